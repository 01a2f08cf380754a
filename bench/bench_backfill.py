"""Benchmark: a backfill of the demo's site (114 nodes, 912 GPUs, 60 s samples), as an operator runs it, against
the engine's bare INSERT ... SELECT of the same Parquet files, measured back to back in one run; and a sacct
file of 5 M jobs.

    .venv/bin/python bench/bench_backfill.py [--days 14] [--small-days 7] [--vm-days 2] [--sacct-jobs 5000000]

A year at 60 s is ~479 M GPU rows (1.31 M a day): generating it alone takes over an hour on 2 cores, so the
bench loads ``--days`` of it and extrapolates to 365 days (printed as an extrapolation, never as a
measurement). The extrapolation holds only if the load's rate and peak memory do not depend on the window:
the file load is measured at two windows (``--small-days`` and ``--days``) side by side to show it.

1. generates ``--days`` days of the site's exporter Parquet (ops_warehouse.generate, as `ops-report demo` and
   `ops-report generate` write them, at 60 s instead of the demo's 300 s);
2. for each window: the product, as `ops-report etl metrics --source file` runs it (etl/backfill.py over
   load_parquet_dir: resumable, a week per chunk), in a fresh child and warehouse: wall time, GPU rows/s, the
   child's peak RSS (bench/peak_rss.py); then the engine alone (bench_telemetry.py's ceiling child: the same
   files' INSERT ... SELECT into equivalent tables, all families, no counter work);
3. VictoriaMetrics (when /usr/bin/victoria-metrics is there): the first ``--vm-days`` days written into a
   fresh server (its CSV import, not timed as the product's), then the product as `ops-report etl metrics
   --source victoriametrics` runs it (a day per chunk: load_prometheus finds VictoriaMetrics and takes its
   /api/v1/export path), the server alone answering the very requests that load made (bodies read and
   dropped), and the query_range path on the same server;
4. a sacct file of ``--sacct-jobs`` jobs: bench_etl_sacct.py's product and engine children (``0``: skip).
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
from peak_rss import peak_rss_mb  # bench/peak_rss.py (benches run as scripts from bench/)

BENCH = Path(__file__).resolve().parent
START = datetime(2026, 10, 1, tzinfo=timezone.utc)
YEAR_DAYS = 365
GOAL_RATIO = 0.8  # issue 50: Parquet telemetry at >= 0.8 of the engine's INSERT ... SELECT
GOAL_RSS_MB = 1536  # issue 50: peak RSS <= 1.5 GB whatever the window


# ---------------------------------------------------------------------------------------------- children

def child_file(data: str, wh: str, days: int) -> dict:
    from ops_warehouse.config import Config
    from ops_warehouse.etl.backfill import FILE_CHUNK_DAYS, load_resumably
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.warehouse import open_warehouse

    w = open_warehouse(Config(dsn=f"chdb://{wh}"))
    d0, d1 = START.date(), START.date() + timedelta(days=days - 1)
    peaks = []  # the peak so far after each chunk: where it grows, if it does

    def chunk(a, b, p):
        out = load_parquet_dir(w, data, a, b, cluster="bench", progress=p)
        peaks.append(round(peak_rss_mb()))
        return out

    t = time.perf_counter()
    c = load_resumably(w, f"file:{Path(data).resolve()}", d0, d1, chunk, chunk_days=FILE_CHUNK_DAYS)
    return {"seconds": time.perf_counter() - t, "rows": c["gpu_rows"], "peak_rss_mb": peak_rss_mb(),
            "peak_after_chunk_mb": peaks}


def child_vm(url: str, wh: str, days: int) -> dict:
    """`ops-report etl metrics --source victoriametrics`: load_prometheus finds VictoriaMetrics and takes its
    export path (a day per chunk); its requests are written beside the warehouse for the server's replay."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl.backfill import SERVER_CHUNK_DAYS, load_resumably
    from ops_warehouse.etl.prometheus_source import PromClient, load_prometheus
    from ops_warehouse.warehouse import open_warehouse

    requests: list[tuple[str, str, bool]] = []

    class Recording(PromClient):
        def _once(self, path, q, post, dest=None):
            requests.append((path, q, post))
            return super()._once(path, q, post, dest)

    w = open_warehouse(Config(dsn=f"chdb://{wh}"))
    d0, d1 = START.date(), START.date() + timedelta(days=days - 1)
    t = time.perf_counter()
    c = load_resumably(w, f"prometheus:{url}", d0, d1,
                       lambda a, b, p: load_prometheus(w, url, a, b, step_s=60, cluster="bench", progress=p,
                                                       client=Recording(url)),
                       chunk_days=SERVER_CHUNK_DAYS)
    seconds = time.perf_counter() - t
    Path(wh).with_suffix(".requests.json").write_text(json.dumps(requests))
    return {"seconds": seconds, "rows": c["gpu_rows"], "peak_rss_mb": peak_rss_mb(),
            "exports": sum(1 for p, _, _ in requests if p == "/api/v1/export")}


