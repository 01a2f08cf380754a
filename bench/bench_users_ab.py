"""Benchmark: one command (`ops-report users`, `ops-report monthly`) of two checkouts of the product back to back,
each on the warehouse its own code loaded from the same raw files, in one run (round 5, engineer A: the users'
utilization from run_observed, the labelled GPUs, instead of job_efficiency's node share).

    .venv/bin/python bench/bench_users_ab.py --before /tmp/wt-main --before-wh /tmp/ws/base \\
        --after . --after-wh /tmp/ws/new --project A --from 2026-10-01 --to 2026-10-08 [--rounds 3]

A checkout is a folder with its own .venv (`git worktree add --detach /tmp/wt-main main`, then its editable
install); its warehouse a copy of a site it built (tests/sites.py keeps them by the code's hash, so a change of
a grain's SQL loads another). The rounds alternate before and after, so the shared machine's load weighs on
both alike; the fastest round of each counts (its noise only ever adds). CPU seconds are the child's user +
system (resource.getrusage of the children), peak RSS the child's own (/usr/bin/time's %M: its high-water
mark). RESULT lines: before ÷ after (above 1: the change is faster).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time
from pathlib import Path


def _once(root: Path, dsn: str, args: list[str]) -> tuple[float, float, float]:
    env = {**os.environ, "OPS_CONFIG": "", "OPS_WAREHOUSE": dsn}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", str(root / ".venv" / "bin" / "ops-report"), *args],
                       env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"{root}: ops-report {' '.join(args)}: {p.stderr[-2000:]}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, int(p.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--before-wh", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--after-wh", type=Path, required=True)
    ap.add_argument("--project", default="A")
    ap.add_argument("--cluster", default="ai1", help="the Slurm cluster's name")
    ap.add_argument("--from", dest="start", default="2026-10-01")
    ap.add_argument("--to", dest="end", default="2026-10-08")
    ap.add_argument("--month", default="2026-10")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    commands = {
        "users": ["users", "--project", a.project, "--from", a.start, "--to", a.end, "--slurm-cluster", a.cluster,
                  "--format", "json"],
        "monthly": ["monthly", "--month", a.month, "--project", a.project, "--slurm-cluster", a.cluster,
                    "--format", "json"],
    }
    sides = {"before": (a.before, f"chdb://{a.before_wh}"), "after": (a.after, f"chdb://{a.after_wh}")}
    best = {(c, s): (float("inf"), float("inf"), 0.0) for c in commands for s in sides}
    for _ in range(a.rounds):
        for c, args in commands.items():
            for s, (root, dsn) in sides.items():
                wall, cpu, rss = _once(root, dsn, args)
                w0, c0, r0 = best[(c, s)]
                best[(c, s)] = (min(w0, wall), min(c0, cpu), max(r0, rss))
    for c in commands:
        (bw, bc, br), (aw, ac, ar) = best[(c, "before")], best[(c, "after")]
        print(f"RESULT {c}_command project={a.project} before_s={bw:.2f} after_s={aw:.2f} ratio={bw / aw:.2f} "
              f"before_cpu_s={bc:.2f} after_cpu_s={ac:.2f} cpu_ratio={bc / ac:.2f} "
              f"before_peak_rss_mb={br:.0f} after_peak_rss_mb={ar:.0f}")


if __name__ == "__main__":
    main()
