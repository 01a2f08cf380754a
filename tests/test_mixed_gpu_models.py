"""Nodes with GPUs of several models (issue 49, item 2): `Gres=gpu:h100:2,gpu:h200:4` on one node. The whole
inventory was refused ("the inventory holds one GPU model a node"), so a site with one such node could not
load its capacity at all; now the inventory and the capacity grain are keyed by (node, GPU model).

Real inventories, their capacity by model counted by hand from their raw lines:
  - slurm_exporter's `scontrol show nodes -o` of Slurm 24.11.7 and 26.05.2 (tests/data/slurm_exporter/):
    na1-na10 `Gres=(null)`; nb1-nb4 `gpu:model_a:4`; nb5-nb8 `gpu:model_b:4`; nb9, nb10
    `gpu:model_a:2,gpu:model_b:2`: model_a 4 × 4 + 2 × 2 = 20 GPUs, model_b 20, on 20 nodes
  - Slurm-web's slurmrestd 24.11 nodes (both data parsers): cn1-cn4 no gres, ia1 and ia2
    `gpu:h100:2,gpu:h200:4`: h100 2 × 2 = 4, h200 4 × 2 = 8
  and a day of each (no jobs: all free) is those GPUs × 24 GPU-hours by model (model_a 480, h100 96, ...).

A hand-built day (2026-10-05) on node m1 (`gpu:h100:2,gpu:h200:4`), no telemetry, nothing down:
  4101 typed   gres/gpu:h100=2   10:00-12:00  h100 2 × 2 = 4 GPU-h
  4102 typed   gres/gpu:h200=4   10:00-11:00  h200 4 × 1 = 4 GPU-h
  4103 untyped gres/gpu=3        13:00-15:00  6 GPU-h, in reservation r1 (m1, 13:00-15:00: 6 × 2 = 12 GPU-h
                                              reserved, 6 used), split by the node's GPUs (docs/statistics.md):
                                              h100 6 × 2/6 = 2, h200 6 × 4/6 = 4
  allocated: h100 4 + 2 = 6, h200 4 + 4 = 8 GPU-h; capacity to the history's as-of time 15:00:
  h100 2 × 15 = 30, h200 4 × 15 = 60 GPU-h; utilization h100 6/30 = 0.2, h200 8/60 = 0.1333.
  capex: a GPU-hour of a model on m1 is its model's node price shared by m1's 6 GPUs over 5 × 8,766 h:
  h100 30 × 300,000 / 6 / 43,830 = 34.2231, h200 60 × 350,000 / 6 / 43,830 = 79.8540.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.capacity_sources import load_capacity, read_inventory
from ops_warehouse.etl.grains import refresh_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from tests.test_hung_and_idle_jobs import DAY, HEAD, UTC, at
from tests.warehouse_copies import Loaded

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("path, by_model, nodes", [
    ("slurm_exporter/24.11.7/scontrol_nodes.txt", {"": 0, "model_a": 20, "model_b": 20}, 20),
    ("slurm_exporter/26.05.2/scontrol_nodes.txt", {"": 0, "model_a": 20, "model_b": 20}, 20),
    ("slurmrestd/24.11/0.0.41/slurm-nodes.json", {"": 0, "h100": 4, "h200": 8}, 6),
    ("slurmrestd/24.11/0.0.42/slurm-nodes.json", {"": 0, "h100": 4, "h200": 8}, 6),
])
def test_real_inventories_with_two_models_on_a_node_load_by_model(path, by_model, nodes, wh):
    df = read_inventory(DATA / path, "real")
    assert load_capacity(wh, inventory=DATA / path, cluster="real") == {"node_inventory": df.height}
    got = dict(wh.query_rows("SELECT gpu_model, sum(gpus) FROM node_inventory FINAL GROUP BY gpu_model"))
    assert got == by_model
    assert wh.query_rows("SELECT uniqExact(node) FROM node_inventory FINAL") == [(nodes,)]
    mixed = "nb9" if "slurm_exporter" in path else "ia1"
    rows = wh.query_rows("SELECT gpu_model, gpus FROM node_inventory FINAL WHERE node = {n:String} "
                         "ORDER BY gpu_model", {"n": mixed})
    assert rows == ([("model_a", 2), ("model_b", 2)] if mixed == "nb9" else [("h100", 2), ("h200", 4)])
    # loaded again: nothing doubled
    load_capacity(wh, inventory=DATA / path, cluster="real")
    assert dict(wh.query_rows("SELECT gpu_model, sum(gpus) FROM node_inventory FINAL GROUP BY gpu_model")) == by_model
    # a day's capacity by model (no job history: nothing cut, all free): each model's GPUs × 24 h
    day = (datetime(2026, 10, 5, tzinfo=UTC), datetime(2026, 10, 6, tzinfo=UTC))
    refresh_capacity(wh, "real", *day)
    util = {r["key"]: (r["capacity_gpu_h"], r["free_gpu_h"])
            for r in run_mart(wh, "utilization", cluster="real", window=day).to_dicts() if r["level"] == "gpu_model"}
    assert util == {m: (24.0 * n, 24.0 * n) for m, n in by_model.items()}


def test_a_node_loaded_again_with_other_models_keeps_only_the_new_ones(tmp_path, wh):
    """m1 swapped from 2 h100 + 4 h200 to 8 b200: its old models' rows go, not counted beside the new one."""
    p = tmp_path / "nodes.txt"
    p.write_text("NodeName=m1 CPUTot=64 Gres=gpu:h100:2,gpu:h200:4 State=IDLE Partitions=gpu\n")
    load_capacity(wh, inventory=p, cluster="t3")
    p.write_text("NodeName=m1 CPUTot=64 Gres=gpu:b200:8 State=IDLE Partitions=gpu\n")
    load_capacity(wh, inventory=p, cluster="t3")
    assert wh.query_rows("SELECT gpu_model, gpus FROM node_inventory FINAL") == [("b200", 8)]


