"""A capacity load (inventory, node events, reservations) refreshes the models of the hourly grain that read
them, capacity_node_hour and run_node_hour, and leaves the runs' per-sample grains (run_sample_hour,
run_telemetry), job_run and gpu_day, which read no capacity table, as they are (issue 51, item 3: the demo's
capacity stage rebuilt them all over the month; docs/benchmarks.md).

The day is tests/test_per_sample_attribution.py's (two 8-GPU H100 nodes n1, n2 of cluster t2 on 2026-10-05,
jobs 3001 and 3002 on n1 10:00-12:00, 3003 on n2 14:30-15:00, dcgm-exporter samples every minute). Then
`sacctmgr list event` says n1 was DOWN 06:00-08:00, when it ran nothing: 2 h x 8 GPUs = 16 GPU-h = 57,600
GPU-s down, taken from its free time (the day's grid stops at the history's as-of time, 15:00); the runs' allocation (4 x 2 + 4 x 2 + 8 x 0.5 = 20 GPU-h = 72,000
GPU-s) and what the samples saw of it are unchanged."""

from __future__ import annotations

import pytest

from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import refresh_capacity
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.test_hung_and_idle_jobs import DAY, OCT
from tests.test_per_sample_attribution import _jobs_and_nodes, _telemetry

pytestmark = pytest.mark.slow  # a day of minute samples loaded and refreshed: about 50 s on 2 cores

EVENTS = ("Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
          "t2|n1|2026-10-05T06:00:00|2026-10-05T08:00:00|DOWN|PSU swap|root(0)\n")


def _grid(wh) -> dict[str, tuple[float, float, float]]:
    """(down, free, allocated) GPU-seconds of each node over the day."""
    return {n: (d, f, a) for n, d, f, a in wh.query_rows(
        "SELECT node, sum(down_gpu_s), sum(free_gpu_s), sum(allocated_gpu_s) FROM capacity_node_hour FINAL "
        "WHERE toDate(hour) = {d:Date} GROUP BY node ORDER BY node", {"d": DAY})}


def _stamps(wh, table: str) -> tuple:
    """The rows of ``table`` and when they were written: a refresh writes them again with a later stamp."""
    return tuple(wh.query_rows(f"SELECT count(), max(refreshed_at), count(DISTINCT refreshed_at) FROM {table}")[0])


def test_a_capacity_load_refreshes_the_grid_and_leaves_the_runs_samples(tmp_path, cfg):
    wh = _jobs_and_nodes(cfg, tmp_path)
    _telemetry(tmp_path / "telemetry", labelled=True)
    load_parquet_dir(wh, tmp_path, DAY, DAY, cluster="t2")
    refresh_capacity(wh, "t2", *OCT)
    before = _grid(wh)
    samples = {t: _stamps(wh, t) for t in ("run_sample_hour", "run_telemetry", "job_run", "gpu_day")}
    assert all(s[0] > 0 for s in samples.values()), samples
    # before the event: each node 15 h x 8 GPUs = 120 GPU-h (the day stops at the history's as-of time, 15:00,
    # the last run's end), n1 allocated 16 GPU-h (3001 + 3002), n2 4 GPU-h (3003), the rest free
    assert before == {"n1": (0.0, 104 * 3600.0, 16 * 3600.0), "n2": (0.0, 116 * 3600.0, 4 * 3600.0)}

    (tmp_path / "events.psv").write_text(EVENTS)
    assert load_capacity(wh, events=tmp_path / "events.psv", cluster="t2") == {"node_event": 1}

    after = _grid(wh)
    assert after == {"n1": (57_600.0, 104 * 3600.0 - 57_600.0, 16 * 3600.0), "n2": before["n2"]}
    alloc, = wh.query_rows("SELECT sum(gpu_s) FROM run_node_hour FINAL WHERE NOT is_deleted")[0]
    assert alloc == pytest.approx(72_000.0)
    # the runs' grains, job_run and gpu_day were not written again: they read no capacity table
    assert {t: _stamps(wh, t) for t in samples} == samples
    wh.close()
