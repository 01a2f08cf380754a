"""The demo's summaries stage (cli/demo.py `write_summaries`) reads the window's samples once for its two
telemetry views, by cluster and by GPU model (issue 51, item 3): one query of both groupings, where a call per
grouping read every GPU sample twice (16 M rows in the demo). Rows read are the engine's own count (system.events
SelectedRows), as in tests/test_telemetry_view_one_read.py, whose hand-built day this module loads again: its
docstring works out every figure asserted here by hand from the raw rows.
"""

from __future__ import annotations

import json

import pytest
from tests.test_telemetry_view_one_read import DAY, H100, H200, WINDOW_ROWS, _rows_read
from tests.test_telemetry_view_one_read import loaded  # noqa: F401 (the fixture)

from ops_warehouse.analytics.telemetry import telemetry_groupings
from ops_warehouse.cli.demo import write_summaries
from ops_warehouse.errors import OpsError


def test_the_stage_reads_the_samples_once_for_both_views(loaded, tmp_path):  # noqa: F811
    wh = loaded
    got = {}
    read = _rows_read(wh, lambda: got.update(write_summaries(wh, tmp_path, DAY, DAY)))
    # no jobs loaded: the four summaries read nothing; the window's rows once (a view a grouping would read
    # them twice: 12 GPU rows more)
    assert WINDOW_ROWS <= read < WINDOW_ROWS + 12, read

    (c1,) = json.loads((tmp_path / "telemetry_by_cluster.json").read_text())
    assert c1["cluster"] == "c1"
    assert c1["gpu_util_mean"] == pytest.approx(45)
    assert (c1["power_w_mean"], c1["power_w_max"], c1["temp_c_max"]) == (pytest.approx(2550 / 9), 600, 80)
    assert c1["energy_kwh"] == pytest.approx(0.0425, rel=1e-12)
    assert c1["throttled_hours"] == pytest.approx(240 / 3600)
    assert (c1["nic_rx_bytes"], c1["nic_tx_bytes"], c1["storage_read_bytes"], c1["storage_write_bytes"],
            c1["xid_events"]) == (21000, 12003, 600, 321, 2)
    by_model = {r["gpu_model"]: r for r in json.loads((tmp_path / "telemetry_by_gpu_model.json").read_text())}
    assert sorted(by_model) == ["(no GPUs)", H100, H200]
    h100, h200, none = by_model[H100], by_model[H200], by_model["(no GPUs)"]
    assert (h100["gpu_util_mean"], h100["power_w_mean"], h100["power_w_max"]) == (pytest.approx(30), pytest.approx(175), 300)
    assert h100["energy_kwh"] == pytest.approx(0.0175, rel=1e-12) and h100["throttled_hours"] == pytest.approx(0.05)
    assert (h100["nic_rx_bytes"], h100["nic_tx_bytes"], h100["xid_events"]) == (3000, 6000, 1)
    assert (h200["gpu_util_mean"], h200["power_w_mean"], h200["temp_c_max"]) == (pytest.approx(70), pytest.approx(500), 80)
    assert h200["energy_kwh"] == pytest.approx(0.025, rel=1e-12) and h200["xid_events"] == 1
    assert none["gpu_util_mean"] is None
    assert (none["nic_rx_bytes"], none["nic_tx_bytes"], none["storage_read_bytes"], none["storage_write_bytes"],
            none["xid_events"]) == (15000, 3, 0, 21, 0)
    assert got["telemetry_by_cluster"].height == 1 and got["telemetry_by_gpu_model"].height == 3


def test_by_node_too_and_a_grouping_without_node_metrics_refused(loaded):  # noqa: F811
    wh = loaded
    frames = telemetry_groupings(wh, DAY, DAY, ("node", "cluster"))
    nodes = {r["node"]: r for r in frames["node"].to_dicts()}
    assert sorted(nodes) == ["n1", "n2", "n3"]  # n3: node samples only
    assert nodes["n1"]["gpu_util_mean"] == pytest.approx(30) and nodes["n2"]["gpu_util_mean"] == pytest.approx(70)
    assert (nodes["n3"]["nic_rx_bytes"], nodes["n1"]["xid_events"], nodes["n2"]["xid_events"]) == (15000, 1, 1)
    assert frames["cluster"]["nic_rx_bytes"].to_list() == [21000]
    with pytest.raises(OpsError, match="gpu"):
        telemetry_groupings(wh, DAY, DAY, ("cluster", "gpu"))
