"""A multi-day telemetry load stages each next day on an engine handle of its own while the day's tables are written
(etl/telemetry_load.py ``DaysAhead``; issue 51 item 3: the demo's backfill kept one of two cores waiting): the
counter steps still need the day before's last readings, so the days are written in order, and a day is
recorded as in only once it and every day before it are.

The figures by hand: one H100 (gpu01, GPU 0) and its node's InfiniBand port, sampled every 30 minutes over
three days (48 samples a day, 144 in all), the energy counter rising 540,000,000 mJ a step (300 W × 1,800 s:
540,000 J) and the port's received bytes 1,000,000 a step. Every step is 540,000 J and 1,000,000 bytes but
the very first sample's (no reading before it): 143 of each, the first of days 2 and 3 included, which only
the day before's last reading (counter_edge, kept by that day's load) gives without reading its file again.
"""

from __future__ import annotations

import threading
from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.etl import telemetry_load
from ops_warehouse.etl.backfill import backfill_key, load_resumably, loaded_through
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.warehouse import Warehouse
from tests.conftest import rows
from tests.handles import statements_on_every_client

DAY1 = date(2026, 10, 1)
DAYS = 3
STEP = timedelta(minutes=30)
N = DAYS * 48


def _site(root):
    t0 = datetime(2026, 10, 1, tzinfo=timezone.utc)
    ts = [t0 + k * STEP for k in range(N)]
    frames = {
        "dcgm": pl.DataFrame({"timestamp": ts, "gpu": ["0"] * N, "UUID": ["GPU-0"] * N,
                              "modelName": ["NVIDIA H100 80GB HBM3"] * N, "Hostname": ["gpu01"] * N,
                              "DCGM_FI_DEV_POWER_USAGE": [300.0] * N,
                              "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": [1e9 + k * 540_000_000.0 for k in range(N)]}),
        "nic": pl.DataFrame({"timestamp": ts, "instance": ["gpu01:9100"] * N, "device": ["mlx5_0"] * N,
                             "port": ["1"] * N,
                             "node_infiniband_port_data_received_bytes_total": [k * 1e6 for k in range(N)],
                             "node_infiniband_port_data_transmitted_bytes_total": [0.0] * N}),
    }
    paths = {}
    for fam, df in frames.items():
        (root / fam).mkdir(parents=True)
        df = df.with_columns(pl.col("timestamp").dt.cast_time_unit("ms"))
        for k in range(DAYS):
            day = DAY1 + timedelta(days=k)
            p = (root / fam / f"{day}.parquet").resolve()
            df.filter(pl.col("timestamp").dt.date() == day).write_parquet(p)
            paths[(fam, day)] = p
    return paths


def _assert_the_steps(wh):
    assert rows(wh, "SELECT count(), countIf(energy_j IS NULL), countIf(energy_j = 540000) FROM gpu_sample FINAL") == [
        (N, 1, N - 1)]
    assert rows(wh, "SELECT count(), countIf(nic_rx_bytes[1] = 1000000) FROM node_sample FINAL") == [(N, N - 1)]
    # the first sample of days 2 and 3: stepped from the day before's last
    assert rows(wh, "SELECT toString(ts), energy_j FROM gpu_sample FINAL WHERE toHour(ts) = 0 AND toMinute(ts) = 0 "
                    "ORDER BY ts") == [("2026-10-01 00:00:00", None), ("2026-10-02 00:00:00", 540000.0),
                                       ("2026-10-03 00:00:00", 540000.0)]
    # the next load starts from each series' last raw value
    assert rows(wh, "SELECT kind, value FROM counter_edge FINAL WHERE ts = '2026-10-03 23:30:00' ORDER BY kind") == [
        ("gpu", {"energy_j": 1e6 + (N - 1) * 540_000.0}), ("node", {"nic_rx_bytes": (N - 1) * 1e6, "nic_tx_bytes": 0.0})]


