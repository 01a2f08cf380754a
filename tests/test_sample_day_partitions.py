"""The per-sample tables partitioned by day (migration 0023, issue 50 item 4): a read of one day of samples, as
the night's rollups and grains make, touches that day's rows only (with month partitions it read every granule
of the month); a warehouse made by the schema before is migrated with every row its queries showed; a load of
more than 100 days in one insert (an OpenMetrics file of months) still loads. The figures are worked out by
hand from the rows each test writes."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timedelta, timezone
from importlib.resources import files
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.migrations import apply_migrations
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import rows

MIGRATION = "0023_sample_day_partitions.sql"
OCT1 = datetime(2026, 10, 1, tzinfo=timezone.utc)


def _insert_gpu_day(wh, day: int, nodes: int) -> None:
    """Day ``day`` (1 = Oct 1) of ``nodes`` nodes of 8 GPUs at 60 s, in one insert as a night's load makes it;
    node n's GPU g draws n * 100 + g W."""
    wh.command(
        "INSERT INTO gpu_sample (cluster, node, gpu, ts, step_s, model_name, uuid, power_w, source) "
        "SELECT 'c', concat('n', toString(n)), g, toDateTime('2026-10-01 00:00:00', 'UTC') + "
        "toIntervalDay({d:UInt32}) + s * 60, 60, 'H100', '', toFloat32(n * 100 + g), 't' "
        "FROM (SELECT number + 1 AS n FROM numbers({nodes:UInt32})) AS a "
        "CROSS JOIN (SELECT toUInt16(number) AS g FROM numbers(8)) AS b "
        "CROSS JOIN (SELECT number AS s FROM numbers(1440)) AS c",
        {"d": day - 1, "nodes": nodes})


def _insert_node_day(wh, day: int, nodes: int) -> None:
    """Day ``day`` of ``nodes`` nodes at 60 s; node n draws n W."""
    wh.command(
        "INSERT INTO node_sample (cluster, node, ts, step_s, node_power_w, source) "
        "SELECT 'c', concat('n', toString(n)), toDateTime('2026-10-01 00:00:00', 'UTC') + toIntervalDay({d:UInt32}) "
        "+ s * 60, 60, toFloat32(n), 't' FROM (SELECT number + 1 AS n FROM numbers({nodes:UInt32})) AS a "
        "CROSS JOIN (SELECT number AS s FROM numbers(1440)) AS b", {"d": day - 1, "nodes": nodes})


DAY2 = {"lo": datetime(2026, 10, 2, tzinfo=timezone.utc), "hi": datetime(2026, 10, 3, tzinfo=timezone.utc)}


def test_a_day_of_samples_is_read_alone_once_the_month_is_merged(wh):
    # three nights of 2 nodes x 8 GPUs and of 20 nodes, merged as the engine merges a partition's parts in
    # the background; the second day read under a limit of that day's own rows: with month partitions the
    # day's samples sit in every granule of the merged part (sorted by series first) and the read of
    # 69,120 GPU rows (86,400 node rows) exceeds it
    for day in (1, 2, 3):
        _insert_gpu_day(wh, day, nodes=2)
        _insert_node_day(wh, day, nodes=20)
    wh.command("OPTIMIZE TABLE gpu_sample FINAL")
    wh.command("OPTIMIZE TABLE node_sample FINAL")
    gpu_day_rows = 2 * 8 * 1440  # 23,040
    got = rows(wh, "SELECT count(), sum(power_w) FROM gpu_sample FINAL WHERE ts >= {lo:DateTime('UTC')} "
                   f"AND ts < {{hi:DateTime('UTC')}} SETTINGS max_rows_to_read = {gpu_day_rows}", **DAY2)
    # sum over n in {1, 2}, g in 0..7 of (100 n + g) = 2,456 W a minute, 1,440 minutes
    assert got == [(gpu_day_rows, 1440 * 2456)]
    node_day_rows = 20 * 1440  # 28,800
    got = rows(wh, "SELECT count(), sum(node_power_w) FROM node_sample FINAL WHERE ts >= {lo:DateTime('UTC')} "
                   f"AND ts < {{hi:DateTime('UTC')}} SETTINGS max_rows_to_read = {node_day_rows}", **DAY2)
    assert got == [(node_day_rows, 1440 * 210)]  # 1 + ... + 20 = 210 W a minute


def _sql_before(tmp_path: Path) -> Path:
    """The shipped sql/ as it was before migration 0023 (it and any later migration left out)."""
    root = tmp_path / "sql-before"
    shutil.copytree(Path(str(files("ops_warehouse.sql"))), root)
    for p in (root / "migrations").glob("*.sql"):
        if p.name >= MIGRATION:
            p.unlink()
    return root


