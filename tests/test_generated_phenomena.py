"""Hung jobs, idle-GPU jobs, campaigns' lost work and lemon nodes found from the loaded files alone, against the generator's ground
truth (issue 17, part 6): the simulation's own frames (truth/runs.parquet: ``hang_from``, the time a run's NCCL stall
began; truth/gpu_alloc.parquet: each allocated GPU's utilization while busy), which never went through our
parsers, loads or SQL.

The site: 14 days of October 2026, 800 jobs a day on 40 nodes (320 GPUs), seed 11, 5-minute telemetry. The
generator plants (generate/workload.py, generate/schedule.py):
- hangs: one large run (64+ GPUs) in 12 that does not complete stalls 30 minutes before its end (the
  watchdog, WATCHDOG_S) and is recorded FAILED, and so does one in four of a training campaign's own crashes;
  on this site 6 runs, all ending inside the 14 days (1000546, 1001068, 1003685, 1004268 (a campaign's): 128
  GPUs; 1003754, 1007865: 64). Their GPUs sit at ~0 % and their NICs quiet
  from ``hang_from`` to the end.
- idle-GPU jobs: 3 % of the runs under 64 GPUs hold their GPUs at 0-3 % all along, and in each account the
  idle user's (generate/workload.py, issue 52: 80 % of that user's runs under 64 GPUs).
- training campaigns: runs of 16+ GPUs checkpoint every 30, 60 or 120 minutes (truth/runs.parquet:
  ``ckpt_period_s``), each a 120 s Lustre write burst; a run cut by a node failure is often requeued and goes
  on from its last checkpoint; the generator's campaigns go on by resubmissions too; truth/runs.parquet records
  each run's campaign, lost work and start-up (tests/goodput_truth.py).
- two lemon nodes (25 times the failure rate: DOWN events with hardware Xids) and a straggler (its GPUs at
  0.7 of the speed of its peers'), returned by the simulation (``h.lemons``, ``h.straggler``).

What the warehouse must find, with the default parameters (hang_minutes 20, idle threshold 5 %, an hour of
telemetry for an idle run):
- exactly the planted hangs; each hang starts at the first sample after ``hang_from`` whose GPUs are idle
  and whose NIC rate is quiet: within two 300 s steps (a NIC rate covers the interval before its sample, so a
  stall that began late in an interval still shows that interval's traffic), and lasts end − that sample:
  between 20 and 30 minutes; GPU-hours lost = GPUs × that ÷ 60.
- every planted idle run that ran at least an hour (a sample's step counts for the part of it the run held,
  issue 49: an hour held is an hour of telemetry; a 10-minute margin was needed before), on shared nodes too
  (each run's own GPUs, named by dcgm-exporter's hpc_job label in the generator's files), each with a mean
  utilization under 5 %; and nothing that is not a planted idle run. A reading at ts stands for
  [ts, ts + step) (docs/telemetry.md), so a run that took its GPUs from a busy run at the same second has
  that run's last reading over its first seconds: of the 631 idle runs of an hour or more (most of them the
  planted idle users' sessions of an hour or two, generate/workload.py), 51 (own readings at most 3.0 %)
  average 5.01-8.66 % so, worked out here from the raw dcgm files, and are not expected (58 and 2 before the
  sessions).
- on the node scorecard (node_health.sql): the straggler first and on the swap list; the planted hot nodes,
  and only they, throttled; each lemon with its DOWN events, on the swap list when it had two faults (6
  points); nothing on the swap list that was not planted.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from types import SimpleNamespace

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.warehouse import close_embedded
from tests.goodput_truth import faulty_nodes, truth_campaigns
from tests.sites import built_site, generated_site, laws_broken, open_site

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

UTC = timezone.utc
W0, W1 = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 15, tzinfo=UTC)
STEP_S = 300


def build(out, **params) -> dict:
    return generated_site(out, telemetry_days=(date(2026, 10, 1), date(2026, 10, 14)), **params)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = built_site(tmp_path_factory, "phenomena", build, start=W0, days=14, jobs_per_day=800, nodes=40, seed=11,
                   metrics_step_s=STEP_S)
    wh = open_site(s, tmp_path_factory.mktemp("waste"))
    yield wh, s.facts["cluster"], s.path / "truth", SimpleNamespace(**s.facts)
    close_embedded()


def test_every_law_holds_on_the_site(site):
    """sql/checks/ (`ops-report check`): every law holds over the site's two weeks."""
    wh, cluster = site[:2]
    assert laws_broken(wh, cluster, (W0, W1)) == {}


