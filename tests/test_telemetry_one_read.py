"""A telemetry day file is read by the engine once per load that uses it (issue 50, item 2): its rows are staged
in memory once, and every table and check of the load reads them there (etl/telemetry_insert.py). Before, each
target table and each check parsed the file again (gpu_sample, xid_event, gpu_pci, the energy-step check, the
counts, the value checks and counter_edge: 7-9 reads of a day's Parquet). A file is read again only to name the
line of a rejected value. A large stage is written to the tables a group of nodes at a time (the sorts' memory
bounded whatever the window): the same rows.

The figures are worked out by hand from the rows written here: one H100 on node gpu01, sampled each minute
from 2026-10-01 23:58 to 2026-10-02 00:02 (two samples in the first day's files, three in the second's):
- energy counter (mJ) 1,000,000,000, 1,018,000,000 | 1,036,000,000, 1,054,000,000, 1,066,000,000: steps of
  18,000 J (300 W × 60 s) and a last one of 12,000 J; the second day's first step needs the first day's last
  sample (the seed);
- the Xid gauge 0, 79 | 79, 79, 0: one Xid at 23:59, none in the second day (79 was already showing);
- one InfiniBand port mlx5_0, received bytes 1,000, 2,000 | 5,000, 9,000, 9,500: steps 1,000 | 3,000, 4,000, 500;
- the node's IPMI power 1,000, 1,100 | 1,200, 1,300, 1,400 W.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.etl import telemetry_insert
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.conftest import rows
from tests.handles import statements_on_every_client

T0 = datetime(2026, 10, 1, 23, 58, tzinfo=timezone.utc)
UUID = "GPU-9c1b6f3e-52f7-4a55-8a3b-8c7d0e1f2a3b"
ENERGY_MJ = [1_000_000_000, 1_018_000_000, 1_036_000_000, 1_054_000_000, 1_066_000_000]
XID = [0, 79, 79, 79, 0]
RX = [1_000, 2_000, 5_000, 9_000, 9_500]
POWER_W = [1_000.0, 1_100.0, 1_200.0, 1_300.0, 1_400.0]
FAMILIES = ("dcgm", "nic", "ipmi")


def _site(root, power_w=POWER_W, unit="ms"):
    """The three families' day files: rows 0-1 on 2026-10-01, rows 2-4 on 2026-10-02 (times stored in ``unit``)."""
    ts = [T0 + timedelta(minutes=k) for k in range(5)]
    frames = {
        "dcgm": pl.DataFrame({"timestamp": ts, "gpu": ["0"] * 5, "UUID": [UUID] * 5,
                              "pci_bus_id": ["00000000:1B:00.0"] * 5, "modelName": ["NVIDIA H100 80GB HBM3"] * 5,
                              "Hostname": ["gpu01"] * 5, "DCGM_FI_DEV_POWER_USAGE": [300.0] * 5,
                              "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": [float(e) for e in ENERGY_MJ],
                              "DCGM_FI_DEV_XID_ERRORS": [float(x) for x in XID]}),
        "nic": pl.DataFrame({"timestamp": ts, "instance": ["gpu01:9100"] * 5, "device": ["mlx5_0"] * 5,
                             "port": ["1"] * 5,
                             "node_infiniband_port_data_received_bytes_total": [float(b) for b in RX],
                             "node_infiniband_port_data_transmitted_bytes_total": [0.0] * 5}),
        "ipmi": pl.DataFrame({"timestamp": ts, "instance": ["gpu01:9290"] * 5,
                              "ipmi_dcmi_power_consumption_watts": power_w}),
    }
    paths = {}
    for fam, df in frames.items():
        (root / fam).mkdir(parents=True, exist_ok=True)
        df = df.with_columns(pl.col("timestamp").dt.cast_time_unit(unit))
        for day, part in (("2026-10-01", df.head(2)), ("2026-10-02", df.tail(3))):
            p = (root / fam / f"{day}.parquet").resolve()
            part.write_parquet(p)
            paths[(fam, day)] = p
    return paths


