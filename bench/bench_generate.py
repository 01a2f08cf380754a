"""Benchmark: the cluster generator at the sizes the issue names, each phase in a fresh child process.

    /work/venv/bin/python bench/bench_generate.py [--jobs 1000000] [--days 480] [--telemetry-nodes 128]
                                                  [--telemetry-days 31] [--workdir DIR]

1. history: 1,000,000 jobs (scheduled simulation + `sacct --parsable2` with steps, node events, inventory) on a
   1,024-node cluster (8,192 GPUs) over --days (default 480: ~2,100 jobs a day, about half the cluster busy
   at this job mix; a million jobs in one month would need a cluster several times larger, or leave most
   of them queued, which makes the simulation crawl through a deep queue);
2. telemetry: one month of 1-minute dcgm-exporter / NIC / Lustre / IPMI samples for 128 nodes (1,024 GPUs),
   Parquet, from a month's simulation of that cluster.
Prints seconds, rows, bytes and peak RSS of each child (its own: VmHWM, read in the child), and one RESULT
line for bench/run_all.py. (Smaller --jobs/--days/--telemetry-* are for a quick check that it runs.)
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from peak_rss import peak_rss_mb  # bench/peak_rss.py (benches run as scripts from bench/)

START = datetime(2026, 10, 1, tzinfo=timezone.utc)


def child_history(out: str, jobs: int, days: int) -> dict:
    from ops_warehouse.generate import generate

    t = time.perf_counter()
    h = generate(out, start=START, days=days, jobs_per_day=-(-jobs // days), nodes=1024, seed=1, telemetry=(),
                 spill=True)
    s = time.perf_counter() - t
    psv = Path(out) / "sacct" / "sacct.psv"
    return {"seconds": s, "runs": h.runs.select(pl.len()).collect().item(), "sacct_lines": sum(1 for _ in open(psv, "rb")) - 1,
            "sacct_mb": psv.stat().st_size / 1e6, "node_events": h.node_events.height, "peak_rss_mb": peak_rss_mb()}


def child_telemetry(out: str, nodes: int = 128, days: int = 31) -> dict:
    from ops_warehouse.generate import scaled_spec
    from ops_warehouse.generate.schedule import simulate
    from ops_warehouse.generate.telemetry import write_telemetry

    spec = scaled_spec(nodes)
    t = time.perf_counter()
    h = simulate(spec, start=START, days=days, jobs_per_day=1000 * nodes // 128, seed=1)
    sim_s = time.perf_counter() - t
    t = time.perf_counter()
    counts = write_telemetry(Path(out), spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc,
                             node_events=h.node_events, xids=h.xids, throttle=h.throttle, start=START, end=h.end,
                             step_s=60, seed=1, formats=("parquet",))
    s = time.perf_counter() - t
    return {"simulate_seconds": sim_s, "seconds": s, "gpus": int(h.inventory["gpus"].sum()),
            "dcgm_rows": counts["dcgm"]["rows"], "samples": sum(c["samples"] for c in counts.values()),
            "mb": sum(c["bytes"] for c in counts.values()) / 1e6, "peak_rss_mb": peak_rss_mb()}


def run_child(kind: str, out: Path, jobs: int, days: int, tel_nodes: int = 128, tel_days: int = 31) -> dict:
    p = subprocess.run([sys.executable, __file__, "--child", kind, "--out", str(out), "--jobs", str(jobs),
                        "--days", str(days), "--telemetry-nodes", str(tel_nodes), "--telemetry-days", str(tel_days)],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=480)
    ap.add_argument("--telemetry-nodes", type=int, default=128, help="nodes of the telemetry phase (8 GPUs each)")
    ap.add_argument("--telemetry-days", type=int, default=31, help="days of 60 s telemetry")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--child")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        res = (child_history(a.out, a.jobs, a.days) if a.child == "history"
               else child_telemetry(a.out, a.telemetry_nodes, a.telemetry_days))
        print(json.dumps(res))
        return
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-generate-"))
    try:
        h = run_child("history", work / "history", a.jobs, a.days)
        print(f"history: {h['runs']:,} job runs on 1,024 nodes x {a.days} days in {h['seconds']:.1f} s; sacct "
              f"{h['sacct_lines']:,} lines, {h['sacct_mb']:.0f} MB; {h['node_events']} node events; "
              f"peak RSS {h['peak_rss_mb']:,.0f} MB")
        t = run_child("telemetry", work / "telemetry", a.jobs, a.days, a.telemetry_nodes, a.telemetry_days)
        print(f"telemetry: {t['gpus']:,} GPUs x {a.telemetry_days} days at 60 s: {t['dcgm_rows']:,} dcgm rows, {t['samples']:,} "
              f"samples, {t['mb']:,.0f} MB Parquet in {t['seconds']:.1f} s (simulation {t['simulate_seconds']:.1f} s); "
              f"peak RSS {t['peak_rss_mb']:,.0f} MB")
        # for bench/run_all.py (the generator is a tool, not the product: figures, no goal)
        print(f"RESULT generate history_s={h['seconds']:.1f} job_runs={h['runs']} "
              f"runs_per_s={h['runs'] / h['seconds']:.0f} history_peak_mb={h['peak_rss_mb']:.0f} "
              f"telemetry_s={t['seconds']:.1f} samples_per_s={t['samples'] / t['seconds']:.0f} "
              f"telemetry_peak_mb={t['peak_rss_mb']:.0f}")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
