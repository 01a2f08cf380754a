"""Benchmark: what-if replays (`ops-report whatif`) on a month of the demo site and of the 1,024-GPU site, beside
the generator's own simulation of the same month (the scheduler the replay came from: the baseline).

    .venv/bin/python bench/bench_whatif.py [--days 31] [--workdir DIR] [--big-workdir /tmp/bench-monthly]

1. the demo-size site (114 nodes, 912 GPUs, 900 jobs a day, seed 7): generated without telemetry (the replay
   reads jobs, nodes and reservations only) and loaded into an embedded warehouse under --workdir, unless
   there already; the generator's simulate() of the same month is timed as the baseline;
2. `whatif` with the unchanged replay and one change (+16 H200 nodes), the two replays in parallel
   processes: the whole call (reads, replays, SQL), the replays alone, scheduling passes a second, and the
   unchanged replay's error against what was observed (utilization points, median wait ratio per size class);
3. the same on bench_monthly.py's prepared 1,024-GPU month when --big-workdir holds it (skipped otherwise).
Goals (issue 18): a demo month in under 10 s, a 1,024-GPU month in under 60 s; the unchanged replay within 2
points of utilization and 20% of each size class's median wait.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

START = datetime(2026, 10, 1, tzinfo=timezone.utc)
PROJECTS = {f"proj{c}": c.upper() for c in "abcdef"}


def prepare(work: Path, days: int) -> float:
    """The demo-size site loaded under ``work`` (once); returns the generator's simulate() seconds."""
    from ops_warehouse.generate import simulate

    t = time.perf_counter()
    simulate(start=START, days=days, jobs_per_day=900, seed=7)
    sim_s = time.perf_counter() - t
    if (work / "warehouse").exists():
        return sim_s
    from ops_warehouse.config import Config
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.generate import generate
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    h = generate(work / "site", start=START, days=days, jobs_per_day=900, seed=7, telemetry=())
    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    load_sacct(wh, work / "site" / "sacct" / "sacct.psv")
    load_capacity(wh, inventory=work / "site" / "inventory.csv", events=work / "site" / "slurm" / "events.psv",
                  reservations=work / "site" / "slurm" / "reservations.txt", cluster=h.spec.name)
    close_embedded()
    return sim_s


def measure(name: str, dsn: str, days: int, goal_s: float, baseline_s: float | None) -> None:
    from ops_warehouse.analytics.whatif import whatif
    from ops_warehouse.planning.changes import parse_change
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    cfg = Config(dsn=dsn)
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    cluster = wh.query_rows("SELECT any(cluster) FROM slurm_job_run")[0][0]
    window = (START, datetime(2026, 10, days, tzinfo=timezone.utc) if days < 31
              else datetime(2026, 11, 1, tzinfo=timezone.utc))
    t = time.perf_counter()
    w = whatif(wh, cluster=cluster, window=window, changes=[parse_change(add=["h200:16"])])
    whole = time.perf_counter() - t
    # a policy difference's effect: backfill plans by when running jobs end instead of by their time limits
    # (what Slurm and the generator do)
    by_end = whatif(wh, cluster=cluster, window=window, changes=[], plan_by="end")
    close_embedded()
    e = {r["scenario"]: r for r in by_end["summary"].to_dicts()}["replay"]
    e_ratios = {r["size_class"]: r["wait_p50_ratio"] for r in by_end["waits"].to_dicts() if r["scenario"] == "replay"}
    e_p90 = {r["size_class"]: r["wait_p90_hours"] for r in by_end["waits"].to_dicts() if r["scenario"] == "replay"}
    o_p90 = {r["size_class"]: r["wait_p90_hours"] for r in by_end["waits"].to_dicts() if r["scenario"] == "observed"}
    s = {r["scenario"]: r for r in w["summary"].to_dicts()}
    passes = sum(v["passes"] for v in w["replay_stats"].values())
    err = s["replay"]["allocated_of_capacity_error_pts"]
    ratios = {r["size_class"]: r["wait_p50_ratio"] for r in w["waits"].to_dicts() if r["scenario"] == "replay"}
    worst = max((abs(v - 1) for v in ratios.values() if v is not None), default=0.0)
    print(f"{name}: {s['observed']['jobs']:,} jobs on {s['observed']['nodes']} nodes; whatif {whole:.1f} s "
          f"(replays {w['replay_s']:.1f} s, {passes:,} scheduling passes, {passes / w['replay_s']:,.0f} a second"
          + (f"; the generator simulated the month in {baseline_s:.1f} s" if baseline_s else "") + ")", flush=True)
    print(f"  unchanged replay vs observed: allocated ÷ capacity {err:+.2f} points; median wait ratio by size class "
          + ", ".join(f"{k} {v:.2f}" if v is not None else f"{k} (0 observed)" for k, v in ratios.items()))
    print(f"  +16 H200: allocated ÷ capacity {100 * s['+16 h200']['allocated_of_capacity']:.1f}% "
          f"(was {100 * s['replay']['allocated_of_capacity']:.1f}%), "
          f"wait-hours saved {s['+16 h200']['wait_hours_saved']:,.0f} ({s['+16 h200']['wait_hours_saved_per_added_node']:,.0f} "
          "a node)")
    print(f"  replayed with plans by run ends (plan_by='end') instead of time limits: allocated ÷ capacity "
          f"{e['allocated_of_capacity_error_pts']:+.2f} points, wait-hours {e['wait_hours']:,.0f} (observed "
          f"{s['observed']['wait_hours']:,.0f}); median wait ratio by size class "
          + ", ".join(f"{k} {v:.2f}" if v is not None else f"{k} (0 observed)" for k, v in e_ratios.items())
          + "; p90 hours " + ", ".join(f"{k} {e_p90[k]:.1f} (observed {o_p90[k]:.1f})" for k in e_p90))
    ratio = f" ratio={baseline_s / whole:.2f} baseline_s={baseline_s:.2f}" if baseline_s else ""
    print(f"RESULT whatif_{name} whole_s={whole:.2f} replay_s={w['replay_s']:.2f} passes_per_s={passes / w['replay_s']:.0f}"
          f"{ratio} goal=<={goal_s:g}s")
    print(f"RESULT whatif_{name}_calibration util_error_pts={abs(err):.2f} worst_wait_ratio_off={worst:.2f} "
          f"goal=<=2")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=31)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/bench-whatif"))
    ap.add_argument("--big-workdir", type=Path, default=Path("/tmp/bench-monthly"))
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    sim_s = prepare(a.workdir, a.days)
    measure("demo_month", f"chdb://{a.workdir / 'warehouse'}", a.days, 10, sim_s)
    if (a.big_workdir / "warehouse").exists():
        measure("1024gpu_month", f"chdb://{a.big_workdir / 'warehouse'}", 31, 60, None)
    else:
        print(f"(no 1,024-GPU month at {a.big_workdir}: run bench/bench_monthly.py first)")


if __name__ == "__main__":
    main()