@pytest.mark.parametrize("group_rows", [None, 1])
def test_each_day_file_is_read_once_a_load_and_the_steps_are_the_files(wh, tmp_path, monkeypatch, group_rows):
    if group_rows:  # a large stage is written a group of nodes at a time: here each row is a group's worth
        monkeypatch.setattr(telemetry_insert, "GROUP_ROWS", group_rows)
    paths = _site(tmp_path / "telemetry")
    seen = statements_on_every_client(wh, monkeypatch)
    c = load_parquet_dir(wh, tmp_path, date(2026, 10, 1), date(2026, 10, 2), cluster="c1")
    reads = {k: sum(str(p) in sql for sql in seen) for k, p in paths.items()}
    # each file once, for its own day's rows: the second day's counters are seeded by the edges the first day's
    # load kept in counter_edge (its files were read a second time for their last samples before)
    assert reads == {(f, d): 1 for f in FAMILIES for d in ("2026-10-01", "2026-10-02")}
    # and a day's node files (NIC, IPMI) into the stage by one statement: its fixed cost paid once a kind
    for d in ("2026-10-01", "2026-10-02"):
        assert sum(str(paths[("nic", d)]) in sql and str(paths[("ipmi", d)]) in sql for sql in seen) == 1
    assert c["gpu_rows"] == 5 and c["node_rows"] == 5 and c["quarantined"] == 0 and c["xid_events"] == 1
    assert rows(wh, "SELECT formatDateTime(ts, '%F %R'), energy_j FROM gpu_sample FINAL ORDER BY ts") == [
        ("2026-10-01 23:58", None), ("2026-10-01 23:59", 18_000.0), ("2026-10-02 00:00", 18_000.0),
        ("2026-10-02 00:01", 18_000.0), ("2026-10-02 00:02", 12_000.0)]
    assert rows(wh, "SELECT formatDateTime(ts, '%F %R'), xid FROM xid_event FINAL") == [("2026-10-01 23:59", 79)]
    # each row written once (FINAL would hide a row a group wrote twice)
    assert rows(wh, "SELECT (SELECT count() FROM gpu_sample), (SELECT count() FROM node_sample)") == [(5, 5)]
    assert rows(wh, "SELECT nic_device, nic_rx_bytes, node_power_w FROM node_sample FINAL ORDER BY ts") == [
        (["mlx5_0"], [0], 1_000.0), (["mlx5_0"], [1_000], 1_100.0), (["mlx5_0"], [3_000], 1_200.0),
        (["mlx5_0"], [4_000], 1_300.0), (["mlx5_0"], [500], 1_400.0)]
    # the next load starts from the last raw value of each counter series
    assert rows(wh, "SELECT kind, value FROM counter_edge FINAL WHERE ts = '2026-10-02 00:02:00' ORDER BY kind") == [
        ("gpu", {"energy_j": 1_066_000.0, "xid_last": 0.0}), ("node", {"nic_rx_bytes": 9_500.0, "nic_tx_bytes": 0.0})]


@pytest.mark.parametrize("unit", ["us", "ns"])
def test_a_day_file_timed_in_micro_or_nanoseconds_is_read_once_a_load_too(wh, tmp_path, monkeypatch, unit):
    """Whether the first day's files can be left unread is told from their last sample in their statistics, read
    as the raw integer and its unit (etl/telemetry_insert.py: not boxed by pyarrow, which imports pandas): the
    same as in milliseconds above, and the same steps."""
    paths = _site(tmp_path / "telemetry", unit=unit)
    seen = statements_on_every_client(wh, monkeypatch)
    load_parquet_dir(wh, tmp_path, date(2026, 10, 1), date(2026, 10, 2), cluster="c1")
    assert {k: sum(str(p) in sql for sql in seen) for k, p in paths.items()} == {
        (f, d): 1 for f in FAMILIES for d in ("2026-10-01", "2026-10-02")}
    assert rows(wh, "SELECT energy_j FROM gpu_sample FINAL ORDER BY ts") == [
        (None,), (18_000.0,), (18_000.0,), (18_000.0,), (12_000.0,)]
    assert rows(wh, "SELECT nic_rx_bytes FROM node_sample FINAL ORDER BY ts") == [
        ([0],), ([1_000],), ([3_000],), ([4_000],), ([500],)]


def test_the_second_day_alone_is_seeded_by_the_first_days_files(wh, tmp_path, monkeypatch):
    paths = _site(tmp_path / "telemetry")
    seen = statements_on_every_client(wh, monkeypatch)
    load_parquet_dir(wh, tmp_path, date(2026, 10, 2), date(2026, 10, 2), cluster="c1")
    # the day before's files are read for their last samples, but not IPMI's: a family without a counter seeds
    # nothing (its power is a gauge)
    assert {k: sum(str(p) in sql for sql in seen) for k, p in paths.items()} == {
        **{(f, d): 1 for f in FAMILIES for d in ("2026-10-01", "2026-10-02")}, ("ipmi", "2026-10-01"): 0}
    assert rows(wh, "SELECT energy_j FROM gpu_sample FINAL ORDER BY ts") == [(18_000.0,), (18_000.0,), (12_000.0,)]
    assert rows(wh, "SELECT nic_rx_bytes FROM node_sample FINAL ORDER BY ts") == [([3_000],), ([4_000],), ([500],)]
    assert rows(wh, "SELECT count() FROM xid_event") == [(0,)]  # 79 was showing before the day


