"""Telemetry from a real Prometheus (Debian's prometheus 2.42, started on loopback after a promtool
backfill of the generator's OpenMetrics files): the same rows as loading the generator's Parquet files."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.prometheus_source import PromClient, load_prometheus
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.generate import generate
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import require
from tests import prometheus_harness as ph

pytestmark = require(ph.available(), "prometheus/promtool")
DAY = date(2026, 10, 1)
COLS = ("node, gpu, ts, gpu_util_pct, sm_active, tensor_active, dram_active, fb_used_mib, power_w, energy_j, temp_c, "
        "sm_clock_mhz, throttle_reasons, xid_last")


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    base = tmp_path_factory.mktemp("prom")
    site = base / "site"
    generate(site, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=1, jobs_per_day=100, nodes=4, seed=5,
             metrics_step_s=60, telemetry=("parquet", "openmetrics"))
    ph.backfill(sorted((site / "telemetry" / "openmetrics").glob("*.om")), base / "tsdb")
    p = ph.Prometheus(base / "tsdb").start()
    yield site, p
    p.stop()


def _rows(cfg, tmp_path, name, load):
    cfg.dsn = f"chdb://{tmp_path / name}"
    w = open_warehouse(cfg)
    load(w)
    out = {
        "gpu": w.query_rows(f"SELECT {COLS} FROM gpu_sample FINAL ORDER BY node, gpu, ts"),
        "node": w.query_rows("SELECT node, ts, nic_device, nic_rx_bytes, nic_tx_bytes, lustre_read_bytes, "
                             "lustre_write_bytes, node_power_w FROM node_sample FINAL ORDER BY node, ts"),
        "xid": w.query_rows("SELECT node, gpu, ts, xid FROM xid_event FINAL ORDER BY node, gpu, ts"),
    }
    close_embedded()
    return out


def _sorted_nics(rows):
    # the per-NIC arrays may come in another device order from the server
    out = []
    for node, ts, dev, rx, tx, *rest in rows:
        order = sorted(range(len(dev)), key=lambda i: dev[i])
        out.append((node, ts, [dev[i] for i in order], [rx[i] for i in order], [tx[i] for i in order], *rest))
    return out


@pytest.mark.parametrize("batch_nodes", [32, 2])
def test_query_range_gives_the_rows_of_the_files(prom, cfg, tmp_path, monkeypatch, batch_nodes):
    """One query per metric, or several node batches per metric (as on a large cluster)."""
    from ops_warehouse.etl import prometheus_source

    monkeypatch.setattr(prometheus_source, "BATCH_NODES", batch_nodes)
    site, p = prom
    files = _rows(cfg, tmp_path, "files", lambda w: load_parquet_dir(w, site, DAY, DAY, cluster="c"))
    api = _rows(cfg, tmp_path, "api", lambda w: load_prometheus(w, p.url, DAY, DAY, step_s=60, cluster="c"))
    # 3 H100 + 1 H200 nodes x 8 GPUs x 1,440 minutes (the B200 node is not in service yet)
    assert len(files["gpu"]) == 32 * 1440
    assert api["gpu"] == files["gpu"]
    assert _sorted_nics(api["node"]) == _sorted_nics(files["node"])
    assert api["xid"] == files["xid"]


def test_reload_is_idempotent_and_survives_a_restart(prom, cfg, tmp_path):
    site, p = prom
    cfg.dsn = f"chdb://{tmp_path / 'wh'}"
    w = open_warehouse(cfg)
    load_prometheus(w, p.url, DAY, DAY, step_s=60, cluster="c")
    once = w.query_rows("SELECT count(), sum(cityHash64(*)) FROM gpu_sample FINAL")
    # restart the server while a load is retrying: the client backs off and carries on
    p.stop()
    import threading

    t = threading.Timer(1.5, p.start)
    t.start()
    load_prometheus(w, p.url, DAY, DAY, step_s=60, cluster="c", client=PromClient(p.url, retries=6, backoff_s=0.5))
    t.join()
    assert w.query_rows("SELECT count(), sum(cityHash64(*)) FROM gpu_sample FINAL") == once
    # the source's watermark: the end of the last whole day loaded
    from ops_warehouse.etl.watermarks import watermark

    assert watermark(w, f"prometheus:{p.url}") == datetime(2026, 10, 2, tzinfo=timezone.utc)
    close_embedded()


def test_unreachable_server_is_one_clear_error(cfg, tmp_path):
    cfg.dsn = f"chdb://{tmp_path / 'x'}"
    w = open_warehouse(cfg)
    with pytest.raises(OpsError, match=r"prometheus at http://127.0.0.1:\d+ unreachable after 2 tries"):
        load_prometheus(w, f"http://127.0.0.1:{ph.free_port()}", DAY, DAY,
                        client=PromClient(f"http://127.0.0.1:{ph.free_port()}", retries=1, backoff_s=0.1))
    close_embedded()
