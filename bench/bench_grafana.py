"""Benchmark: every Grafana panel of `ops-report grafana` over a one-year range, on a year of the demo's site,
beside the same marts run the report's way (run_mart), in one command.

    .venv/bin/python bench/bench_grafana.py [--days 365] [--nodes 114] [--jobs-per-day 900]
                                            [--metrics-step 3600] [--workdir DIR] [--repeat 3]

1. prepare (skipped when --workdir already holds it): generate the demo's site (seed 7, 114 nodes / 912
   GPUs, 900 jobs a day) for --days days from 2025-11-01, load it (sacct, capacity, telemetry day files;
   the loads keep the hourly and daily grains) into an embedded warehouse. The telemetry step defaults to an
   hour, not the demo's 5 minutes: no panel reads a per-sample table (issue 32: ranges over a week read the
   grains), and the grains hold one row per GPU-hour, node-hour and run whatever the step, so the panels
   see the rows a 5-minute year would give them; the year loads in minutes instead of an hour;
2. product, in a fresh child: the views `ops-report grafana` creates, then each panel's query expanded as the
   ClickHouse data source expands it for the whole range (the dashboards' default `now-1y`), with its
   variables at their defaults (the cluster, every project, partition and GPU model), run --repeat times;
   the fastest run counts (a shared machine's noise only ever adds);
3. baseline, in the same child: each mart a panel reads run the report's way for the same window
   (analytics.marts.run_mart, the text the monthly report and the API run), fastest of --repeat. The ratio
   is the baseline's time ÷ the panel's: about 1 says a panel through its view costs what the report's
   figure costs (the view adds nothing, the time macros reach the grains' keys).

Goal (issue 32): every panel under 1 s over the year.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2025, 11, 1, tzinfo=timezone.utc)


def prepare(work: Path, days: int, nodes: int, jobs_per_day: int, step_s: int) -> None:
    from ops_warehouse.config import Config
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.grains import refresh_capacity
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.generate import generate
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    site = work / "site"
    t = time.perf_counter()
    h = generate(site, start=START, days=days, jobs_per_day=jobs_per_day, nodes=nodes, seed=7,
                 metrics_step_s=step_s, spill=True)
    print(f"generated {days} days, {h.inventory['gpus'].sum()} GPUs on {h.inventory.height} nodes, "
          f"{step_s} s telemetry in {time.perf_counter() - t:.0f} s", flush=True)
    wh = open_warehouse(Config(dsn=f"chdb://{work / 'warehouse'}"))
    t = time.perf_counter()
    load_sacct(wh, site / "sacct" / "sacct.psv")
    load_capacity(wh, inventory=site / "inventory.csv", events=site / "slurm" / "events.psv",
                  reservations=site / "slurm" / "reservations.txt", cluster=h.spec.name)
    end = START + timedelta(days=days)
    c = load_parquet_dir(wh, site, START.date(), (end - timedelta(days=1)).date(), cluster=h.spec.name,
                         progress=lambda k, n: k % 30 == 0 and print(f"  telemetry: {k}/{n} days", flush=True))
    refresh_capacity(wh, h.spec.name, START, end)
    runs = wh.query_rows("SELECT count() FROM fct_job_run")[0][0]
    print(f"loaded {runs:,} job runs, {c['gpu_rows']:,} GPU samples in {time.perf_counter() - t:.0f} s", flush=True)
    (work / "cluster").write_text(h.spec.name)
    (work / "days").write_text(str(days))
    close_embedded()


def child(work: Path, repeat: int) -> dict:
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.cli.grafana import provision
    from ops_warehouse.config import Config
    from ops_warehouse.reports.grafana_macros import expand
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    wh = open_warehouse(cfg)
    cluster = (work / "cluster").read_text()
    t0 = START
    t1 = START + timedelta(days=int((work / "days").read_text()))
    out = work / "grafana"
    provision(wh, cfg, out, url="http://localhost:8123/ops", user="ops_analyst", password_env="OPS_GRAFANA_PASSWORD")
    variables = {"cluster": cluster, "project": "", "partition": "", "gpu_model": ""}

    def fastest(f) -> tuple[float, int]:
        best, n = float("inf"), 0
        for _ in range(repeat):
            s = time.perf_counter()
            n = f()
            best = min(best, time.perf_counter() - s)
        return best, n

    panels, marts = [], {}
    for f in sorted((out / "dashboards").glob("*.json")):
        for p in json.loads(f.read_text())["panels"]:
            (target,) = p["targets"]
            # the interval Grafana would pick for a year on a ~1,000-pixel panel: a few hours
            sql = expand(target["rawSql"], t0, t1, 6 * 3600, variables)
            s, rows = fastest(lambda: wh.query_arrow(sql).num_rows)
            mart = sql.split("FROM grafana_", 1)[1].split("(", 1)[0]
            if mart not in marts:
                marts[mart] = fastest(lambda: run_mart(wh, mart, cluster=cluster, window=(t0, t1)).height)[0]
            panels.append({"board": f.stem, "title": p["title"], "type": p["type"], "mart": mart, "s": s,
                           "rows": rows, "baseline_s": marts[mart]})
    return {"panels": panels}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--nodes", type=int, default=114)
    ap.add_argument("--jobs-per-day", type=int, default=900)
    ap.add_argument("--metrics-step", type=int, default=3600, help="telemetry step in seconds (the grains' rows "
                    "do not depend on it; see the module docstring)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/bench-grafana"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.workdir, a.repeat)))
        return
    if not (a.workdir / "cluster").exists():
        a.workdir.mkdir(parents=True, exist_ok=True)
        prepare(a.workdir, a.days, a.nodes, a.jobs_per_day, a.metrics_step)
    p = subprocess.run([sys.executable, __file__, "--child", "--workdir", str(a.workdir), "--repeat", str(a.repeat)],
                       check=True, capture_output=True, text=True)
    res = json.loads(p.stdout.strip().splitlines()[-1])["panels"]
    days = (a.workdir / "days").read_text()
    print(f"\n## Every panel over {days} days (fastest of {a.repeat}; baseline: the mart by run_mart)\n")
    print("| dashboard | panel | type | mart | rows | panel s | run_mart s | ratio |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for r in res:
        print(f"| {r['board']} | {r['title']} | {r['type']} | {r['mart']} | {r['rows']:,} | {r['s']:.3f} | "
              f"{r['baseline_s']:.3f} | {r['baseline_s'] / r['s']:.2f} |")
    slow = max(res, key=lambda r: r["s"])
    total, base = sum(r["s"] for r in res), sum(r["baseline_s"] for r in res)
    print(f"\nslowest panel: {slow['board']}/{slow['title']} {slow['s']:.3f} s; all {len(res)} panels {total:.2f} s")
    print(f"RESULT grafana_panels slowest_panel_s={slow['s']:.3f} panels={len(res)} total_s={total:.2f} "
          f"ratio={base / total:.2f} goal=<=1s")


if __name__ == "__main__":
    main()
