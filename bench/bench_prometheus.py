"""Benchmark: a day of telemetry through a real Prometheus's HTTP API, against the server answering the same
requests (issue 50 item 3: >= 50 k GPU rows/s, peak RSS <= 1 GB, the product at most 1.25 x the server's time).

    .venv/bin/python bench/bench_prometheus.py [--nodes 128] [--workdir DIR] [--server prometheus|vm]

bench/bench_telemetry.py runs the same measurement (its Prometheus part) on the day it generated; alone, this
generates that day's OpenMetrics itself. In one child process, back to back on one server (promtool's
backfill has just written its blocks, so both read them from the page cache):

1. product: ``load_prometheus`` for the day into a fresh embedded warehouse (answers decoded, GPU batches
   inserted, hourly rollups): GPU rows/s, the child's own peak RSS (VmHWM, bench/peak_rss.py);
2. server: the very requests the product made (recorded by its client), sent again one after another with
   plain urllib, the answers read and thrown away: the time the server takes to answer them.

``--server vm``: the same day (as Parquet, imported through VictoriaMetrics' CSV import, not timed) in a fresh
VictoriaMetrics; load_prometheus finds it and takes the export path (etl/vm_export_steps.py), then, in a second
child, the query_range path on the same server; each beside the server replaying that child's own requests.
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
    from tests import prometheus_harness as ph

    t = time.perf_counter()
    ph.backfill(om_files, base / "tsdb")
    backfill_s = time.perf_counter() - t
    p = ph.Prometheus(base / "tsdb").start()
    try:
        return {**measure_url(p.url, base, w), "backfill_s": backfill_s}
    finally:
        p.stop()


def measure_url(url: str, base: Path, w=None, export: bool | None = None) -> dict:
    """In the calling (child) process: load the day from the server at ``url`` (``export``: as
    load_prometheus takes it; None: found out), then replay the requests it made, bodies read and dropped."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ops_warehouse.config import Config
    from ops_warehouse.etl.prometheus_source import PromClient, load_prometheus
    from ops_warehouse.warehouse import open_warehouse

    requests: list[tuple[str, str, bool]] = []

    class Recording(PromClient):
        def _once(self, path: str, q: str, post: bool, dest: Path | None = None) -> bytes:
            requests.append((path, q, post))
            return super()._once(path, q, post, dest)

    if w is None:
        shutil.rmtree(base / "wh", ignore_errors=True)
        w = open_warehouse(Config(dsn=f"chdb://{base / 'wh'}"))
    t = time.perf_counter()
    c = load_prometheus(w, url, START.date(), START.date(), step_s=60, cluster="bench", client=Recording(url),
                        export=export)
    product_s = time.perf_counter() - t
    peak = peak_rss_mb()
    t = time.perf_counter()
    answered = 0
    for path, q, post in requests:
        req = (urllib.request.Request(url + path, data=q.encode(), method="POST") if post
               else urllib.request.Request(f"{url}{path}?{q}"))
        with urllib.request.urlopen(req, timeout=600) as r:
            while chunk := r.read(1 << 20):
                answered += len(chunk)
    server_s = time.perf_counter() - t
    return {"seconds": product_s, "server_s": server_s, "rows": c["gpu_rows"], "queries": len(requests),
            "answer_mb": answered / 1e6, "backfill_s": 0.0, "peak_rss_mb": peak,
            "path": "export" if any(p == "/api/v1/export" for p, _, _ in requests) else "query_range"}


def report(pr: dict, name: str = "prometheus_load", server: str = "Prometheus") -> None:
    rate = pr["rows"] / pr["seconds"]
    over = pr["seconds"] / pr["server_s"]
    print(f"{server}, one day: backfill {pr['backfill_s']:.0f} s; load_prometheus ({pr.get('path', 'query_range')}) "
          f"{pr['rows']:,} GPU rows "
          f"in {pr['seconds']:.1f} s = {rate:,.0f} rows/s ({pr['queries']} requests, {pr['answer_mb']:,.0f} MB of "
          f"answers), peak RSS {pr['peak_rss_mb']:,.0f} MB; the server alone answering the same requests "
          f"{pr['server_s']:.1f} s: the product takes {over:.2f} x the server's time (same run, same server)")
    print(f"RESULT {name} rows_per_s={rate:.0f} goal=>=50000 server_s={pr['server_s']:.1f} "
          f"product_s={pr['seconds']:.1f} ratio_to_server={over:.2f} goal=<=1.25 queries={pr['queries']} "
          f"peak_mb={pr['peak_rss_mb']:.0f} goal=<=1024")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--server", choices=("prometheus", "vm"), default="prometheus",
                    help="vm: VictoriaMetrics (the day imported from Parquet through its CSV import, not timed), "
                         "loaded by the export path it takes by itself, then by query_range, each beside the "
                         "server answering its own requests")
    ap.add_argument("--child", type=Path)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--export", choices=("auto", "no"), default="auto", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        if a.url:
            print(json.dumps(measure_url(a.url, a.child, export=None if a.export == "auto" else False)))
        else:
            print(json.dumps(measure(sorted((a.child / "om").glob("*.om")), a.child)))
        return
    if not shutil.which("prometheus" if a.server == "prometheus" else "victoria-metrics"):
        raise SystemExit(f"{a.server} is not installed")
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-prometheus-"))
    try:
        from ops_warehouse.generate import scaled_spec
        from ops_warehouse.generate.schedule import simulate
        from ops_warehouse.generate.telemetry import write_telemetry

        spec = scaled_spec(a.nodes)
        h = simulate(spec, start=START, days=1, jobs_per_day=1000, seed=1)
        write_telemetry(work / "site", spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc,
                        node_events=h.node_events, xids=h.xids, throttle=h.throttle, start=START,
                        end=START + timedelta(days=1), step_s=60, seed=1,
                        formats=("openmetrics",) if a.server == "prometheus" else ("parquet",))
        if a.server == "vm":
            vm_runs(work)
            return
        om = work / "om"
        shutil.rmtree(om, ignore_errors=True)
        (work / "site" / "telemetry" / "openmetrics").rename(om)
        report(run_child(work))
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


def vm_runs(work: Path) -> None:
    """The day in a fresh VictoriaMetrics, then two children back to back on it: the path load_prometheus
    takes by itself (the export) and query_range, each followed by the server answering its requests."""
    from bench_backfill import import_into_vm  # bench/: the day's Parquet through the server's CSV import

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests import prometheus_harness as ph

    vm = ph.VictoriaMetrics(work / "vmdata").start()
    try:
        t = time.perf_counter()
        import_into_vm(vm.url, work / "site", 1)
        imported_s = time.perf_counter() - t
        for export, name in (("auto", "vm_export_load"), ("no", "vm_query_range_load")):
            r = run_child(work, ["--url", vm.url, "--export", export])
            r["backfill_s"] = imported_s
            report(r, name, "VictoriaMetrics")
    finally:
        vm.stop()


def run_child(work: Path, more: list[str] = ()) -> dict:
    """``work/om/*.om`` (or the server at ``--url``) measured in a fresh process (its peak RSS its own)."""
    p = subprocess.run([sys.executable, __file__, "--child", str(work), *more], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
