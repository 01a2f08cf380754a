"""Benchmark: a grain's refresh statement by statement (issue 50, item 4), a git ref's SQL (before) and this
tree's (after), alternated in one process on one warehouse.

    .venv/bin/python bench/bench_grain_statements.py --wh COPY [--grain run_sample_hour] [--day 2026-10-15]
        [--repeat 3] [--before-ref main]

COPY: a copy of a prepared month's warehouse (bench/bench_monthly.py's workdir/warehouse: 256 GPUs, 1-minute
telemetry), brought to this tree's schema when opened. Each side refreshes the same day and the hour before it
(a night's window), before first in each round, statements run as etl/grains.py runs a refresh file (a SELECT
guards the statement after it). Each statement's fastest of --repeat counts, by CPU seconds (this process's,
time.process_time: the embedded engine's threads are its own; the wall is given beside it, a shared machine's
load moves it far more). RESULT lines: each side's total, and before ÷ after (above 1: the change is cheaper).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_PARAM = re.compile(r"\{(\w+):")


def statements(text: str) -> list[str]:
    """A grain file's statements, its run_fanout include inlined as the loader does."""
    from ops_warehouse.sqlfiles import split_statements, sql_query

    fanout = sql_query("intermediate/run_fanout.sql")
    return [s.replace("{{intermediate run_fanout}}", fanout) for s in split_statements(text)]


def timed(wh, stmts: list[str], params: dict) -> list[tuple[str, float, float]]:
    """(statement's head, wall s, CPU s) of each statement run; a guard's skipped statement is left out."""
    out, skip = [], False
    for stmt in stmts:
        if skip:
            skip = False
            continue
        p = {k: v for k, v in params.items() if k in set(_PARAM.findall(stmt))}
        t, c = time.perf_counter(), time.process_time()
        if stmt.startswith("SELECT"):
            skip = not wh.query_rows(stmt, p)[0][0]
        else:
            wh.client.command(stmt, parameters=p, settings={"optimize_on_insert": 0})
        head = " ".join(re.sub(r"--[^\n]*", "", stmt).split())
        head = re.sub(r" ENGINE = .*", "", head) if head.startswith("CREATE") else head[:48]
        out.append((head, time.perf_counter() - t, time.process_time() - c))
    return out


def day_params(day: str) -> dict:
    """A night's refresh window for ``day`` (the day and the hour before), as etl/grains.py binds it."""
    d0 = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
    return {"from_ts": d0 - timedelta(hours=1), "to_ts": d0 + timedelta(days=1), "idle_util_pct": 5.0}


def grain_sides(grain: str, before_ref: str) -> dict[str, list[str]]:
    """{"before": the grain's statements at git ref ``before_ref``, "after": this tree's}."""
    from ops_warehouse.sqlfiles import sql_text

    old = subprocess.run(["git", "-C", str(REPO), "show", f"{before_ref}:sql/intermediate/{grain}.sql"],
                         capture_output=True, text=True, check=True).stdout
    return {"before": statements(old), "after": statements(sql_text(f"intermediate/{grain}.sql"))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wh", required=True)
    ap.add_argument("--grain", default="run_sample_hour")
    ap.add_argument("--day", default="2026-10-15")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before-ref", default="main")
    a = ap.parse_args()

    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{a.wh}"))
    params = day_params(a.day)
    sides = grain_sides(a.grain, a.before_ref)
    best: dict[str, dict[tuple[int, str], tuple[float, float]]] = {"before": {}, "after": {}}
    for _ in range(a.repeat):
        for side in ("before", "after"):
            for i, (head, w, c) in enumerate(timed(wh, sides[side], params)):
                k = (i, head)
                best[side][k] = min(best[side].get(k, (w, c)), (w, c), key=lambda x: x[1])
    for side in ("before", "after"):
        for (i, head), (w, c) in sorted(best[side].items()):
            print(f"{side:6s} {i:2d} cpu_s={c:.3f} wall_s={w:.3f}  {head}")
    tot = {s: (sum(w for w, _ in best[s].values()), sum(c for _, c in best[s].values())) for s in best}
    (bw, bc), (aw, ac) = tot["before"], tot["after"]
    print(f"RESULT {a.grain} day={a.day} statements before={len(best['before'])} after={len(best['after'])} "
          f"before_cpu_s={bc:.3f} after_cpu_s={ac:.3f} cpu_ratio={bc / ac:.2f} before_s={bw:.3f} after_s={aw:.3f} "
          f"ratio={bw / aw:.2f}")


if __name__ == "__main__":
    main()