def test_a_day_loaded_in_part_before_still_seeds_from_its_files(wh, tmp_path, monkeypatch):
    """counter_edge holds the first day's 23:58 sample only (its files then had one row): the second day's
    seeds must be the files' 23:59 sample, so the files are read; from the 23:58 edge the first steps would be
    36,000 J and 4,000 bytes."""
    paths = _site(tmp_path / "telemetry")
    whole = {k: pl.read_parquet(p) for k, p in paths.items()}
    for (fam, day), df in whole.items():
        if day == "2026-10-01":
            df.head(1).write_parquet(paths[(fam, day)])
    load_parquet_dir(wh, tmp_path, date(2026, 10, 1), date(2026, 10, 1), cluster="c1")
    for (fam, day), df in whole.items():
        df.write_parquet(paths[(fam, day)])
    seen = statements_on_every_client(wh, monkeypatch)
    load_parquet_dir(wh, tmp_path, date(2026, 10, 2), date(2026, 10, 2), cluster="c1")
    reads = {k: sum(str(p) in sql for sql in seen) for k, p in paths.items()}
    assert reads[("dcgm", "2026-10-01")] == 1 and reads[("nic", "2026-10-01")] == 1
    assert rows(wh, "SELECT energy_j FROM gpu_sample FINAL WHERE ts >= '2026-10-02' ORDER BY ts") == [
        (18_000.0,), (18_000.0,), (12_000.0,)]
    assert rows(wh, "SELECT nic_rx_bytes FROM node_sample FINAL WHERE ts >= '2026-10-02' ORDER BY ts") == [
        ([3_000],), ([4_000],), ([500],)]


def test_a_bad_value_in_one_of_a_kinds_files_is_named_by_that_file_and_line(wh, tmp_path, monkeypatch):
    power = [*POWER_W]
    power[3] = float("nan")  # the second day's second row: line 2 of its file, row 1
    paths = _site(tmp_path / "telemetry", power_w=power)
    seen = statements_on_every_client(wh, monkeypatch)
    c = load_parquet_dir(wh, tmp_path, date(2026, 10, 2), date(2026, 10, 2), cluster="c1")
    assert c["quarantined"] == 1 and c["node_rows"] == 3
    assert rows(wh, "SELECT source, line_no, reason FROM etl_quarantine") == [
        (str(paths[("ipmi", "2026-10-02")]), 2, "ipmi_dcmi_power_consumption_watts nan: not a number")]
    # the bad reading is unknown; the node's other readings of that time load
    assert rows(wh, "SELECT nic_rx_bytes, node_power_w FROM node_sample FINAL ORDER BY ts") == [
        ([3_000], 1_200.0), ([4_000], None), ([500], 1_400.0)]
    # the day's node files are read for the stage and again for the rejected value's line; the GPU file once
    reads = {k: sum(str(p) in sql for sql in seen) for k, p in paths.items()}
    assert reads[("dcgm", "2026-10-02")] == 1 and reads[("ipmi", "2026-10-02")] == 2


def test_a_kinds_series_are_grouped_once_a_load_for_the_seed_and_the_edges(wh, tmp_path, monkeypatch):
    """The counter_edge seed (each series' first sample) and the load's counter edges (each series' last raw
    values in the window) come from one grouping of the stage by series (etl/telemetry_insert.py _edge_rows);
    before, the edges grouped the whole stage a second time (0.1 s of CPU a 32-node day: docs/benchmarks.md).
    The edges are the hand-worked last raw values of the window's last sample with any counter value: the GPU's
    energy reading at 00:02 is a NaN (quarantined, NULL), so that sample's edge holds the Xid gauge's 0 alone."""
    energy = [float(e) for e in ENERGY_MJ]
    energy[4] = float("nan")
    _site(tmp_path / "telemetry")
    df = pl.read_parquet(tmp_path / "telemetry" / "dcgm" / "2026-10-02.parquet")
    df.with_columns(pl.Series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", energy[2:])).write_parquet(
        tmp_path / "telemetry" / "dcgm" / "2026-10-02.parquet")
    seen = statements_on_every_client(wh, monkeypatch)
    c = load_parquet_dir(wh, tmp_path, date(2026, 10, 1), date(2026, 10, 2), cluster="c1")
    assert c["quarantined"] == 1
    # each kind's stage grouped by its series once a day (2 days × GPU and node kinds), not twice
    import re
    by_series = sum(len(re.findall(r"FROM _telemetry_(?:gpu|node)_[0-9a-f]{32} WHERE _seed = 0\)[^;]{0,120}?"
                                   r"GROUP BY node, (?:gpu|series, device)\b", sql)) for sql in seen)
    assert by_series == 4
    assert rows(wh, "SELECT kind, formatDateTime(ts, '%F %R'), value FROM counter_edge FINAL "
                    "WHERE ts >= '2026-10-02' ORDER BY kind") == [
        ("gpu", "2026-10-02 00:02", {"xid_last": 0.0}),
        ("node", "2026-10-02 00:02", {"nic_rx_bytes": 9_500.0, "nic_tx_bytes": 0.0})]
    assert rows(wh, "SELECT energy_j FROM gpu_sample FINAL WHERE ts >= '2026-10-02' ORDER BY ts") == [
        (18_000.0,), (18_000.0,), (None,)]


