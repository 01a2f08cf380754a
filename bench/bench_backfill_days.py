"""Benchmark: the demo's backfill (issue 51 item 3; issue 50 item 5's loop) with its telemetry days one after the
other against each next day staged beside the day's writes (etl/telemetry_load.py ``ahead``), back to back in
fresh children, the sides alternated, on a demo's generated files.

    .venv/bin/python bench/bench_backfill_days.py --data DIR [--days 30] [--rounds 2] [--workdir DIR]

DIR: a demo's data folder (`ops-report demo --dir D` writes D/data). Each side, in a fresh child and warehouse,
loads as the demo's backfill does (cli/demo.py ``backfill``: sacct's one extract of the 30 days, then the
telemetry days through the resumable backfill a week a chunk, the grains refreshed once at the end) and reports
its wall, its CPU (the child's user + sys: the engine's threads are the process's), its peak RSS, the telemetry
days' wall (from the first day's progress to the last's) and the share of a core used every 2 s. Then every
table of the two warehouses is compared: rows and the sum of cityHash64 of each row's text (FINAL where the
table's engine has it), the columns a load stamps with its own time (loaded_at, updated_at, refreshed_at,
synced_at, _version) left out: the two sides must give the same rows. Prints

    RESULT backfill_days ahead_s=... sequential_s=... ratio=... ahead_cpu_s=... sequential_cpu_s=... same_rows=...

(seconds: the best of the rounds; ratio: sequential ÷ ahead). The load average is printed before each child.
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
import threading
import time
from datetime import date, timedelta
from pathlib import Path

FIRST = date(2026, 10, 1)
# a column a load fills with its own clock: left out of the comparison
STAMPS = re.compile(r"loaded_at|updated_at|refreshed_at|synced_at|_version")


def child(data: str, warehouse: str, side: str, days: int) -> None:
    from ops_warehouse.config import Config
    from ops_warehouse.etl.backfill import FILE_CHUNK_DAYS, load_resumably
    from ops_warehouse.etl.grains import one_refresh
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.warehouse import open_warehouse

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peak_rss import peak_rss_mb

    cfg = Config(dsn=f"chdb://{warehouse}")
    cfg.projects = {f"proj{c}": c.upper() for c in "abcdef"}  # as the demo's
    wh = open_warehouse(cfg)
    root = Path(data) / "telemetry"
    last = FIRST + timedelta(days=days - 1)
    extract = Path(data) / "sacct" / "backfill" / f"{FIRST}..{FIRST + timedelta(days=29)}.psv"
    use: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:  # the process's CPU over each 2 s: how much of the 2 cores the load keeps busy
        w0, c0 = time.perf_counter(), time.process_time()
        while not stop.wait(2.0):
            w, c = time.perf_counter(), time.process_time()
            use.append((round(w - t0, 1), round((c - c0) / (w - w0), 2)))
            w0, c0 = w, c

    marks: list[float] = []
    t0, cpu0 = time.perf_counter(), os.times()
    threading.Thread(target=sample, daemon=True).start()
    with one_refresh(wh):
        load_sacct(wh, extract, source=f"backfill/{extract.name}")
        c = load_resumably(wh, f"file:{root.resolve()}", FIRST, last,
                           lambda a, b, p: load_parquet_dir(wh, root, a, b, cluster="demo", progress=p,
                                                            ahead=side == "ahead"),
                           chunk_days=FILE_CHUNK_DAYS, progress=lambda d, n: marks.append(time.perf_counter()))
        days_s = marks[-1] - marks[0]
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    stop.set()
    out = {"wall_s": wall, "cpu_s": cpu1.user + cpu1.system - cpu0.user - cpu0.system, "days_s": days_s,
           "rss_mb": peak_rss_mb(), "gpu_rows": c["gpu_rows"], "use": use, "tables": tables(wh)}
    wh.close()
    print("CHILD " + json.dumps(out), flush=True)


def tables(wh, strip: str = "") -> dict:
    """Every table's rows and digest (the stamped columns left out; ``strip``, a folder's path, taken out of
    each row's text: two demos in two folders name their files by them)."""
    out = {}
    names = [r[0] for r in wh.query_rows(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND NOT is_temporary AND engine NOT IN "
        "('View', 'MaterializedView', 'Distributed') AND name NOT IN ('etl_run_log', 'etl_watermark', "
        "'schema_migrations') ORDER BY name")]
    for t in names:
        cols = [r[0] for r in wh.query_rows(
            "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = {t:String} "
            "ORDER BY position", {"t": t}) if not STAMPS.search(r[0])]
        text = f"toString(tuple({', '.join(f'`{c}`' for c in cols)}))"
        if strip:
            text = f"replaceAll({text}, '{strip}', '')"
        digest = f"count(), toString(sum(cityHash64({text})))"
        try:
            out[t] = list(wh.query_rows(f"SELECT {digest} FROM `{t}` FINAL")[0])
        except Exception:  # an engine without FINAL
            out[t] = list(wh.query_rows(f"SELECT {digest} FROM `{t}`")[0])
    return out


