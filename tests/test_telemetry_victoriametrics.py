"""Telemetry from a real VictoriaMetrics (Debian's victoria-metrics, on loopback): bulk backfill through
/api/v1/export gives the rows of the generator's Parquet files."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.etl.vm_export_source import load_vm_export
from ops_warehouse.generate import generate
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import require
from tests import prometheus_harness as ph

pytestmark = require(ph.vm_available(), "victoria-metrics")
DAY = date(2026, 10, 1)


@pytest.fixture(scope="module")
def vm(tmp_path_factory):
    base = tmp_path_factory.mktemp("vm")
    site = base / "site"
    generate(site, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=1, jobs_per_day=100, nodes=4, seed=5,
             metrics_step_s=60, telemetry=("parquet", "openmetrics"))
    v = ph.VictoriaMetrics(base / "vmdata").start()
    v.import_openmetrics(sorted((site / "telemetry" / "openmetrics").glob("*.om")))
    yield site, v
    v.stop()


def _rows(cfg, path, load):
    cfg.dsn = f"chdb://{path}"
    w = open_warehouse(cfg)
    load(w)
    # (hpc_job: the Parquet files carry dcgm-exporter's job label, the generator's OpenMetrics form does not)
    out = (w.query_rows("SELECT * EXCEPT (source, hpc_job) FROM gpu_sample FINAL ORDER BY node, gpu, ts"),
           w.query_rows("SELECT node, ts, arraySort(nic_device), arraySum(nic_rx_bytes), arraySum(nic_tx_bytes), "
                        "lustre_read_bytes, lustre_write_bytes, node_power_w FROM node_sample FINAL ORDER BY node, ts"),
           w.query_rows("SELECT * EXCEPT source FROM xid_event FINAL ORDER BY node, gpu, ts"))
    close_embedded()
    return out


def test_export_gives_the_rows_of_the_files(vm, cfg, tmp_path):
    site, v = vm
    files = _rows(cfg, tmp_path / "files", lambda w: load_parquet_dir(w, site, DAY, DAY, cluster="c"))
    export = _rows(cfg, tmp_path / "vm", lambda w: load_vm_export(w, v.url, DAY, DAY, cluster="c"))
    assert len(files[0]) == 32 * 1440
    assert export[0] == files[0]
    assert export[1] == files[1]
    assert export[2] == files[2]


def test_query_range_against_victoriametrics(vm, cfg, tmp_path):
    """The Prometheus source speaks to VictoriaMetrics too (same query_range API)."""
    from ops_warehouse.etl.prometheus_source import load_prometheus

    site, v = vm
    files = _rows(cfg, tmp_path / "files", lambda w: load_parquet_dir(w, site, DAY, DAY, cluster="c"))
    api = _rows(cfg, tmp_path / "api", lambda w: load_prometheus(w, v.url, DAY, DAY, step_s=60, cluster="c"))
    assert len(api[0]) == len(files[0])
    assert api[0] == files[0]