def test_a_stage_in_groups_of_nodes_writes_bus_ids_and_xids_in_one_statement_and_counts_node_times(
        wh, tmp_path, monkeypatch):
    """A stage over GROUP_ROWS is written a group of nodes at a time where a statement orders every row (the
    sample tables), but gpu_pci (a grouping into a few rows a GPU) and xid_event (only the GPUs with an Xid)
    in one statement each: per group each read the whole stage again (docs/benchmarks.md, issue 50 round 7).
    By hand: three nodes, one GPU each (bus ids 1B, 2B, 3B), sampled at 00:00, 00:01, 00:02; the Xid gauge of
    gpu02 reads 0, 43, 43 (one Xid at 00:01), of gpu03 0, 0, 79 (one at 00:02), of gpu01 0 throughout; each
    node has two InfiniBand ports and an IPMI reading, 27 node rows staged for 9 node times."""
    monkeypatch.setattr(telemetry_insert, "GROUP_ROWS", 1)  # every staged row a group's worth
    t0 = datetime(2026, 10, 2, tzinfo=timezone.utc)
    ts = [t0 + timedelta(minutes=k) for k in range(3)]
    xid = {"gpu01": [0, 0, 0], "gpu02": [0, 43, 43], "gpu03": [0, 0, 79]}
    nodes = sorted(xid)
    root = tmp_path / "telemetry"
    frames = {
        "dcgm": pl.DataFrame({
            "timestamp": ts * 3, "gpu": ["0"] * 9, "UUID": [f"GPU-{n}" for n in nodes for _ in ts],
            "pci_bus_id": [f"00000000:{k + 1}B:00.0" for k in range(3) for _ in ts],
            "modelName": ["NVIDIA H100 80GB HBM3"] * 9, "Hostname": [n for n in nodes for _ in ts],
            "DCGM_FI_DEV_POWER_USAGE": [300.0] * 9,
            "DCGM_FI_DEV_XID_ERRORS": [float(x) for n in nodes for x in xid[n]]}),
        "nic": pl.DataFrame({
            "timestamp": [t for _ in nodes for t in ts for _ in (0, 1)],
            "instance": [f"{n}:9100" for n in nodes for _ in ts for _ in (0, 1)],
            "device": ["mlx5_0", "mlx5_1"] * 9, "port": ["1"] * 18,
            "node_infiniband_port_data_received_bytes_total": [1_000.0] * 18,
            "node_infiniband_port_data_transmitted_bytes_total": [0.0] * 18}),
        "ipmi": pl.DataFrame({"timestamp": ts * 3, "instance": [f"{n}:9290" for n in nodes for _ in ts],
                              "ipmi_dcmi_power_consumption_watts": [1_000.0] * 9}),
    }
    for fam, df in frames.items():
        (root / fam).mkdir(parents=True)
        df.with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(root / fam / "2026-10-02.parquet")
    seen = statements_on_every_client(wh, monkeypatch)
    c = load_parquet_dir(wh, tmp_path, date(2026, 10, 2), date(2026, 10, 2), cluster="c1")
    written = {t: sum(sql.lstrip().startswith(f"INSERT INTO {t} ") for sql in seen)
               for t in ("gpu_sample", "node_sample", "gpu_pci", "xid_event")}
    assert written["gpu_pci"] == 1 and written["xid_event"] == 1
    assert written["gpu_sample"] > 1 and written["node_sample"] > 1  # groups of nodes (three at most hold rows)
    assert c["gpu_rows"] == 9 and c["node_rows"] == 9 and c["xid_events"] == 2
    assert rows(wh, "SELECT node, formatDateTime(ts, '%R'), xid FROM xid_event FINAL ORDER BY node") == [
        ("gpu02", "00:01", 43), ("gpu03", "00:02", 79)]
    assert rows(wh, "SELECT node, gpu, uuid FROM gpu_pci FINAL ORDER BY node") == [
        (n, 0, f"GPU-{n}") for n in nodes]
    assert rows(wh, "SELECT count(), uniqExact(node, ts) FROM node_sample") == [(9, 9)]