def test_the_planted_hangs_are_found(site):
    wh, cluster, truth, _ = site
    runs = pl.read_parquet(truth / "runs.parquet")
    planted = {r["job_id"]: r for r in runs.filter(pl.col("hang_from").is_not_null()
                                                    & (pl.col("end") < int(W1.timestamp()))).to_dicts()}
    assert len(planted) == 6  # the site's (docstring); a generator change that plants none fails here
    found = run_mart(wh, "hung_jobs", cluster=cluster, window=(W0, W1))
    assert sorted(found["job_id"]) == sorted(planted)
    for r in found.to_dicts():
        p = planted[r["job_id"]]
        hang_from = datetime.fromtimestamp(p["hang_from"], UTC)
        end = datetime.fromtimestamp(p["end"], UTC)
        assert (r["gpus"], r["state"], r["end_ts"]) == (p["gpus"], "FAILED", end)
        assert r["nodes"] == sorted(p["nodes"]) or sorted(r["nodes"]) == sorted(p["nodes"])
        assert 0 < (r["hang_start_ts"] - hang_from).total_seconds() <= 2 * STEP_S
        assert r["hang_minutes"] == pytest.approx((end - r["hang_start_ts"]).total_seconds() / 60)
        assert 30 - 2 * STEP_S / 60 <= r["hang_minutes"] <= 30
        assert r["hung_gpu_h"] == pytest.approx(p["gpus"] * r["hang_minutes"] / 60)
    # at 30 minutes, a hang whose stall began between two samples measures less: the lower bound, never more
    assert set(run_mart(wh, "hung_jobs", cluster=cluster, window=(W0, W1), hang_minutes=30)["job_id"]) <= set(planted)


