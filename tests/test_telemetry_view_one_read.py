"""`ops-report telemetry` (sql/marts/telemetry.sql) reads the window's GPU samples once (issue 51, item 3): its
per-GPU partial sums are a scalar subquery, evaluated once, where before the samples' CTE was inlined into
the figures, the nodes' keys and the Xid events' keys, and `gpu_sample FINAL` read three times (8.0 M rows
each in the demo). The rows read are the engine's own count (system.events SelectedRows, rows of the parts'
selected marks): a tiny table is one granule a part, so every stored row of the three tables counts once,
the window's and the day before's (1,000 samples a GPU of values no figure may show).

The figures are worked out by hand from the rows written here (cluster c1, 2026-10-05 10:00-10:02, 60 s steps):
- n1 GPU 0 (H100): util 10, 20, missing; power 100, 200, 300 W; energy 6,000, 12,000, 18,000 J; temp 40, 50,
  60 °C; clock-event reasons 0, 0x08 (HW slowdown: throttled), 0x01 (idle: not); SM 0.25, 0.5, 0.75; tensor
  0.1, 0.2, 0.3; DRAM 0.5 each;
- n1 GPU 1 (H100): util 30, 40, 50; power 150 W; energy 9,000 J; temp 45; reasons 0x20, 0x20, missing; SM 0.5;
  tensor 0; DRAM 0.25;
- n2 GPU 0, loaded as an H100 (util 90, 700 W, 90 °C, reasons 0x40) then reloaded as an H200 with the same
  times (a reload that replaces a node's GPU model: only the H200 rows count): util 60, 70, 80; power 400,
  500, 600 W; energy 24,000, 30,000, 36,000 J; temp 70, 75, 80; reasons 0x04, 0, 0; SM 1; tensor 0.5; DRAM 0.75;
- node samples: n1 and n2 each step rx 1,000 B, tx 2,000 B, Lustre read 100 B, write 50 B; n3 (no GPUs) rx
  5,000, tx 1, read 0, write 7;
- Xid 79 on n1 GPU 0 at 10:01, Xid 48 on n2 GPU 0 at 10:02.

By model: H100 util (10+20+30+40+50)/5 = 30, SM 3/6 = 0.5, tensor 0.6/6 = 0.1, DRAM 2.25/6 = 0.375, power
1,050/6 = 175 W (max 300), energy 63,000 J = 0.0175 kWh, temp max 60, throttled 60 + 120 s = 0.05 h, rx 3,000,
tx 6,000, read 300, write 150, 1 Xid; H200 util 70, SM 1, tensor 0.5, DRAM 0.75, power 500 W (max 600),
90,000 J = 0.025 kWh, temp max 80, throttled 60 s, rx 3,000, tx 6,000, read 300, write 150, 1 Xid; "(no GPUs)"
rx 15,000, tx 3, read 0, write 21. The cluster: util 360/8 = 45, power 2,550/9 W (max 600), 0.0425 kWh,
throttled 240 s, rx 21,000, tx 12,003, 2 Xids.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from ops_warehouse.analytics.telemetry import telemetry

DAY = date(2026, 10, 5)
T0 = datetime(2026, 10, 5, 10, 0, tzinfo=timezone.utc)
BEFORE = datetime(2026, 10, 4, 0, 0, tzinfo=timezone.utc)  # 1,000 minutes: to 16:39 the day before
WINDOW_ROWS = 12 + 9 + 2  # GPU rows in the window (9, the reload's 3), node rows, Xid events
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
GPU_COLS = ["cluster", "node", "gpu", "ts", "step_s", "model_name", "uuid", "gpu_util_pct", "sm_active",
            "tensor_active", "dram_active", "power_w", "energy_j", "temp_c", "throttle_reasons", "source"]
NODE_COLS = ["cluster", "node", "ts", "step_s", "nic_device", "nic_rx_bytes", "nic_tx_bytes", "lustre_read_bytes",
             "lustre_write_bytes", "source"]


def _gpu(node, gpu, model, util, sm, tensor, dram, power, energy, temp, reasons):
    return [["c1", node, gpu, T0 + timedelta(minutes=i), 60, model, f"GPU-{node}-{gpu}", util[i], sm[i], tensor[i],
             dram[i], power[i], energy[i], temp[i], reasons[i], "test"] for i in range(3)]


def _node(node, rx, tx, rd, wr) -> str:
    return ", ".join(f"('c1', '{node}', '{T0 + timedelta(minutes=i):%Y-%m-%d %H:%M:%S}', 60, ['mlx5_0'], [{rx}], [{tx}], "
                     f"{rd}, {wr}, 'test')" for i in range(3))


def _selected_rows(wh) -> int:
    return wh.query_rows("SELECT value FROM system.events WHERE event = 'SelectedRows'")[0][0]


def _rows_read(wh, fn) -> int:
    """Rows of MergeTree parts the engine selected while ``fn`` ran, less what reading the counter costs (a
    constant of the session, measured on the spot: the counter is the process's)."""
    a = _selected_rows(wh)
    itself = _selected_rows(wh) - a
    b = _selected_rows(wh)
    fn()
    return _selected_rows(wh) - b - itself


@pytest.fixture
def loaded(wh):
    wh.insert_rows("gpu_sample", GPU_COLS,
                   _gpu("n1", 0, H100, [10, 20, None], [.25, .5, .75], [.1, .2, .3], [.5] * 3, [100, 200, 300],
                        [6000, 12000, 18000], [40, 50, 60], [0, 0x08, 0x01])
                   + _gpu("n1", 1, H100, [30, 40, 50], [.5] * 3, [0] * 3, [.25] * 3, [150] * 3, [9000] * 3,
                          [45] * 3, [0x20, 0x20, None])
                   + _gpu("n2", 0, H100, [90] * 3, [1] * 3, [1] * 3, [1] * 3, [700] * 3, [42000] * 3, [90] * 3,
                          [0x40] * 3)
                   # the day before, in the same part (one granule: read whatever the window): 1,000 samples a
                   # GPU of values no figure may show
                   + [["c1", n, g, BEFORE + timedelta(minutes=i), 60, H100, f"GPU-{n}-{g}", 99, 1, 1, 1, 999, 59940,
                       99, 0xFF, "test"] for n, g in (("n1", 0), ("n1", 1), ("n2", 0)) for i in range(1000)])
    # the reload: the same GPU and times, another model
    wh.insert_rows("gpu_sample", GPU_COLS,
                   _gpu("n2", 0, H200, [60, 70, 80], [1] * 3, [.5] * 3, [.75] * 3, [400, 500, 600],
                        [24000, 30000, 36000], [70, 75, 80], [0x04, 0, 0]))
    # arrays: a VALUES text (insert_rows sends a list as its text)
    wh.command(f"INSERT INTO node_sample ({', '.join(NODE_COLS)}) VALUES " + ", ".join(
        (_node("n1", 1000, 2000, 100, 50), _node("n2", 1000, 2000, 100, 50), _node("n3", 5000, 1, 0, 7))))
    wh.insert_rows("xid_event", ["cluster", "node", "gpu", "ts", "xid", "source"],
                   [["c1", "n1", 0, T0 + timedelta(minutes=1), 79, "test"],
                    ["c1", "n2", 0, T0 + timedelta(minutes=2), 48, "test"]])
    return wh


def test_the_samples_are_read_once_and_the_figures_are_the_hand_worked_ones(loaded):
    wh = loaded
    out = []
    read = _rows_read(wh, lambda: out.append(telemetry(wh, DAY, DAY, "gpu_model")))
    by_model = {r["gpu_model"]: r for r in out[0].to_dicts()}
    # the window's rows: 12 GPU rows (9, and the reload's 3), 9 node rows, 2 Xid events, each read once, with
    # the few rows the session reads of its own; a second read of the GPU rows would add 12 (before the one
    # read: 3 x 12 + 11 and more). The day before's 3,000 GPU rows are another day's partition (migration
    # 0023), never read: before it they shared the window's part and were read whatever the window (3,023)
    assert WINDOW_ROWS <= read < WINDOW_ROWS + 12, read

    assert sorted(by_model) == ["(no GPUs)", H100, H200]
    h100, h200, none = by_model[H100], by_model[H200], by_model["(no GPUs)"]
    assert h100["gpu_util_mean"] == pytest.approx(30)
    assert h100["sm_active_mean"] == pytest.approx(0.5)
    assert h100["tensor_active_mean"] == pytest.approx(0.1, rel=1e-6)
    assert h100["dram_active_mean"] == pytest.approx(0.375)
    assert (h100["power_w_mean"], h100["power_w_max"], h100["temp_c_max"]) == (pytest.approx(175), 300, 60)
    assert h100["energy_kwh"] == pytest.approx(0.0175, rel=1e-12)
    assert h100["throttled_hours"] == pytest.approx(0.05)
    assert (h100["nic_rx_bytes"], h100["nic_tx_bytes"], h100["storage_read_bytes"], h100["storage_write_bytes"],
            h100["xid_events"]) == (3000, 6000, 300, 150, 1)
    assert h200["gpu_util_mean"] == pytest.approx(70)
    assert (h200["sm_active_mean"], h200["tensor_active_mean"], h200["dram_active_mean"]) == (1, 0.5, 0.75)
    assert (h200["power_w_mean"], h200["power_w_max"], h200["temp_c_max"]) == (pytest.approx(500), 600, 80)
    assert h200["energy_kwh"] == pytest.approx(0.025, rel=1e-12)
    assert h200["throttled_hours"] == pytest.approx(60 / 3600)
    assert (h200["nic_rx_bytes"], h200["nic_tx_bytes"], h200["storage_read_bytes"], h200["storage_write_bytes"],
            h200["xid_events"]) == (3000, 6000, 300, 150, 1)
    assert none["gpu_util_mean"] is None and none["energy_kwh"] is None and none["throttled_hours"] is None
    assert (none["nic_rx_bytes"], none["nic_tx_bytes"], none["storage_read_bytes"], none["storage_write_bytes"],
            none["xid_events"]) == (15000, 3, 0, 21, 0)


def test_by_cluster_node_and_gpu(loaded):
    wh = loaded
    (c1,) = telemetry(wh, DAY, DAY, "cluster").to_dicts()
    assert c1["cluster"] == "c1"
    assert c1["gpu_util_mean"] == pytest.approx(45)
    assert (c1["power_w_mean"], c1["power_w_max"], c1["temp_c_max"]) == (pytest.approx(2550 / 9), 600, 80)
    assert c1["energy_kwh"] == pytest.approx(0.0425, rel=1e-12)
    assert c1["throttled_hours"] == pytest.approx(240 / 3600)
    assert (c1["nic_rx_bytes"], c1["nic_tx_bytes"], c1["xid_events"]) == (21000, 12003, 2)
    nodes = {r["node"]: r for r in telemetry(wh, DAY, DAY, "node").to_dicts()}
    assert sorted(nodes) == ["n1", "n2", "n3"]
    assert nodes["n2"]["gpu_util_mean"] == pytest.approx(70) and nodes["n3"]["gpu_util_mean"] is None
    assert nodes["n3"]["nic_rx_bytes"] == 15000 and nodes["n1"]["xid_events"] == 1
    gpus = {r["gpu"]: r for r in telemetry(wh, DAY, DAY, "gpu").to_dicts()}
    assert sorted(gpus) == ["n1:0", "n1:1", "n2:0"]  # a node without GPUs has no row by GPU
    assert gpus["n1:0"]["gpu_util_mean"] == pytest.approx(15)  # 10, 20 and a missing value
    assert gpus["n1:1"]["throttled_hours"] == pytest.approx(120 / 3600)
    assert gpus["n1:0"]["nic_rx_bytes"] is None
    # a day with no samples: no rows
    assert telemetry(wh, date(2026, 10, 6), date(2026, 10, 6), "cluster").height == 0
