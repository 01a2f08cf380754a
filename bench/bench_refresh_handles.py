"""Benchmark: a large load's one refresh of the grains, its steps on one engine handle (the order of main before
round 8) against two at once (etl/concurrent_steps.py), alternated in one command, each run in a fresh child on
a fresh copy of the same loaded warehouse; every table compared.

    .venv/bin/python bench/bench_refresh_handles.py --demo-data DIR [--rounds 3] [--workdir DIR]
    .venv/bin/python bench/bench_refresh_handles.py --sacct-jobs 250000 [--days 45] [--rounds 3]

``--demo-data``: a demo's data/ (`ops-report demo` writes it: sacct/backfill/, telemetry/): the demo's backfill
of October 1-30 is loaded once as cli/demo.py ``backfill`` loads it, its one refresh held back (the pending hours
left in etl_watermark, as a load killed before its block's end leaves them); each run then refreshes them as the
block's end does (grains.refresh_pending). ``--sacct-jobs``: a synthetic sacct dump (bench_etl_sacct.py's) loaded
with ``refresh=False``; each run then refreshes as that load would have (grains.refresh_after_jobs: job_run in
ranges of ids, run_node_hour in pieces, the merges). Each child prints its wall, its process's CPU seconds (the
engine's threads are the process's), its peak RSS over the refresh (VmHWM, reset before it), and every MergeTree
table's count and sum of row hashes (FINAL, the refresh times left out). ``--pythonpath P`` runs the one-handle
side with P first on PYTHONPATH instead (another checkout's code made importable, e.g. main's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
VOLATILE = ("loaded_at", "refreshed_at", "synced_at", "updated_at", "applied_at", "source_line", "line_no")


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _hwm_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) / 1024 for ln in f if ln.startswith("VmHWM:"))


def _config(wh_dir: str):
    from ops_warehouse.config import Config

    cfg = Config(dsn=f"chdb://{wh_dir}")
    cfg.projects = {f"proj{c}": c.upper() for c in "abcdef"}  # the demo's (cli/demo.py)
    return cfg


def child_prepare(kind: str, src: str, wh_dir: str) -> dict:
    """The load whose refresh is measured, its refresh held back."""
    from ops_warehouse.etl import grains
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(_config(wh_dir))
    t = time.perf_counter()
    if kind == "demo":
        from datetime import date

        from ops_warehouse.cli import demo
        from ops_warehouse.generate import scaled_spec

        grains.refresh_pending = lambda _wh: []  # (one_refresh's end: the hours stay pending)
        n = demo.backfill(wh, Path(src), scaled_spec().name, date(2026, 10, 1), date(2026, 10, 30))
        pending = sorted(getattr(wh, "_compact_pending", set()))
    else:
        from ops_warehouse.etl.sacct_load import load_sacct

        r = load_sacct(wh, src, refresh=False)
        n, pending = {"jobs": r.jobs_loaded}, []
    wh.close()
    return {"seconds": time.perf_counter() - t, "loaded": n, "pending_merges": pending}


def child_refresh(kind: str, wh_dir: str, handles: int, pending: list[str]) -> dict:
    from datetime import timezone

    from ops_warehouse.etl import grains
    from ops_warehouse.warehouse import open_warehouse

    try:
        from ops_warehouse.etl import concurrent_steps
    except ImportError:  # a checkout before round 8 (--pythonpath): its steps one after the other
        if handles != 1:
            raise
    else:
        concurrent_steps.HANDLES = handles
    wh = open_warehouse(_config(wh_dir))
    wh.query_rows("SELECT 1")
    if kind == "sacct":
        first = wh.query_rows("SELECT min(coalesce(start_ts, submit_ts)) FROM slurm_job_run")[0][0]
    wh._compact_pending = set(pending)  # what the loads of the block left to merge at its end
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    t, c = time.perf_counter(), _cpu_s()
    if kind == "demo":
        grains.refresh_pending(wh)
    else:
        grains.refresh_after_jobs(wh, first.replace(tzinfo=timezone.utc), (None, None))
    wall, cpu = time.perf_counter() - t, _cpu_s() - c
    out = {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": _hwm_mb(), "load": os.getloadavg()[0], "tables": {}}
    for (table,) in wh.query_rows("SELECT name FROM system.tables WHERE database = currentDatabase() "
                                  "AND engine LIKE '%MergeTree' AND name != 'etl_run_log' ORDER BY name"):
        cols = [c for (c,) in wh.query_rows("SELECT name FROM system.columns WHERE database = currentDatabase() "
                                            "AND table = {t:String} ORDER BY position", {"t": table})
                if c not in VOLATILE]
        expr = "cityHash64(tuple(" + ", ".join(f"`{c}`" for c in cols) + "))"
        out["tables"][table] = [str(v) for v in wh.query_rows(f"SELECT count(), sum({expr}) FROM {table} FINAL")[0]]
    wh.close()
    return out


def _child(args: list[str], pythonpath: str | None = None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"child {args[:2]} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo-data", type=Path)
    ap.add_argument("--sacct-jobs", type=int)
    ap.add_argument("--days", type=int, default=45, help="--sacct-jobs: the days they are submitted over")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--pythonpath", help="the one-handle side's code first on PYTHONPATH (e.g. main's)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, what, *rest = a.child
        r = (child_prepare(kind, what, rest[0]) if what != "refresh"
             else child_refresh(kind, rest[0], int(rest[1]), json.loads(rest[2])))
        print(json.dumps(r))
        return
    if (a.demo_data is None) == (a.sacct_jobs is None):
        raise SystemExit("one of --demo-data DIR or --sacct-jobs N")
    work = Path(tempfile.mkdtemp(prefix="bench-refresh-", dir=a.workdir))
    try:
        kind = "demo" if a.demo_data else "sacct"
        if kind == "demo":
            src = str(a.demo_data.resolve())
        else:
            from datetime import datetime, timezone

            from ops_warehouse.generate.volume import write_sacct_dump

            src = str(work / "sacct.psv")
            write_sacct_dump(Path(src), jobs=a.sacct_jobs, start=datetime(2025, 1, 1, tzinfo=timezone.utc),
                             days=a.days, seed=0, steps=True)
        loaded = work / "loaded"
        prep = _child([kind, src, str(loaded)])
        print(f"prepared: {prep['loaded']} in {prep['seconds']:.1f} s")
        runs: dict[int, list[dict]] = {1: [], 2: []}
        for k in range(a.rounds):
            for handles in ((1, 2) if k % 2 == 0 else (2, 1)):
                copy = work / f"run-{handles}"
                shutil.rmtree(copy, ignore_errors=True)
                subprocess.run(["cp", "-a", str(loaded), str(copy)], check=True)  # (keeps the engine's links)
                r = _child([kind, "refresh", str(copy), str(handles), json.dumps(prep["pending_merges"])],
                           a.pythonpath if handles == 1 else None)
                shutil.rmtree(copy, ignore_errors=True)
                runs[handles].append(r)
                print(f"round {k + 1} handles={handles}: {r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} CPU-s, "
                      f"peak RSS {r['peak_rss_mb']:.0f} MB, load {r['load']:.1f}", flush=True)
        same = all(r["tables"] == runs[1][0]["tables"] for rs in runs.values() for r in rs)
        best = {h: min(rs, key=lambda r: r["wall_s"]) for h, rs in runs.items()}
        print(f"RESULT refresh kind={kind} one_handle_s={best[1]['wall_s']:.2f} "
              f"one_handle_cpu_s={min(r['cpu_s'] for r in runs[1]):.2f} two_handles_s={best[2]['wall_s']:.2f} "
              f"two_handles_cpu_s={min(r['cpu_s'] for r in runs[2]):.2f} "
              f"one_handle_rss_mb={max(r['peak_rss_mb'] for r in runs[1]):.0f} "
              f"two_handles_rss_mb={max(r['peak_rss_mb'] for r in runs[2]):.0f} rounds={a.rounds} "
              f"same_tables={same} tables={len(runs[1][0]['tables'])}")
        if not same:
            for t, v in runs[1][0]["tables"].items():
                others = {tuple(r["tables"].get(t, ())) for rs in runs.values() for r in rs}
                if len(others) > 1:
                    print(f"  differs: {t} {sorted(others)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