def test_the_planted_idle_runs_are_found(site):
    wh, cluster, truth, _ = site
    alloc = pl.read_parquet(truth / "gpu_alloc.parquet")
    per_run = alloc.group_by("job_id").agg(
        pl.col("gpu_util").max().alias("max_util"), pl.col("start_ts").min(), pl.col("end_ts").max(),
        pl.len().alias("gpus"), pl.col("node").n_unique().alias("nodes"))
    idle = per_run.filter(pl.col("max_util") < 5)
    held_long = idle.filter(((pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds() >= 60 * 60)
                            & (pl.col("end_ts") <= W1) & (pl.col("start_ts") >= W0))
    # what the samples say of each: a reading at ts stands for [ts, ts + step) (docs/telemetry.md), so the
    # reading just before a run's start covers its first seconds, and where the run took its GPUs from a
    # busy run at the same second that reading is the other run's: worked out here from the raw dcgm files
    readings = _idle_runs_readings(alloc.join(held_long.select("job_id"), on="job_id"), truth)
    polluted = readings.filter(pl.col("util") >= 5)
    assert (polluted["own_util"] < 5).all()  # their own readings idle: only another run's reading lifts them
    assert polluted.height < held_long.height / 4 and held_long.height >= 8, (polluted.height, held_long.height)
    # an idle run is one with an hour of its own readings a GPU (its label, or none: the one attribution rule,
    # sql/functions/reading_is_runs.sql): a run held exactly an hour whose first seconds only the previous job's
    # reading covers has less, and is not called idle
    seen_hour = readings.join(held_long.select("job_id", "gpus"), on="job_id").filter(
        pl.col("own_seen_s") / pl.col("gpus") >= 3600)
    long = held_long.join(seen_hour.select("job_id"), on="job_id").join(
        polluted.select("job_id"), on="job_id", how="anti")
    shared = long.filter(pl.col("gpus") < 8 * pl.col("nodes"))
    assert long.height >= 2 and shared.height >= 1  # planted idle runs of an hour or more, on shared nodes too
    found = run_mart(wh, "idle_gpu_jobs", cluster=cluster, window=(W0, W1))
    # every one; on a shared node by its own GPUs (the generator's dcgm files carry dcgm-exporter's hpc_job
    # label), beside a busy one included (a run on whole nodes is attributed "whole nodes")
    assert set(long["job_id"]) <= set(found["job_id"])
    assert set(shared["job_id"]) <= set(found.filter(pl.col("attribution") == "own GPUs")["job_id"])
    assert set(found["job_id"]) <= set(idle["job_id"])  # nothing that was busy
    assert (found["gpu_util_pct"] < 5).all() and (found["observed_minutes"] >= 60).all()
    users = run_mart(wh, "idle_gpu_users", cluster=cluster, window=(W0, W1))
    total = users.filter(pl.col("level") == "all").row(0, named=True)
    assert total["runs"] == found.height and total["gpu_h"] == pytest.approx(found["gpu_h"].sum())


def _idle_runs_readings(alloc: pl.DataFrame, truth) -> pl.DataFrame:
    """Per run of ``alloc`` (truth GPU allocations): the mean utilization of the dcgm readings of its GPUs, each
    reading at ts weighted by the part of [ts, ts + step) the run held (``util``), and of its own readings
    alone, those labelled with its job id (``own_util``); the seconds its own or unlabelled readings cover, all
    its GPUs together (``own_seen_s``)."""
    raw = pl.read_parquet(truth / "runs.parquet").select(
        "job_id", pl.col("job_id_raw").cast(pl.String).alias("raw"),
        pl.from_epoch("start", "s").dt.replace_time_zone("UTC").dt.cast_time_unit("ms").alias("start_ts"))
    gpus = alloc.join(raw, on=["job_id", "start_ts"]).select(
        "job_id", "raw", "node", pl.col("gpu").cast(pl.String), "start_ts", "end_ts")
    dcgm = pl.scan_parquet(truth.parent / "telemetry" / "dcgm" / "*.parquet").select(
        pl.col("timestamp").alias("ts"), pl.col("Hostname").alias("node"), "gpu", "hpc_job",
        pl.col("DCGM_FI_DEV_GPU_UTIL").alias("util")).join(gpus.lazy(), on=["node", "gpu"]).filter(
        (pl.col("ts") + pl.duration(seconds=STEP_S) > pl.col("start_ts")) & (pl.col("ts") < pl.col("end_ts"))).collect()
    w = (pl.min_horizontal(pl.col("ts") + pl.duration(seconds=STEP_S), "end_ts")
         - pl.max_horizontal("ts", "start_ts")).dt.total_seconds()
    own = pl.col("hpc_job") == pl.col("raw")
    mine = own | pl.col("hpc_job").is_null() | (pl.col("hpc_job") == "")
    return dcgm.with_columns(w=w).group_by("job_id").agg(
        util=(pl.col("util") * pl.col("w")).sum() / pl.col("w").sum(),
        own_util=(pl.col("util") * pl.col("w")).filter(own).sum() / pl.col("w").filter(own).sum(),
        own_seen_s=pl.col("w").filter(mine).sum())


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
        assert row["swap"] == (row["fault_events"] >= 2)  # two faults are 6 points: on the list
    # the swap list is what the generator made faulty and shows in the window, nothing else
    assert set(card.filter(pl.col("swap") == 1)["node"]) == faulty_nodes(truth, W0, W1)
    assert card.filter(pl.col("swap") == 1).height >= 2
    # a reservation's nodes only (the cluster's rates); a name that is none selects nothing
    assert run_mart(wh, "node_health", cluster=cluster, window=(W0, W1), reservation="no-such").height == 0


def test_the_planted_campaigns_checkpoints_and_ettr(site):
    """Campaigns, lost work and ETTR against the generator's own record of each run (issue 17, part 6; issue 29):
    truth/runs.parquet's campaign, lost_s and startup_s (tests/goodput_truth.py), never the mart's rule again.
    Large runs (16+ GPUs) checkpoint every 30, 60 or 120 minutes (generate/workload.py), each checkpoint 120 s
    of Lustre writes from every node; an interrupted run loses the work since its last one. The warehouse sees
    a checkpoint at the first 300 s node sample whose step carries enough of the burst, so a run's lost work is
    found up to 120 + 300 s short, never more; a restart's start-up (180-900 s of quiet GPUs) is seen up to a
    step long. Tolerances: per campaign, runs, interruptions, wall and running time exact, lost work within that
    much per interrupted run, ETTR within both ÷ wall; GPU-hours lost to hangs are the planted hangs'."""
    from ops_warehouse.generate.schedule import CKPT_WRITE_S

    wh, cluster, truth, _ = site
    want = truth_campaigns(truth, int(W0.timestamp()), int(W1.timestamp()))
    got = run_mart(wh, "campaigns", cluster=cluster, window=(W0, W1)).with_columns(pl.col("job_ids").list.sort())
    both = want.join(got, on="job_ids", suffix="_got")
    # a campaign of 16+ GPUs is found whole; the few that are not are independent runs of one user, name and
    # size, one submitted within the gap after the other was interrupted: what no rule over sacct tells apart
    large = want.filter(pl.col("gpus") >= 16)
    missed = large.join(got, on="job_ids", how="anti")
    assert large.height > 150 and missed.height <= large.height // 50 and not missed["planted"].any(), missed
    for c in ("runs", "interrupted_runs", "wall_s", "running_s"):
        assert (both[c] == both[f"{c}_got"]).all(), c
    known = both.filter(pl.col("lost_s_got").is_not_null())
    assert both.height - known.height <= both.height // 100  # unknown only where a failed node sent nothing
    tol = pl.col("ckpt_interruptions") * CKPT_WRITE_S + pl.col("interrupted_runs") * STEP_S
    short = known.select(d=pl.col("lost_s") - pl.col("lost_s_got"), tol=tol)
    assert ((short["d"] >= 0) & (short["d"] <= short["tol"])).all(), short.filter(
        (pl.col("d") < 0) | (pl.col("d") > pl.col("tol")))
    # without checkpoints the whole run is lost, found exactly; with them, the planted campaigns' losses
    ckpt = known.filter((pl.col("ckpt_interruptions") > 0))
    assert ckpt.height >= 20
    assert ((ckpt["ettr_got"] - ckpt["ettr"]).abs()
            <= (ckpt["interrupted_runs"] * (CKPT_WRITE_S + STEP_S) + ckpt["runs"] * STEP_S) / ckpt["wall_s"]
            + 1e-9).all()
    lost = (ckpt["gpus"] * ckpt["lost_s"]).sum() / 3600
    assert ckpt["lost_gpu_h"].sum() == pytest.approx(lost, rel=0.1)  # the checkpointing campaigns' loss (the mart's)
    # the hangs' loss: the planted hangs', all of it since the run's last checkpoint before the stall
    runs = pl.read_parquet(truth / "runs.parquet")
    hung = runs.filter(pl.col("hang_from").is_not_null() & (pl.col("end") < int(W1.timestamp())))
    assert got["lost_hang_gpu_h"].sum() == pytest.approx((hung["gpus"] * hung["lost_s"]).sum() / 3600, rel=0.1)
    # restarted runs' start-ups: the planted quiet start-up (180-900 s), seen within one step
    restarted = both.filter((pl.col("restarts") > 0) & (pl.col("restarts_without_startup") == 0)
                            & (pl.col("gpus") >= 64))
    assert restarted.height >= 1
    assert ((restarted["restart_startup_s"] - restarted["startup_s"]).abs() <= restarted["restarts"] * STEP_S).all()
