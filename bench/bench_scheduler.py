"""Benchmark: the backfill scheduler's event loop (planning/backfill.py) in its two callers, at a git revision
and now, back to back in one command, with the schedules compared.

    .venv/bin/python bench/bench_scheduler.py --dir DIR [--before REV] [--rounds 3]

DIR is a folder ``ops-report demo --dir DIR`` wrote (its warehouse is only read: the month's what-if inputs,
once, as ``ops-report whatif --add h200:16`` reads them). Each side runs in a fresh child process (imports not
timed), alternated round by round (before first), and the fastest round of each side is reported:

1. ``simulate``: the generator's month as the demo makes it (generate/schedule.py ``simulate``: 31 days, 114
   nodes, 900 jobs a day, seed 7; the scheduler places every run), wall and CPU seconds, and the scheduler's
   own share (``Scheduler.run`` less the generator's ``on_start`` callbacks);
2. ``replay``: the what-if's replays of the demo month (planning/scenarios.py ``replay_scenarios``): the
   unchanged replay and "+16 H200 nodes" one after the other in the child (CPU seconds of each: the process
   alone), then the two in forked processes as the demo's monthly stage runs them (wall; CPU of parent and
   children).

With --before, the scheduler (and the generator's package) of REV are loaded in the "before" child from
``git show`` (bench_generate.py's way), and the two sides' schedules are compared: every run's start and nodes
of the simulated month (and its Parquet-equal runs frame), every job's start in each replay, and the
scheduling passes and jobs tried the what-if reports. A ``RESULT scheduler`` line for bench/run_all.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 10, 1, tzinfo=timezone.utc)


def _load_at(rev: str) -> None:
    """planning/backfill.py, planning/scenarios.py and the generator's modules as they were at git ``rev``,
    executed over the imported modules (dependencies first, so each binds the old ones it imports)."""
    import importlib

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_generate import GEN_MODULES

    names = [("planning", "backfill"), ("planning", "scenarios")] + [("generate", m) for m in GEN_MODULES] + [
        ("generate", "__init__")]
    for pkg, name in names:
        mod = importlib.import_module(f"ops_warehouse.{pkg}" + ("" if name == "__init__" else f".{name}"))
        src = subprocess.run(["git", "show", f"{rev}:{pkg}/{name}.py"], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout
        exec(compile(src, f"{rev}:{pkg}/{name}.py", "exec"), mod.__dict__)


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def child_simulate() -> dict:
    import polars as pl
    from ops_warehouse.generate import schedule

    run_s = [0.0, 0.0]
    cb = [0.0, 0.0]
    sched_run = schedule.Scheduler.run

    def run(self, horizon, on_start):  # the event loop, and the generator's callbacks inside it
        def timed_cb(*a):
            t, c = time.perf_counter(), time.process_time()
            try:
                return on_start(*a)
            finally:
                cb[0] += time.perf_counter() - t
                cb[1] += time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        try:
            return sched_run(self, horizon, timed_cb)
        finally:
            run_s[0] += time.perf_counter() - t
            run_s[1] += time.process_time() - c

    schedule.Scheduler.run = run
    t, c = time.perf_counter(), time.process_time()
    h = schedule.simulate(start=START, days=31, jobs_per_day=900, seed=7)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    runs = h.runs if isinstance(h.runs, pl.DataFrame) else h.runs.collect()
    key = runs.select("job_id", "run", "start", "nodes").sort("job_id", "run")
    digest = hashlib.sha256(key.write_ipc(None).getvalue()).hexdigest()[:16]
    return {"wall_s": wall, "cpu_s": cpu, "loop_s": run_s[0] - cb[0], "loop_cpu_s": run_s[1] - cb[1],
            "on_start_cpu_s": cb[1], "runs": runs.height, "digest": digest}


def child_replay(inputs: str) -> dict:
    import numpy as np
    from ops_warehouse.planning import scenarios

    with open(inputs, "rb") as f:
        inp, changes = pickle.load(f)
    out: dict = {"scenarios": {}}
    for label, change in [("replay", None)] + [(c.label, c) for c in changes]:
        b = scenarios._arrays(inp, change)
        args = (b[0], b[1], b[2], b[3], inp.t0, inp.t1, b[5]["job_id_raw"].to_numpy().astype(np.int64), "limit")
        t, c = time.perf_counter(), time.process_time()
        r = scenarios._run(args)
        out["scenarios"][label] = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                                   "passes": r.events, "tries": r.tries,
                                   "digest": hashlib.sha256(np.asarray(r.start, np.int64).tobytes()).hexdigest()[:16]}
    t, c, cc = time.perf_counter(), time.process_time(), _cpu_children()
    scenarios.replay_scenarios(inp, changes)  # as the demo's monthly stage: a forked process a scenario
    out["forked"] = {"wall_s": time.perf_counter() - t,
                     "cpu_s": time.process_time() - c + _cpu_children() - cc}
    return out


def _inputs(directory: Path, path: Path) -> None:
    """The demo month's what-if inputs, read from DIR's warehouse as `ops-report whatif --add h200:16` does."""
    from ops_warehouse.analytics import whatif
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.config import Config
    from ops_warehouse.planning.changes import parse_change
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{directory.resolve() / 'warehouse'}"), migrate=False, create=False)
    window = (START, datetime(2026, 11, 1, tzinfo=timezone.utc))
    through = run_mart(wh, "data_through", cluster="ai1", window=window).row(0, named=True)["through_ts"]
    if through is not None:
        through = through if through.tzinfo else through.replace(tzinfo=timezone.utc)
        window = (window[0], max(window[0], min(window[1], through)))
    inp = whatif.read_inputs(wh, "ai1", window)
    with open(path, "wb") as f:
        pickle.dump((inp, [parse_change(add=["h200:16"])]), f)


def _child(kind: str, side: str, before: str | None, inputs: Path) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--inputs", str(inputs)]
    if side == "before":
        cmd += ["--before", before]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, help="a folder `ops-report demo --dir` wrote (for the replays)")
    ap.add_argument("--before", metavar="REV", help="the scheduler and generator at git REV, first")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=("simulate", "replay"), help="one of the two callers")
    ap.add_argument("--child", choices=("simulate", "replay"))
    ap.add_argument("--inputs", type=Path)
    a = ap.parse_args()
    if a.child:
        if a.before:
            _load_at(a.before)
        print(json.dumps(child_simulate() if a.child == "simulate" else child_replay(str(a.inputs))))
        return
    kinds = [k for k in ("simulate", "replay") if a.only in (None, k)]
    if "replay" in kinds and not a.dir:
        raise SystemExit("--dir DIR (a demo's folder) is needed for the replays (or --only simulate)")
    sides = (["before"] if a.before else []) + ["now"]
    with tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        inputs = Path(tmp) / "inputs.pkl"
        if "replay" in kinds:
            _inputs(a.dir, inputs)
        res: dict = {(k, s): [] for k in kinds for s in sides}
        for r in range(a.rounds):
            for k in kinds:
                for side in sides:
                    load = os.getloadavg()[0]
                    d = _child(k, side, a.before, inputs)
                    d["load"] = load
                    res[(k, side)].append(d)
                    if k == "simulate":
                        print(f"simulate {side} #{r + 1} (load {load:.1f}): {d['wall_s']:.2f} s wall, {d['cpu_s']:.2f}"
                              f" CPU-s; event loop {d['loop_cpu_s']:.2f} CPU-s, on_start {d['on_start_cpu_s']:.2f};"
                              f" {d['runs']:,} runs, schedule {d['digest']}", flush=True)
                    else:
                        sc = "; ".join(f"{lb} {v['cpu_s']:.2f} CPU-s ({v['passes']:,} passes, {v['tries']:,} tried, "
                                       f"starts {v['digest']})" for lb, v in d["scenarios"].items())
                        print(f"replay {side} #{r + 1} (load {load:.1f}): {sc}; both forked {d['forked']['wall_s']:.2f}"
                              f" s wall, {d['forked']['cpu_s']:.2f} CPU-s", flush=True)
    line = "RESULT scheduler"
    same = True
    for k in kinds:
        for side in sides:
            rows = res[(k, side)]
            if k == "simulate":
                best = min(rows, key=lambda d: d["cpu_s"])
                line += (f" simulate_{side}_s={min(d['wall_s'] for d in rows):.2f}"
                         f" simulate_{side}_cpu_s={best['cpu_s']:.2f} loop_{side}_cpu_s={best['loop_cpu_s']:.2f}")
            else:
                line += (f" replay_{side}_cpu_s={min(d['scenarios']['replay']['cpu_s'] for d in rows):.2f}"
                         f" forked_{side}_s={min(d['forked']['wall_s'] for d in rows):.2f}")
        if a.before:
            b, n = res[(k, "before")][0], res[(k, "now")][0]
            if k == "simulate":
                same &= b["digest"] == n["digest"] and b["runs"] == n["runs"]
            else:
                same &= all(b["scenarios"][lb] == {**n["scenarios"][lb], "wall_s": b["scenarios"][lb]["wall_s"],
                                                   "cpu_s": b["scenarios"][lb]["cpu_s"]} for lb in b["scenarios"])
    if a.before:
        if "simulate" in kinds:
            line += " ratio={:.2f}".format(min(d["cpu_s"] for d in res[("simulate", "before")])
                                           / min(d["cpu_s"] for d in res[("simulate", "now")]))
        line += f" same_schedules={'yes' if same else 'NO'}"
    print(line)


if __name__ == "__main__":
    main()