def test_a_site_csv_lists_a_mixed_node_once_per_model(tmp_path, wh):
    p = tmp_path / "inventory.csv"
    p.write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                 "m1,h100,2,gpu,r1,2025-01-01\nm1,h200,4,gpu,r1,2025-01-01\nn2,h100,8,gpu,r1,2025-01-01\n")
    assert load_capacity(wh, inventory=p, cluster="t3") == {"node_inventory": 3}
    assert wh.query_rows("SELECT node, gpu_model, gpus FROM node_inventory FINAL ORDER BY node, gpu_model") == [
        ("m1", "h100", 2), ("m1", "h200", 4), ("n2", "h100", 8)]


JOBS = [(4101, "gres/gpu:h100=2,gres/gpu=2", 2, "10:00", "12:00", ""),
        (4102, "gres/gpu:h200=4,gres/gpu=4", 4, "10:00", "11:00", ""),
        (4103, "gres/gpu=3", 3, "13:00", "15:00", "r1")]


def _mixed_day(wh, tmp_path):
    lines = [HEAD]
    for jid, gres, n, s, e, resv in JOBS:
        s, e = at(s), at(e)
        submit = (s - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
        tres = f"billing={8 * n},cpu={8 * n},{gres},mem=100G,node=1"
        lines.append(f"{jid}|{jid}|t3|gpu|normal|proja|proja|1|alice|1|{submit}|{submit}|"
                     f"{s:%Y-%m-%dT%H:%M:%S}|{e:%Y-%m-%dT%H:%M:%S}|{int((e - s).total_seconds())}|2880|0:0|"
                     f"COMPLETED|1|{8 * n}|{8 * n}|100G|{tres}|{tres}|m1|{resv}|job{jid}")
    (tmp_path / "sacct.psv").write_text("\n".join(lines) + "\n")
    (tmp_path / "nodes.txt").write_text(
        "NodeName=m1 Arch=x86_64 CPUTot=64 AvailableFeatures=rack01 Gres=gpu:h100:2,gpu:h200:4 State=MIXED "
        "Partitions=gpu\n")
    (tmp_path / "resv.txt").write_text(
        "ReservationName=r1 StartTime=2026-10-05T13:00:00 EndTime=2026-10-05T15:00:00 Duration=02:00:00 "
        "Nodes=m1 NodeCnt=1 CoreCnt=64 Features=(null) PartitionName=gpu Flags=SPEC_NODES TRES=cpu=64 "
        "Users=(null) Groups=(null) Accounts=proja Licenses=(null) State=ACTIVE BurstBuffer=(null)\n")
    assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
    load_capacity(wh, inventory=tmp_path / "nodes.txt", reservations=tmp_path / "resv.txt", cluster="t3")
    day = (datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC), datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC)
           + timedelta(days=1))
    refresh_capacity(wh, "t3", *day)
    return day


@pytest.fixture(scope="module")
def mixed_loaded(request, tmp_path_factory):
    """The mixed node's day loaded once for the module (its loads were most of each test's time)."""
    return Loaded("embedded", request, tmp_path_factory, lambda wh, folder, _: _mixed_day(wh, folder))


@pytest.fixture
def mixed(mixed_loaded, tmp_path, request):
    """(a copy of the mixed node's day of the test's own, the day's window): a test may write to it."""
    with mixed_loaded.opened_copy(tmp_path, request) as wh:
        yield wh, mixed_loaded.get()[2]


