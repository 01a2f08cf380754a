"""Per-sample attribution (issue 28, item 2): busy, observed and allocated-but-idle GPU time from the GPU
samples inside each run's allocation, on a hand-built day whose every figure is worked out here.

Cluster t2: two 8-GPU H100 nodes n1, n2; dcgm-exporter samples every minute of 2026-10-05. A sample at t
is a reading at t: the utilization of the job holding the GPU then (0 % when none), and dcgm-exporter's
hpc_job label names that job, as the site's prolog maps it (the "no label" form: the site has no mapping,
the label is absent). A sample inside a run's allocation (start ≤ t < end) stands for its minute of the
run's GPU time. Jobs, [start, end):

  3001 proja alice 4 GPUs n1 (GPUs 0-3) 10:00 .. 12:00  90 %   busy 4 × 2 = 8 GPU-h
  3002 projb bob   4 GPUs n1 (GPUs 4-7) 10:00 .. 12:00   1 %   idle 8 GPU-h: an idle-GPU run beside a busy one
  3003 proja alice 8 GPUs n2            14:30 .. 15:00  90 %   busy 8 × 0.5 = 4 GPU-h, half of hour 14

Allocated 8 + 8 + 4 = 20 GPU-h, all of it seen by samples (observed 20); busy 8 + 4 = 12; allocated but idle
20 − 12 = 8. The rule before this issue counted a GPU-hour busy when its hourly mean reached the threshold:
n2's hour 14 has a mean of 45 % (30 samples at 90, 30 at 0), so it counted 8 busy GPU-hours where 4 were
allocated (busy above allocated). Per sample: 4, and in every node-hour busy ≤ observed ≤ allocated.

Runs: with the label each run reads its own GPUs' samples (attribution 'own GPUs'): 3002 is idle at 1.0 %
over 120 minutes, 3001 busy at 90 %. Without it, sacct does not say which GPUs a run held, so the runs on n1
share its samples by allocation (4 of 8 each): both at (4 × 90 + 4 × 1) / 8 = 45.5 %, and 3002 is not found
(the documented limit of 'shared node: node share'); the cluster's sums are the same either way.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import timedelta

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import one_refresh, refresh_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
# the same day, month and sacct header as the hung- and idle-job day
from tests.test_hung_and_idle_jobs import DAY, HEAD, OCT, at

pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

# id, account, user, node, its GPUs, start, end, utilization %
JOBS = [(3001, "proja", "alice", "n1", range(0, 4), "10:00", "12:00", 90.0),
        (3002, "projb", "bob", "n1", range(4, 8), "10:00", "12:00", 1.0),
        (3003, "proja", "alice", "n2", range(0, 8), "14:30", "15:00", 90.0)]


def write_sacct(path, jobs=JOBS):
    """sacct lines of ``jobs`` ((id, account, user, node, GPUs, start, end, a figure), one node each), as
    `sacct -P` prints them: tests/test_run_energy_attribution.py writes its own jobs with it."""
    lines = [HEAD]
    for jid, acct, user, node, gpus, s, e, _ in jobs:
        s, e, n = at(s), at(e), len(gpus)
        submit = (s - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
        tres = f"billing={14 * n},cpu={14 * n},gres/gpu={n},mem=100G,node=1"
        lines.append(f"{jid}|{jid}|t2|gpu|normal|{acct}|{acct}|1|{user}|1|{submit}|{submit}|"
                     f"{s:%Y-%m-%dT%H:%M:%S}|{e:%Y-%m-%dT%H:%M:%S}|{int((e - s).total_seconds())}|2880|0:0|"
                     f"COMPLETED|1|{14 * n}|{14 * n}|100G|{tres}|{tres}|{node}|||job{jid}")
    path.write_text("\n".join(lines) + "\n")


def _readings():
    """(time, node, GPU, utilization %, job id or '') of every sample of the day: the job holding the GPU at
    the scrape, and its utilization (0 % and no job on a free GPU)."""
    for k in range(1440):
        t = at("00:00") + timedelta(minutes=k)
        for node in ("n1", "n2"):
            for gpu in range(8):
                util, job = 0.0, ""
                for jid, _, _, jnode, gpus, s, e, u in JOBS:
                    if jnode == node and gpu in gpus and at(s) <= t < at(e):
                        util, job = u, str(jid)
                yield t, node, gpu, util, job


def _telemetry(root, labelled: bool):
    rows = []
    for t, node, gpu, util, job in _readings():
        row = {"timestamp": t, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}",
               "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_UTIL": util, "DCGM_FI_DEV_POWER_USAGE": 100.0}
        if labelled:
            row["hpc_job"] = job
        rows.append(row)
    write_dcgm_day(root, rows)


def write_dcgm_day(root, rows: list[dict]) -> None:
    """The day's dcgm-exporter readings (one dict a GPU and minute) as the day file load_parquet_dir reads."""
    (root / "dcgm").mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
        root / "dcgm" / f"{DAY}.parquet")


def _jobs_and_nodes(cfg, tmp_path, telemetry=None):
    """A warehouse with the day's jobs and the two nodes loaded (telemetry is the caller's). ``telemetry(wh)``:
    the caller's telemetry load, run with the two loads and the month's grains in one refresh at the end
    (etl/grains.py one_refresh, as `etl nightly` runs a night's): every table's checksum as with each load
    refreshing its own hours and the month again after them (docs/benchmarks.md, issue 51 round 10)."""
    from ops_warehouse.warehouse import open_warehouse

    cfg.projects = {"proja": "A", "projb": "B"}
    wh = open_warehouse(cfg)
    write_sacct(tmp_path / "sacct.psv")
    (tmp_path / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                            "n1,h100,8,gpu,r1,2025-01-01\nn2,h100,8,gpu,r1,2025-01-01\n")
    with one_refresh(wh) if telemetry else nullcontext():
        assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
        load_capacity(wh, inventory=tmp_path / "inventory.csv", cluster="t2")
        if telemetry:
            telemetry(wh)
            refresh_capacity(wh, "t2", *OCT)
    return wh