def _recorded(monkeypatch, wh, log: list, gate: dict | None = None):
    """stage_window and write_window recorded (what, the window's first day, the handle, the thread); with
    ``gate``, day 1's write waits (at most 60 s) until day 2 is staged: only a load that stages the next day
    beside the writes gets there."""
    stage, write = telemetry_load.stage_window, telemetry_load.write_window
    staged_2 = threading.Event()

    def staging(handle, files, cat, cluster, source, window, **kw):
        out = stage(handle, files, cat, cluster, source, window, **kw)
        log.append(("stage", window[0].date(), id(handle), threading.get_ident()))
        if window[0].date() == DAY1 + timedelta(days=1):
            staged_2.set()
        return out

    def writing(s):
        day = s.params["from_ts"].date()
        if gate is not None and day == DAY1:
            gate["overlapped"] = staged_2.wait(60)
        if gate is not None and day == gate.get("fail"):
            raise RuntimeError("the disk is full")
        log.append(("write", day, id(s.wh), threading.get_ident()))
        return write(s)

    monkeypatch.setattr(telemetry_load, "stage_window", staging)
    monkeypatch.setattr(telemetry_load, "write_window", writing)


@pytest.mark.both_forms
def test_the_next_day_is_staged_on_a_handle_of_its_own_while_the_day_is_written(wh, tmp_path, monkeypatch):
    paths = _site(tmp_path / "telemetry")
    seen = statements_on_every_client(wh, monkeypatch)  # every statement, on any handle
    log: list = []
    gate: dict = {}
    _recorded(monkeypatch, wh, log, gate)
    # the progress callback uses the load's own handle, as the backfill's record of the days in does
    c = load_parquet_dir(wh, tmp_path, DAY1, DAY1 + timedelta(days=DAYS - 1), cluster="c1",
                         progress=lambda done, n: wh.query_rows("SELECT 1"))
    assert gate["overlapped"], log
    assert c["gpu_rows"] == N and c["node_rows"] == N and c["quarantined"] == 0
    days = [DAY1 + timedelta(days=k) for k in range(DAYS)]
    assert [(w, d) for w, d, _, _ in log if w == "write"] == [("write", d) for d in days]
    handle = {(w, d): h for w, d, h, _ in log}
    thread = {(w, d): t for w, d, _, t in log}
    # the days take turns on two handles of their own (the load's own handle, the calling thread's, records and
    # refreshes meanwhile: a session runs one statement at a time), each written on the handle that staged it;
    # staged in a thread of their own, beside the writes
    assert handle[("stage", days[0])] == handle[("stage", days[2])] != handle[("stage", days[1])]
    assert id(wh) not in handle.values()
    assert all(handle[("write", d)] == handle[("stage", d)] for d in days)
    assert thread[("stage", days[1])] != thread[("write", days[0])] == threading.get_ident()
    # each day file read once: days 2 and 3 stepped from counter_edge, not from the day before's file again (in
    # process the statements name the files; a server is sent their rows)
    if wh.embedded:
        assert {k: sum(str(p) in sql for sql in seen) for k, p in paths.items()} == {k: 1 for k in paths}
    _assert_the_steps(wh)


def _handles_opened(monkeypatch) -> list[Warehouse]:
    """Every handle the load opens beside ``wh``, in order (so a test can see each was closed)."""
    handles: list[Warehouse] = []
    another = Warehouse.another_handle

    def opened(self):
        handles.append(another(self))
        return handles[-1]

    monkeypatch.setattr(Warehouse, "another_handle", opened)
    return handles