def test_a_warehouse_of_month_partitions_is_migrated_with_every_row(tmp_path):
    # 130 days (Oct 1 to Feb 7) of one GPU and one node, hourly, in the old schema: the migration's copy is one
    # block of 130 day partitions (more than max_partitions_per_insert_block's 100)
    cfg = Config(dsn=f"chdb://{tmp_path / 'wh'}")
    wh = open_warehouse(cfg, migrate=False)
    try:
        apply_migrations(wh, root=_sql_before(tmp_path))
        key = "SELECT name, partition_key FROM system.tables WHERE database = currentDatabase() " \
              "AND name IN ('gpu_sample', 'node_sample') ORDER BY name"
        assert rows(wh, key) == [("gpu_sample", "toYYYYMM(ts)"), ("node_sample", "toYYYYMM(ts)")]
        hours = 130 * 24  # 3,120
        wh.command("INSERT INTO gpu_sample (cluster, node, gpu, ts, step_s, model_name, uuid, hpc_job, power_w, "
                   "util_source, source) SELECT 'c', 'n1', 0, "
                   "toDateTime('2026-10-01 00:00:00', 'UTC') + number * 3600, 3600, 'H100', 'GPU-1', '42', "
                   "toFloat32(number % 100), 'gpu_util', 't' "
                   f"FROM numbers({hours})")
        # a later load's row for hour 5 replaces the first one (ReplacingMergeTree: the last inserted wins)
        wh.command("INSERT INTO gpu_sample (cluster, node, gpu, ts, step_s, model_name, uuid, power_w, source) "
                   "VALUES ('c', 'n1', 0, toDateTime('2026-10-01 05:00:00', 'UTC'), 3600, 'H100', 'GPU-1', 1000, 't')")
        wh.command("INSERT INTO node_sample (cluster, node, ts, step_s, nic_device, nic_rx_bytes, nic_tx_bytes, "
                   "node_power_w, source) SELECT 'c', 'n1', toDateTime('2026-10-01 00:00:00', 'UTC') + number * 3600, "
                   "3600, ['mlx5_0'], [toFloat64(number)], [1.0], 500, 't' "
                   f"FROM numbers({hours})")
        assert rows(wh, "SELECT uniqExact(partition_id) FROM system.parts WHERE database = currentDatabase() "
                        "AND table = 'gpu_sample' AND active") == [(5,)]  # Oct, Nov, Dec, Jan, Feb

        applied = apply_migrations(wh)
        assert MIGRATION in applied
        assert rows(wh, key) == [("gpu_sample", "toYYYYMMDD(ts)"), ("node_sample", "toYYYYMMDD(ts)")]
        # hours 0..3,119 draw hour % 100 W: 31 cycles of 0..99 (4,950 W each) and 0..19 (190 W) = 153,640 W;
        # hour 5 draws 1,000 W instead of 5 W after the second load
        assert rows(wh, "SELECT count(), sum(power_w), countIf(hpc_job = '42'), countIf(util_source = 'gpu_util'), "
                        "min(ts), max(ts) FROM gpu_sample FINAL") == [
            (hours, 153_640 - 5 + 1000, hours - 1, hours - 1, datetime(2026, 10, 1),
             datetime(2026, 10, 1) + timedelta(hours=hours - 1))]
        assert rows(wh, "SELECT power_w, hpc_job FROM gpu_sample FINAL WHERE ts = toDateTime('2026-10-01 05:00:00', "
                        "'UTC')") == [(1000.0, "")]
        # sum of 0..3,119 = 3,119 * 3,120 / 2 = 4,865,640 bytes received
        assert rows(wh, "SELECT count(), sum(nic_rx_bytes[1]), sum(node_power_w) FROM node_sample FINAL") == [
            (hours, 4_865_640.0, 500.0 * hours)]
        for table in ("gpu_sample", "node_sample"):
            assert rows(wh, "SELECT uniqExact(partition_id), min(partition_id), max(partition_id) FROM system.parts "
                            "WHERE database = currentDatabase() AND table = {t:String} AND active",
                        t=table) == [(130, "20261001", "20270207")]
        # nothing of the copy is left behind, and a second run of the schema applies nothing
        assert not rows(wh, "SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE '%_v2'")
        assert apply_migrations(wh) == []
    finally:
        wh.close()
        close_embedded()


def test_a_text_file_of_more_than_100_days_loads_in_one_insert(wh, tmp_path):
    # one GPU's power every 12 hours for 101 days (Oct 1 to Jan 9), one file, one window: the load's insert
    # is one block of 101 day partitions
    t0_ms = int(OCT1.timestamp() * 1000)
    lines = [f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",Hostname="n1",modelName="NVIDIA H100 80GB HBM3"}} {i % 7} '
             f"{t0_ms + i * 12 * 3600 * 1000}" for i in range(202)]
    path = tmp_path / "months.prom"
    path.write_text("\n".join(lines) + "\n")
    c = load_text_files(wh, [path], date(2026, 10, 1), date(2027, 1, 9), cluster="c")
    assert c["gpu_rows"] == 202 and c["quarantined"] == 0
    # i % 7 over i = 0..201: 28 cycles of 0..6 (21 W each) and 0..5 (15 W) = 603 W
    assert rows(wh, "SELECT count(), sum(power_w), min(ts), max(ts) FROM gpu_sample FINAL") == [
        (202, 603.0, datetime(2026, 10, 1), datetime(2026, 10, 1) + timedelta(hours=12 * 201))]
    assert rows(wh, "SELECT uniqExact(partition_id) FROM system.parts WHERE database = currentDatabase() "
                    "AND table = 'gpu_sample' AND active") == [(101,)]