@pytest.mark.slow  # 6 s on 2 vCPUs
def test_typed_and_untyped_jobs_on_a_mixed_node_count_under_their_models(mixed):
    from ops_warehouse.analytics.checks import run_checks

    wh, day = mixed
    util = {r["key"]: r for r in run_mart(wh, "utilization", cluster="t3", window=day).to_dicts()
            if r["level"] == "gpu_model"}
    assert {k: (round(r["capacity_gpu_h"], 6), round(r["allocated_gpu_h"], 6), round(r["utilization"], 6))
            for k, r in util.items()} == {"h100": (30.0, 6.0, 0.2), "h200": (60.0, 8.0, round(8 / 60, 6))}
    # the untyped run's 6 GPU-hours, split 2 : 4 by the node's GPUs, in its hours 13 and 14
    split = wh.query_rows("SELECT gpu_model, sum(allocated_gpu_s) / 3600 FROM capacity_node_hour FINAL "
                          "WHERE cluster = 't3' AND hour >= '2026-10-05 13:00:00' GROUP BY gpu_model ORDER BY gpu_model")
    assert [(m, round(h, 6)) for m, h in split] == [("h100", 2.0), ("h200", 4.0)]
    cost = {r["model"]: r for r in run_mart(wh, "cost", cluster="t3", window=day).to_dicts()}
    assert cost["h100"]["capex"] == pytest.approx(34.2231, abs=1e-4)
    assert cost["h200"]["capex"] == pytest.approx(79.8540, abs=1e-4)
    assert cost["all"]["allocated_gpu_h"] == pytest.approx(14.0)
    # chargeback: proja's runs by model as the capacity grain splits them
    charge = {r["gpu_model"]: round(r["allocated_gpu_h"], 6)
              for r in run_mart(wh, "chargeback", cluster="t3", window=day).to_dicts()}
    assert charge == {"h100": 6.0, "h200": 8.0}
    # the cluster's laws (the project ones need a project: no account maps to one here)
    cluster_laws = ["capacity_order", "capacity_split", "cluster_breakdowns_sum_to_totals", "cost_per_hour_order",
                    "parts_within_wholes", "same_name_same_value", "size_classes_sum_to_totals"]
    outs = run_checks(wh, cluster="t3", window=day, project="", names=cluster_laws)
    assert {o.law.name: o.status for o in outs} == dict.fromkeys(cluster_laws, "holds"), [
        (o.law.name, o.error, o.rows.to_dicts()[:4]) for o in outs if o.status != "holds"]
    # r1 held m1's 6 GPUs 13:00-15:00: 12 GPU-h reserved, 4103's 6 used (before, one model's row stood for
    # the node-hour: 2 h100 × 2 h = 4 reserved, and the used time capped at it)
    resv = run_mart(wh, "reservations", cluster="t3", window=day).to_dicts()
    assert [(r["reservation"], round(r["reserved_gpu_h"], 6), round(r["used_gpu_h"], 6)) for r in resv] == [
        ("r1", 12.0, 6.0)]
    # the run grain keeps one row per run and node-hour: the job-hours are the runs' 4 + 4 + 6 = 14 GPU-h
    assert wh.query_rows("SELECT round(sum(gpu_s) / 3600, 6), count() FROM run_node_hour FINAL "
                         "WHERE cluster = 't3'") == [(14.0, 5)]


@pytest.mark.slow  # 5 s on 2 vCPUs
def test_a_law_broken_on_one_model_of_a_mixed_node_names_the_model(mixed):
    """busy ≤ allocated per (node, model): 2 busy GPU-hours written on m1's h200 row of 11:00, where nothing was
    allocated to h200 (4102 ended at 11:00), break it on that row, which the law's key names."""
    from ops_warehouse.analytics.checks import run_checks

    wh, day = mixed
    wh.command("INSERT INTO capacity_node_hour SELECT * REPLACE (7200. AS busy_gpu_s, 7200. AS allocated_observed_gpu_s, "
               "now64(3) + 1 AS refreshed_at) FROM capacity_node_hour FINAL "
               "WHERE node = 'm1' AND gpu_model = 'h200' AND hour = '2026-10-05 11:00:00'")
    (out,) = run_checks(wh, cluster="t3", window=day, project="", names=["capacity_order"])
    assert out.status == "broken"
    rows = out.rows.filter(pl.col("section") == "capacity_node_hour").to_dicts()
    assert {(r["key"], r["figure"], r["value"], r["bound"]) for r in rows} == {
        ("m1 h200 2026-10-05 11:00", "allocated observed ≤ allocated", 2.0, 0.0),
        ("m1 h200 2026-10-05 11:00", "busy ≤ allocated", 2.0, 0.0)}
