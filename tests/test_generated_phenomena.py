"""Hung jobs, idle-GPU jobs, campaigns' lost work and lemon nodes found from the loaded files alone, against the generator's ground
truth (issue 17, part 6): the simulation's own frames (truth/runs.parquet: ``hang_from``, the time a run's NCCL stall
began; truth/gpu_alloc.parquet: each allocated GPU's utilization while busy), which never went through our
parsers, loads or SQL.

The site: 14 days of October 2026, 800 jobs a day on 40 nodes (320 GPUs), seed 11, 5-minute telemetry. The
generator plants (generate/workload.py, generate/schedule.py):
- hangs: one large run (64+ GPUs) in 12 that does not complete stalls 30 minutes before its end (the
  watchdog, WATCHDOG_S) and is recorded FAILED; on this site 5 runs, all ending inside the 14 days
  (1000546, 1001068, 1003685: 128 GPUs; 1003754, 1007865: 64). Their GPUs sit at ~0 % and their NICs quiet
  from ``hang_from`` to the end.
- idle-GPU jobs: 3 % of the runs under 64 GPUs hold their GPUs at 0-3 % all along.
- training campaigns: runs of 16+ GPUs checkpoint every 30, 60 or 120 minutes (truth/runs.parquet:
  ``ckpt_period_s``), each a 120 s Lustre write burst; a run cut by a node failure is often requeued and goes
  on from its last checkpoint; the test works out each campaign's lost work and ETTR from that schedule.
- two lemon nodes (25 times the failure rate: DOWN events with hardware Xids) and a straggler (its GPUs at
  0.7 of the speed of its peers'), returned by the simulation (``h.lemons``, ``h.straggler``).

What the warehouse must find, with the default parameters (hang_minutes 20, idle threshold 5 %, an hour of
telemetry for an idle run):
- exactly the planted hangs; each hang starts at the first sample after ``hang_from`` whose GPUs are idle
  and whose NIC rate is quiet: within two 300 s steps (a NIC rate covers the interval before its sample, so a
  stall that began late in an interval still shows that interval's traffic), and lasts end − that sample:
  between 20 and 30 minutes; GPU-hours lost = GPUs × that ÷ 60.
- every planted idle run that ran at least 70 minutes (an hour of telemetry with a margin for the 5-minute
  samples at its ends), on shared nodes too (each run's own GPUs, named by dcgm-exporter's hpc_job label
  in the generator's files), each with a mean utilization under 5 %; and nothing that is not a planted idle
  run.
- on the node scorecard (node_health.sql): the straggler first and on the swap list; the planted hot nodes,
  and only they, throttled; each lemon with its DOWN events, on the swap list when it went DOWN twice (6
  points); nothing on the swap list that was not planted.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from types import SimpleNamespace

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.warehouse import close_embedded
from tests.sites import built_site, generated_site, laws_broken, open_site

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

UTC = timezone.utc
W0, W1 = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 15, tzinfo=UTC)
STEP_S = 300


def build(out, **params) -> dict:
    return generated_site(out, telemetry_days=(date(2026, 10, 1), date(2026, 10, 14)), refresh_window=(W0, W1),
                          **params)


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
    assert len(planted) == 5  # the site's (docstring); a generator change that plants none fails here
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
        assert r["hung_gpu_hours"] == pytest.approx(p["gpus"] * r["hang_minutes"] / 60)
    # at 30 minutes, a hang whose stall began between two samples measures less: the lower bound, never more
    assert set(run_mart(wh, "hung_jobs", cluster=cluster, window=(W0, W1), hang_minutes=30)["job_id"]) <= set(planted)


def test_the_planted_idle_runs_are_found(site):
    wh, cluster, truth, _ = site
    alloc = pl.read_parquet(truth / "gpu_alloc.parquet")
    per_run = alloc.group_by("job_id").agg(
        pl.col("gpu_util").max().alias("max_util"), pl.col("start_ts").min(), pl.col("end_ts").max(),
        pl.len().alias("gpus"), pl.col("node").n_unique().alias("nodes"))
    idle = per_run.filter(pl.col("max_util") < 5)
    long = idle.filter(((pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds() >= 70 * 60)
                       & (pl.col("end_ts") <= W1) & (pl.col("start_ts") >= W0))
    shared = long.filter(pl.col("gpus") < 8 * pl.col("nodes"))
    assert long.height >= 2 and shared.height >= 1  # planted idle runs of 70 minutes or more, on shared nodes too
    found = run_mart(wh, "idle_gpu_jobs", cluster=cluster, window=(W0, W1))
    # every one, by its own GPUs (the generator's dcgm files carry dcgm-exporter's hpc_job label): a run on a
    # shared node beside a busy one included
    assert set(long["job_id"]) <= set(found.filter(pl.col("attribution") == "own GPUs")["job_id"])
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


def _truth_campaigns(runs: pl.DataFrame, gap_s: int = 24 * 3600) -> pl.DataFrame:
    """The generator's campaigns from its own run records: the runs that ended by W1 (sacct shows later ends
    RUNNING), grouped by campaigns.sql's rule (one user, account and job name; a run submitted more than the
    gap after the group's latest end so far starts a new campaign), with the work each interrupted run lost
    from the generator's checkpoint schedule: a checkpoint every ckpt_period_s from the run's start, written
    whole in CKPT_WRITE_S and only before the run stopped (ended, or hung: none are written while it hangs);
    the work since the last one's start is lost, all of it without one."""
    from ops_warehouse.generate.schedule import CKPT_WRITE_S

    w0, w1 = int(W0.timestamp()), int(W1.timestamp())
    r = (runs.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null() & (pl.col("gpus") > 0)
                     & (pl.col("nodes").list.len() > 0) & (pl.col("end") > w0) & (pl.col("end") <= w1))
         .sort("user", "account", "name", "start", "job_id"))
    stop = pl.coalesce("hang_from", "end")
    ckpts = ((stop - pl.col("start") - CKPT_WRITE_S) // pl.col("ckpt_period_s")).clip(0)
    last_ckpt = pl.when(pl.col("ckpt_period_s") > 0).then(pl.col("start") + ckpts * pl.col("ckpt_period_s")) \
        .otherwise(pl.col("start"))
    grp = ["user", "account", "name"]
    r = r.with_columns(
        interrupted=pl.col("state") != "COMPLETED",
        prev_max_end=pl.col("end").cum_max().shift(1).over(grp),
        prev_end=pl.col("end").shift(1).over(grp),
    ).with_columns(
        new=pl.col("prev_max_end").is_null() | (pl.col("submit") > pl.col("prev_max_end") + gap_s),
    ).with_columns(
        campaign=pl.col("new").cast(pl.Int32).cum_sum().over(grp),
        # a run's time from the latest end of the campaign's runs before it: the union of their intervals
        run_s=pl.col("end") - pl.when(pl.col("new")).then(pl.col("start"))
        .otherwise(pl.max_horizontal("start", "prev_max_end")),
    ).with_columns(
        # the work since the last checkpoint, never more than the run's own time
        lost_s=pl.when(pl.col("interrupted")).then(pl.min_horizontal(pl.col("end") - last_ckpt,
                                                                     pl.col("run_s").clip(0))).otherwise(0),
    )
    return r.group_by(*grp, "campaign").agg(
        pl.len().alias("runs"), pl.col("interrupted").sum().alias("interrupted_runs"),
        (pl.col("end").max() - pl.col("submit").min()).alias("wall_s"),
        pl.col("run_s").clip(0).sum().alias("running_s"), pl.col("lost_s").sum().alias("lost_s"),
        (pl.col("gpus") * pl.col("lost_s")).sum().truediv(3600).alias("gpu_hours_lost"),
        (pl.col("gpus") * pl.col("lost_s")).filter(pl.col("hang_from").is_not_null()).sum().truediv(3600)
        .alias("lost_hang_gpu_hours"),
        (pl.col("interrupted") & (pl.col("ckpt_period_s") > 0)).sum().alias("ckpt_interruptions"),
        pl.col("ckpt_period_s").max(),
        pl.col("submit").min().alias("first_submit"),
    ).with_columns(ettr=(pl.col("running_s") - pl.col("lost_s")) / pl.col("wall_s"))


def test_the_planted_campaigns_checkpoints_and_ettr(site):
    """Campaigns, lost work and ETTR against the generator's checkpoint schedule and failures (issue 17, part 6).
    Large runs (16+ GPUs) checkpoint every 30, 60 or 120 minutes (generate/workload.py), each checkpoint 120 s
    of Lustre writes from every node; a run cut by a node failure is requeued from its last checkpoint. The
    warehouse sees a checkpoint at the first 300 s node sample whose step carries enough of the burst, so it
    places each one between its start and its end + one step: a run's lost work is found up to 120 + 300 s
    short, never more; and a run's first step may carry the last checkpoint of its node's previous run, so a
    run without checkpoints may be found up to a step short too. Tolerances: per campaign, lost work within
    that much per interrupted run (most runs without checkpoints exact: all their work is lost), runs,
    interruptions, wall and running time exact, and ETTR within the lost-work tolerance ÷ wall; GPU-hours
    lost to hangs are the planted hangs'."""
    from ops_warehouse.generate.schedule import CKPT_WRITE_S

    wh, cluster, truth, _ = site
    want = _truth_campaigns(pl.read_parquet(truth / "runs.parquet"))
    got = run_mart(wh, "campaigns", cluster=cluster, window=(W0, W1))
    key = ["user", "account", "job_name", "first_submit_ts"]
    want = want.rename({"name": "job_name"}).with_columns(
        first_submit_ts=pl.from_epoch("first_submit", "s").dt.replace_time_zone("UTC").dt.cast_time_unit("us"))
    got = got.with_columns(pl.col("first_submit_ts").dt.cast_time_unit("us").dt.replace_time_zone("UTC"))
    both = want.join(got, on=key, how="full", suffix="_got", coalesce=True)
    assert both.filter(pl.col("runs").is_null() | pl.col("runs_got").is_null()).height == 0  # the same campaigns
    assert want.height > 1_000 and want.filter(pl.col("interrupted_runs") > 0).height > 300
    for c in ("runs", "interrupted_runs", "wall_s", "running_s"):
        assert (both[c] == both[f"{c}_got"]).all(), c
    known = both.filter(pl.col("lost_s_got").is_not_null())
    assert both.height - known.height <= both.height // 100  # unknown only where a failed node sent nothing
    tol = pl.col("ckpt_interruptions") * CKPT_WRITE_S + pl.col("interrupted_runs") * STEP_S
    short = known.select(d=pl.col("lost_s") - pl.col("lost_s_got"), tol=tol)
    assert ((short["d"] >= 0) & (short["d"] <= short["tol"])).all(), short.filter(
        (pl.col("d") < 0) | (pl.col("d") > pl.col("tol")))
    # without checkpoints the whole run is lost, found exactly; with them, the planted campaigns' losses
    no_ckpt = known.filter((pl.col("ckpt_period_s") == 0) & (pl.col("interrupted_runs") > 0))
    assert (no_ckpt["lost_s"] == no_ckpt["lost_s_got"]).mean() > 0.95
    ckpt = known.filter((pl.col("ckpt_period_s") > 0) & (pl.col("interrupted_runs") > 0))
    assert ckpt.height >= 20
    assert ((ckpt["ettr_got"] - ckpt["ettr"]).abs()
            <= ckpt["interrupted_runs"] * (CKPT_WRITE_S + STEP_S) / ckpt["wall_s"] + 1e-9).all()
    lost = ckpt["gpu_hours_lost"].sum()
    assert ckpt["gpu_hours_lost_got"].sum() == pytest.approx(lost, rel=0.1)  # the checkpointing campaigns' loss
    # the hangs' loss: the planted hangs, all of it since the run's last checkpoint before the stall
    hang = known.filter(pl.col("lost_hang_gpu_hours") > 0)
    assert hang.height == 5 and (hang["lost_hang_gpu_hours_got"] > 0).all()
    assert hang["lost_hang_gpu_hours_got"].sum() == pytest.approx(hang["lost_hang_gpu_hours"].sum(), rel=0.1)
    assert known["lost_hang_gpu_hours_got"].sum() == pytest.approx(hang["lost_hang_gpu_hours_got"].sum())
    # restarted runs: the generator's large runs (64+ GPUs, never planted idle) are busy from their first
    # second, seen within one step; a planted idle run restarted never gets busy: its first hour (or all of it)
    restarted = got.filter((pl.col("restarts") > 0) & (pl.col("restarts_without_startup") == 0))
    large = restarted.filter(pl.col("max_gpus") >= 64)
    assert large.height >= 1 and (large["restart_startup_s"] <= large["restarts"] * STEP_S).all()
    assert restarted.filter(pl.col("restart_startup_s") > pl.col("restarts") * STEP_S).height < restarted.height // 10
