"""Telemetry from exporter Parquet files (the generator's output) into the warehouse, and `ops-report
telemetry`, checked against the same files read independently with polars."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timezone

import polars as pl
import pytest

from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.generate import generate
from ops_warehouse.analytics.telemetry import telemetry
from tests.conftest import rows, table_checksums
from tests.warehouse_copies import Loaded, copy_of

# the loads and reports here run on the embedded warehouse and on a ClickHouse server (tests/conftest.py)
pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

STEP_S = 600


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    generate(out, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=2, jobs_per_day=150, nodes=12, seed=3,
             metrics_step_s=STEP_S)
    return out


@pytest.fixture(scope="module")
def two_days(site, form, request, tmp_path_factory):
    """The site's two days loaded once per form (tests/warehouse_copies.py): (its Config, its folder, the
    load's counts). The tests that load the window again on top of it each write to a copy."""
    def build(wh, folder, _):
        return load_parquet_dir(wh, site, date(2026, 10, 1), date(2026, 10, 2), cluster="ai1")

    return Loaded(form, request, tmp_path_factory, build).get()


@pytest.fixture
def two_days_read(two_days):
    """The two days' warehouse itself, for a test that only reads it, and the load's counts."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    w = open_warehouse(two_days[0])
    yield w, two_days[2]
    w.close()
    close_embedded()


@pytest.fixture
def two_days_copy(two_days, tmp_path, request):
    """A warehouse of the test's own holding the two days as one load_parquet_dir of them left them."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    w = open_warehouse(copy_of(two_days[0], tmp_path, request))
    yield w
    w.close()
    close_embedded()


def _counter_steps(df: pl.DataFrame, keys: list[str], col: str) -> pl.Series:
    """Independent: per series, positive differences, a drop counting the new value (restart from 0)."""
    d = df.sort([*keys, "timestamp"]).with_columns(prev=pl.col(col).shift(1).over(keys))
    return d.select(pl.when(pl.col(col) >= pl.col("prev")).then(pl.col(col) - pl.col("prev"))
                    .when(pl.col("prev").is_not_null()).then(pl.col(col))).to_series().drop_nulls()


def test_counter_steps_handle_resets(wh):
    # the SQL rule every load applies (sql/functions/counter_step.sql): a drop is a restart from zero
    got = rows(wh, "SELECT counter_step(v, lagInFrame(toNullable(v)) OVER (ORDER BY i ROWS BETWEEN 1 PRECEDING "
                   "AND CURRENT ROW)) FROM (SELECT arrayJoin([(1, 100.), (2, 150.), (3, 230.), (4, 20.), (5, 50.), "
                   "(6, 50.)]) AS t, t.1 AS i, t.2 AS v) ORDER BY i")
    assert [r[0] for r in got] == [None, 50.0, 80.0, 20.0, 30.0, 0.0]
    assert rows(wh, "SELECT slurm_node('gpu-017.cluster.example.org:9400'), slurm_node('h100-001')") == [
        ("gpu-017", "h100-001")]


def test_loaded_telemetry_matches_the_files(site, two_days_read):
    wh, c = two_days_read  # the load's counts of the two days
    dcgm = pl.concat([pl.read_parquet(p) for p in sorted((site / "telemetry" / "dcgm").glob("*.parquet"))])
    assert c["gpu_rows"] == dcgm.height
    got = telemetry(wh, date(2026, 10, 1), date(2026, 10, 2), "cluster").row(0, named=True)
    assert got["cluster"] == "ai1"
    assert got["gpu_util_mean"] == pytest.approx(dcgm["DCGM_FI_DEV_GPU_UTIL"].mean(), rel=1e-6)
    assert got["tensor_active_mean"] == pytest.approx(dcgm["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"].mean(), rel=1e-5)
    assert got["power_w_max"] == pytest.approx(dcgm["DCGM_FI_DEV_POWER_USAGE"].max(), rel=1e-6)
    assert got["temp_c_max"] == dcgm["DCGM_FI_DEV_GPU_TEMP"].max()
    energy_mj = _counter_steps(dcgm, ["Hostname", "gpu"], "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION").sum()
    assert got["energy_kwh"] == pytest.approx(energy_mj / 1000 / 3.6e6, rel=1e-9)
    throttled = dcgm.filter((pl.col("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS") & 0xEC) != 0).height
    assert throttled > 0 and got["throttled_hours"] == pytest.approx(throttled * STEP_S / 3600)
    xid = dcgm.sort("Hostname", "gpu", "timestamp").with_columns(
        prev=pl.col("DCGM_FI_DEV_XID_ERRORS").shift(1).over("Hostname", "gpu"))
    n_xid = xid.filter((pl.col("DCGM_FI_DEV_XID_ERRORS") > 0)
                       & (pl.col("prev").is_null() | (pl.col("prev") != pl.col("DCGM_FI_DEV_XID_ERRORS")))).height
    assert got["xid_events"] == n_xid
    nic = pl.concat([pl.read_parquet(p) for p in sorted((site / "telemetry" / "nic").glob("*.parquet"))])
    rx = _counter_steps(nic, ["instance", "device"], "node_infiniband_port_data_received_bytes_total").sum()
    assert got["nic_rx_bytes"] == pytest.approx(rx, rel=1e-9)
    lustre = pl.concat([pl.read_parquet(p) for p in sorted((site / "telemetry" / "lustre").glob("*.parquet"))])
    wr = _counter_steps(lustre, ["instance"], "lustre_write_bytes_total").sum()
    assert got["storage_write_bytes"] == pytest.approx(wr, rel=1e-9)


