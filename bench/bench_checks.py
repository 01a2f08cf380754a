"""`ops-report check`'s cost on one warehouse: the laws (sql/checks/) run as the command runs them, the marts of
each project evaluated as this checkout evaluates them ("after") and with every mart table made by CREATE ... AS
SELECT as before round 7 ("before": no table's columns taken from an earlier evaluation of the same query), the
two sides alternated, best of N, CPU seconds of the process (chDB's threads are the process's) and wall. Both
sides' outcomes (every law's status and rows, as `--format json` gives them) must be the same; the script says
whether they are.

    python bench/bench_checks.py WAREHOUSE_DIR CLUSTER FROM TO [--rounds 3] [--break-users]

``--break-users``: the users mart's GPU-hours × 1.01 in the text the engine runs (a mart changed to break a law:
users_sum_to_project must be broken on both sides, for every project, with the same rows).

docs/benchmarks.md, issue 51, round 7 (engineer G).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
import time
from datetime import datetime, timezone

import ops_warehouse.analytics.marts as marts
from ops_warehouse.analytics.checks import run_checks
from ops_warehouse.config import Config
from ops_warehouse.warehouse import open_warehouse


class _NoShapes(dict):
    """Before: no earlier table's columns are ever found (every mart table made by CREATE ... AS SELECT)."""

    def get(self, key, default=None):
        return default


def _once(wh, cluster, window, before: bool):
    evaluated = marts._Evaluated.__init__

    def init(self, *a, **k):
        evaluated(self, *a, **k)
        if before:
            self.shapes = _NoShapes()

    marts._Evaluated.__init__ = init
    try:
        t, w = time.process_time(), time.perf_counter()
        out = run_checks(wh, cluster=cluster, window=window)
        cpu, wall = time.process_time() - t, time.perf_counter() - w
    finally:
        marts._Evaluated.__init__ = evaluated
    text = json.dumps([o.as_dict() for o in out], default=str, sort_keys=True)
    broken = {o.law.name: (o.rows.height, sorted(set(o.rows["project"])) if "project" in o.rows.columns else None)
              for o in out if o.status == "broken"}
    return cpu, wall, hashlib.sha256(text.encode()).hexdigest()[:16], [o.status for o in out], broken


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("warehouse")
    ap.add_argument("cluster")
    ap.add_argument("start")
    ap.add_argument("end")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--break-users", action="store_true")
    a = ap.parse_args()
    if a.break_users:
        import ops_warehouse.sqlfiles as sqlfiles

        text = sqlfiles.sql_text

        def broken(relpath: str) -> str:
            t = text(relpath)
            return t.replace("j.gpu_h AS gpu_h,", "j.gpu_h * 1.01 AS gpu_h,") if relpath == "marts/users.sql" else t

        sqlfiles.sql_text = broken
    window = tuple(datetime.fromisoformat(x).replace(tzinfo=timezone.utc) for x in (a.start, a.end))
    copy = tempfile.mkdtemp()
    shutil.copytree(a.warehouse, f"{copy}/warehouse", symlinks=True)  # the laws only read: a copy all the same
    wh = open_warehouse(Config(dsn=f"chdb://{copy}/warehouse"))
    best: dict[str, list] = {"before": [9e9, 9e9], "after": [9e9, 9e9]}
    digests: dict[str, set] = {"before": set(), "after": set()}
    _once(wh, a.cluster, window, before=False)  # the engine and the files warmed once, for both sides
    for r in range(a.rounds):
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            cpu, wall, digest, statuses, broken = _once(wh, a.cluster, window, before=side == "before")
            best[side] = [min(best[side][0], cpu), min(best[side][1], wall)]
            digests[side].add(digest)
            print(f"round {r} {side:6} cpu {cpu:6.2f} s  wall {wall:6.2f} s  outcomes {digest}  "
                  f"load {os.getloadavg()[0]:.1f}" + (f"  broken {broken}" if broken else ""), flush=True)
    counts = {s: statuses.count(s) for s in set(statuses)}
    print(f"best of {a.rounds}: before cpu {best['before'][0]:.2f} wall {best['before'][1]:.2f}; "
          f"after cpu {best['after'][0]:.2f} wall {best['after'][1]:.2f}; statuses {counts}")
    same = len(digests["before"] | digests["after"]) == 1
    print("the same outcomes on both sides, every round:", same)
    shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    main()
