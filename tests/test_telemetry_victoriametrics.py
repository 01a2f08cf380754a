"""Telemetry from a real VictoriaMetrics (Debian's victoria-metrics, on loopback): bulk backfill through
/api/v1/export gives the rows of the generator's Parquet files; load_prometheus finds the server is
VictoriaMetrics and reads its raw samples (/api/v1/export, downsampled by the engine), giving the tables
query_range gives."""

from __future__ import annotations

import re
import time
import urllib.request
from datetime import date, datetime, timedelta, timezone

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


def _requests(v, path: str = "/api/v1/export") -> int:
    """How many requests to ``path`` the server has answered (its own /metrics)."""
    text = urllib.request.urlopen(v.url + "/metrics", timeout=30).read().decode()
    return sum(int(n) for n in re.findall(rf'vm_http_requests_total\{{path="{re.escape(path)}"\}} (\d+)', text))


def _exports(v) -> int:
    return _requests(v)


def _counted(v, path: str, before: int, timeout_s: float = 30) -> int:
    """The server's count of ``path`` requests once it shows more than ``before``: its /metrics can lag the
    requests by a few seconds (a load that took 2 s showed none of its requests yet: CI, 2026-12-06)."""
    deadline = time.monotonic() + timeout_s
    while (n := _requests(v, path)) <= before and time.monotonic() < deadline:
        time.sleep(0.25)
    return n


def test_a_backfill_from_victoriametrics_takes_the_export_path(vm, cfg, tmp_path):
    """Nothing asked: the load finds VictoriaMetrics, reads the raw samples (one export per node batch: GPUs,
    nodes, Lustre jobs) and stores the rows of the generator's Parquet files."""
    from ops_warehouse.etl.prometheus_source import load_prometheus

    site, v = vm
    files = _rows(cfg, tmp_path / "files", lambda w: load_parquet_dir(w, site, DAY, DAY, cluster="c"))
    before = _exports(v)
    api = _rows(cfg, tmp_path / "api", lambda w: load_prometheus(w, v.url, DAY, DAY, step_s=60, cluster="c"))
    _counted(v, "/api/v1/export", before + 3)
    assert _exports(v) - before == 1 + 3  # the probe that found VictoriaMetrics, then the three batches
    assert len(api[0]) == 32 * 1440
    assert api == files


# one GPU scraped every 15 s from 23:59:15 the day before: sample k at 23:59:15 + 15 k s
_T0 = datetime(2026, 9, 30, 23, 59, 15, tzinfo=timezone.utc)
_GPU = 'Hostname="n1",gpu="0",modelName="NVIDIA H100 80GB HBM3",UUID="GPU-1"'


def _fine_samples(n: int = 40) -> str:
    lines = []
    for k in range(n):
        ms = int((_T0 + timedelta(seconds=15 * k)).timestamp() * 1000)
        lines += [f"DCGM_FI_DEV_POWER_USAGE{{{_GPU}}} {100 * (k + 1)} {ms}",
                  f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{_GPU}}} {1000 * k * k} {ms}",
                  f"DCGM_FI_DEV_XID_ERRORS{{{_GPU}}} {79 if k == 9 else 0} {ms}"]
    return "\n".join(lines) + "\n"


def test_export_downsamples_as_query_range_does(cfg, tmp_path):
    """Samples every 15 s loaded at a 60 s step by both paths: the same rows, and the figures worked out from
    the samples written. The step ending 00:01:00 holds samples 4-7 (00:00:15 .. 00:01:00): power the mean of
    500, 600, 700, 800 W = 650 W; energy the counter's last (7^2 = 49 J) less the step before's (3^2 = 9 J) =
    40 J. The step ending 00:02:00 (samples 8-11): 1,050 W, 121 - 49 = 72 J, and the Xid 79 written at 00:01:30
    (the largest of the step's 0, 79, 0, 0; a mean would be 19.75)."""
    from ops_warehouse.etl.prometheus_source import load_prometheus

    v = ph.VictoriaMetrics(tmp_path / "vmdata").start()
    try:
        req = urllib.request.Request(v.url + "/api/v1/import/prometheus", data=_fine_samples().encode(), method="POST")
        urllib.request.urlopen(req, timeout=60).read()
        urllib.request.urlopen(v.url + "/internal/force_flush", timeout=30).read()
        out = {}
        for export in (False, True):
            cfg.dsn = f"chdb://{tmp_path / f'wh-{export}'}"
            w = open_warehouse(cfg)
            before = {p: _requests(v, p) for p in ("/api/v1/export", "/api/v1/query_range")}
            load_prometheus(w, v.url, DAY, DAY, step_s=60, cluster="c", export=export)
            # the path taken shows in the server's counts; the other path's count, read after, is unchanged
            taken = "/api/v1/export" if export else "/api/v1/query_range"
            assert _counted(v, taken, before[taken]) > before[taken]
            other = "/api/v1/query_range" if export else "/api/v1/export"
            assert _requests(v, other) == before[other]
            out[export] = (w.query_rows("SELECT toString(ts), power_w, energy_j, xid_last FROM gpu_sample FINAL "
                                        "WHERE ts BETWEEN '2026-10-01 00:01:00' AND '2026-10-01 00:02:00' ORDER BY ts"),
                           w.query_rows("SELECT * EXCEPT source FROM gpu_sample FINAL ORDER BY ts"),
                           w.query_rows("SELECT toString(ts), xid FROM xid_event FINAL ORDER BY ts"))
            close_embedded()
    finally:
        v.stop()
    assert out[True][0] == [("2026-10-01 00:01:00", 650.0, 40.0, 0), ("2026-10-01 00:02:00", 1050.0, 72.0, 79)]
    assert out[True][2] == [("2026-10-01 00:02:00", 79)]
    assert out[True] == out[False]
