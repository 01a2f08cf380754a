"""Benchmark: the monthly report's charts (reports/charts.py), as they are now beside the module as it was at
git REV, on the same two reports (the cluster's and project A's month), in one command.

    .venv/bin/python bench/bench_charts.py --before REV [--workdir DIR] [--rounds 5] [--repeat 3]

The reports are those of bench_monthly.py's prepared month (its --workdir, default the 256-GPU month kept
under ~/.cache/ops-warehouse/bench-monthly-n32-d31-<checkout>): made once and kept beside it (charts-reports.pkl;
--fresh makes them again), so that this bench measures drawing only.

1. warm, in one process: every chart of both reports drawn by the old module and by the new one in turn
   (after one draw of each to warm matplotlib's caches), --rounds times; the fastest of each chart counts.
2. cold, each a fresh child, as a report command draws them: import the module, then `draw_all` of the
   cluster's report and of project A's (as the demo's monthly stage does), with one worker (drawn here, one
   after the other) and with the default (forked workers, one a core): the wall time and the child's CPU
   seconds (its own and its reaped workers'), best of --repeat, the four kinds alternating.
The machine is shared: old and new always run back to back in the same command, and the ratios are what
counts (old ÷ new: above 1, the new module is faster).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from month_cache import month_workdir  # noqa: E402  bench/month_cache.py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_WORK = month_workdir(32, 31)
PROJECTS = {f"proj{c}": c.upper() for c in "abcdef"}


def reports(work: Path, fresh: bool) -> Path:
    """The pickled reports (cluster, project A) of the prepared month, made once."""
    path = work / "charts-reports.pkl"
    if path.exists() and not fresh:
        return path
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.monthly import monthly_report
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    if not (work / "warehouse").is_dir():
        raise SystemExit(f"{work} holds no prepared month: run bench/bench_monthly.py --workdir {work} first")
    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    cfg.projects = PROJECTS
    cfg.whatif = [{"name": "16 more H200 nodes", "add": ["h200:16"]}]  # the demo's: the what-if chart drawn
    wh = open_warehouse(cfg)
    cluster = (work / "cluster").read_text().strip()
    got = [monthly_report(Connection(wh), month=date(2026, 10, 1), project=p, cluster=cluster) for p in (None, "A")]
    wh.close()
    path.write_bytes(pickle.dumps(got))
    return path


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the forked workers' pickled function names resolve through it
    spec.loader.exec_module(module)
    return module


def old_module_file(rev: str, tmp: Path) -> Path:
    text = subprocess.run(["git", "show", f"{rev}:reports/charts.py"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    path = tmp / "charts_before.py"
    path.write_text(text)
    return path


def warm(old_file: Path, pkl: Path, rounds: int) -> dict:
    reps = pickle.loads(pkl.read_bytes())
    old = load_module(old_file, "charts_before")
    from ops_warehouse.reports import charts as new

    best: dict[tuple[str, str, int], float] = {}
    sides = (("before", old), ("now", new))
    for side, m in sides:  # warm-up: fonts, caches
        for _, _, fn in m.CHARTS:
            fn(reps[0])
    for _ in range(rounds):
        for side, m in sides:
            for k, r in enumerate(reps):
                for name, _, fn in m.CHARTS:
                    t = time.perf_counter()
                    fn(r)
                    dt = time.perf_counter() - t
                    key = (side, name, k)
                    best[key] = min(best.get(key, dt), dt)
    return {f"{side}|{name}|{k}": round(v, 4) for (side, name, k), v in best.items()}


def child_cold(module_file: str, pkl: Path, workers: int) -> dict:
    t0 = time.perf_counter()
    reps = pickle.loads(pkl.read_bytes())
    t = time.perf_counter()
    if module_file == "now":
        from ops_warehouse.reports import charts as m
    else:
        m = load_module(Path(module_file), "charts_before")
    import_s = time.perf_counter() - t
    t = time.perf_counter()
    if "workers" in inspect.signature(m.draw_all).parameters:  # matplotlib's module (before round 10)
        n = sum(len(m.draw_all(r, workers=None if workers > 1 else 1)) for r in reps)
    else:  # SVG, one process: the workers' count means nothing to it
        n = sum(len(m.draw_all(r)) for r in reps)
    draw_s = time.perf_counter() - t
    ru = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return {"seconds": time.perf_counter() - t0, "import_s": import_s, "draw_s": draw_s, "charts": n,
            "cpu_s": sum(u.ru_utime + u.ru_stime for u in ru)}


def cold(old_file: Path, pkl: Path, repeat: int) -> dict:
    best: dict[str, dict] = {}
    for _ in range(repeat):
        for side, module in (("before", str(old_file)), ("now", "now")):
            for workers in (1, 2):
                p = subprocess.run([sys.executable, __file__, "--child", module, str(pkl), str(workers)],
                                   capture_output=True, text=True, cwd=ROOT)
                if p.returncode:
                    raise SystemExit(p.stderr[-3000:])
                got = json.loads(p.stdout.strip().splitlines()[-1])
                key = f"{side} workers={workers}"
                if key not in best or got["seconds"] < best[key]["seconds"]:
                    best[key] = got
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="HEAD", help="git revision of reports/charts.py to compare against")
    ap.add_argument("--workdir", type=Path, default=DEFAULT_WORK)
    ap.add_argument("--rounds", type=int, default=5, help="warm rounds (each chart's fastest counts)")
    ap.add_argument("--repeat", type=int, default=3, help="cold children of each kind (the fastest counts)")
    ap.add_argument("--fresh", action="store_true", help="make the reports again")
    ap.add_argument("--child", nargs=3)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child_cold(a.child[0], Path(a.child[1]), int(a.child[2]))))
        return
    pkl = reports(a.workdir, a.fresh)
    with tempfile.TemporaryDirectory() as tmp:
        old_file = old_module_file(a.before, Path(tmp))
        w = warm(old_file, pkl, a.rounds)
        print("warm, fastest of", a.rounds, "rounds (s): chart, report 0 = cluster, 1 = project A")
        names = sorted({k.split("|")[1] for k in w})
        tot = {"before": 0.0, "now": 0.0}
        for name in names:
            for k in (0, 1):
                b, n = w.get(f"before|{name}|{k}", 0), w.get(f"now|{name}|{k}", 0)
                tot["before"] += b
                tot["now"] += n
                print(f"  {name:18} {k}  before {b:.3f}  now {n:.3f}  ratio {b / n if n else 0:.2f}")
        print(f"RESULT charts_warm before_s={tot['before']:.3f} now_s={tot['now']:.3f} "
              f"ratio={tot['before'] / tot['now']:.2f}")
        c = cold(old_file, pkl, a.repeat)
        for key, got in c.items():
            print(f"  cold {key:18} wall {got['seconds']:.2f} s (import {got['import_s']:.2f}, draw "
                  f"{got['draw_s']:.2f}), CPU {got['cpu_s']:.2f} s, {got['charts']} charts")
        for workers in (1, 2):
            b, n = c[f"before workers={workers}"], c[f"now workers={workers}"]
            print(f"RESULT charts_cold workers={workers} before_s={b['seconds']:.2f} now_s={n['seconds']:.2f} "
                  f"ratio={b['seconds'] / n['seconds']:.2f} before_cpu_s={b['cpu_s']:.2f} now_cpu_s={n['cpu_s']:.2f}")


if __name__ == "__main__":
    main()
