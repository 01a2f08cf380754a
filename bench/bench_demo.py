"""Benchmark: `ops-report demo`, README command 1 (issue 51 item 3: <= 60 s on 2 cores, the same figures), in its
load shapes back to back in one command, each in a fresh folder and a fresh child process:

  before      every night loaded as the cron job loads it (cli/demo.py ``loads="nightly"``: 31 nights, each
              its sacct extract and telemetry day, the grains refreshed once a night), as the demo ran until
              round 5, the generator first
  sequential  the month's first 30 days backfilled in one load as a site's first install loads them (sacct's
              one extract of the window, the telemetry days, one refresh), then night 31 by cron; the
              generator first, then the loads (``beside=False``)
  now         the same, the backfill loading each telemetry day as soon as the generator, in a thread, has
              written it (the default)

    .venv/bin/python bench/bench_demo.py [--days 31] [--jobs-per-day 900] [--rounds 1]
        [--sides before,sequential,now] [--workdir DIR] [--code-before PYTHON]

``--code-before PYTHON``: one more side, ``code-before``, the "now" shape run by another checkout's interpreter
(its venv's python: an earlier commit's code), alternated with "now" (code-before first in each round); after
the rounds, every table of the last two warehouses of these sides is compared (rows and the sum of cityHash64
of each row's text, FINAL, the columns a load stamps with its clock left out, the demo folder's path in a
row's text made the same; bench_backfill_days.tables) and their printed lines, timings aside.

Each side is the demo's own function (run_demo) in a child: its stages as the demo prints them ("[demo] X:
done in N s"), its wall, its CPU (user + sys of the child: the engine runs in it, its threads included) and its
peak RSS (bench/peak_rss.py); the machine's load average before each side (the machine is shared: the sides
are measured back to back, before first, and the ratio is what to read). Prints a table and

    RESULT demo now_s=... before_s=... ratio=... goal=<=60s <stage>_s=...

(ratio: before ÷ now; the goal bounds now_s). tests/test_demo_load_shapes.py holds the same figures both ways.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# side -> (run_demo's loads, beside)
SHAPES = {"before": ("nightly", False), "sequential": ("backfill", False), "now": ("backfill", True)}
# a stage's printed label -> its short name (the RESULT line's keys)
STAGES = (("generate", "generate"), ("backfill of", "backfill"), ("night", "nights"),
          ("capacity", "capacity"), ("kernel", "kernel"), ("summaries", "summaries"),
          ("monthly reports", "reports"), ("Parquet exports", "exports"))
DONE = re.compile(r"^\[demo\] (.*): done in ([0-9.]+) s", re.M)


def child(folder: str, side: str, days: int, jobs_per_day: int) -> None:
    t0 = time.perf_counter()
    from ops_warehouse.cli.demo import run_demo
    from ops_warehouse.config import Config

    loads, beside = SHAPES[side]
    run_demo(Config(), Path(folder), days=days, jobs_per_day=jobs_per_day, loads=loads, beside=beside)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peak_rss import peak_rss_mb

    ru = os.times()
    print("CHILD " + json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": ru.user + ru.system,
                                 "rss_mb": peak_rss_mb()}), flush=True)


def stages(out: str) -> dict[str, float]:
    got: dict[str, float] = {}
    for label, s in DONE.findall(out):
        name = next((n for prefix, n in STAGES if label.startswith(prefix)), None)
        if name:
            got[name] = got.get(name, 0.0) + float(s)
    return got


def run_side(side: str, work: Path, days: int, jobs_per_day: int, python: str = sys.executable) -> dict:
    folder = work / side
    shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()[0]
    env = {**os.environ, "OPS_WAREHOUSE": "", "OPS_CONFIG": ""}
    t = time.perf_counter()
    shape = "now" if side == "code-before" else side
    p = subprocess.run([python, __file__, "--child", str(folder), shape, str(days), str(jobs_per_day)],
                       capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode:
        sys.exit(f"{side}: the demo failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    c = json.loads(p.stdout.rsplit("CHILD ", 1)[1])
    return {"side": side, "wall_s": wall, "cpu_s": c["cpu_s"], "rss_mb": c["rss_mb"], "load": load,
            "stages": stages(p.stdout), "printed": printed(p.stdout, folder)}


def printed(out: str, folder: Path) -> list[str]:
    """The demo's printed lines, its timings and folder aside (what must not change)."""
    lines = [x for x in out.splitlines() if not x.startswith(("[demo]", "CHILD "))]
    return [re.sub(r"\d+(\.\d+)? s\b", "N s", x.replace(str(folder.resolve()), "DIR")) for x in lines]


