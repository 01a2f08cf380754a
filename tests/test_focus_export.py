"""`ops-report export --format focus`: the chargeback as a FOCUS 1.3 cost and usage dataset (docs/focus.md).

On the hand-built month of tests/test_monthly_scenario.py (cluster t1, October 2026, three 8-GPU H100 nodes),
whose figures are worked out by hand there and here:
  capacity 17,856 GPU-h; allocated 394 GPU-h (J0 32 on 10-01 and J1 192 on 10-05 for A, J3 2 on 10-31 for A;
  J4 40 on 10-15 and J2 64 on 10-20 for B; J5 32 on 10-09 and 32 on 10-10 for C)
  capex    17,856 GPU-h × 300,000 USD ÷ 8 GPUs ÷ (5 years × 8,766 h)      (the default [cost.h100])
  energy   the GPUs' counters (no IPMI): n1's 8 GPUs busy on 10-05, 143 steps × 300 kJ each; every other
           GPU-day with telemetry idle (10-05: 16 GPUs, 10-15 and 10-20: 24 each, 64 in all), 143 × 36 kJ
           = (8 × 143 × 300 + 64 × 143 × 36) kJ = 186.853 kWh × PUE 1.3 × 0.15 USD/kWh
  price    (capex + energy) ÷ 394 GPU-h: one GPU-hour of the month, whoever held it
so a project's day costs its GPU-hours that day × that price. The export is checked against those figures,
against the FinOps Foundation's focus-validator 1.0.0 (FOCUS 1.0's rules, in a venv of its own: it pins
pandas 2 and numpy 1.26 where the project has pandas 3 and numpy 2), and against FOCUS 1.3's own column
definitions (tests/data/focus_spec/, copied from the specification with its license).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ops_warehouse.analytics.api import Connection
from ops_warehouse.config import Config
from tests.cli_runner import cli, ops
from tests.sites import built_site
from tests.test_monthly_scenario import OCT, PROJECTS, _built_embedded

pytestmark = pytest.mark.slow  # the scenario month is loaded once (tests/sites.py), the validator's venv made once

SPEC = json.loads((Path(__file__).parent / "data" / "focus_spec" / "cost_and_usage_columns.json").read_text())
HOURS = {  # (project, day of October): GPU-hours, from the scenario's sacct lines
    ("A", 1): 32, ("A", 5): 192, ("A", 31): 2, ("B", 15): 40, ("B", 20): 64, ("C", 9): 32, ("C", 10): 32}
CAPEX_USD = 17_856 * 300_000 / 8 / (5 * 8_766)
ENERGY_KWH = (8 * 143 * 300 + 64 * 143 * 36) / 3_600
PRICE_USD_PER_GPU_H = (CAPEX_USD + ENERGY_KWH * 1.3 * 0.15) / 394

# focus-validator 1.0.0's rule set for FOCUS 1.0 checks five rules on column ids that FOCUS 1.0 renamed
# (InvoiceIssuer, Provider, Publisher and ResourceID are InvoiceIssuerName, ProviderName, PublisherName and
# ResourceId since 1.0-preview; SkuPriceId_Nullable's query reads ChargeType, ChargeCategory since
# 1.0-preview): they fail on any dataset that names the columns as FOCUS 1.0 does, so they are skipped, and
# the test checks that exactly these are.
VALIDATOR_OVERRIDES = ["InvoiceIssuer_Required", "InvoiceIssuer_IsString", "InvoiceIssuer_NotNull",
                       "Provider_Required", "Provider_IsString", "Provider_NotNull",
                       "Publisher_Required", "Publisher_IsString", "Publisher_NotNull",
                       "ResourceID_Required", "ResourceID_IsString", "ResourceID_Nullable", "SkuPriceId_Nullable"]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    site = built_site(tmp_path_factory, "monthly-scenario", _built_embedded)
    return site.open_copy(tmp_path_factory.mktemp("focus"))


def _export(warehouse: Path, out: Path, *args):
    return cli("export", "--format", "focus", "--month", "2026-10", "--out", str(out), *args,
               env={"OPS_WAREHOUSE": f"chdb://{warehouse}"})


@pytest.fixture(scope="module")
def exported(warehouse, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("focus-out")
    p = _export(warehouse, out)
    assert "t1-cluster-2026-10-focus: FOCUS 1.3, 7 rows" in p.stdout
    return out / "t1-cluster-2026-10-focus"


def test_billed_cost_per_project_and_day_is_the_hand_worked_price(exported):
    df = pl.read_parquet(exported / "focus_cost.parquet")
    got = {(r["SubAccountId"], r["ChargePeriodStart"].day): r for r in df.iter_rows(named=True)}
    assert set(got) == set(HOURS)
    assert PRICE_USD_PER_GPU_H == pytest.approx(38.8671162, rel=1e-8)  # the hand figure, for the reader
    for (project, day), gpu_h in HOURS.items():
        r = got[(project, day)]
        assert float(r["ConsumedQuantity"]) == float(r["PricingQuantity"]) == pytest.approx(gpu_h)
        assert float(r["BilledCost"]) == pytest.approx(gpu_h * PRICE_USD_PER_GPU_H, rel=1e-9), (project, day)
        # one rate, no discount, no commitment: the four costs are one figure, price × quantity
        assert r["EffectiveCost"] == r["ListCost"] == r["ContractedCost"] == r["BilledCost"]
        assert float(r["ListUnitPrice"]) == float(r["ContractedUnitPrice"]) == pytest.approx(PRICE_USD_PER_GPU_H)
        assert (r["ChargePeriodEnd"] - r["ChargePeriodStart"]).total_seconds() == 86_400
        assert (r["BillingPeriodStart"].isoformat(), r["BillingPeriodEnd"].isoformat()) == (
            "2026-10-01T00:00:00+00:00", "2026-11-01T00:00:00+00:00")
        assert (r["BillingCurrency"], r["x_GpuModel"], r["x_Cluster"], r["SubAccountName"]) == (
            "USD", "h100", "t1", project)
    # the month: Σ BilledCost = capex + energy of the month, all of it charged (every GPU model has users)
    assert float(df["BilledCost"].sum()) == pytest.approx(CAPEX_USD + ENERGY_KWH * 1.3 * 0.15, rel=1e-9)
    # what FOCUS has no column for: J1's 192 GPU-hours at 80% utilization, its GPUs' 143 steps × 300 kJ × 8
    assert got[("A", 5)]["x_BusyGpuHours"] == pytest.approx(192 * 0.8)
    assert got[("A", 5)]["x_EnergyKwh"] == pytest.approx(8 * 143 * 300 / 3_600)
    # J4 alone on n2 on 10-15, 00:00 .. 10:00, its GPUs idle: 59 steps × 36 kJ × 8 GPUs (the run holds the
    # node's idle GPUs' energy too: tests/test_monthly_scenario.py)
    assert got[("B", 15)]["x_EnergyKwh"] == pytest.approx(59 * 36 * 8 / 3_600)


def test_a_project_export_holds_its_rows_only(warehouse, tmp_path):
    p = _export(warehouse, tmp_path, "--project", "B")
    df = pl.read_parquet(tmp_path / "t1-B-2026-10-focus" / "focus_cost.parquet")
    assert "2 rows" in p.stdout and df["SubAccountId"].to_list() == ["B", "B"]
    assert float(df["BilledCost"].sum()) == pytest.approx(104 * PRICE_USD_PER_GPU_H, rel=1e-9)


def test_export_format_is_checked_in_one_line(warehouse, tmp_path):
    p = cli("export", "--format", "csv", "--out", str(tmp_path), env={"OPS_WAREHOUSE": f"chdb://{warehouse}"},
            check=False)
    assert p.returncode != 0 and "--format must be marts or focus, not 'csv'" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_parquet_and_csv_types_are_focus_types(exported):
    """FOCUS's Decimal columns are Parquet decimals, its Date/Time columns UTC timestamps; in the CSV, the
    datetimes are ISO 8601 in UTC ('Z') and the decimals the same numbers as text."""
    schema = pq.read_schema(exported / "focus_cost.parquet")
    for name, spec in SPEC["columns"].items():
        if name not in schema.names:
            continue
        t = schema.field(name).type
        if spec["data_type"] == "Decimal":
            assert pa.types.is_decimal(t), (name, t)
        elif spec["data_type"] == "Date/Time":
            assert pa.types.is_timestamp(t) and t.tz == "UTC", (name, t)
        else:  # String, JSON (serialized as a String)
            assert pa.types.is_string(t) or pa.types.is_large_string(t), (name, t)
    csv = pl.read_csv(exported / "focus_cost.csv", infer_schema=False)
    iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
    for name in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"):
        assert all(iso.match(v) for v in csv[name]), csv[name].to_list()
    assert csv.filter(pl.col("ChargePeriodStart") == "2026-10-05T00:00:00Z")["ChargePeriodEnd"].to_list() == [
        "2026-10-06T00:00:00Z"]
    parquet = pl.read_parquet(exported / "focus_cost.parquet")
    assert [float(v) for v in csv["BilledCost"]] == pytest.approx([float(v) for v in parquet["BilledCost"]], rel=1e-12)
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["focus_version"] == "1.3" and manifest["rows"] == 7 and manifest["month"] == "2026-10"


def _assert_focus_1_3(df: pl.DataFrame):
    """Every column that is not a custom one (x_) is a column of FOCUS 1.3's cost and usage dataset, with the
    specification's data type, nullability and allowed values; the 1.3 mandatory columns are all there; the
    custom columns come after the FOCUS ones (FOCUS's column ordering)."""
    focus = [c for c in df.columns if not c.startswith("x_")]
    assert [c for c in focus if c not in SPEC["columns"]] == []
    assert df.columns == focus + [c for c in df.columns if c.startswith("x_")]
    mandatory = {c for c, s in SPEC["columns"].items() if s["feature_level"] == "Mandatory"}
    assert mandatory - set(df.columns) == set()
    assert {"ServiceProviderName", "HostProviderName"} <= mandatory  # 1.3's, beside the deprecated ProviderName
    for name in focus:
        spec, values = SPEC["columns"][name], df[name]
        kind = {"Decimal": pl.Decimal, "Date/Time": pl.Datetime, "String": pl.String, "JSON": pl.String}
        assert isinstance(values.dtype, kind[spec["data_type"]]) or values.dtype == kind[spec["data_type"]], name
        if spec["data_type"] == "Date/Time":
            assert values.dtype.time_zone == "UTC", name
        if not spec["allows_nulls"]:
            assert values.null_count() == 0, name
        if spec["allowed_values"]:
            assert set(values.drop_nulls().to_list()) <= set(spec["allowed_values"]), name
        if spec["data_type"] == "JSON":
            assert all(isinstance(json.loads(v), dict) for v in values.drop_nulls()), name
    # the site's charges are usage, not a correction, priced at its one rate
    assert set(df["ChargeCategory"]) == {"Usage"} and df["ChargeClass"].null_count() == df.height
    assert set(df["ChargeFrequency"]) == {"Usage-Based"} and set(df["PricingCategory"]) == {"Standard"}


def test_columns_are_focus_1_3_columns_as_the_specification_defines_them(exported):
    _assert_focus_1_3(pl.read_parquet(exported / "focus_cost.parquet"))


@pytest.fixture(scope="module")
def focus_validator(tmp_path_factory) -> Path:
    """focus-validator 1.0.0 in a venv of its own, made once (~/.cache/ops-warehouse, or
    $OPS_FOCUS_VALIDATOR_VENV): its pins (pandas ^2, numpy ^1.26) cannot sit beside the project's pandas 3 and
    numpy 2; multimethod < 2 because its pandera 0.17 imports multimethod.overload, which 2.0 removed."""
    where = Path(os.environ.get("OPS_FOCUS_VALIDATOR_VENV",
                                Path.home() / ".cache" / "ops-warehouse" / "focus-validator-1.0.0"))
    where.parent.mkdir(parents=True, exist_ok=True)
    exe = where / "bin" / "focus-validator"
    with open(f"{where}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker making it: wait for it
        if not exe.exists():
            shutil.rmtree(where, ignore_errors=True)
            made = subprocess.run([sys.executable, "-m", "venv", str(where)], capture_output=True, text=True)
            pip = subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q",
                                  "focus-validator==1.0.0", "multimethod<2"],
                                 capture_output=True, text=True, timeout=900) if made.returncode == 0 else made
            if pip.returncode != 0:
                shutil.rmtree(where, ignore_errors=True)
                why = f"focus-validator 1.0.0 could not be installed: {(pip.stderr or pip.stdout).strip()[-300:]}"
                pytest.fail(why) if os.environ.get("CI") else pytest.skip(why)
    return exe


