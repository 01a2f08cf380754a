"""Benchmark: a small load's fixed cost (issue 50 item 1; issue 51 item 4: the suite runs hundreds of them).

    .venv/bin/python bench/bench_small_loads.py [--rounds 2] [--demo DIR] [--only N]

Each case runs in a fresh child process: a fresh embedded warehouse, a header-only sacct load first (imports and
the engine's first use, not counted), the case's own setup, then the one load measured: its wall seconds, its
process CPU seconds (getrusage: the engine's threads are the process's) and the engine calls it made (every
``query`` of chDB's connection: the client's statements and the SETs its backend sends around a statement given
settings). The best of ``--rounds`` runs of each case is printed.

Cases: tests/data's live 22.05 sacct.psv into a fresh warehouse; the same file reloaded; an inventory file (a
capacity load) into a warehouse holding it; one dcgm-exporter scrape (OpenMetrics) into the same; with ``--demo
DIR`` (a demo's folder: its warehouse and data/sacct/nightly), night 31's file reloaded into a copy of its
warehouse inside one_refresh, as the demo's nightly loads it. docs/benchmarks.md, "Issue 50: sacct loads in
bounded memory", round 8.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIVE = REPO / "tests/data/sacct/slurm-22.05-live/sacct.psv"
WARM = REPO / "tests/fuzz_corpus/sacct-header-only.psv"
DCGM = REPO / "tests/data/metrics/dcgm-exporter-scrape-t4.txt"
INVENTORY = REPO / "tests/data/hostile/inventory.csv"
CASES = ["fresh: live sacct.psv", "fresh: live sacct.psv, reloaded", "live loaded: inventory.csv (capacity)",
         "live loaded: one dcgm-exporter scrape", "demo copy: night 31 reloaded in one_refresh"]


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(case: int, work: Path, demo: str | None) -> dict:
    from datetime import date, datetime, timezone

    import chdb.state.sqlitelike as engine
    from ops_warehouse.config import Config
    from ops_warehouse.errors import OpsError
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.grains import one_refresh
    from ops_warehouse.etl.openmetrics_source import load_text_files
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    day = date(2026, 10, 1)
    if case == 4:
        shutil.copytree(Path(demo) / "warehouse", work, symlinks=True)
    wh = open_warehouse(Config(dsn=f"chdb://{work}"))
    load_sacct(wh, WARM)
    if case in (1, 2, 3):
        load_sacct(wh, LIVE, cluster="h1")
    night = Path(demo or ".") / "data/sacct/nightly/2026-10-31.psv"

    def load():
        if case in (0, 1):
            load_sacct(wh, LIVE, cluster="h1")
        elif case == 2:
            load_capacity(wh, inventory=INVENTORY, cluster="h1")
        elif case == 3:
            load_text_files(wh, [DCGM], day, day, at=datetime(2026, 10, 1, 12, tzinfo=timezone.utc), cluster="h1")
        else:
            with one_refresh(wh):
                load_sacct(wh, night, source=f"nightly/{night.name}")

    calls = [0]
    query = engine.Connection.query

    def counted(self, *a, **k):
        calls[0] += 1
        return query(self, *a, **k)

    engine.Connection.query = counted
    t, c = time.perf_counter(), _cpu()
    try:
        load()
    except OpsError:
        pass
    out = {"wall_s": time.perf_counter() - t, "cpu_s": _cpu() - c, "engine_calls": calls[0]}
    engine.Connection.query = query
    wh.close()
    close_embedded()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--demo", default=None, help="a demo's folder (warehouse, data/sacct/nightly): adds night 31")
    ap.add_argument("--only", type=int, default=None, help="one case, by its index")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child, Path(a.work), a.demo)))
        return
    cases = [a.only] if a.only is not None else [i for i in range(len(CASES)) if i < 4 or a.demo]
    for i in cases:
        runs = []
        for _ in range(a.rounds):
            work = Path(tempfile.mkdtemp(prefix="bench-small-")) / "wh"
            try:
                p = subprocess.run([sys.executable, __file__, "--child", str(i), "--work", str(work),
                                    *(["--demo", a.demo] if a.demo else [])], capture_output=True, text=True, check=True)
                runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
            finally:
                shutil.rmtree(work.parent, ignore_errors=True)
        best = min(runs, key=lambda r: r["cpu_s"])
        print(f"RESULT small_load case={i} cpu_s={best['cpu_s']:.3f} wall_s={best['wall_s']:.2f} "
              f"engine_calls={best['engine_calls']}  # {CASES[i]}")


if __name__ == "__main__":
    main()