def same_tables(a: Path, b: Path) -> list[str]:
    """The tables whose rows differ between the demo warehouses in folders a and b (empty: the same)."""
    import bench_backfill_days
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    got = []
    for folder in (a, b):
        wh = open_warehouse(Config(dsn=f"chdb://{folder.resolve() / 'warehouse'}"))
        # the folder's path is in the telemetry's source: each side's own taken out
        got.append(bench_backfill_days.tables(wh, strip=str(folder.resolve())))
        wh.close()
        close_embedded()
    differ = [t for t in sorted(set(got[0]) | set(got[1])) if got[0].get(t) != got[1].get(t)]
    print(f"tables: {len(got[0])} and {len(got[1])}; differing: {differ or 'none'}")
    for t in differ:
        print(f"  {t}: {got[0].get(t)} against {got[1].get(t)}")
    return differ


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=31)
    ap.add_argument("--jobs-per-day", type=int, default=900)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sides", default="before,sequential,now", help="which sides, in this order, each round")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--code-before", help="another checkout's python: the now shape on its code, side code-before")
    ap.add_argument("--child", nargs=4, metavar=("DIR", "SIDE", "DAYS", "JOBS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], int(a.child[2]), int(a.child[3]))
        return
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    sides = a.sides.split(",")
    if set(sides) - set(SHAPES):
        sys.exit(f"--sides: each of {', '.join(SHAPES)}")
    if a.code_before:
        sides = ["code-before"] + [s for s in sides if s != "code-before"]
    runs = []
    for r in range(a.rounds):
        for side in sides:
            runs.append(run_side(side, work, a.days, a.jobs_per_day,
                                 a.code_before if side == "code-before" else sys.executable))
            x = runs[-1]
            print(f"round {r + 1} {side:10s} wall {x['wall_s']:6.1f} s  CPU {x['cpu_s']:6.1f} s  "
                  f"peak RSS {x['rss_mb']:5.0f} MB  load before {x['load']:.1f}  "
                  + "  ".join(f"{k} {v:.1f}" for k, v in x["stages"].items()), flush=True)
    if a.code_before and "now" in sides:
        same = runs[-2]["printed"] == runs[-1]["printed"] if len(runs) >= 2 else False
        print(f"printed lines the same: {same}")
        if not same:
            import difflib
            print("\n".join(difflib.unified_diff(runs[-2]["printed"], runs[-1]["printed"], lineterm="")))
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        differ = same_tables(work / "code-before", work / "now")
        print(f"RESULT demo_code same_printed={same} same_tables={not differ}")
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    best = {s: min((x for x in runs if x["side"] == s), key=lambda x: x["wall_s"]) for s in sides}
    keys = [n for _, n in STAGES]
    print(f"\n| stage (s) | {' | '.join(sides)} |\n| --- |" + " ---: |" * len(sides))
    for k in keys + ["wall", "cpu", "rss"]:
        cell = {"wall": "wall_s", "cpu": "cpu_s", "rss": "rss_mb"}.get(k)
        print(f"| {k} | " + " | ".join(f"{(best[s][cell] if cell else best[s]['stages'].get(k, 0.0)):.1f}"
                                       for s in sides) + " |")
    now = best.get("now") or best[sides[0]]
    line = f"RESULT demo now_s={now['wall_s']:.1f}"
    if "code-before" in best:
        cb = best["code-before"]
        line += f" code_before_s={cb['wall_s']:.1f} code_before_cpu_s={cb['cpu_s']:.1f}"
    if "before" in best and "now" in best:
        line += f" before_s={best['before']['wall_s']:.1f} ratio={best['before']['wall_s'] / now['wall_s']:.2f}"
    if "sequential" in best and "now" in best:
        line += f" sequential_s={best['sequential']['wall_s']:.1f}"
    line += f" goal=<=60s cpu_s={now['cpu_s']:.1f} rss_mb={now['rss_mb']:.0f} load={now['load']:.1f} " + " ".join(
        f"{k}_s={now['stages'].get(k, 0.0):.1f}" for k in keys)
    print(line)


if __name__ == "__main__":
    main()
