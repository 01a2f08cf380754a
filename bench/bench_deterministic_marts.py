"""Which report marts give different results when evaluated twice on the same warehouse (the engine adds floats
in whatever order its threads finish), and what the exact sums cost: each window mart of the monthly report
evaluated N times on the small generated week (tests/sites.py), its values compared exactly (each float's bits).

    OPS_TEST_SITES=/tmp/sites python bench/bench_deterministic_marts.py [--repeat 4] [--marts energy,job_energy]
        [--baseline-ref main]

With --baseline-ref, each mart is also evaluated with the sql/ files of that git revision (the Float64 sums),
alternating with this tree's, and a RESULT line gives both times and their ratio: measured back to back in one
run, on one warehouse (the machine is shared; the ratio is what to read).
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--marts", default="")
    # the small week fits one block: smaller blocks on more threads make the engine add in parts, as a month does
    ap.add_argument("--block-rows", type=int, default=64)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--baseline-ref", default="")
    a = ap.parse_args()
    from ops_warehouse.analytics import declarations
    from ops_warehouse.analytics.marts import run_file
    from tests.sites import SMALL_WEEK, open_site, small_week

    site = small_week(None)
    names = a.marts.split(",") if a.marts else [n for n in declarations.reported()
                                                  if declarations.mart(n).kind == "window"]
    with tempfile.TemporaryDirectory() as tmp:
        wh = open_site(site, Path(tmp))
        cluster = site.facts["cluster"]
        if a.block_rows:  # 0: the engine's own blocks and threads (the timings)
            wh.command(f"SET max_block_size = {a.block_rows}")
            wh.command(f"SET max_threads = {a.threads}")
        differ = []
        for name in names:
            outs, t = [], time.perf_counter()
            for _ in range(a.repeat):
                df = run_file(wh, f"marts/{name}.sql", cluster=cluster, window=SMALL_WEEK)
                outs.append(repr([[v.hex() if isinstance(v, float) else v for v in df[c].to_list()] for c in df.columns]))
            per_s = (time.perf_counter() - t) / a.repeat
            same = len(set(outs)) == 1
            if not same:
                differ.append(name)
            print(f"{name:28s} rows={df.height:6d} {'same' if same else 'DIFFERS'} {per_s:.3f} s/evaluation")
            if a.baseline_ref:
                _against_baseline(wh, cluster, name, a.baseline_ref, a.repeat)
        print(f"RESULT marts_differing={len(differ)} {','.join(differ)}")


def _against_baseline(wh, cluster: str, name: str, ref: str, repeat: int) -> None:
    from ops_warehouse import sqlfiles
    from ops_warehouse.analytics.marts import run_file
    from tests.sites import SMALL_WEEK

    shipped = sqlfiles.sql_text
    root = Path(__file__).resolve().parents[1]

    @functools.lru_cache(maxsize=None)  # read from git once, before the timed evaluations
    def at_ref(relpath: str) -> str:
        return subprocess.run(["git", "-C", str(root), "show", f"{ref}:sql/{relpath}"], check=True,
                              capture_output=True, text=True).stdout

    times = {"product": 0.0, "baseline": 0.0}
    for i in range(repeat + 1):  # the first round untimed: git read, engine caches warm for both
        for which in ("product", "baseline"):
            sqlfiles.sql_text = shipped if which == "product" else at_ref
            try:
                t = time.perf_counter()
                run_file(wh, f"marts/{name}.sql", cluster=cluster, window=SMALL_WEEK)
                times[which] += (time.perf_counter() - t) if i else 0.0
            finally:
                sqlfiles.sql_text = shipped
    p, b = times["product"] / repeat, times["baseline"] / repeat
    print(f"RESULT mart={name} product_s={p:.4f} baseline_s={b:.4f} ratio={p / b:.3f}")


if __name__ == "__main__":
    main()
