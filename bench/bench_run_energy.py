"""Benchmark: the cost of a run's GPU energy by the one attribution rule (round 6, migration 0025): the
run_sample_hour and run_node_hour refresh statements of one day, with a git ref's SQL (before) and this tree's
(after), alternated in one process on one warehouse, and the marts that read a run's energy (job_energy,
job_efficiency) on the month after.

    .venv/bin/python bench/bench_run_energy.py --wh COPY [--day 2026-10-15] [--repeat 3] [--before-ref main]

COPY: a copy of a prepared month's warehouse (bench/bench_monthly.py's workdir/warehouse: 256 GPUs, 1-minute
telemetry); it is brought to this tree's schema (migrations) when opened. Each side rewrites the same day's rows
(the hour before it included, as a night's refresh does), before first in each round; the fastest of --repeat
counts (a shared machine's noise only adds). CPU seconds are this process's (time.process_time: the embedded
engine's threads are its own), which the machine's load moves far less than the wall seconds. RESULT lines:
before ÷ after (above 1: the change is faster).
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from bench_grain_statements import day_params, grain_sides, timed
from peak_rss import peak_rss_mb


def _run(wh, stmts: list[str], params: dict) -> tuple[float, float]:
    """The statements as etl/grains.py runs a refresh file (a SELECT guards the statement after it): wall and
    CPU seconds, summed over bench_grain_statements' per-statement timings."""
    out = timed(wh, stmts, params)
    return sum(w for _, w, _ in out), sum(c for _, _, c in out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wh", type=Path, required=True)
    ap.add_argument("--day", default="2026-10-15")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before-ref", default="main")
    a = ap.parse_args()

    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{a.wh}"))
    params = day_params(a.day)
    sides = {f: grain_sides(f, a.before_ref) for f in ("run_sample_hour", "run_node_hour")}
    best: dict[tuple[str, str], tuple[float, float]] = {}
    for _ in range(a.repeat):
        # the order a night runs them: run_sample_hour, then (capacity_node_hour, unchanged) run_node_hour
        for f in ("run_sample_hour", "run_node_hour"):
            for side in ("before", "after"):
                w, c = _run(wh, sides[f][side], params)
                k = (f, side)
                best[k] = min(best.get(k, (w, c)), (w, c))
    for f in ("run_sample_hour", "run_node_hour"):
        (bw, bc), (aw, ac) = best[(f, "before")], best[(f, "after")]
        print(f"RESULT {f}_refresh day={a.day} before_s={bw:.3f} after_s={aw:.3f} ratio={bw / aw:.2f} "
              f"before_cpu_s={bc:.3f} after_cpu_s={ac:.3f} cpu_ratio={bc / ac:.2f}")
    # the marts reading a run's energy, on the month (their SQL is unchanged: run_node_hour's rates moved)
    month = (datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, tzinfo=timezone.utc))
    cluster = wh.query_rows("SELECT any(cluster) FROM run_node_hour")[0][0]
    for mart, extra in (("job_energy", {}), ("job_efficiency", {"runs_limit": 15}), ("job_efficiency", {})):
        times = []
        for _ in range(a.repeat):
            t, c = time.perf_counter(), time.process_time()
            rows = run_mart(wh, mart, cluster=cluster, window=month, **extra).height
            times.append((time.perf_counter() - t, time.process_time() - c))
        w, c = min(times)
        print(f"RESULT {mart} {extra or ''} rows={rows} s={w:.3f} cpu_s={c:.3f}")
    print(f"RESULT peak_rss_mb={peak_rss_mb():.0f}")


if __name__ == "__main__":
    main()
