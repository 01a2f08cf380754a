"""The telemetry view (`ops-report telemetry`, sql/marts/telemetry.sql) on a loaded demo warehouse, against the
engine alone and DuckDB on the same input, in one command (issue 51, item 3, round 3).

  now      telemetry(wh, first day, last day, by) as the product runs it
  before   the same with sql/marts/telemetry.sql as it was at git revision --before (the mart that read
           gpu_sample FINAL three times), when given
  engine   the engine alone: the GPU figures' one GROUP BY over gpu_sample FINAL (the read the view cannot do
           without) and the node bytes' one over node_sample FINAL
  duckdb   DuckDB over the demo's raw dcgm Parquet (the same 8.0 M samples): mean utilization and power, peak
           power and temperature per GPU model; compared with the view's (to 1e-6) and printed

    .venv/bin/python bench/bench_telemetry_view.py --dir /tmp/k51/demo [--before REV] [--repeat 2]

A copy of the warehouse is read (a read takes the warehouse's turn). Every side runs back to back in this one
process, alternating, each --repeat times; the best of each is printed (the machine is shared)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ENGINE_GPU = """SELECT {key} AS k, round(avg(gpu_util_pct), 6), round(avg(sm_active), 9), round(avg(tensor_active), 9),
    round(avg(dram_active), 9), round(avg(power_w), 6), max(power_w), sum(toInt64(round(energy_j * 1000))),
    max(temp_c), sum(if(gpu_is_throttled(throttle_reasons), step_s, 0))
FROM gpu_sample FINAL WHERE ts >= {{a:DateTime('UTC')}} AND ts < {{b:DateTime('UTC')}} GROUP BY k FORMAT Null"""
ENGINE_NODE = """SELECT node, sum(toUInt64(arraySum(nic_rx_bytes))), sum(toUInt64(arraySum(nic_tx_bytes))),
    sum(toUInt64(lustre_read_bytes)), sum(toUInt64(lustre_write_bytes))
FROM node_sample FINAL WHERE ts >= {a:DateTime('UTC')} AND ts < {b:DateTime('UTC')} GROUP BY node FORMAT Null"""
DUCK = """SELECT modelName, avg(DCGM_FI_DEV_GPU_UTIL), avg(DCGM_FI_DEV_POWER_USAGE), max(DCGM_FI_DEV_POWER_USAGE),
    max(DCGM_FI_DEV_GPU_TEMP), count(*) FROM read_parquet(?) GROUP BY modelName ORDER BY modelName"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/k51/demo"), help="a loaded demo folder")
    ap.add_argument("--before", metavar="REV", help="git revision of the mart to time as 'before'")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    import duckdb

    from ops_warehouse.analytics import telemetry as tel
    from ops_warehouse.cli.demo import DEMO_START
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    first, last = DEMO_START, date(2026, 10, 31)
    tmp = Path(tempfile.mkdtemp(prefix="bench-telemetry-view-"))
    shutil.copytree(a.dir / "warehouse", tmp / "warehouse", symlinks=True)  # chDB links its metadata relatively
    wh = open_warehouse(Config(dsn=f"chdb://{tmp / 'warehouse'}"))
    real_text = tel.sql_text
    old = None
    if a.before:
        old = subprocess.run(["git", "show", f"{a.before}:sql/marts/telemetry.sql"], check=True, capture_output=True,
                             text=True, cwd=Path(__file__).resolve().parent.parent).stdout
    window = {"a": f"{first} 00:00:00", "b": f"{date.fromordinal(last.toordinal() + 1)} 00:00:00"}
    parquet = sorted(str(p) for p in (a.dir / "data" / "telemetry" / "dcgm").glob("*.parquet"))

    def timed(fn):
        t = time.perf_counter()
        out = fn()
        return time.perf_counter() - t, out

    def view(by, text=None):
        tel.sql_text = (lambda rel: text if rel == "marts/telemetry.sql" else real_text(rel)) if text else real_text
        try:
            return tel.telemetry(wh, first, last, by)
        finally:
            tel.sql_text = real_text

    for by, key in (("cluster", "cluster"), ("gpu_model", "model_name")):
        best: dict[str, float] = {}
        frames = {}
        for _ in range(a.repeat):
            sides = {"now": lambda: view(by),
                     "engine": lambda: (wh.command(ENGINE_GPU.format(key=key), window), wh.command(ENGINE_NODE, window))}
            if old:
                sides["before"] = lambda: view(by, old)
            if by == "gpu_model":
                sides["duckdb"] = lambda: duckdb.sql(DUCK.replace("?", repr(parquet))).fetchall()
            for side, fn in sides.items():
                s, out = timed(fn)
                best[side] = min(best.get(side, s), s)
                frames[side] = out
        if old:
            same = frames["now"].equals(frames["before"])
            print(f"  {by}: now and before give the same rows: {same} ({frames['now'].height} rows)", flush=True)
        if by == "gpu_model":
            got = {r["gpu_model"]: r for r in frames["now"].to_dicts()}
            for m, util, power, pmax, tmax, n in frames["duckdb"]:
                r = got[m]
                ok = (abs(r["gpu_util_mean"] - util) <= 1e-6 * util and abs(r["power_w_mean"] - power) <= 1e-6 * power
                      and abs(r["power_w_max"] - pmax) <= 1e-3 and r["temp_c_max"] == tmax)
                print(f"  {m}: {n:,} samples, util {util:.6f} (view {r['gpu_util_mean']}), power {power:.6f} W "
                      f"(view {r['power_w_mean']}), max {pmax} W, {tmax} °C: {'same' if ok else 'DIFFERENT'}", flush=True)
        extra = "".join(f" {k}_s={v:.2f}" for k, v in best.items() if k != "now")
        ratios = "".join(f" vs_{k}={best['now'] / v:.2f}" for k, v in best.items() if k in ("engine", "duckdb"))
        before = f" speedup={best['before'] / best['now']:.2f}" if "before" in best else ""
        print(f"RESULT telemetry_view_{by} now_s={best['now']:.2f}{extra}{ratios}{before}", flush=True)
    wh.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