def child_vm_query(url: str, wh: str, days: int) -> dict:
    """`--source victoriametrics` before the export path: query_range, downsampled by the server to 60 s (a day
    per chunk)."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl.backfill import SERVER_CHUNK_DAYS, load_resumably
    from ops_warehouse.etl.prometheus_source import load_prometheus
    from ops_warehouse.warehouse import open_warehouse

    w = open_warehouse(Config(dsn=f"chdb://{wh}"))
    d0, d1 = START.date(), START.date() + timedelta(days=days - 1)
    t = time.perf_counter()
    c = load_resumably(w, f"prometheus:{url}", d0, d1,
                       lambda a, b, p: load_prometheus(w, url, a, b, step_s=60, cluster="bench", progress=p,
                                                       export=False),
                       chunk_days=SERVER_CHUNK_DAYS)
    return {"seconds": time.perf_counter() - t, "rows": c["gpu_rows"], "peak_rss_mb": peak_rss_mb()}


def child_vm_server(url: str, wh: str, days: int) -> dict:
    """The server alone: the requests the export load made (child_vm's record), sent again one after another,
    the bodies read and dropped."""
    import urllib.request

    record = Path(wh.replace("wh-vm_server-", "wh-vm-")).with_suffix(".requests.json")
    size = 0
    t = time.perf_counter()
    for path, q, post in json.loads(record.read_text()):
        req = (urllib.request.Request(url + path, data=q.encode(), method="POST") if post
               else urllib.request.Request(f"{url}{path}?{q}"))
        with urllib.request.urlopen(req, timeout=3600) as r:
            while chunk := r.read(1 << 20):
                size += len(chunk)
    return {"seconds": time.perf_counter() - t, "bytes": size, "peak_rss_mb": peak_rss_mb()}


CHILDREN = {"file": child_file, "vm": child_vm, "vm_query": child_vm_query, "vm_server": child_vm_server}


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(ln.split()[1]) / 1024 for ln in f if ln.startswith("VmRSS:")), 0.0)
    except OSError:
        return 0.0


def run(kind: str, data: str, work: Path, days: int, cap_mb: float | None = None) -> dict:
    """A child's figures; with ``cap_mb``, a child whose resident memory passes it is stopped (the machine
    is shared: a load that needs more than any site would give it is a finding, not something to wait for)
    and ``{"capped_s": seconds}`` returned."""
    wh = work / f"wh-{kind}-{days}"
    shutil.rmtree(wh, ignore_errors=True)
    argv = ([sys.executable, str(BENCH / "bench_telemetry.py"), "--child", "ceiling"] if kind == "ceiling"
            else [sys.executable, __file__, "--child", kind])
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([*argv, "--data", data, "--wh", str(wh), "--days", str(days)], stdout=out, stderr=err,
                             text=True)
        while p.poll() is None:
            if cap_mb and _rss_mb(p.pid) > cap_mb:
                p.kill()
                p.wait()
                shutil.rmtree(wh, ignore_errors=True)
                return {"capped_s": time.perf_counter() - t}
            time.sleep(0.5)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    shutil.rmtree(wh, ignore_errors=True)
    if p.returncode:
        raise SystemExit(f"{kind} child failed:\n{stderr[-3000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- inputs

def window(site: Path, out: Path, days: int) -> Path:
    """A site folder holding the first ``days`` day files of ``site`` (links): what a load of those days
    and the engine's glob over them both read."""
    shutil.rmtree(out, ignore_errors=True)
    for fam in (site / "telemetry").iterdir():
        (out / "telemetry" / fam.name).mkdir(parents=True, exist_ok=True)
        for k in range(days):
            f = fam / f"{(START + timedelta(days=k)):%Y-%m-%d}.parquet"
            if f.exists():
                (out / "telemetry" / fam.name / f.name).symlink_to(f)
    return out


