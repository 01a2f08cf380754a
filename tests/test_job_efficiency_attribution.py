"""job_efficiency (the monthly report's largest jobs, stragglers, energy) reads a run's GPU activity by the one
attribution rule, as run_observed (`users`, idle_gpu_jobs) and `ops-report job` do (issue 52, round 5 F).

The hand-built day of tests/test_per_sample_attribution.py: on node n1, 3001 (4 GPUs at 90 %) and 3002 (4 GPUs
at 1 %) share hours 10 and 11 of 2026-10-05; 3003 holds the whole of n2 at 90 % for half of hour 14. With
dcgm-exporter's hpc_job label, each run's utilization is the mean of the readings its label names inside the
run, worked out here by DuckDB over the raw Parquet; without it, sacct does not say which GPUs each run held,
and both runs of n1 read their share of the node: (4 × 90 + 4 × 1) ÷ 8 = 45.5 %, by hand. Before this round
job_efficiency read 45.5 % for both runs of n1 even with the label (the node-hour's rates shared by allocated
GPU time), while `users` and `ops-report job` read 90 % and 1 %.
"""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from ops_warehouse.analytics.checks import run_checks
from ops_warehouse.analytics.marts import run_mart
from tests.test_hung_and_idle_jobs import DAY, OCT
# the day's site, with and without the label (a fixture of that module, used here as its own)
from tests.test_per_sample_attribution import JOBS, site  # noqa: F401

pytestmark = [pytest.mark.both_forms, pytest.mark.slow]


def _duckdb_pooled_by_label(root) -> dict[str, tuple[float, float]]:
    """Per job: (observed GPU-hours, mean utilization %) over the raw Parquet's readings its hpc_job label names
    inside the run [start, end): each minute's reading stands for its minute."""
    con = duckdb.connect()
    runs = pl.DataFrame([(str(j), node, s, e) for j, _, _, node, _, s, e, _ in JOBS],
                        schema=["job", "node", "s", "e"], orient="row")
    con.register("runs", runs)
    rows = con.execute(f"""
        SELECT r.job, count(*) / 60.0, avg(d.DCGM_FI_DEV_GPU_UTIL)
        FROM read_parquet('{root}/dcgm/{DAY}.parquet') AS d
        JOIN runs AS r ON d.hpc_job = r.job AND d.Hostname = r.node
         AND strftime(d.timestamp, '%H:%M') >= r.s AND strftime(d.timestamp, '%H:%M') < r.e
        GROUP BY r.job ORDER BY r.job""").fetchall()
    return {j: (o, u) for j, o, u in rows}


def test_a_runs_utilization_in_job_efficiency_is_the_one_rules(site, tmp_path):
    (wh, labelled), root = site, tmp_path / "telemetry"  # (the site's telemetry, written into tmp_path)
    eff = run_mart(wh, "job_efficiency", cluster="t2", window=OCT)
    got = {r["job_id"]: (r["observed_gpu_h"], r["gpu_util_pct"], r["slowest_node_util_pct"], r["gpu_h"])
           for r in eff.to_dicts()}
    if labelled:
        want = _duckdb_pooled_by_label(root)
        assert {j: (round(o, 6), round(u, 6)) for j, o, u in
                ((j, *v) for j, v in want.items())} == {"3001": (8.0, 90.0), "3002": (8.0, 1.0), "3003": (4.0, 90.0)}
    else:  # by hand: n1's readings shared by the two runs' allocation, 4 of 8 GPUs each
        want = {"3001": (8.0, 45.5), "3002": (8.0, 45.5), "3003": (4.0, 90.0)}
    assert set(got) == set(want)
    for j, (o, u) in want.items():
        # one node each: the straggler figure is the run's own utilization
        assert got[j] == (pytest.approx(o), pytest.approx(u), pytest.approx(u), pytest.approx(o)), j
    # the same figures as run_observed's (`users`, idle_gpu_jobs) and the job report's pooled ones
    obs = {r["job_id"]: (r["observed_gpu_h"], r["gpu_util_pct"])
           for r in run_mart(wh, "run_observed", cluster="t2", window=OCT).to_dicts()}
    assert obs == {j: (pytest.approx(v[0]), pytest.approx(v[1])) for j, v in got.items()}
    [law] = run_checks(wh, cluster="t2", window=OCT, names=["run_activity_agrees"])
    assert law.status == "holds", law.rows
