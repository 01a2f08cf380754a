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

    --demo [--before REV]: the demo's own generate instead (31 days, 114 nodes, 900 jobs a day, seed 7, 300 s
    telemetry, nightly extracts and the 30-day backfill extract), wall and CPU seconds by phase; with
    --before, the generator package and the backfill scheduler (planning/backfill.py) as they were at git
    REV first, then now, in this one command (the machine is shared: back to back, alternating --repeat
    times), and every file the two wrote compared: text byte for byte, Parquet row for row.
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


DEMO = dict(days=31, jobs_per_day=900, seed=7, metrics_step_s=300, telemetry=("parquet",), nightly=True,
            backfill_days=30)  # as cli/demo.py calls it
GEN_MODULES = ("model", "workload", "schedule", "sacct_writer", "kernel_log", "telemetry", "volume")


def _load_generator_at(rev: str) -> None:
    """Replace the generator's modules by their text at git ``rev`` (in dependency order, the package last, so
    each module's imports of its siblings bind the old ones), the backfill scheduler it places jobs with
    (planning/backfill.py) first."""
    import importlib

    root = Path(__file__).resolve().parent.parent
    for pkg, name in [("planning", "backfill")] + [("generate", m) for m in GEN_MODULES + ("__init__",)]:
        mod = importlib.import_module(f"ops_warehouse.{pkg}" + ("" if name == "__init__" else f".{name}"))
        src = subprocess.run(["git", "show", f"{rev}:{pkg}/{name}.py"], cwd=root, check=True,
                             capture_output=True, text=True).stdout
        exec(compile(src, f"{rev}:{pkg}/{name}.py", "exec"), mod.__dict__)


def child_demo(out: str, before: str | None) -> dict:
    import ops_warehouse.generate as gen
    from ops_warehouse.generate import telemetry as tel

    if before:
        _load_generator_at(before)
    phases: dict = {}

    def timed(mod, name: str, label: str):  # wall and CPU seconds of each call of mod.name, added up
        f = getattr(mod, name)

        def w(*a, **k):
            t, c = time.perf_counter(), time.process_time()
            try:
                return f(*a, **k)
            finally:
                p = phases.setdefault(label, [0.0, 0.0])
                p[0] += time.perf_counter() - t
                p[1] += time.process_time() - c
        setattr(mod, name, w)

    timed(gen, "simulate", "simulate")
    timed(gen, "write_sacct", "sacct")
    timed(gen, "sacct_text", "sacct")
    timed(gen, "write_telemetry", "telemetry")
    timed(tel, "_write_parquet", "telemetry_parquet_writes")
    t, c = time.perf_counter(), time.process_time()
    gen.generate(out, start=START, **DEMO)
    return {"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - c,
            "phases": {k: [round(v[0], 2), round(v[1], 2)] for k, v in phases.items()}, "peak_rss_mb": peak_rss_mb()}


def compare_sites(a: Path, b: Path) -> tuple[int, list[str]]:
    """Files of two generated sites: text byte for byte, Parquet the same rows (sorted, in any order)."""
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    differ = sorted({str(p) for p in set(fa) ^ set(fb)})
    for rel in sorted(set(fa) & set(fb)):
        if rel.suffix == ".parquet":
            x, y = pl.read_parquet(a / rel), pl.read_parquet(b / rel)
            if x.schema != y.schema or not x.sort(x.columns).equals(y.sort(y.columns)):
                differ.append(str(rel))
        elif (a / rel).read_bytes() != (b / rel).read_bytes():
            differ.append(str(rel))
    return len(fa), differ


def demo_main(a) -> None:
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-generate-demo-"))
    sides = (["before"] if a.before else []) + ["now"]
    res: dict = {s: [] for s in sides}
    try:
        for r in range(a.repeat):
            for side in sides:
                out = work / f"{side}-{r}"
                shutil.rmtree(out, ignore_errors=True)
                cmd = [sys.executable, __file__, "--child", "demo", "--out", str(out)]
                p = subprocess.run(cmd + (["--before", a.before] if side == "before" else []),
                                   capture_output=True, text=True)
                if p.returncode:
                    raise SystemExit(p.stderr)
                d = json.loads(p.stdout.strip().splitlines()[-1])
                res[side].append(d)
                print(f"{side} #{r + 1}: {d['seconds']:.1f} s wall, {d['cpu_s']:.1f} s CPU, peak RSS "
                      f"{d['peak_rss_mb']:,.0f} MB; phases (wall, CPU s): "
                      + ", ".join(f"{k} {w:.1f}/{c:.1f}" for k, (w, c) in d["phases"].items()), flush=True)
        best = {s: min(res[s], key=lambda d: d["seconds"]) for s in sides}
        line = (f"RESULT generate_demo now_s={best['now']['seconds']:.1f} now_cpu_s={best['now']['cpu_s']:.1f} "
                f"now_peak_mb={best['now']['peak_rss_mb']:.0f}")
        if a.before:
            n, differ = compare_sites(work / "before-0", work / "now-0")
            print(f"same files before and now: {n - len(differ)} of {n}"
                  + (f"; differ: {', '.join(differ[:10])}" if differ else ""), flush=True)
            b = best["before"]
            line += (f" before_s={b['seconds']:.1f} before_cpu_s={b['cpu_s']:.1f} "
                     f"ratio={b['seconds'] / best['now']['seconds']:.2f} "
                     f"cpu_ratio={b['cpu_s'] / best['now']['cpu_s']:.2f} differing_files={len(differ)}")
        print(line)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


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
    ap.add_argument("--demo", action="store_true", help="the demo's generate (see the module's docstring)")
    ap.add_argument("--before", metavar="REV", help="with --demo: the generator at git REV, first")
    ap.add_argument("--repeat", type=int, default=1, help="with --demo: rounds of before and now")
    a = ap.parse_args()
    if a.child == "demo":
        print(json.dumps(child_demo(a.out, a.before)))
        return
    if a.demo:
        demo_main(a)
        return
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