def import_into_vm(url: str, site: Path, days: int) -> None:
    """The day files into VictoriaMetrics through its CSV import (labels and metric columns named by the
    exporters' own names, as a scrape stores them); empty values are skipped by the server."""
    import urllib.request

    import polars as pl

    for fam in sorted((site / "telemetry").iterdir()):
        for k in range(days):
            f = fam / f"{(START + timedelta(days=k)):%Y-%m-%d}.parquet"
            if not f.exists():
                continue
            df = pl.read_parquet(f)
            labels = [c for c, t in df.schema.items() if c != "timestamp" and t == pl.String]
            metrics = [c for c, t in df.schema.items() if c != "timestamp" and t != pl.String]
            cols = [pl.col("timestamp").dt.epoch("ms"), *labels, *metrics]
            fmt = ",".join(["1:time:unix_ms", *[f"{i + 2}:label:{c}" for i, c in enumerate(labels)],
                            *[f"{i + 2 + len(labels)}:metric:{c}" for i, c in enumerate(metrics)]])
            body = df.select(cols).write_csv(include_header=False).encode()
            req = urllib.request.Request(f"{url}/api/v1/import/csv?format={fmt}", data=body, method="POST")
            with urllib.request.urlopen(req, timeout=3600) as r:
                assert r.status in (200, 204), r.status
    urllib.request.urlopen(f"{url}/internal/force_flush", timeout=300).read()


def sacct(jobs: int, work: Path) -> dict:
    out = work / "sacct.json"
    p = subprocess.run([sys.executable, str(BENCH / "bench_etl_sacct.py"), "--jobs", str(jobs), "--small-jobs", "0",
                        "--workdir", str(work / "sacct"), "--json", str(out)], capture_output=True, text=True)
    shutil.rmtree(work / "sacct", ignore_errors=True)
    if p.returncode:
        raise SystemExit(f"bench_etl_sacct.py failed:\n{p.stderr[-3000:]}")
    print("\n".join("  sacct: " + ln for ln in p.stdout.splitlines() if not ln.startswith("RESULT")))
    return json.loads(out.read_text())