def test_per_gpu_and_model_keys_and_null_for_missing(site, wh):
    load_parquet_dir(wh, site, date(2026, 10, 1), date(2026, 10, 1), cluster="ai1")
    per_gpu = telemetry(wh, date(2026, 10, 1), date(2026, 10, 1), "gpu")
    assert per_gpu.get_column("gpu")[0] == "h100-001:0"
    assert per_gpu.get_column("nic_rx_bytes").null_count() == per_gpu.height  # node-level: null per GPU
    models = telemetry(wh, date(2026, 10, 1), date(2026, 10, 1), "gpu_model").get_column("gpu_model").to_list()
    assert models == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]  # the B200 node is not in service yet


def test_reloading_a_window_is_idempotent(site, two_days_copy):
    wh = two_days_copy  # the window loaded once
    once = {t: rows(wh, f"SELECT count(), sum(cityHash64(*)) FROM {t} FINAL")[0]
            for t in ("gpu_sample", "node_sample", "xid_event")}
    load_parquet_dir(wh, site, date(2026, 10, 2), date(2026, 10, 2), cluster="ai1")
    load_parquet_dir(wh, site, date(2026, 10, 1), date(2026, 10, 2), cluster="ai1")
    again = {t: rows(wh, f"SELECT count(), sum(cityHash64(*)) FROM {t} FINAL")[0]
             for t in ("gpu_sample", "node_sample", "xid_event")}
    assert once == again
    assert table_checksums(wh)["slurm_job_run"][0] == 0


def test_hourly_rollups_add_up_to_the_fine_rows(site, two_days_copy):
    wh = two_days_copy  # the window loaded once
    fine = rows(wh, "SELECT count(), sum(energy_j), sum(if(bitAnd(ifNull(throttle_reasons, 0), 0xEC) != 0, step_s, 0)),"
                    " max(power_w) FROM gpu_sample FINAL")[0]
    hourly = rows(wh, "SELECT sum(samples), sum(energy_j), sum(throttled_s), max(power_w_max) FROM gpu_hour FINAL")[0]
    assert hourly[0] == fine[0] and hourly[2] == fine[2] and hourly[3] == fine[3]
    assert hourly[1] == pytest.approx(fine[1], rel=1e-12)
    # 12 nodes' GPUs in service (11 nodes x 8) x 48 hours, whatever the reloads
    load_parquet_dir(wh, site, date(2026, 10, 2), date(2026, 10, 2), cluster="ai1")
    assert rows(wh, "SELECT count() FROM gpu_hour FINAL") == [(11 * 8 * 48,)]
    n_fine = rows(wh, "SELECT sum(toUInt64(arraySum(nic_rx_bytes))) FROM node_sample FINAL")[0][0]
    assert rows(wh, "SELECT sum(nic_rx_bytes) FROM node_hour FINAL")[0][0] == n_fine


@pytest.mark.embedded_only("both sides load into embedded warehouses of the test's own, whatever the form")
def test_csv_files_give_the_rows_of_the_parquet_files(site, cfg, tmp_path, embedded_template):
    """The same exporter columns as CSV (ISO timestamps) load to the same rows."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    csv_root = tmp_path / "csv"
    for fam_dir in (site / "telemetry").iterdir():
        if fam_dir.is_dir() and fam_dir.name != "openmetrics":
            (csv_root / fam_dir.name).mkdir(parents=True)
            for f in fam_dir.glob("*.parquet"):
                pl.read_parquet(f).write_csv(csv_root / fam_dir.name / f"{f.stem}.csv")
    out = []
    for name, root in (("p", site), ("c", csv_root)):
        # a copy of the session's migrated empty warehouse, as every fresh embedded one (tests/conftest.py)
        shutil.copytree(embedded_template, tmp_path / name, symlinks=True)
        cfg.dsn = f"chdb://{tmp_path / name}"
        w = open_warehouse(cfg)
        load_parquet_dir(w, root, date(2026, 10, 1), date(2026, 10, 2), cluster="ai1")
        out.append((w.query_rows("SELECT * EXCEPT source FROM gpu_sample FINAL ORDER BY node, gpu, ts"),
                    w.query_rows("SELECT * EXCEPT source FROM node_sample FINAL ORDER BY node, ts")))
        close_embedded()
    assert out[0][0] and out[0] == out[1]
