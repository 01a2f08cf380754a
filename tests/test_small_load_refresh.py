"""A small load's refresh sends only what has something to write (issue 50 item 4, issue 51 item 4; round 7):
run_sample_hour and run_telemetry write rows only where GPU or node samples are (their ``requires``), so a
refresh of hours that hold no sample leaves them out (before: 16 statements and 0.2-0.5 CPU-s of every small job
load's refresh, docs/benchmarks.md "Issue 50"), and a refresh merges what it wrote in one look at system.parts.
Each test checks the statements sent and the rows left against figures worked out by hand from the lines.

Test 1 is tests/test_sample_step_attribution.py's day (cluster t2, node n1, 8 GPUs, 2026-10-05), whose
allocated and observed GPU time per run is worked out there: sacct first (no sample anywhere yet), then the
day's dcgm-exporter samples.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.conftest import rows
from tests.handles import on_every_handle
from tests.test_hung_and_idle_jobs import DAY
from tests.test_per_sample_attribution import write_dcgm_day
from tests.test_sacct_semantics import line, write
from tests.test_sample_step_attribution import _sacct, _telemetry

# what only run_sample_hour's and run_telemetry's refresh send
SAMPLE_GRAINS = ("CREATE TEMPORARY TABLE _rsh_", "CREATE TEMPORARY TABLE _rt_runs", "INSERT INTO run_sample_hour",
                 "INSERT INTO run_telemetry")


@pytest.fixture
def sent(wh):
    """Every statement the warehouse's clients are sent from now on (its own and a refresh's second handle's),
    in the order they are sent."""
    out: list[str] = []

    def recording(h) -> None:
        for name in ("command", "query"):
            real = getattr(h.client, name)

            def call(sql, *a, _real=real, **k):
                out.append(" ".join(str(sql).split()))
                return _real(sql, *a, **k)

            setattr(h.client, name, call)

    on_every_handle(wh, recording)
    return out


@pytest.mark.slow  # a day of telemetry loaded and refreshed
def test_a_job_load_over_hours_without_samples_leaves_the_sample_grains_out(wh, tmp_path, sent):
    """The day's six runs loaded before any sample: run_node_hour gets each run's GPUs × its time on n1
    (4001: 4 × 86 min; 4002: 4 × 39 min 10 s; 4003: 2 × 2 min; 4004: 8 × 60 min; 4005: 8 × 3,602 s; 4006:
    8 × 230 s), and no statement of run_sample_hour or run_telemetry is sent (main: 13 of these, 20 with their
    DROPs and the guard). The day's samples then bring them: each run observed as long as it held its GPUs (the
    module's worked figures)."""
    _sacct(tmp_path / "sacct.psv")
    assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
    assert [s for s in sent if s.startswith(SAMPLE_GRAINS)] == []
    held = {4001: 4 * 86 * 60, 4002: 4 * 2350, 4003: 2 * 120, 4004: 8 * 3600, 4005: 8 * 3602, 4006: 8 * 230}
    assert dict(rows(wh, "SELECT toUInt32(job_id), round(sum(gpu_s), 3) FROM run_node_hour FINAL "
                         "GROUP BY job_id ORDER BY job_id")) == held
    assert rows(wh, "SELECT (SELECT count() FROM run_sample_hour), (SELECT count() FROM run_telemetry)") == [(0, 0)]

    sent.clear()
    _telemetry(tmp_path / "telemetry", True)
    load_parquet_dir(wh, tmp_path / "telemetry", DAY, DAY, cluster="t2")
    assert any(s.startswith("CREATE TEMPORARY TABLE _rsh_g ") for s in sent)
    assert dict(rows(wh, "SELECT toUInt32(job_id), round(sum(observed_gpu_s), 3) FROM run_sample_hour FINAL "
                         "GROUP BY job_id ORDER BY job_id")) == held