def _validate(exe: Path, csv: Path, tmp_path: Path) -> ET.Element:
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text("overrides:\n" + "".join(f"  - {o}\n" for o in VALIDATOR_OVERRIDES))
    report = tmp_path / "report.xml"
    # it reads its currency codes from focus_validator/utils/currency_codes.csv relative to the working folder
    site_packages = next((exe.parent.parent / "lib").glob("python3*/site-packages"))
    subprocess.run([str(exe), "--data-file", str(csv), "--validate-version", "1.0", "--override-file",
                    str(overrides), "--output-type", "unittest", "--output-destination", str(report)],
                   cwd=site_packages, check=True, capture_output=True, text=True, timeout=300)
    return ET.parse(report).getroot()


def _failed(root: ET.Element) -> set[str]:
    return {suite.get("name").split("-")[0] for suite in root.iter("testsuite") if suite.find(".//failure") is not None}


def test_export_passes_focus_validator_1_0(exported, focus_validator, tmp_path):
    root = _validate(focus_validator, exported / "focus_cost.csv", tmp_path)
    assert _failed(root) == set()
    assert int(root.get("failures")) == 0 and int(root.get("errors")) == 0
    assert int(root.get("skipped")) == len(VALIDATOR_OVERRIDES) and int(root.get("tests")) >= 120
    # the validator does check this file: a copy with a null BilledCost and an unknown ChargeFrequency fails
    bad = pl.read_csv(exported / "focus_cost.csv", infer_schema=False).with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.col("BilledCost")).alias("BilledCost"),
        pl.lit("Daily").alias("ChargeFrequency"))
    bad.write_csv(tmp_path / "bad.csv")
    failed = _failed(_validate(focus_validator, tmp_path / "bad.csv", tmp_path))
    assert {"BilledCost_NotNull", "ChargeFrequency_Enum"} <= failed


