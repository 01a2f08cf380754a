"""Benchmark: a day of telemetry through a real Prometheus's HTTP API, against the server answering the same
requests (issue 50 item 3: >= 50 k GPU rows/s, peak RSS <= 1 GB, the product at most 1.25 x the server's time).

    .venv/bin/python bench/bench_prometheus.py [--nodes 128] [--workdir DIR]

bench/bench_telemetry.py runs the same measurement (its Prometheus part) on the day it generated; alone, this
generates that day's OpenMetrics itself. In one child process, back to back on one server (promtool's
backfill has just written its blocks, so both read them from the page cache):

1. product: ``load_prometheus`` for the day into a fresh embedded warehouse (answers decoded, GPU batches
   inserted, hourly rollups): GPU rows/s, the child's own peak RSS (VmHWM, bench/peak_rss.py);
2. server: the very requests the product made (recorded by its client), sent again one after another with
   plain urllib, the answers read and thrown away: the time the server takes to answer them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

from peak_rss import peak_rss_mb  # bench/peak_rss.py (benches run as scripts from bench/)

START = datetime(2026, 10, 1, tzinfo=timezone.utc)


def measure(om_files: list[Path], base: Path, w=None) -> dict:
    """In the calling (child) process: backfill, start Prometheus, load the day into ``w`` (default: a fresh
    embedded warehouse under ``base``), replay its requests."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ops_warehouse.config import Config
    from ops_warehouse.etl.prometheus_source import PromClient, load_prometheus
    from ops_warehouse.warehouse import open_warehouse
    from tests import prometheus_harness as ph

    t = time.perf_counter()
    ph.backfill(om_files, base / "tsdb")
    backfill_s = time.perf_counter() - t
    p = ph.Prometheus(base / "tsdb").start()
    requests: list[tuple[str, str, bool]] = []

    class Recording(PromClient):
        def _once(self, path: str, q: str, post: bool) -> bytes:
            requests.append((path, q, post))
            return super()._once(path, q, post)

    try:
        if w is None:
            shutil.rmtree(base / "wh", ignore_errors=True)
            w = open_warehouse(Config(dsn=f"chdb://{base / 'wh'}"))
        t = time.perf_counter()
        c = load_prometheus(w, p.url, START.date(), START.date(), step_s=60, cluster="bench", client=Recording(p.url))
        product_s = time.perf_counter() - t
        peak = peak_rss_mb()
        t = time.perf_counter()
        answered = 0
        for path, q, post in requests:
            req = (urllib.request.Request(p.url + path, data=q.encode(), method="POST") if post
                   else urllib.request.Request(f"{p.url}{path}?{q}"))
            with urllib.request.urlopen(req, timeout=600) as r:
                while chunk := r.read(1 << 20):
                    answered += len(chunk)
        server_s = time.perf_counter() - t
    finally:
        p.stop()
    return {"seconds": product_s, "server_s": server_s, "rows": c["gpu_rows"], "queries": len(requests),
            "answer_mb": answered / 1e6, "backfill_s": backfill_s, "peak_rss_mb": peak}


def report(pr: dict) -> None:
    rate = pr["rows"] / pr["seconds"]
    over = pr["seconds"] / pr["server_s"]
    print(f"Prometheus, one day: promtool backfill {pr['backfill_s']:.0f} s; load_prometheus {pr['rows']:,} GPU rows "
          f"in {pr['seconds']:.1f} s = {rate:,.0f} rows/s ({pr['queries']} requests, {pr['answer_mb']:,.0f} MB of "
          f"answers), peak RSS {pr['peak_rss_mb']:,.0f} MB; the server alone answering the same requests "
          f"{pr['server_s']:.1f} s: the product takes {over:.2f} x the server's time (same run, same server)")
    print(f"RESULT prometheus_load rows_per_s={rate:.0f} goal=>=50000 server_s={pr['server_s']:.1f} "
          f"product_s={pr['seconds']:.1f} ratio_to_server={over:.2f} goal=<=1.25 queries={pr['queries']} "
          f"peak_mb={pr['peak_rss_mb']:.0f} goal=<=1024")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--child", type=Path)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(measure(sorted((a.child / "om").glob("*.om")), a.child)))
        return
    if not shutil.which("prometheus"):
        raise SystemExit("prometheus is not installed")
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-prometheus-"))
    try:
        from ops_warehouse.generate import scaled_spec
        from ops_warehouse.generate.schedule import simulate
        from ops_warehouse.generate.telemetry import write_telemetry

        spec = scaled_spec(a.nodes)
        h = simulate(spec, start=START, days=1, jobs_per_day=1000, seed=1)
        write_telemetry(work / "site", spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc,
                        node_events=h.node_events, xids=h.xids, throttle=h.throttle, start=START,
                        end=START + timedelta(days=1), step_s=60, seed=1, formats=("openmetrics",))
        om = work / "om"
        shutil.rmtree(om, ignore_errors=True)
        (work / "site" / "telemetry" / "openmetrics").rename(om)
        report(run_child(work))
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


def run_child(work: Path) -> dict:
    """``work/om/*.om`` measured in a fresh process (its peak RSS its own)."""
    p = subprocess.run([sys.executable, __file__, "--child", str(work)], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