@pytest.mark.slow  # three loads and their refreshes
def test_a_runs_telemetry_is_formed_from_samples_outside_the_hours_refreshed(wh, tmp_path, sent):
    """Job 5001 (4 GPUs of n1) starts 2026-10-05 10:47 and is read RUNNING for 25 h 13 min, to 10-06 12:00 (job
    5002, on n2, ends then too); the GPU samples are those of 10-05 10:00 .. 12:55 (every 5 min, GPUs 0-3 at 90 % labelled 5001).
    The next read says TIMEOUT at 10-07 06:00: the hours it refreshes (10-06 and 10-07, from the hour before)
    hold no sample, so run_sample_hour is left out, but run_telemetry forms the run from all its samples, as
    before: its first hour (10:47, 11:47] holds the samples of 10:50 .. 11:45, 12; its GPUs were last busy at
    12:55, the last sample; it ends at 10-07 06:00."""
    start = datetime(2026, 10, 5, 10, 47, tzinfo=timezone.utc)
    submit = "2026-10-05T10:40:00"
    running = write(tmp_path, "a.psv", line(5001, 5001, submit, f"{start:%Y-%m-%dT%H:%M:%S}", "Unknown", 90780, "RUNNING",
                                            nodes="n1", nnodes=1, gpus=4),
                    line(5002, 5002, "2026-10-05T00:00:00", "2026-10-05T00:00:00", "2026-10-06T12:00:00", 129600,
                         "COMPLETED", nodes="n2", nnodes=1, gpus=8))
    load_sacct(wh, running, tz="UTC", source="nightly")
    samples = []
    for k in range(36):  # 10:00 .. 12:55
        t = datetime(2026, 10, 5, 10, tzinfo=timezone.utc) + k * timedelta(minutes=5)
        for gpu in range(8):
            mine = gpu < 4 and t >= start
            samples.append({"timestamp": t, "Hostname": "n1", "gpu": str(gpu), "UUID": f"GPU-n1-{gpu}",
                            "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_UTIL": 90.0 if mine else 0.0,
                            "hpc_job": "5001" if mine else ""})
    write_dcgm_day(tmp_path / "telemetry", samples)
    load_parquet_dir(wh, tmp_path / "telemetry", DAY, DAY, cluster="c1")

    sent.clear()
    ended = write(tmp_path, "b.psv", line(5001, 5001, submit, f"{start:%Y-%m-%dT%H:%M:%S}", "2026-10-07T06:00:00",
                                          156780, "TIMEOUT", nodes="n1", nnodes=1, gpus=4))
    load_sacct(wh, ended, tz="UTC", source="nightly")
    assert not any(s.startswith("CREATE TEMPORARY TABLE _rsh_") for s in sent)
    assert any(s.startswith("INSERT INTO run_telemetry") for s in sent)
    assert rows(wh, "SELECT job_id, end_ts, first_hour_gpu_samples, last_gpu_busy_ts FROM run_telemetry FINAL") == [
        ("5001", datetime(2026, 10, 7, 6), 12, datetime(2026, 10, 5, 12, 55))]


def test_a_small_job_loads_refresh_looks_at_the_parts_once(wh, tmp_path, sent):
    """A job load outside a night's block merges job_run, as_of_by_cluster and the grains it wrote at the end of
    its refresh, found in one look at system.parts (main: three, one after as_of_by_cluster, one after job_run,
    one after the hourly grains), every partition of them left in one part."""
    first = write(tmp_path, "a.psv", line(101, 101, "2026-10-01T00:00:00", "2026-10-01T01:00:00",
                                          "2026-10-01T05:00:00", 14400, "COMPLETED"))
    load_sacct(wh, first, tz="UTC")
    sent.clear()
    second = write(tmp_path, "b.psv", line(102, 102, "2026-10-01T02:00:00", "2026-10-01T02:00:00",
                                           "2026-10-01T04:00:00", 7200, "COMPLETED", user="bob"))
    load_sacct(wh, second, tz="UTC")
    assert sum(s.startswith("SELECT table, partition_id") and "system.parts" in s for s in sent) == 1
    merged = ("job_run", "as_of_by_cluster", "run_node_hour")
    parts = rows(wh, "SELECT table, partition_id, count() FROM system.parts WHERE database = currentDatabase() "
                     "AND active AND table IN {t:Array(String)} GROUP BY table, partition_id", t=list(merged))
    assert {t for t, _, _ in parts} == set(merged) and [p for p in parts if p[2] > 1] == []
    # 16 GPUs over gpu001 and gpu002 (8 a node): 101 for 4 h, 102 for 2 h
    assert rows(wh, "SELECT job_id, node, sum(gpu_s) FROM run_node_hour FINAL GROUP BY job_id, node "
                    "ORDER BY job_id, node") == [("101", "gpu001", 8 * 4 * 3600.0), ("101", "gpu002", 8 * 4 * 3600.0),
                                                 ("102", "gpu001", 8 * 2 * 3600.0), ("102", "gpu002", 8 * 2 * 3600.0)]
