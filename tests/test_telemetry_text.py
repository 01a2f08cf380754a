"""Telemetry from Prometheus text / OpenMetrics files: a real dcgm-exporter scrape (DataDog
integrations-core fixture, BSD-3-Clause; Tesla T4) and the generator's promtool input."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from ops_warehouse.etl.openmetrics_source import load_text_files, read_samples
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.generate import generate
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import DATA, rows

SCRAPE = DATA / "metrics" / "dcgm-exporter-scrape-t4.txt"
AT = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)


def test_real_dcgm_exporter_scrape(wh):
    s = read_samples(SCRAPE, AT)
    # 38 samples: 16 of host 424773df46e0, 7 of 551bdf382151, 1 of ip-11111, 14 dummies without labels
    assert s.height == 38
    assert s.group_by("Hostname").len().sort("Hostname", nulls_last=True).rows() == [
        ("424773df46e0", 16), ("551bdf382151", 7), ("ip-11111", 1), (None, 14)]
    c = load_text_files(wh, [SCRAPE], date(2026, 10, 1), date(2026, 10, 1), at=AT, cluster="dd")
    assert c == {"gpu_rows": 3, "node_rows": 0, "xid_events": 0, "quarantined": 0}
    got = rows(wh, "SELECT node, gpu, ts, model_name, uuid, sm_clock_mhz, temp_c, power_w, gpu_util_pct, "
                   "fb_free_mib, fb_used_mib, energy_j, xid_last, throttle_reasons, dram_active "
                   "FROM gpu_sample FINAL ORDER BY node")
    # values as printed in the scrape; a counter seen once has no step amount yet
    t = AT.replace(tzinfo=None)
    assert got[0] == ("424773df46e0", 0, t, "Tesla T4", "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e",
                      300.0, 25.0, 8.968999862670898, 0.0, 15109.0, 0.0, None, 0, None, None)
    assert got[1][0] == "551bdf382151" and got[1][13] == 1  # GPU idle clock-event bit
    assert got[2][0] == "ip-11111" and abs(got[2][14] - 0.000003) < 1e-9


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_openmetrics_files_give_the_rows_of_the_parquet_files(cfg, tmp_path):
    site = tmp_path / "site"
    generate(site, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=1, jobs_per_day=60, nodes=3, seed=2,
             metrics_step_s=300, telemetry=("parquet", "openmetrics"))
    out = []
    for name in ("parquet", "text"):
        cfg.dsn = f"chdb://{tmp_path / name}"
        w = open_warehouse(cfg)
        if name == "parquet":
            load_parquet_dir(w, site, date(2026, 10, 1), date(2026, 10, 1), cluster="c")
        else:
            load_text_files(w, sorted((site / "telemetry" / "openmetrics").glob("*.om")), date(2026, 10, 1),
                            date(2026, 10, 1), cluster="c")
        # (hpc_job: the Parquet files carry dcgm-exporter's job label, the generator's OpenMetrics form does not)
        out.append((w.query_rows("SELECT * EXCEPT (source, hpc_job) FROM gpu_sample FINAL ORDER BY node, gpu, ts"),
                    w.query_rows("SELECT node, ts, lustre_read_bytes, lustre_write_bytes, node_power_w, "
                                 "arraySum(nic_rx_bytes) FROM node_sample FINAL ORDER BY node, ts")))
        close_embedded()
    assert len(out[0][0]) > 0 and out[0] == out[1]