def test_the_law_focus_matches_chargeback_holds_and_can_break(warehouse, monkeypatch):
    """sql/checks/focus_matches_chargeback.sql: Σ BilledCost per project and model = chargeback's cost. It
    holds on the month, and breaks when the FOCUS rows are priced another way (1% more here)."""
    from ops_warehouse import sqlfiles

    cfg = Config(dsn=f"chdb://{warehouse}")
    cfg.projects = PROJECTS
    wh = Connection(cfg)
    [o] = wh.check("2026-10", cluster="t1", laws=["focus_matches_chargeback"])
    assert o.status == "holds", o.rows
    real = sqlfiles.sql_text

    def dearer(relpath):
        text = real(relpath)
        return text.replace("a.gpu_h * p.per_gpu_h AS cost", "a.gpu_h * p.per_gpu_h * 1.01 AS cost") \
            if relpath == "marts/focus_cost.sql" else text

    monkeypatch.setattr(sqlfiles, "sql_text", dearer)
    [o] = wh.check("2026-10", cluster="t1", laws=["focus_matches_chargeback"])
    assert o.status == "broken"
    rows = {r["key"]: r for r in o.rows.iter_rows(named=True) if r["figure"] == "Σ BilledCost = cost"}
    assert set(rows) == {"A / h100", "B / h100", "C / h100"}
    assert rows["B / h100"]["bound"] == pytest.approx(104 * PRICE_USD_PER_GPU_H, rel=1e-9)
    assert rows["B / h100"]["off_by"] == pytest.approx(0.01 * 104 * PRICE_USD_PER_GPU_H, rel=1e-6)


