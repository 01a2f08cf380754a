"""The generator's goodput truth, read from its own frames (truth/runs.parquet, truth/faults.json,
truth/xids.parquet: never through our parsers, loads or SQL), for the tests that check campaigns, ETTR and
the swap list against what was planted (issue 29).

Each run of truth/runs.parquet carries ``campaign`` (the job id of its campaign's first run: a job with
its requeues and resubmissions as the generator made them; every other job its own), ``lost_s`` (the run's
work not kept at its end: since its last checkpoint written whole, or all of it), ``startup_s`` (a restart's
quiet start-up, when a checkpoint kept the work after it) and ``planted_campaign`` (a multi-day training
campaign of generate/workload.py). A campaign's ETTR is (Σ run time − Σ lost − Σ start-up) ÷ (last end −
first start), the definition docs/monthly.md gives; nothing here reads or restates the marts' rule.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl


def truth_campaigns(truth: Path, w0: int, w1: int) -> pl.DataFrame:
    """One row per campaign of the runs that ran on GPUs and ended in (w0, w1] (sacct shows later ends as
    RUNNING): its sorted job ids, size, runs, interruptions, times and ETTR."""
    r = pl.read_parquet(truth / "runs.parquet").filter(
        pl.col("start").is_not_null() & pl.col("end").is_not_null() & (pl.col("gpus") > 0)
        & (pl.col("nodes").list.len() > 0) & (pl.col("end") > w0) & (pl.col("end") <= w1))
    return r.group_by("campaign").agg(
        pl.col("planted_campaign").first().alias("planted"), pl.col("gpus").max(), pl.col("account").first(),
        pl.col("job_id").unique().sort().alias("job_ids"), pl.len().alias("runs"),
        (pl.col("state") != "COMPLETED").sum().alias("interrupted_runs"),
        ((pl.col("state") != "COMPLETED") & (pl.col("ckpt_period_s") > 0)).sum().alias("ckpt_interruptions"),
        (pl.col("end").max() - pl.col("start").min()).alias("wall_s"),
        (pl.col("end") - pl.col("start")).sum().alias("running_s"),
        pl.col("lost_s").sum(), pl.col("startup_s").sum(),
    ).with_columns(ettr=(pl.col("running_s") - pl.col("lost_s") - pl.col("startup_s")) / pl.col("wall_s"))


def gpu_weighted_ettr(c: pl.DataFrame) -> float:
    """Σ GPUs × productive ÷ Σ GPUs × wall over the campaigns ``c`` (truth_campaigns' rows)."""
    return float((c["gpus"] * c["ettr"] * c["wall_s"]).sum() / (c["gpus"] * c["wall_s"]).sum())


def faulty_nodes(truth: Path, w0: datetime, w1: datetime) -> set[str]:
    """The nodes the generator made faulty and whose fault shows in [w0, w1): the straggler, the hot nodes,
    and every node with two hardware faults or more in the window (Xid repeaters: the lemons among them; a
    lemon that failed once is indistinguishable from a healthy node's one failure in 250 node-days)."""
    from ops_warehouse.generate.schedule import DRAIN_XIDS, FATAL_XIDS

    f = json.loads((truth / "faults.json").read_text())
    x = pl.read_parquet(truth / "xids.parquet").filter(
        pl.col("xid").is_in(list(FATAL_XIDS) + list(DRAIN_XIDS)) & (pl.col("ts") >= w0) & (pl.col("ts") < w1))
    repeaters = set(x.group_by("node").len().filter(pl.col("len") >= 2)["node"])
    return set(f["hot_nodes"]) | ({f["straggler"]} - {""}) | repeaters
