"""`ops-report demo`, the README's first command: runs on the embedded default, is reproducible, and its
night-by-night loads add up to the simulation's own ground truth."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
import pytest

from tests.test_cli import ops

DAYS = 3


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("demo")
    outs = []
    for run in ("a", "b"):
        p = ops("demo", "--dir", str(base / run), "--days", str(DAYS), "--jobs-per-day", "300", cwd=base,
                env={"OPS_WAREHOUSE": "", "OPS_CONFIG": ""})
        assert "quarantined 0" in p.stdout and "| A " in p.stdout
        outs.append({f.name: f.read_bytes() for f in sorted((base / run / "out").iterdir())})
    return base, outs


def test_demo_twice_gives_the_same_outputs(demo_runs):
    _, outs = demo_runs
    assert outs[0] == outs[1]
    assert {"summary_by_project.json", "summary_by_gpu_count.md", "summary_by_wall_time.csv",
            "summary_by_partition_day.json"} <= set(outs[0])


def test_nightly_loads_match_the_simulations_ground_truth(demo_runs):
    """GPU-hours and job counts per project from the warehouse (31 nightly sacct extracts, running jobs
    replaced night after night) equal those computed straight from the simulated runs."""
    base, outs = demo_runs
    got = {r["project"]: r for r in json.loads(outs[0]["summary_by_project.json"])}
    runs = pl.read_parquet(base / "a" / "data" / "truth" / "runs.parquet")
    t0 = int(datetime(2026, 10, 1, tzinfo=timezone.utc).timestamp())
    t1 = t0 + DAYS * 86400
    ran = runs.filter(pl.col("start").is_not_null() & (pl.col("start") < t1))
    truth = ran.with_columns(
        project=pl.col("account").str.slice(4).str.to_uppercase(),
        s=(pl.min_horizontal(pl.col("end").fill_null(t1), pl.lit(t1)) - pl.col("start")) * pl.col("gpus"),
    ).group_by("project").agg(gpu_hours=pl.col("s").sum() / 3600)
    for r in truth.iter_rows(named=True):
        assert got[r["project"]]["gpu_hours"] == pytest.approx(r["gpu_hours"], rel=1e-9), r["project"]
    # a job counts once however often it was requeued: by its last run, if that one ran and ended
    last = runs.filter(pl.col("submit") < t1).sort("run").group_by("job_id").last()
    n_truth = last.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null() & (pl.col("end") < t1)).height
    assert sum(r["jobs_ended"] for r in got.values()) == n_truth
