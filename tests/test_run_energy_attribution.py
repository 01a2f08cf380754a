"""A run's GPU energy by the one attribution rule (issue 52, round 6): on a node two runs share, each run's
energy is its own GPUs' energy counter over its time, not the node's shared by allocated GPU time.

Cluster t2, node n1 (8 H100s), 2026-10-05, dcgm-exporter samples every minute, with the energy counter
(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ since the driver loaded) and power. A GPU draws its job's power while
the job holds it, 60 W idle otherwise; the counter's step read at t is what the GPU drew in [t - 1 min, t).

  3001 proja alice GPUs 0-3 of n1 10:00 .. 12:00  600 W
  3002 projb bob   GPUs 4-7 of n1 10:00 .. 12:00  100 W

By hand, with dcgm-exporter's hpc_job label: 3001's own GPUs drew 4 × 600 W × 7,200 s = 17,280,000 J and
3002's 4 × 100 W × 7,200 s = 2,880,000 J in their time (the steps read at 10:01 .. 12:00). The node-hours the
runs held (10:00 and 11:00, gpu_hour's hours: the steps read in them) hold one more step no run's readings
claim: the one read at 10:00, drawn idle in 09:59 .. 10:00, 8 × 60 W × 60 s = 28,800 J, which goes, as the whole
node-hour's energy went before, to the runs there by their GPU time: 14,400 J each. So 3001 17,294,400 J =
4.804 kWh, 3002 2,894,400 J = 0.804 kWh. On main (the node share by allocated GPU time) each read half the two
node-hours' energy: (9,940,800 + 10,080,000) ÷ 2 = 10,010,400 J = 2.7807 kWh. Without the label sacct does not
say which GPUs each run held: both still read 2.7807 kWh. The runs' own energy is also worked out by DuckDB over
the raw Parquet (the counters at the run's end less at its start, on the GPUs the label names).
"""

from __future__ import annotations

from datetime import timedelta

import duckdb
import polars as pl
import pytest

from ops_warehouse.analytics.checks import run_checks
from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import refresh_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.test_hung_and_idle_jobs import DAY, OCT, at
from tests.test_per_sample_attribution import write_dcgm_day, write_sacct
from tests.warehouse_copies import Loaded, copy_of

pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

IDLE_W = 60.0
# id, account, user, node, its GPUs, start, end, power W
JOBS = [(3001, "proja", "alice", "n1", range(0, 4), "10:00", "12:00", 600.0),
        (3002, "projb", "bob", "n1", range(4, 8), "10:00", "12:00", 100.0)]
OWN_J = {"3001": 4 * 600.0 * 7200, "3002": 4 * 100.0 * 7200}
IDLE_STEP_J = 8 * IDLE_W * 60  # the step read at 10:00, in a node-hour the runs held, shared by GPU time
LABELLED_KWH = {j: (e + IDLE_STEP_J / 2) / 3.6e6 for j, e in OWN_J.items()}
NODE_SHARE_KWH = (9_940_800 + 10_080_000) / 2 / 3.6e6


def _holder(t, gpu):
    for jid, _, _, _, gpus, s, e, w in JOBS:
        if gpu in gpus and at(s) <= t < at(e):
            return str(jid), w
    return "", IDLE_W