RUN_DAYS = {  # (job id, day of October): (project, GPU-hours), from the scenario's sacct lines: J5 (1005) runs
    # 10-09 20:00 .. 10-10 04:00, four hours on each day; J0 (1000) and J3 (1003) only their October hours
    (1000, 1): ("A", 32), (1001, 5): ("A", 192), (1003, 31): ("A", 2), (1004, 15): ("B", 40),
    (1002, 20): ("B", 64), (1005, 9): ("C", 32), (1005, 10): ("C", 32)}


def _allocation_marts(warehouse) -> tuple[dict, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    from ops_warehouse.analytics import marts
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{warehouse}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    try:
        with marts.each_mart_once(wh) as state:
            got = [marts.run_mart(wh, n, cluster="t1", window=OCT)
                   for n in ("run_allocation_daily", "chargeback", "focus_cost")]
            return dict(state.evaluations), *got
    finally:
        wh.close()


def test_chargeback_and_focus_read_one_allocation(warehouse, monkeypatch):
    """The allocation both charge is defined once (sql/marts/run_allocation_daily.sql): its rows are the
    scenario's runs day by day as the sacct lines give them, one block (the report, the export, the laws)
    evaluates it once for chargeback and focus_cost together, and a change to it moves both marts alike.
    Before round 4 each mart built the allocation with a join of its own: no such mart to evaluate or change."""
    from ops_warehouse import sqlfiles

    evaluations, alloc, charge, focus = _allocation_marts(warehouse)
    assert evaluations["run_allocation_daily"] == 1
    rows = {(int(r["job_id"]), r["day"].day): r for r in alloc.iter_rows(named=True)}  # job ids are strings
    assert {k: (r["project"], r["gpu_s"] / 3_600) for k, r in rows.items()} == RUN_DAYS
    assert {r["gpu_model"] for r in rows.values()} == {"h100"}
    # J1's 192 GPU-hours at 80% utilization, its GPUs' 143 steps × 300 kJ × 8; J4's 59 idle steps × 36 kJ × 8
    assert rows[(1001, 5)]["busy_gpu_s"] == pytest.approx(192 * 0.8 * 3_600)
    assert rows[(1001, 5)]["energy_j"] == pytest.approx(8 * 143 * 300e3)
    assert rows[(1004, 15)]["energy_j"] == pytest.approx(59 * 36 * 8e3)
    # chargeback counts a run once over its days (J5 twice in the rows, once in C's runs)
    assert {r["project"]: (r["runs"], r["allocated_gpu_h"]) for r in charge.iter_rows(named=True)} == {
        "A": (3, 226), "B": (2, 104), "C": (1, 64)}
    assert {(r["SubAccountId"], r["ChargePeriodStart"].day): float(r["ConsumedQuantity"])
            for r in focus.iter_rows(named=True)} == HOURS

    real = sqlfiles.sql_text

    def doubled(relpath):  # every run's GPU time counted twice, in the allocation's one file
        text = real(relpath)
        return text.replace(") AS gpu_s,", ") * 2 AS gpu_s,") if relpath == "marts/run_allocation_daily.sql" else text

    monkeypatch.setattr(sqlfiles, "sql_text", doubled)
    _, _, charge, focus = _allocation_marts(warehouse)
    assert {r["project"]: r["allocated_gpu_h"] for r in charge.iter_rows(named=True)} == {"A": 452, "B": 208, "C": 128}
    assert {(r["SubAccountId"], r["ChargePeriodStart"].day): float(r["ConsumedQuantity"])
            for r in focus.iter_rows(named=True)} == {k: 2 * v for k, v in HOURS.items()}


def test_demo_month_focus_export_passes_the_validator_and_the_1_3_columns(demo_runs, focus_validator, tmp_path):
    """The demo's month (`ops-report demo` as the README runs it: three days, two GPU models with jobs): the
    export passes focus-validator and the 1.3 column check, and `ops-report check` finds the law holding."""
    base, _ = demo_runs
    env = {"OPS_WAREHOUSE": f"chdb://{base / 'a' / 'warehouse'}", "OPS_CONFIG": ""}
    ops("export", "--format", "focus", "--month", "2026-10", "--out", str(tmp_path / "out"), env=env)
    folder = tmp_path / "out" / "ai1-cluster-2026-10-focus"
    df = pl.read_parquet(folder / "focus_cost.parquet")
    assert df.height > 0 and df["x_GpuModel"].n_unique() >= 2 and df["SubAccountId"].n_unique() > 1
    _assert_focus_1_3(df)
    assert _failed(_validate(focus_validator, folder / "focus_cost.csv", tmp_path)) == set()
    p = ops("check", "--month", "2026-10", "--law", "focus_matches_chargeback", env=env)
    assert "holds" in p.stdout
