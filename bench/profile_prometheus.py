"""Profile: a day through the Prometheus / VictoriaMetrics HTTP load, call by call (issue 50 item 3), beside the
server answering the same requests, and the stored tables' checksums (to show two versions store the same rows).

    .venv/bin/python bench/profile_prometheus.py WORKDIR [--nodes 128] [--path prom|vm-export|vm-query-range]
        [--module FILE] [--sequential]

WORKDIR keeps the generated day and the server's data between runs (the first run generates and backfills,
minutes, not timed), so a before/after pair is two runs back to back on the same server data: run the earlier
version with ``--module`` (e.g. ``git show REV:etl/prometheus_source.py > /tmp/old.py``), loaded in place of
etl/prometheus_source.py. Prints, for the load: wall, the process's CPU seconds, GPU rows/s and peak RSS
(VmHWM, bench/peak_rss.py); for each timed call (the HTTP request, the answer's decoding, the frames, the
insert, the export's downsampling, the hourly refresh): summed wall and process CPU seconds (threads overlap,
so the CPU of a call on one thread includes the others' at the same moment: ``--sequential`` runs every call
on this thread, for CPU seconds that add up); then the server alone answering the load's requests again one
after another (bodies read and dropped), and each table's count and ``sum(cityHash64(row))`` without
``source`` (it names the server's random port).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import threading
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_prometheus import START  # noqa: E402  (bench/: run as a script)
from peak_rss import peak_rss_mb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--path", choices=("prom", "vm-export", "vm-query-range"), default="prom")
    ap.add_argument("--module", type=Path, help="another version of etl/prometheus_source.py to load instead")
    ap.add_argument("--sequential", action="store_true", help="no fetching ahead: every call on this thread")
    a = ap.parse_args()
    from tests import prometheus_harness as ph

    work = a.workdir
    if not (work / "site").exists():
        from ops_warehouse.generate import scaled_spec
        from ops_warehouse.generate.schedule import simulate
        from ops_warehouse.generate.telemetry import write_telemetry

        spec = scaled_spec(a.nodes)
        h = simulate(spec, start=START, days=1, jobs_per_day=1000, seed=1)
        write_telemetry(work / "site", spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc,
                        node_events=h.node_events, xids=h.xids, throttle=h.throttle, start=START,
                        end=START + timedelta(days=1), step_s=60, seed=1, formats=("openmetrics", "parquet"))
    if a.path == "prom":
        if not (work / "tsdb").exists():
            ph.backfill(sorted((work / "site/telemetry/openmetrics").glob("*.om")), work / "tsdb")
        srv = ph.Prometheus(work / "tsdb").start()
    else:
        fresh = not (work / "vmdata").exists()
        srv = ph.VictoriaMetrics(work / "vmdata").start()
        if fresh:
            from bench_backfill import import_into_vm

            import_into_vm(srv.url, work / "site", 1)
    try:
        profile(srv.url, work, a)
    finally:
        srv.stop()


def profile(url: str, work: Path, a) -> None:
    if a.module:
        spec = importlib.util.spec_from_file_location("ops_warehouse.etl.prometheus_source", a.module)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    import ops_warehouse.etl.prometheus_source as ps
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    took: dict[str, list[float]] = {}
    lock = threading.Lock()

    def timed(owner, name: str, key: str | None = None) -> None:
        f = getattr(owner, name)

        def call(*args, **kw):
            t, c = time.perf_counter(), time.process_time()
            try:
                return f(*args, **kw)
            finally:
                with lock:
                    e = took.setdefault(key or name, [0.0, 0.0, 0])
                    e[0] += time.perf_counter() - t
                    e[1] += time.process_time() - c
                    e[2] += 1
        setattr(owner, name, call)

    requests: list[tuple[str, str, bool]] = []
    once = ps.PromClient._once

    def recorded(self, path, q, post, dest=None):
        requests.append((path, q, post))
        return once(self, path, q, post, dest)

    ps.PromClient._once = recorded
    timed(ps.PromClient, "_once", "http request")
    for name in ("decode_matrix", "wide", "_frames", "insert_frames", "refresh_hourly", "export_matrices"):
        timed(ps, name)
    if a.sequential:
        ps._Ahead.each = lambda self, calls: (
            (c() if callable(c) else c[1](c[0]())) for c in calls)  # a call, or a (fetch, decode) pair
    shutil.rmtree(work / "wh", ignore_errors=True)
    w = open_warehouse(Config(dsn=f"chdb://{work / 'wh'}"))
    t, c0 = time.perf_counter(), time.process_time()
    c = ps.load_prometheus(w, url, START.date(), START.date(), step_s=60, cluster="bench",
                           export=None if a.path == "prom" else a.path == "vm-export")
    wall_s, cpu_s = time.perf_counter() - t, time.process_time() - c0
    print(f"{a.path} ({ps.__file__}): {c['gpu_rows']:,} GPU rows in {wall_s:.1f} s, {cpu_s:.1f} CPU-s, "
          f"{c['gpu_rows'] / wall_s:,.0f} rows/s, peak RSS {peak_rss_mb():,.0f} MB, {len(requests)} requests")
    for key, (wall, cpu, n) in sorted(took.items(), key=lambda kv: -kv[1][0]):
        print(f"  {key:16s} wall {wall:7.2f} s  process CPU {cpu:7.2f} s  calls {n}")
    t = time.perf_counter()
    for path, q, post in requests:
        req = (urllib.request.Request(url + path, data=q.encode(), method="POST") if post
               else urllib.request.Request(f"{url}{path}?{q}"))
        with urllib.request.urlopen(req, timeout=600) as r:
            while r.read(1 << 20):
                pass
    server_s = time.perf_counter() - t
    print(f"  the server alone answering the {len(requests)} requests: {server_s:.1f} s "
          f"(the load {wall_s / server_s:.2f} x the server)")
    for table in ("gpu_sample", "node_sample", "xid_event", "counter_edge"):
        cols = [r[0] for r in w.query_rows(f"DESCRIBE TABLE {table}") if r[0] != "source"]
        n, h = w.query_rows(f"SELECT count(), sum(cityHash64(toString(tuple({', '.join(cols)})))) FROM {table} FINAL")[0]
        print(f"  {table}: {n:,} rows, checksum {h}")


if __name__ == "__main__":
    main()