def test_a_failed_day_leaves_the_days_before_it_recorded_and_nothing_staged(wh, tmp_path, monkeypatch):
    _site(tmp_path / "telemetry")
    handles = _handles_opened(monkeypatch)
    log: list = []
    _recorded(monkeypatch, wh, log, {"fail": DAY1 + timedelta(days=1)})
    source, last = f"file:{tmp_path}", DAY1 + timedelta(days=DAYS - 1)

    def load(a, b, p):
        return load_parquet_dir(wh, tmp_path, a, b, cluster="c1", progress=p)

    with pytest.raises(RuntimeError, match="the disk is full"):
        load_resumably(wh, source, DAY1, last, load, chunk_days=7)
    # day 1 in and recorded; day 2 failed; day 3, staged beside day 2's write, dropped, the days' handles closed
    assert loaded_through(wh, backfill_key(source, DAY1, last)) == DAY1
    assert [(w, d) for w, d, _, _ in log] == [("stage", DAY1), ("stage", DAY1 + timedelta(days=1)), ("write", DAY1),
                                              ("stage", DAY1 + timedelta(days=2))]
    assert len(handles) == 2 and all(h._closed for h in handles)
    assert rows(wh, "SELECT toString(min(ts)), toString(max(ts)) FROM gpu_sample") == [
        ("2026-10-01 00:00:00", "2026-10-01 23:30:00")]
    monkeypatch.undo()
    c = load_resumably(wh, source, DAY1, last, load, chunk_days=7)
    assert c["resumed_from"] == DAY1 + timedelta(days=1) and c["gpu_rows"] == 2 * 48
    _assert_the_steps(wh)


def test_a_backfill_in_chunks_stages_each_chunks_first_day_beside_the_chunk_befores_last(wh, tmp_path, monkeypatch):
    """Chunks of one day (the demo's are 7): with one DaysAhead held across the chunks, day 2, the second chunk's
    only day, is staged on a handle of its own while day 1, the first chunk's last, is written (day 1's write
    waits for it: fails after 60 s where each chunk began with nothing staged); each day is recorded as in when
    its chunk is, each file read once, the steps as by hand. A failure in day 3's write drops nothing but
    what was staged, and the rerun resumes at day 3 with the same steps."""
    paths = _site(tmp_path / "telemetry")
    handles = _handles_opened(monkeypatch)
    seen = statements_on_every_client(wh, monkeypatch)
    log: list = []
    gate: dict = {"fail": DAY1 + timedelta(days=2)}
    _recorded(monkeypatch, wh, log, gate)
    source, last = f"file:{tmp_path}", DAY1 + timedelta(days=DAYS - 1)
    recorded = []

    def load(a, b, p):
        return load_parquet_dir(wh, tmp_path, a, b, cluster="c1", progress=p, ahead=ahead, through=last)

    with pytest.raises(RuntimeError, match="the disk is full"), telemetry_load.DaysAhead(wh, True) as ahead:
        load_resumably(wh, source, DAY1, last, load, chunk_days=1,
                       progress=lambda done, n: recorded.append(loaded_through(wh, backfill_key(source, DAY1, last))))
    assert gate["overlapped"], log
    days = [DAY1 + timedelta(days=k) for k in range(DAYS)]
    # day 2 staged beside day 1's write (the gate), day 3 beside day 2's: each a chunk's first; day 3's write
    # failed (its stage and day 2's write are logged in either order: two threads)
    assert [d for w, d, _, _ in log if w == "stage"] == days
    assert [d for w, d, _, _ in log if w == "write"] == days[:2]
    handle = {(w, d): h for w, d, h, _ in log}
    assert id(wh) not in handle.values() and handle[("stage", days[1])] == handle[("write", days[1])]
    assert handle[("stage", days[0])] != handle[("stage", days[1])]
    assert recorded == [None, DAY1, DAY1 + timedelta(days=1)]  # each chunk's day in as its chunk ended
    assert loaded_through(wh, backfill_key(source, DAY1, last)) == days[1]
    assert len(handles) == 2 and all(h._closed for h in handles)
    if wh.embedded:  # day 3's file was read once for its stage; days 1 and 2's once each
        assert {k: sum(str(p) in sql for sql in seen) for k, p in paths.items()} == {k: 1 for k in paths}
    monkeypatch.undo()
    with telemetry_load.DaysAhead(wh, True) as ahead:
        c = load_resumably(wh, source, DAY1, last, load, chunk_days=1)
    assert c["resumed_from"] == days[2] and c["gpu_rows"] == 48
    _assert_the_steps(wh)
