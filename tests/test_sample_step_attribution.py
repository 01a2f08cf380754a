"""Sample attribution at run edges (issue 49, item 1): a sample stands for its step [ts, ts + step), and a run
gets the overlap of each step with its allocation, fractional at its edges, so observed = allocated where the
samples follow each other. Before, a sample inside the run counted its whole step, capped at what the run held
in the node-hour: a run starting or ending mid-step lost part of a step at each hour edge.

Cluster t2, one 8-GPU H100 node n1; dcgm-exporter samples every 5 minutes of 2026-10-05 (00:00 .. 23:55). A
sample at t reads the job holding the GPU then (its utilization, 0 % when free) and its hpc_job label ('' when
free, or no label at all: the "no label" form). Jobs, [start, end), none on the 5-minute grid:

  4001 4 GPUs (0-3) 10:47:00 .. 12:13:00  90 %  86 min each: hours 10 (13 min), 11 (60), 12 (13)
  4002 4 GPUs (4-7) 10:52:30 .. 11:31:40   2 %  39 min 10 s each
  4003 2 GPUs (4-5) 13:01:00 .. 13:03:00  50 %  2 min, between the scrapes of 13:00 and 13:05: no sample reads it
  4004 8 GPUs       16:02:30 .. 17:02:30   1 %  an idle run of exactly an hour
  4005 8 GPUs       18:00:00 .. 19:00:02  90 %  its label still on every GPU at the 19:00 scrape
  4006 8 GPUs       19:00:10 .. 19:04:00  50 %  between the scrapes of 19:00 and 19:05: no sample names it

Worked by hand, per GPU (the step of the sample at t is [t, t + 5 min)):
  4001: the 10:45 sample (free, 0 %) covers 10:47-10:50, 3 min, idle; the samples 10:50 .. 12:10 read it
        busy and cover 10:50-12:13, 83 min. Observed 86 = allocated; busy 83 min; hour 10: 13 observed, 10
        busy; hour 12: 13 and 13. × 4 GPUs: observed 344 GPU-min, busy 332.
        Before: hour 10 counted the samples of 10:50 and 10:55 (10 min of 13), hour 12 those of 12:00 .. 12:10
        (15 min, capped at 13): 83 min observed.
  4002: 10:52:30-10:55 from the free 10:50 sample, then 10:55 .. 11:31:40 from its own (2 %): 39 min 10 s
        observed = allocated, busy 0.
  4003: no sample names it. The labelled form shares the node's unlabelled samples (the 13:00 step: all 8 GPUs
        free, 0 %) by GPU time: 2 GPUs × 120 s = 240 GPU-s observed (before: nothing, no row), busy 0.
  4004: the 16:00 sample (free) covers 16:02:30-16:05; 16:05 .. 17:00 read it at 1 %: observed 60 min
        (before: 55 min in hour 16 and the 17:00 sample's 5 min capped at 2.5: 57.5 min, under the idle list's
        hour, so the run was missed), mean utilization 1 % × 57.5 / 60 = 0.958333 %.
  4005: 8 × 3,602 GPU-s, all busy (the 19:00 sample, labelled 4005 at 90 %, covers its last 2 s).
  4006: the 19:00 step's GPU time less 4005's 8 × 2 s is 2,384 GPU-s, more than 4006's 8 × 230 = 1,840: it
        is observed whole (before: nothing, no row, as for 4003), and busy whole: the step reads 90 % on
        every GPU, the state it was last seen in.
Allocated = observed: (344 + 4 × 39 1/6 + 4 + 8 × 60) GPU-min = 30,280 + 28,800 GPU-s, and 28,816 + 1,840
GPU-s for 4005 and 4006; busy 332 GPU-min + 28,816 + 1,840 GPU-s.
Without the label the node's figures are the same (per node-hour the busy GPUs go to the runs holding it):
hour 10 busy 4 × 10 min, hour 11 4 × 60, hour 12 4 × 13.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import refresh_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.conftest import warehouse_config
from tests.test_hung_and_idle_jobs import DAY, HEAD, OCT
from tests.test_per_sample_attribution import write_dcgm_day
from tests.warehouse_copies import copy_of

pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

STEP = timedelta(minutes=5)
# id, GPUs on n1, start, end, utilization %
JOBS = [(4001, range(0, 4), "10:47:00", "12:13:00", 90.0),
        (4002, range(4, 8), "10:52:30", "11:31:40", 2.0),
        (4003, range(4, 6), "13:01:00", "13:03:00", 50.0),
        (4004, range(0, 8), "16:02:30", "17:02:30", 1.0),
        (4005, range(0, 8), "18:00:00", "19:00:02", 90.0),
        (4006, range(0, 8), "19:00:10", "19:04:00", 50.0)]


def at(hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return datetime(DAY.year, DAY.month, DAY.day, h, m, s, tzinfo=timezone.utc)


def _sacct(path):
    lines = [HEAD]
    for jid, gpus, s, e, _ in JOBS:
        s, e, n = at(s), at(e), len(gpus)
        submit = (s - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
        tres = f"billing={14 * n},cpu={14 * n},gres/gpu={n},mem=100G,node=1"
        lines.append(f"{jid}|{jid}|t2|gpu|normal|proja|proja|1|alice|1|{submit}|{submit}|"
                     f"{s:%Y-%m-%dT%H:%M:%S}|{e:%Y-%m-%dT%H:%M:%S}|{int((e - s).total_seconds())}|2880|0:0|"
                     f"COMPLETED|1|{14 * n}|{14 * n}|100G|{tres}|{tres}|n1|||job{jid}")
    path.write_text("\n".join(lines) + "\n")


def _telemetry(root, labelled: bool):
    rows = []
    for k in range(288):
        t = at("00:00:00") + k * STEP
        for gpu in range(8):
            util, job = 0.0, ""
            for jid, gpus, s, e, u in JOBS:
                if gpu in gpus and at(s) <= t < at(e):
                    util, job = u, str(jid)
            row = {"timestamp": t, "Hostname": "n1", "gpu": str(gpu), "UUID": f"GPU-n1-{gpu}",
                   "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_UTIL": util}
            if labelled:
                row["hpc_job"] = job
            rows.append(row)
    write_dcgm_day(root, rows)


def _load(wh, root, labelled: bool) -> None:
    _sacct(root / "sacct.psv")
    (root / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                        "n1,h100,8,gpu,r1,2025-01-01\n")
    assert load_sacct(wh, root / "sacct.psv").quarantined == 0
    load_capacity(wh, inventory=root / "inventory.csv", cluster="t2")
    _telemetry(root / "telemetry", labelled)
    load_parquet_dir(wh, root / "telemetry", DAY, DAY, cluster="t2")
    refresh_capacity(wh, "t2", *OCT)


LABELS = {"params": [True, False], "ids": ["hpc_job label", "no label"]}


@pytest.fixture(scope="module", **LABELS)
def loaded(request, form, tmp_path_factory):
    """The day loaded once per form and label for the tests that only read it (a load is most of a test's time)."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    folder = tmp_path_factory.mktemp("sample-steps")
    cfg = warehouse_config(form, folder, request)
    cfg.projects = {"proja": "A"}
    with open_warehouse(cfg) as wh:
        _load(wh, folder, request.param)
    close_embedded()
    return cfg, request.param, folder


@pytest.fixture
def site(loaded):
    from ops_warehouse.warehouse import open_warehouse

    cfg, labelled, _ = loaded
    # opened for each test: a test between may have closed the process's embedded engines (close_embedded)
    wh = open_warehouse(cfg)
    yield wh, labelled
    wh.close()


@pytest.fixture
def own_site(loaded, tmp_path, request):
    """A copy of the loaded day, for a test that writes to it (tests/warehouse_copies.py): (its Config, the
    label, the folder of the loaded files)."""
    cfg, labelled, folder = loaded
    return copy_of(cfg, tmp_path, request), labelled, folder


def test_observed_equals_allocated_at_run_edges(site):
    wh, labelled = site
    hours = {(r[0].hour): tuple(round(v / 60, 6) for v in r[1:]) for r in wh.query_rows(
        "SELECT hour, allocated_gpu_s, allocated_observed_gpu_s, busy_gpu_s FROM capacity_node_hour FINAL "
        "WHERE cluster = 't2' AND node = 'n1' AND allocated_gpu_s > 0 ORDER BY hour")}
    # GPU-minutes: (allocated, observed, busy) per hour
    assert hours == {h: tuple(round(v, 6) for v in f) for h, f in {
        10: (4 * 13 + 4 * 7.5, 4 * 13 + 4 * 7.5, 4 * 10),
        11: (4 * 60 + 4 * (31 + 40 / 60), 4 * 60 + 4 * (31 + 40 / 60), 4 * 60),
        12: (4 * 13, 4 * 13, 4 * 13),
        13: (2 * 2, 2 * 2, 0),
        16: (8 * 57.5, 8 * 57.5, 0),
        17: (8 * 2.5, 8 * 2.5, 0),
        18: (8 * 60, 8 * 60, 8 * 60),
        19: ((16 + 1_840) / 60, (16 + 1_840) / 60, (16 + 1_840) / 60)}.items()}
    u = run_mart(wh, "utilization", cluster="t2", window=OCT).filter(pl.col("level") == "cluster").to_dicts()[0]
    assert u["allocated_gpu_h"] * 3600 == pytest.approx(30_280 + 28_800 + 28_816 + 1_840)
    assert u["allocated_observed_gpu_h"] * 3600 == pytest.approx(30_280 + 28_800 + 28_816 + 1_840)
    assert u["busy_gpu_h"] * 3600 == pytest.approx(332 * 60 + 28_816 + 1_840)

    runs = {r[0]: (r[1], round(r[2], 6), round(r[3], 6)) for r in wh.query_rows(
        "SELECT job_id, any(attribution), sum(observed_gpu_s), sum(busy_gpu_s) FROM run_sample_hour FINAL "
        "WHERE cluster = 't2' GROUP BY job_id ORDER BY job_id")}
    if labelled:
        assert runs == {"4001": ("gpu", 344 * 60, 332 * 60), "4002": ("gpu", 9_400, 0.0),
                        "4003": ("node share", 240, 0.0), "4004": ("gpu", 28_800, 0.0),
                        "4005": ("gpu", 28_816, 28_816), "4006": ("node share", 1_840, 1_840)}
    else:
        # sacct does not say which GPUs 4001 and 4002 held: they share the node's busy GPUs (documented limit)
        assert {j: r[:2] for j, r in runs.items()} == {
            "4001": ("node share", 344 * 60), "4002": ("node share", 9_400), "4003": ("node share", 240),
            "4004": ("node share", 28_800), "4005": ("node share", 28_816), "4006": ("node share", 1_840)}


def test_the_idle_run_of_exactly_an_hour_is_found(site):
    wh, labelled = site
    idle = run_mart(wh, "idle_gpu_jobs", cluster="t2", window=OCT, idle_util_pct=wh.cfg.idle_util_pct)
    assert idle.select("job_id", "attribution").rows() == [
        ("4004", "own GPUs" if labelled else "whole nodes")]
    r = idle.to_dicts()[0]
    assert r["observed_minutes"] == pytest.approx(60.0)
    assert r["gpu_h"] == pytest.approx(8.0)
    assert r["gpu_util_pct"] == pytest.approx(57.5 / 60)



def test_a_warehouse_built_by_the_old_rule_is_built_again_by_its_next_load(own_site):
    """A warehouse whose run_sample_hour was built by the rule before (its runs' edges short; the hourly grain's
    fingerprint an earlier version's, core/grain_versions.py) is built again, without being asked, by its next
    load."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    cfg, _, folder = own_site
    wh = open_warehouse(cfg)
    wh.command("INSERT INTO schema_migrations (name, kind, checksum, applied_at) "
               "VALUES ('grains/hourly', 'grain', 'an earlier version', now64(3))")
    # what the old rule left in hour 10: the samples of 10:50 and 10:55, 10 of 4001's 13 minutes
    wh.command("ALTER TABLE capacity_node_hour UPDATE allocated_observed_gpu_s = 4 * 600 + 4 * 450 "
               "WHERE hour = '2026-10-05 10:00:00' SETTINGS mutations_sync = 2")
    wh.close()
    close_embedded()
    wh = open_warehouse(cfg)
    assert wh.stale_grains == ("hourly",)
    load_sacct(wh, folder / "sacct.psv")
    assert wh.query_rows("SELECT allocated_observed_gpu_s FROM capacity_node_hour FINAL WHERE cluster = 't2' "
                         "AND hour = '2026-10-05 10:00:00'") == [(4 * 13 * 60 + 4 * 450,)]