def run_side(data: str, work: Path, side: str, days: int) -> dict:
    warehouse = work / f"wh-{side}"
    shutil.rmtree(warehouse, ignore_errors=True)
    load = os.getloadavg()[0]
    p = subprocess.run([sys.executable, __file__, "--child", side, "--data", data, "--warehouse", str(warehouse),
                        "--days", str(days)], capture_output=True, text=True)
    line = next((x for x in p.stdout.splitlines() if x.startswith("CHILD ")), None)
    if p.returncode or line is None:
        sys.exit(f"{side} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    shutil.rmtree(warehouse, ignore_errors=True)
    return {**json.loads(line[6:]), "load": load}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir")
    ap.add_argument("--child")
    ap.add_argument("--warehouse")
    a = ap.parse_args()
    if a.child:
        child(a.data, a.warehouse, a.child, a.days)
        return
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-backfill-days-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {"sequential": [], "ahead": []}
    for r in range(a.rounds):
        for side in (("sequential", "ahead") if r % 2 == 0 else ("ahead", "sequential")):
            x = run_side(a.data, work, side, a.days)
            runs[side].append(x)
            print(f"round {r + 1} {side:10s} load {x['load']:5.2f}  wall {x['wall_s']:6.1f} s  CPU {x['cpu_s']:6.1f} s"
                  f"  telemetry days {x['days_s']:6.1f} s  peak RSS {x['rss_mb']:,.0f} MB  GPU rows {x['gpu_rows']:,}",
                  flush=True)
            print("  share of a core every 2 s: " + " ".join(f"{u:.2f}" for _, u in x["use"]), flush=True)
    same = all(x["tables"] == runs["sequential"][0]["tables"] for side in runs for x in runs[side])
    if not same:
        ref = runs["sequential"][0]["tables"]
        for side in runs:
            for x in runs[side]:
                for t, v in x["tables"].items():
                    if ref.get(t) != v:
                        print(f"DIFFERS {side} {t}: {v} against {ref.get(t)}")
    best = {s: min(runs[s], key=lambda x: x["wall_s"]) for s in runs}
    print(f"RESULT backfill_days ahead_s={best['ahead']['wall_s']:.1f} sequential_s={best['sequential']['wall_s']:.1f} "
          f"ratio={best['sequential']['wall_s'] / best['ahead']['wall_s']:.2f} "
          f"ahead_days_s={best['ahead']['days_s']:.1f} sequential_days_s={best['sequential']['days_s']:.1f} "
          f"ahead_cpu_s={min(x['cpu_s'] for x in runs['ahead']):.1f} "
          f"sequential_cpu_s={min(x['cpu_s'] for x in runs['sequential']):.1f} "
          f"ahead_rss_mb={max(x['rss_mb'] for x in runs['ahead']):.0f} "
          f"sequential_rss_mb={max(x['rss_mb'] for x in runs['sequential']):.0f} same_rows={same} "
          f"tables={len(runs['sequential'][0]['tables'])}")


if __name__ == "__main__":
    main()