@pytest.fixture(params=[True, False], ids=["hpc_job label", "no label"])
def site(request, tmp_path, cfg):
    _telemetry(tmp_path / "telemetry", request.param)
    wh = _jobs_and_nodes(cfg, tmp_path, lambda wh: load_parquet_dir(wh, tmp_path, DAY, DAY, cluster="t2"))
    return wh, request.param


def test_busy_idle_and_idle_runs_per_sample_inside_the_allocation(site):
    wh = site[0]
    u = run_mart(wh, "utilization", cluster="t2", window=OCT).filter(pl.col("level") == "cluster").to_dicts()[0]
    assert u["allocated_gpu_h"] == pytest.approx(20.0)
    assert u["allocated_observed_gpu_h"] == pytest.approx(20.0)
    assert u["busy_gpu_h"] == pytest.approx(12.0)
    assert u["allocated_idle_gpu_h"] == pytest.approx(8.0)
    # the half-allocated hour: 4 busy GPU-hours, not the 8 an hourly mean of 45 % made of it
    hour14 = wh.query_rows("SELECT busy_gpu_s, allocated_observed_gpu_s, allocated_gpu_s FROM capacity_node_hour FINAL "
                           "WHERE cluster = 't2' AND node = 'n2' AND hour = '2026-10-05 14:00:00'")
    assert [tuple(round(v / 3600, 6) for v in r) for r in hour14] == [(4.0, 4.0, 4.0)]
    broken = wh.query_rows("SELECT count() FROM capacity_node_hour FINAL WHERE cluster = 't2' AND "
                           "(busy_gpu_s > allocated_observed_gpu_s + 1e-6 OR allocated_observed_gpu_s > allocated_gpu_s + 1e-6)")
    assert broken == [(0,)]

    # the runs: by their own GPUs with the label, by their share of the node without it
    labelled = site[1]
    idle = run_mart(wh, "idle_gpu_jobs", cluster="t2", window=OCT, idle_util_pct=wh.cfg.idle_util_pct)
    if labelled:
        assert idle.select("job_id", "attribution").rows() == [("3002", "own GPUs")]
        r = idle.to_dicts()[0]
        assert r["gpu_util_pct"] == pytest.approx(1.0) and r["observed_minutes"] == pytest.approx(120.0)
        assert r["gpu_h"] == pytest.approx(8.0)
    else:
        # sacct does not say which of n1's GPUs each run held: both read (4 × 90 + 4 × 1) / 8 = 45.5 %
        assert idle.height == 0
    runs = {r[0]: r[1:] for r in wh.query_rows(
        "SELECT job_id, any(attribution), sum(observed_gpu_s) / 3600, sum(busy_gpu_s) / 3600, "
        "sum(util_gpu_s) / sum(observed_gpu_s) * 100 FROM run_sample_hour FINAL WHERE cluster = 't2' "
        "GROUP BY job_id ORDER BY job_id")}
    if labelled:
        assert {j: (a, round(o, 6), round(b, 6), round(p, 6)) for j, (a, o, b, p) in runs.items()} == {
            "3001": ("gpu", 8.0, 8.0, 90.0), "3002": ("gpu", 8.0, 0.0, 1.0), "3003": ("gpu", 4.0, 4.0, 90.0)}
    else:
        assert {j: (a, round(o, 6), round(b, 6), round(p, 6)) for j, (a, o, b, p) in runs.items()} == {
            "3001": ("node share", 8.0, 4.0, 45.5), "3002": ("node share", 8.0, 4.0, 45.5),
            "3003": ("node share", 4.0, 4.0, 90.0)}


def test_the_hpc_job_label_from_prometheus_text(tmp_path, cfg):
    """The same day as a Prometheus text file (dcgm-exporter's exposition: the label on a GPU's samples while
    a job holds it, absent otherwise, so a GPU's series changes with its job): the runs by their own GPUs."""
    from ops_warehouse.etl.openmetrics_source import load_text_files

    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for t, node, gpu, util, job in _readings():
        label = f',hpc_job="{job}"' if job else ""
        lines.append(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{gpu}",UUID="GPU-{node}-{gpu}",Hostname="{node}",'
                     f'modelName="NVIDIA H100 80GB HBM3"{label}}} {util:g} {int(t.timestamp() * 1000)}')
    (tmp_path / "dcgm.prom").write_text("\n".join(lines) + "\n")
    wh = _jobs_and_nodes(cfg, tmp_path, lambda wh: load_text_files(wh, [tmp_path / "dcgm.prom"], DAY, DAY,
                                                                  cluster="t2"))
    idle = run_mart(wh, "idle_gpu_jobs", cluster="t2", window=OCT, idle_util_pct=wh.cfg.idle_util_pct)
    assert idle.select("job_id", "attribution", "gpu_h").rows() == [("3002", "own GPUs", 8.0)]
    u = run_mart(wh, "utilization", cluster="t2", window=OCT).filter(pl.col("level") == "cluster").to_dicts()[0]
    assert (u["busy_gpu_h"], u["allocated_idle_gpu_h"]) == (pytest.approx(12.0), pytest.approx(8.0))
