"""Benchmark: a multi-day telemetry load with its grains refreshed once a week of days against once a day.

    .venv/bin/python bench/bench_telemetry_refresh.py [--days 14] [--nodes 40] [--jobs-per-day 800]

A generated site (the job history, the inventory, node events and reservations loaded first, as a site's
backfill finds them) is copied twice; each copy loads the same telemetry days with `load_parquet_dir`, one
refreshing the hourly rollups and grains after every day (``refresh_days=1``, the loader before 2026-12),
one after at most seven (the default), each in a child process. Prints both times, the ratio, and whether
every table of the two warehouses holds the same rows (tests/conftest.py's content checksums): the batched
refresh must change nothing but the time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 10, 1, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[1]


def child(site: str, wh: str, days: int, refresh_days: int) -> dict:
    from ops_warehouse.config import Config
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.warehouse import open_warehouse

    sys.path.insert(0, str(REPO))
    from tests.conftest import table_checksums

    w = open_warehouse(Config(dsn=f"chdb://{wh}"))
    t = time.perf_counter()
    c = load_parquet_dir(w, site, START.date(), START.date() + timedelta(days=days - 1), cluster="ai1",
                         refresh_days=refresh_days)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "gpu_rows": c["gpu_rows"], "checksums": {k: list(v) for k, v in table_checksums(w).items()}}


def run(site: Path, base: Path, work: Path, days: int, refresh_days: int) -> dict:
    wh = work / f"wh-{refresh_days}"
    shutil.rmtree(wh, ignore_errors=True)
    shutil.copytree(base, wh, symlinks=True)
    p = subprocess.run([sys.executable, __file__, "--child", str(site), "--wh", str(wh), "--days", str(days),
                        "--refresh-days", str(refresh_days)], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--jobs-per-day", type=int, default=800)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--child")
    ap.add_argument("--wh")
    ap.add_argument("--refresh-days", type=int)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.wh, a.days, a.refresh_days)))
        return
    from ops_warehouse.config import Config
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.generate import generate
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-refresh-"))
    site, base = work / "site", work / "base"
    try:
        h = generate(site, start=START, days=a.days, jobs_per_day=a.jobs_per_day, nodes=a.nodes, seed=11,
                     metrics_step_s=300)
        wh = open_warehouse(Config(dsn=f"chdb://{base}"))
        load_sacct(wh, site / "sacct" / "sacct.psv")
        load_capacity(wh, inventory=site / "inventory.csv", events=site / "slurm" / "events.psv",
                      reservations=site / "slurm" / "reservations.txt", cluster=h.spec.name)
        close_embedded()
        print(f"site: {a.nodes} nodes, {a.days} days, ~{a.jobs_per_day} jobs a day, 300 s telemetry; "
              f"jobs and capacity loaded")
        daily = run(site, base, work, a.days, 1)
        weekly = run(site, base, work, a.days, 7)
        same = daily["checksums"] == weekly["checksums"]
        print(f"refresh after every day:      {daily['seconds']:6.1f} s ({daily['gpu_rows']:,} GPU rows)")
        print(f"refresh after at most 7 days: {weekly['seconds']:6.1f} s ({weekly['gpu_rows']:,} GPU rows)")
        print(f"ratio daily/weekly: {daily['seconds'] / weekly['seconds']:.2f}; every table the same: {same}")
        print(f"RESULT telemetry_refresh daily_s={daily['seconds']:.1f} weekly_s={weekly['seconds']:.1f} "
              f"ratio={daily['seconds'] / weekly['seconds']:.2f} same_tables={same}")
        if not same:
            diff = [t for t in daily["checksums"] if daily["checksums"][t] != weekly["checksums"].get(t)]
            raise SystemExit(f"the two loads differ in {', '.join(diff)}")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
