"""Benchmark: the analysts' API and `ops-report export` on a month of the demo cluster, against the same
mart SQL run straight through the engine (ops_warehouse.analytics.marts.run_mart: no API layer), in one process.

    /work/venv/bin/python bench/bench_api.py [--dsn chdb:///path/to/demo/warehouse] [--month 2026-10]
                                             [--demo-days 31]

Without --dsn the demo (114 nodes, 31 days, ~28,000 jobs, 5-minute telemetry) is generated into a
temporary folder first (`--demo-days N`: only its first N days, a quick check that this runs). Prints each API function's time (the hourly capacity grain the loads keep is refreshed once
more and timed apart, as a load would pay it), the direct baseline's, the ratio API / direct (1.0: the layer costs
nothing), and the export's time, files and bytes, plus DuckDB reading the whole export back.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn")
    ap.add_argument("--month", default="2026-10")
    ap.add_argument("--project", default="A")
    ap.add_argument("--demo-days", type=int, default=31, help="days of the generated demo (without --dsn)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-api-"))
    try:
        bench(a, tmp)
    finally:  # the generated demo (hundreds of MB) and the export
        shutil.rmtree(tmp, ignore_errors=True)


def bench(a: argparse.Namespace, tmp: Path) -> None:
    dsn = a.dsn
    if not dsn:
        subprocess.run([sys.executable, "-c", "from ops_warehouse.cli.main import main; main()", "demo", "--dir",
                        str(tmp / "demo"), "--days", str(a.demo_days)], check=True, stdout=subprocess.DEVNULL)
        dsn = f"chdb://{tmp / 'demo' / 'warehouse'}"

    import duckdb

    import ops_warehouse as ow
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.etl.grains import refresh_capacity

    wh = ow.connect(dsn)
    p = wh.period(a.month)
    with wh.session() as w:
        t0 = time.perf_counter()
        refresh_capacity(w, p.cluster, p.start, p.end)
        refresh_s = time.perf_counter() - t0  # what a load pays for the month (the API only reads the grain)

    calls = [  # (API call, the mart it runs, the project it passes)
        ("utilization", lambda: wh.utilization(p), "utilization", ""),
        ("utilization_daily", lambda: wh.utilization_daily(p, project=a.project), "utilization_daily", a.project),
        ("job_sizes", lambda: wh.job_sizes(p, project=a.project), "job_sizes", a.project),
        ("run_times", lambda: wh.run_times(p, project=a.project), "run_times", a.project),
        ("end_states", lambda: wh.end_states(p, project=a.project), "end_states", a.project),
        ("efficiency", lambda: wh.efficiency(p, project=a.project), "efficiency", a.project),
        ("job_efficiency", lambda: wh.job_efficiency(p, project=a.project), "job_efficiency", a.project),
        ("failures_by_size", lambda: wh.failures_by_size(p), "failures_by_size", ""),
        ("node_failures", lambda: wh.node_failures(p), "node_failures", ""),
        ("cost", lambda: wh.cost(p), "cost", ""),
        ("chargeback", lambda: wh.chargeback(p), "chargeback", ""),
    ]

    def best(fn, n=3) -> float:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    print(f"warehouse {dsn}, {p.cluster} {p.month}; capacity grain refresh for the month: {refresh_s:.2f} s\n")
    print(f"{'function':<20} {'API s':>8} {'direct s':>9} {'API/direct':>11}")
    total_api = total_direct = 0.0
    with wh.session() as w:  # one opening for the table: the layer's own cost
        for label, fn, mart, proj in calls:
            api_s = best(fn)
            direct_s = best(lambda: run_mart(w, mart, cluster=p.cluster, window=(p.start, p.end), project=proj))
            total_api += api_s
            total_direct += direct_s
            print(f"{label:<20} {api_s:>8.3f} {direct_s:>9.3f} {api_s / direct_s:>11.2f}")
    print(f"{'all of the above':<20} {total_api:>8.3f} {total_direct:>9.3f} {total_api / total_direct:>11.2f}\n")
    # outside a session every call opens the embedded engine and closes it (taking turns): its price
    per_call = best(lambda: [fn() for _, fn, _, _ in calls], n=1)
    print(f"the same {len(calls)} calls each opening the warehouse (taking turns): {per_call:.3f} s, "
          f"{(per_call - total_api) / len(calls):.3f} s a call over one session")
    print(f"RESULT api_layer api_s={total_api:.3f} baseline={total_direct:.3f} "
          f"ratio={total_direct / total_api:.2f} goal=>=0.9 per_call_open_s={(per_call - total_api) / len(calls):.3f}")

    t = time.perf_counter()
    m = wh.export(tmp / "exports", p, project=a.project)
    export_s = time.perf_counter() - t
    folder = Path(m["folder"])
    size = sum(f.stat().st_size for f in folder.glob("*.parquet"))
    rows = sum(f["rows"] for f in m["files"].values())
    t = time.perf_counter()
    read = sum(duckdb.sql(f"SELECT count(*) FROM '{folder / f['file']}'").fetchall()[0][0] for f in m["files"].values())
    duck_s = time.perf_counter() - t
    assert read == rows
    print(f"export (project {a.project}): {len(m['files'])} Parquet files, {rows:,} rows, {size / 1e6:.2f} MB in "
          f"{export_s:.2f} s; DuckDB reads them all back in {duck_s:.3f} s")


if __name__ == "__main__":
    main()