# ---------------------------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=14, help="the larger window measured (days from 2026-10-01)")
    ap.add_argument("--small-days", type=int, default=7, help="the smaller window, to show what grows with it")
    ap.add_argument("--nodes", type=int, default=114, help="the demo's 114 (90 H100, 16 H200, 8 B200 nodes)")
    ap.add_argument("--vm-days", type=int, default=2, help="days through VictoriaMetrics (0: skip)")
    ap.add_argument("--sacct-jobs", type=int, default=5_000_000, help="jobs in the sacct file (0: skip)")
    ap.add_argument("--parts", default="parquet,vm,sacct", help="which of parquet, vm, sacct to run")
    ap.add_argument("--rss-cap-mb", type=float, default=4096,
                    help="a server load whose resident memory passes this is stopped and reported so")
    ap.add_argument("--workdir", type=Path, help="default: a temporary folder, removed after")
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--wh", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(CHILDREN[a.child](a.data, a.wh, a.days)))
        return
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    try:
        from ops_warehouse.generate import scaled_spec
        from ops_warehouse.generate.schedule import simulate
        from ops_warehouse.generate.telemetry import write_telemetry

        spec = scaled_spec(a.nodes)
        site = work / "site"
        t = time.perf_counter()
        if len(list((site / "telemetry" / "dcgm").glob("*.parquet"))) == a.days:
            print(f"reusing the {a.days} days generated in {site} (same --nodes and --days)", flush=True)
        else:
            shutil.rmtree(site, ignore_errors=True)
            h = simulate(spec, start=START, days=a.days, jobs_per_day=900, seed=1)
            write_telemetry(site, spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc, node_events=h.node_events,
                            xids=h.xids, throttle=h.throttle, start=START, end=h.end, step_s=60, seed=1)
            gpus = int(h.inventory["gpus"].sum())
            print(f"generated {a.days} days of 60 s telemetry for {gpus} GPUs on {h.inventory.height} nodes in "
                  f"{time.perf_counter() - t:.0f} s", flush=True)

        parts = set(a.parts.split(","))
        sizes = sorted({d for d in (a.small_days, a.days) if d > 0}) if "parquet" in parts else []
        file_runs = {}
        for days in sizes:
            data = str(window(site, work / f"site-{days}d", days))
            prod = run("file", data, work, days)  # product, then the engine alone, back to back
            ceil = run("ceiling", data, work, days)
            prod_rate, ceil_rate = prod["rows"] / prod["seconds"], ceil["rows"] / ceil["seconds"]
            file_runs[days] = (prod, ceil)
            print(f"{days} days from Parquet: product {prod['rows']:,} GPU rows in {prod['seconds']:.1f} s = "
                  f"{prod_rate:,.0f} rows/s, peak RSS {prod['peak_rss_mb']:,.0f} MB; engine alone "
                  f"{ceil['rows']:,} rows in {ceil['seconds']:.1f} s = {ceil_rate:,.0f} rows/s, peak RSS "
                  f"{ceil['peak_rss_mb']:,.0f} MB; ratio {prod_rate / ceil_rate:.2f}; the product's peak after each "
                  f"week: {', '.join(str(x) for x in prod['peak_after_chunk_mb'])} MB", flush=True)
            print(f"RESULT backfill_parquet_{days}d rows_per_s={prod_rate:.0f} ceiling_rows_per_s={ceil_rate:.0f} "
                  f"ratio={prod_rate / ceil_rate:.2f} goal=>={GOAL_RATIO} peak_mb={prod['peak_rss_mb']:.0f} "
                  f"wall_s={prod['seconds']:.1f} gpu_rows={prod['rows']}", flush=True)
        if sizes:
            big, (prod, ceil) = sizes[-1], file_runs[sizes[-1]]
            print(f"RESULT backfill_parquet_memory peak_mb={prod['peak_rss_mb']:.0f} goal=<={GOAL_RSS_MB}MB days={big}"
                  + "".join(f" peak_mb_{d}d={file_runs[d][0]['peak_rss_mb']:.0f}" for d in sizes))
            per_day = prod["rows"] / big
            sizes_rss = ", ".join(f"{d} days {file_runs[d][0]['peak_rss_mb']:,.0f} MB" for d in sizes)
            print(f"EXTRAPOLATION (not measured): {YEAR_DAYS} days of this site = {per_day * YEAR_DAYS / 1e6:,.0f} M "
                  f"GPU rows: the product at its {big}-day rate {prod['seconds'] / big * YEAR_DAYS / 3600:.1f} h, the "
                  f"engine alone {ceil['seconds'] / big * YEAR_DAYS / 3600:.1f} h; peak RSS as measured if it does "
                  f"not grow with the window ({sizes_rss})")
            print(f"RESULT backfill_year_extrapolated product_h={prod['seconds'] / big * YEAR_DAYS / 3600:.2f} "
                  f"engine_h={ceil['seconds'] / big * YEAR_DAYS / 3600:.2f} gpu_rows={per_day * YEAR_DAYS:.0f} "
                  f"from_days={big}")

        if "vm" in parts and a.vm_days and shutil.which("victoria-metrics"):
            sys.path.insert(0, str(BENCH.parent))
            from tests import prometheus_harness as ph

            vm = ph.VictoriaMetrics(work / "vmdata").start()
            try:
                t = time.perf_counter()
                import_into_vm(vm.url, site, a.vm_days + 1)  # and the day after: the last day's end sample
                print(f"VictoriaMetrics: {a.vm_days + 1} days imported in {time.perf_counter() - t:.0f} s "
                      f"(not part of the load)", flush=True)
                # the export path (as `etl metrics --source victoriametrics` takes it by itself), the server
                # replaying its requests, then query_range: back to back on one server
                server = None
                for kind, how in (("vm", "victoriametrics: /api/v1/export, downsampled by the engine"),
                                  ("vm_query", "victoriametrics: query_range at 60 s")):
                    r = run(kind, vm.url, work, a.vm_days, cap_mb=a.rss_cap_mb)
                    if "capped_s" in r:
                        print(f"{a.vm_days} days from VictoriaMetrics ({how}, a day per chunk): stopped after "
                              f"{r['capped_s']:.0f} s, its resident memory above the {a.rss_cap_mb:,.0f} MB cap")
                        print(f"RESULT backfill_{kind} capped_s={r['capped_s']:.0f} peak_mb=>{a.rss_cap_mb:.0f} "
                              f"days={a.vm_days}")
                        continue
                    if kind == "vm":
                        server = run("vm_server", vm.url, work, a.vm_days)
                        print(f"the server alone answering the export load's {r['exports']} exports (and its "
                              f"label requests) of {a.vm_days} days: {server['seconds']:.1f} s "
                              f"({server['bytes'] / 1e6:,.0f} MB)", flush=True)
                    rate = r["rows"] / r["seconds"]
                    over = f" ratio_to_server={r['seconds'] / server['seconds']:.2f}" if kind == "vm" else ""
                    print(f"{a.vm_days} days from VictoriaMetrics ({how}, a day per chunk): product "
                          f"{r['rows']:,} GPU rows in {r['seconds']:.1f} s = {rate:,.0f} rows/s, peak RSS "
                          f"{r['peak_rss_mb']:,.0f} MB; EXTRAPOLATION (not measured): {YEAR_DAYS} days "
                          f"{r['seconds'] / a.vm_days * YEAR_DAYS / 3600:.1f} h", flush=True)
                    print(f"RESULT backfill_{kind} rows_per_s={rate:.0f} wall_s={r['seconds']:.1f} "
                          f"peak_mb={r['peak_rss_mb']:.0f} days={a.vm_days}{over}"
                          + (f" server_s={server['seconds']:.1f}" if server else ""), flush=True)
            finally:
                vm.stop()

        if "sacct" in parts and a.sacct_jobs:
            s = sacct(a.sacct_jobs, work)
            p, c = s["product"], s["ceiling"]
            print(f"RESULT backfill_sacct rows_per_s={p['rows_per_s']:.0f} ceiling_rows_per_s={c['rows_per_s']:.0f} "
                  f"ratio={s['ratio']:.2f} peak_mb={p['peak_rss_mb']:.0f} jobs={a.sacct_jobs} "
                  f"wall_s={p['seconds']:.1f}")
            print(f"RESULT backfill_sacct_memory peak_mb={p['peak_rss_mb']:.0f} goal=<=1024MB jobs={a.sacct_jobs}")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
