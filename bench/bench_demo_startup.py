"""Benchmark: the demo's start-up, from run_demo's call until its backfill starts on the telemetry (the window's
sacct extract loaded and the first telemetry day written: the path every later stage waits on), on another
checkout's code and on this one, alternated in fresh children and folders (issue 51 item 3, round 11).

    .venv/bin/python bench/bench_demo_startup.py --code-before /work/main/.venv/bin/python [--rounds 3]

Each child runs the demo's own run_demo with ``load_resumably`` (the backfill's telemetry load) replaced by a
stop: its wall and CPU (``time.process_time``: every thread, the engine's and the generator's) at that moment.
The generator goes on writing beside the loads after it in the real demo, so the CPU is what was done before
the stop, not all of it. Prints each child, then best and median of each side and

    RESULT demo_startup now_s=... before_s=... now_cpu_s=... before_cpu_s=... ratio=...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(folder: Path) -> None:
    import ops_warehouse.cli.demo as demo
    from ops_warehouse.config import Config

    class Stop(Exception):
        pass

    def stop(*a, **k):
        raise Stop(time.perf_counter() - t0, time.process_time() - c0)

    demo.load_resumably = stop
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        demo.run_demo(Config(), folder)
    except Stop as e:
        print(json.dumps({"wall": e.args[0], "cpu": e.args[1]}), flush=True)
        os._exit(0)  # the generator's thread is still writing: not waited for
    raise SystemExit("the demo ended without starting its backfill's telemetry")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code-before", required=True, help="another checkout's python (its venv's)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-demo-startup-"))
    sides = {"before": a.code_before, "now": sys.executable}
    res: dict = {s: [] for s in sides}
    try:
        for r in range(a.rounds):
            for side, py in sides.items():
                folder = work / side
                shutil.rmtree(folder, ignore_errors=True)
                load = os.getloadavg()[0]
                p = subprocess.run([py, __file__, "--code-before", a.code_before, "--child", str(folder)],
                                   capture_output=True, text=True)
                if p.returncode:
                    raise SystemExit(f"{side}: {p.stderr[-2000:]}")
                d = json.loads(p.stdout.strip().splitlines()[-1])
                res[side].append(d)
                print(f"round {r + 1} {side:6s} wall {d['wall']:6.1f} s  CPU {d['cpu']:5.1f} s  load before {load:.1f}",
                      flush=True)
        for side, rows in res.items():
            w, c = [x["wall"] for x in rows], [x["cpu"] for x in rows]
            print(f"{side:6s} wall best {min(w):.1f} median {statistics.median(w):.1f} s; "
                  f"CPU best {min(c):.1f} median {statistics.median(c):.1f} s")
        b, n = res["before"], res["now"]
        print(f"RESULT demo_startup now_s={min(x['wall'] for x in n):.1f} before_s={min(x['wall'] for x in b):.1f} "
              f"now_cpu_s={min(x['cpu'] for x in n):.1f} before_cpu_s={min(x['cpu'] for x in b):.1f} "
              f"ratio={min(x['wall'] for x in b) / min(x['wall'] for x in n):.2f}")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
