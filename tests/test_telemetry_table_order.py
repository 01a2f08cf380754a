"""The statements that write the sample tables from a load's stage run on one thread (etl/telemetry_insert.py
``_TABLE_THREADS``; issue 50 round 6): on several, the engine scatters every staged row to a thread by its
series' hash for the window, and the threads' sorted streams reach the MergeTree writer interleaved, which
sorts the block again (a third of gpu_sample's statement: docs/benchmarks.md). The rows are the same.

The figures are worked out by hand from the rows written here: two nodes (gpu01, gpu02) of two GPUs each,
sampled each minute from 2026-10-01 23:58 to 2026-10-02 00:01 (two samples in each day's files), the files
time-major (every GPU at one time, then the next time) as dcgm-exporter's scrapes are, so a series' previous
sample is never its neighbour in the file; the second day is loaded after the first (its stage then holds the
day's rows and the first day's counter edges: two blocks, which the engine reads on two threads unless told):
- GPU g of node n's energy counter at minute k is (1,000,000 + 1,000 × n + 100 × g) J + k × 18,000 J (mJ in
  the file): every step 18,000 J (300 W × 60 s), the very first unknown (no day before);
- one InfiniBand port a node, received bytes 1,000 × n + 1,000 × k²: steps 1,000, 3,000, 5,000.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import polars as pl

from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.conftest import rows

T0 = datetime(2026, 10, 1, 23, 58, tzinfo=timezone.utc)


def _site(root):
    gpu_rows, nic_rows = [], []
    for k in range(4):
        for n in (1, 2):
            for g in (0, 1):
                gpu_rows.append({"timestamp": T0 + timedelta(minutes=k), "gpu": str(g), "Hostname": f"gpu0{n}",
                                 "UUID": f"GPU-{n}-{g}", "modelName": "NVIDIA H100 80GB HBM3",
                                 "DCGM_FI_DEV_POWER_USAGE": 300.0,
                                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
                                     float((1_000_000 + 1_000 * n + 100 * g + 18_000 * k) * 1_000)})
            nic_rows.append({"timestamp": T0 + timedelta(minutes=k), "instance": f"gpu0{n}:9100", "device": "mlx5_0",
                             "port": "1", "node_infiniband_port_data_received_bytes_total": float(1_000 * n + 1_000 * k * k),
                             "node_infiniband_port_data_transmitted_bytes_total": 0.0})
    for fam, data in (("dcgm", gpu_rows), ("nic", nic_rows)):
        (root / fam).mkdir(parents=True)
        df = pl.DataFrame(data).with_columns(pl.col("timestamp").dt.cast_time_unit("ms"))
        for day in ("2026-10-01", "2026-10-02"):
            df.filter(pl.col("timestamp").dt.strftime("%F") == day).write_parquet(root / fam / f"{day}.parquet")


def test_the_sample_tables_are_written_in_their_order_on_one_thread(wh, tmp_path, monkeypatch):
    _site(tmp_path)
    load_parquet_dir(wh, tmp_path, date(2026, 10, 1), date(2026, 10, 1), cluster="c1")
    pipelines = {}
    client = wh.client
    command = client.command

    def explained(sql, *a, **kw):
        # each sample table's statement explained as the load sends it, the stage still there; the engine's
        # default of threads raised, so that only the statement's own setting can keep it on one
        table = next((t for t in ("gpu_sample", "node_sample") if sql.lstrip().startswith(f"INSERT INTO {t} ")), None)
        if table:
            select = sql[sql.index("SELECT"):]
            settings = {"max_threads": 4, **(kw.get("settings") or {})}
            pipelines[table] = "\n".join(r[0] for r in wh.query_rows(
                f"EXPLAIN PIPELINE {select} SETTINGS " + ", ".join(f"{k} = {v}" for k, v in settings.items()),
                kw.get("parameters")))
        return command(sql, *a, **kw)

    monkeypatch.setattr(client, "command", explained)
    load_parquet_dir(wh, tmp_path, date(2026, 10, 2), date(2026, 10, 2), cluster="c1")
    assert set(pipelines) == {"gpu_sample", "node_sample"}
    for table, pipeline in pipelines.items():
        assert "ScatterByPartitionTransform" not in pipeline, (table, pipeline)
        assert "MergeSortingTransform" in pipeline and "× " not in pipeline.split("MergeSortingTransform")[1][:4], (
            table, pipeline)
    # the steps, by hand: 18,000 J each but the first of each GPU (unknown: -1 here); the NIC's 1,000, 3,000, 5,000
    assert rows(wh, "SELECT node, gpu, groupArray(ifNull(energy_j, -1)) FROM (SELECT * FROM gpu_sample FINAL ORDER BY ts) "
                    "GROUP BY node, gpu ORDER BY node, gpu") == [
        (n, g, [-1.0, 18_000.0, 18_000.0, 18_000.0]) for n in ("gpu01", "gpu02") for g in (0, 1)]
    assert rows(wh, "SELECT node, groupArray(nic_rx_bytes) FROM (SELECT * FROM node_sample FINAL ORDER BY ts) "
                    "GROUP BY node ORDER BY node") == [
        (n, [[0.0], [1_000.0], [3_000.0], [5_000.0]]) for n in ("gpu01", "gpu02")]