def _telemetry(root, labelled: bool):
    rows = []
    counter_mj = [1_000_000_000.0] * 8  # since the driver loaded
    for k in range(1440):
        t = at("00:00") + timedelta(minutes=k)
        for gpu in range(8):
            if k:  # the step read at t: what the GPU drew in the minute before
                counter_mj[gpu] += _holder(t - timedelta(minutes=1), gpu)[1] * 60 * 1000
            job, w = _holder(t, gpu)
            row = {"timestamp": t, "Hostname": "n1", "gpu": str(gpu), "UUID": f"GPU-n1-{gpu}",
                   "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_UTIL": 50.0 if job else 0.0,
                   "DCGM_FI_DEV_POWER_USAGE": w, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": counter_mj[gpu]}
            if labelled:
                row["hpc_job"] = job
            rows.append(row)
    write_dcgm_day(root, rows)


@pytest.fixture(scope="module")
def loaded(form, request, tmp_path_factory):
    """The two runs' day loaded once per form and label (a load is most of a test's time): the tests that
    write (a refresh, a hand-made row) each get a copy (tests/warehouse_copies.py)."""
    return Loaded(form, request, tmp_path_factory, _build, {"proja": "A", "projb": "B"})


@pytest.fixture(params=[True, False], ids=["hpc_job label", "no label"])
def site(request, loaded, tmp_path):
    """(a copy of the day loaded with or without the label, the label, the folder of its files)."""
    from ops_warehouse.warehouse import open_warehouse

    cfg, folder, _ = loaded.get(request.param)
    wh = open_warehouse(copy_of(cfg, tmp_path, request))
    yield wh, request.param, folder
    wh.close()


@pytest.fixture
def labelled_site(request, loaded, tmp_path):
    """A copy of the site with dcgm-exporter's hpc_job label: the only form whose rows carry a run's own energy."""
    from ops_warehouse.warehouse import open_warehouse

    cfg, _, _ = loaded.get(True)
    wh = open_warehouse(copy_of(cfg, tmp_path, request))
    yield wh
    wh.close()


def _build(wh, folder, labelled: bool):
    write_sacct(folder / "sacct.psv", JOBS)
    (folder / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                          "n1,h100,8,gpu,r1,2025-01-01\n")
    assert load_sacct(wh, folder / "sacct.psv").quarantined == 0
    load_capacity(wh, inventory=folder / "inventory.csv", cluster="t2")
    _telemetry(folder / "telemetry", labelled)
    load_parquet_dir(wh, folder, DAY, DAY, cluster="t2")
    refresh_capacity(wh, "t2", *OCT)


def _duckdb_own_j(root) -> dict[str, float]:
    """Per job: its GPUs' energy counters at its end less at its start (J), on the GPUs its hpc_job label
    names inside the run: what they drew in [start, end)."""
    con = duckdb.connect()
    runs = pl.DataFrame([(str(j), node, s, e) for j, _, _, node, _, s, e, _ in JOBS],
                        schema=["job", "node", "s", "e"], orient="row")
    con.register("runs", runs)
    rows = con.execute(f"""
        WITH d AS (SELECT *, strftime(timestamp, '%H:%M') AS hm FROM read_parquet('{root}/dcgm/{DAY}.parquet')),
        gpus AS (SELECT DISTINCT r.job, d.Hostname, d.gpu, r.s, r.e FROM d JOIN runs AS r
                 ON d.hpc_job = r.job AND d.Hostname = r.node AND d.hm >= r.s AND d.hm < r.e)
        SELECT g.job, sum(e1.DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION - e0.DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION) / 1000
        FROM gpus AS g
        JOIN d AS e0 ON e0.Hostname = g.Hostname AND e0.gpu = g.gpu AND e0.hm = g.s
        JOIN d AS e1 ON e1.Hostname = g.Hostname AND e1.gpu = g.gpu AND e1.hm = g.e
        GROUP BY g.job ORDER BY g.job""").fetchall()
    return dict(rows)


def test_a_runs_gpu_energy_on_a_shared_node_is_its_own_gpus(site):
    wh, labelled, folder = site
    if labelled:
        assert _duckdb_own_j(folder / "telemetry") == pytest.approx(OWN_J)
        want = LABELLED_KWH
        assert want == pytest.approx({"3001": 4.804, "3002": 0.804})
    else:  # sacct does not say which GPUs each run held: the node's energy shared by GPU time
        want = {"3001": NODE_SHARE_KWH, "3002": NODE_SHARE_KWH}
    eff = {r["job_id"]: r["gpu_energy_kwh"] for r in run_mart(wh, "job_efficiency", cluster="t2", window=OCT).to_dicts()}
    energy = {r["job_id"]: (r["gpu_kwh"], r["gpu_counter_kwh"], r["gpu_energy_source"])
              for r in run_mart(wh, "job_energy", cluster="t2", window=OCT).to_dicts()}
    assert eff == pytest.approx(want)
    assert energy == {j: (pytest.approx(v), pytest.approx(v), "counters") for j, v in want.items()}
    # the projects' figures follow the runs' (efficiency and energy: law same_name_same_value)
    eff_p = {r["project_key"]: r["gpu_energy_kwh"] for r in run_mart(wh, "efficiency", cluster="t2", window=OCT).to_dicts()}
    en_p = {r["project_key"]: r["gpu_kwh"] for r in run_mart(wh, "energy", cluster="t2", window=OCT).to_dicts()}
    by_project = {"": want["3001"] + want["3002"], "A": want["3001"], "B": want["3002"]}
    assert eff_p == pytest.approx(by_project) and en_p == pytest.approx(by_project)
    laws = run_checks(wh, cluster="t2", window=OCT, names=["run_energy_within_node", "same_name_same_value"])
    assert [law.status for law in laws] == ["holds", "holds"], [law.rows.to_dicts() for law in laws]


def test_a_hand_made_energy_row_breaks_the_law(labelled_site):
    wh = labelled_site
    # 3001's 10:00 row given a megajoule its GPUs did not draw: more than the node-hour drew
    wh.command("INSERT INTO run_sample_hour SELECT * REPLACE (gpu_energy_j + 1e6 AS gpu_energy_j, "
               "now64(3) + 1 AS refreshed_at) FROM run_sample_hour FINAL WHERE cluster = 't2' AND job_id = '3001' "
               "AND hour = '2026-10-05 10:00:00'")
    [law] = run_checks(wh, cluster="t2", window=OCT, names=["run_energy_within_node"])
    assert law.status == "broken"
    rows = law.rows.to_dicts()
    [over] = [r for r in rows if r["figure"].startswith("Σ labelled runs")]
    assert over["key"] == "n1 2026-10-05 10:00", rows
    # the node-hour drew the runs' own and the idle step read at 10:00, no run's: a megajoule over, less that
    assert over["off_by"] == pytest.approx((1e6 - IDLE_STEP_J) / 3.6e6, rel=1e-9)  # kWh


def test_a_refresh_ending_inside_the_runs_gives_the_same_energy(site):
    """A night's refresh whose window ends while the runs hold the node (here 10:00 .. 12:00, whose last hour
    is 11:00): the step read at 11:00 belongs to the 10:00 rows of the grain and is counted, for the rest, in
    the hour it is read in. Were it left out of 11:00's labelled energy, 11:00 would hold a 168 kJ rest (the
    runs' own step, 4 × 600 W + 4 × 100 W for 60 s) shared a second time: 3001 84 kJ over 4.804 kWh."""
    wh, labelled, _ = site
    refresh_capacity(wh, "t2", at("10:00"), at("12:00"))
    want = LABELLED_KWH if labelled else {"3001": NODE_SHARE_KWH, "3002": NODE_SHARE_KWH}
    got = {r["job_id"]: r["gpu_kwh"] for r in run_mart(wh, "job_energy", cluster="t2", window=OCT).to_dicts()}
    assert got == pytest.approx(want)
    [law] = run_checks(wh, cluster="t2", window=OCT, names=["run_energy_within_node"])
    assert law.status == "holds", law.rows.to_dicts()
