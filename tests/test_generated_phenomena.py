"""Hung jobs, idle-GPU jobs and lemon nodes found from the loaded files alone, against the generator's ground
truth (issue 17, part 6): the simulation's own frames (truth/runs.parquet: ``hang_from``, the time a run's NCCL stall
began; truth/gpu_alloc.parquet: each allocated GPU's utilization while busy), which never went through our
parsers, loads or SQL.

The site: 14 days of October 2026, 800 jobs a day on 40 nodes (320 GPUs), seed 11, 5-minute telemetry. The
generator plants (generate/workload.py, generate/schedule.py):
- hangs: one large run (64+ GPUs) in 12 that does not complete stalls 30 minutes before its end (the
  watchdog, WATCHDOG_S) and is recorded FAILED; on this site 3 runs, 2 of them ending inside the 14 days
  (1001068: 128 GPUs, 1003754: 64; 1011034 ends on the 15th, after the telemetry). Their GPUs sit at ~0 % and their NICs quiet from ``hang_from`` to the end.
- idle-GPU jobs: 3 % of the runs under 64 GPUs hold their GPUs at 0-3 % all along.
- two lemon nodes (25 times the failure rate: DOWN events with hardware Xids) and a straggler (its GPUs at
  0.7 of the speed of its peers'), returned by the simulation (``h.lemons``, ``h.straggler``).

What the warehouse must find, with the default parameters (hang_minutes 20, idle threshold 5 %, an hour of
telemetry for an idle run):
- exactly the planted hangs; each hang starts at the first sample after ``hang_from`` (within one 300 s
  step) and lasts end − that sample: between 25 and 30 minutes; GPU-hours lost = GPUs × that ÷ 60.
- every planted idle run on whole nodes that ran at least 70 minutes (an hour of telemetry with a margin for
  the 5-minute samples at its ends), each with a mean utilization under 5 %; and nothing that is not a
  planted idle run (a busy run on a shared node is never reported idle: its own GPUs keep the node's mean up).
- on the node scorecard (node_health.sql): the straggler first and on the swap list; the planted hot nodes,
  and only they, throttled; each lemon with its DOWN events, on the swap list when it went DOWN twice (6
  points); nothing on the swap list that was not planted.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.config import Config
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import refresh_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.generate import generate
from ops_warehouse.warehouse import close_embedded, open_warehouse

UTC = timezone.utc
W0, W1 = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 15, tzinfo=UTC)
STEP_S = 300


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("waste")
    h = generate(out, start=W0, days=14, jobs_per_day=800, nodes=40, seed=11, metrics_step_s=STEP_S)
    cfg = Config(dsn=f"chdb://{out / 'warehouse'}")
    cfg.projects = {f"proj{c}": c.upper() for c in "abcdef"}
    wh = open_warehouse(cfg)
    assert load_sacct(wh, out / "sacct" / "sacct.psv").quarantined == 0
    load_capacity(wh, inventory=out / "inventory.csv", events=out / "slurm" / "events.psv",
                  reservations=out / "slurm" / "reservations.txt", cluster=h.spec.name)
    load_parquet_dir(wh, out, date(2026, 10, 1), date(2026, 10, 14), cluster=h.spec.name)
    refresh_capacity(wh, h.spec.name, W0, W1)
    yield wh, h.spec.name, out / "truth", h
    close_embedded()


def test_the_planted_hangs_are_found(site):
    wh, cluster, truth, _ = site
    runs = pl.read_parquet(truth / "runs.parquet")
    planted = {r["job_id"]: r for r in runs.filter(pl.col("hang_from").is_not_null()
                                                    & (pl.col("end") < int(W1.timestamp()))).to_dicts()}
    assert len(planted) == 2  # the site's (docstring); a generator change that plants none fails here
    found = run_mart(wh, "hung_jobs", cluster=cluster, window=(W0, W1))
    assert sorted(found["job_id"]) == sorted(planted)
    for r in found.to_dicts():
        p = planted[r["job_id"]]
        hang_from = datetime.fromtimestamp(p["hang_from"], UTC)
        end = datetime.fromtimestamp(p["end"], UTC)
        assert (r["gpus"], r["state"], r["end_ts"]) == (p["gpus"], "FAILED", end)
        assert r["nodes"] == sorted(p["nodes"]) or sorted(r["nodes"]) == sorted(p["nodes"])
        assert 0 < (r["hang_start_ts"] - hang_from).total_seconds() <= STEP_S
        assert r["hang_minutes"] == pytest.approx((end - r["hang_start_ts"]).total_seconds() / 60)
        assert 30 - STEP_S / 60 <= r["hang_minutes"] <= 30
        assert r["gpu_hours_lost"] == pytest.approx(p["gpus"] * r["hang_minutes"] / 60)
    # at 30 minutes, a hang whose stall began between two samples measures less: the lower bound, never more
    assert set(run_mart(wh, "hung_jobs", cluster=cluster, window=(W0, W1), hang_minutes=30)["job_id"]) <= set(planted)


def test_the_planted_idle_runs_are_found(site):
    wh, cluster, truth, _ = site
    alloc = pl.read_parquet(truth / "gpu_alloc.parquet")
    per_run = alloc.group_by("job_id").agg(
        pl.col("gpu_util").max().alias("max_util"), pl.col("start_ts").min(), pl.col("end_ts").max(),
        pl.len().alias("gpus"), pl.col("node").n_unique().alias("nodes"))
    idle = per_run.filter(pl.col("max_util") < 5)
    whole = idle.filter((pl.col("gpus") == 8 * pl.col("nodes"))
                        & ((pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds() >= 70 * 60)
                        & (pl.col("end_ts") <= W1) & (pl.col("start_ts") >= W0))
    assert whole.height >= 2  # the site's planted whole-node idle runs of 70 minutes or more
    found = run_mart(wh, "idle_gpu_jobs", cluster=cluster, window=(W0, W1))
    assert set(whole["job_id"]) <= set(found.filter(pl.col("attribution") == "whole nodes")["job_id"])
    assert set(found["job_id"]) <= set(idle["job_id"])  # nothing that was busy
    assert (found["gpu_util_pct"] < 5).all() and (found["observed_minutes"] >= 60).all()
    users = run_mart(wh, "idle_gpu_users", cluster=cluster, window=(W0, W1))
    total = users.filter(pl.col("level") == "all").row(0, named=True)
    assert total["runs"] == found.height and total["gpu_hours"] == pytest.approx(found["gpu_hours"].sum())


def test_the_straggler_lemons_and_hot_nodes_on_the_scorecard(site):
    wh, cluster, truth, h = site
    card = run_mart(wh, "node_health", cluster=cluster, window=(W0, W1))
    assert card.height == 40 and card["rank"].to_list() == list(range(1, 41))  # every node, ranked
    first = card.row(0, named=True)
    assert (first["node"], first["swap"]) == (h.straggler, 1) and first["runs_behind"] >= 10, first
    hot = set(pl.read_parquet(truth / "throttle.parquet")["node"])
    assert hot and set(card.filter(pl.col("throttled_hours") > 0)["node"]) == hot
    for lemon in h.lemons:
        row = card.filter(pl.col("node") == lemon).row(0, named=True)
        assert row["down_events"] >= 1 and "DOWN" in row["reasons"]
        assert row["swap"] == (row["down_events"] >= 2)  # two DOWNs are 6 points: on the list
    # nothing is on the swap list that the generator did not plant
    assert set(card.filter(pl.col("swap") == 1)["node"]) <= set(h.lemons) | {h.straggler} | hot
    assert card.filter(pl.col("swap") == 1).height >= 2
    # a reservation's nodes only (the cluster's rates); a name that is none selects nothing
    assert run_mart(wh, "node_health", cluster=cluster, window=(W0, W1), reservation="no-such").height == 0
