-- The per-sample tables partitioned by day (issue 50 item 4). A night's load and its refresh read one day
-- of samples (the rollups, run_sample_hour, run_telemetry), but with a month's partition ordered by series
-- first a granule holds a GPU's samples of several days, so the primary key excluded nothing: every read of
-- a day read every granule of its month (182 of 182 after 6 demo nights). A day's partition is read alone
-- (docs/benchmarks.md, issue 50 item 4, round 4), and each night's insert stays its own part instead of
-- being merged again into the month's.
--
-- Each table is rebuilt with the new partition key and keeps its rows, read with FINAL (one row a key, the
-- one the old table's queries saw). The first DROP makes a rerun after an interrupted migration start over:
-- at any point the original table, or the rebuilt one after the exchange, holds every row. The copy
-- streams a block at a time, a month's partition after another (FINAL within each month, one thread), and
-- a block holds up to a month of days: max_partitions_per_insert_block (100 by default) is lifted on these
-- inserts (and on the loads' inserts, etl/telemetry_insert.py, where a window may span more). Blocks of
-- 262,144 rows: the 31-night demo warehouse (8 M GPU rows) was copied in 1,344 MB peak RSS with the
-- defaults (two threads, 1 M-row blocks), 671 MB so (docs/benchmarks.md). On a cluster each shard's rows
-- are sent back to it by the Distributed table's key; the Distributed tables in front keep their columns
-- and name.

DROP TABLE IF EXISTS gpu_sample_v2{{local}} {{on_cluster}};

CREATE TABLE IF NOT EXISTS gpu_sample_v2{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    gpu UInt16,
    ts DateTime('UTC'),
    step_s UInt32,
    model_name LowCardinality(String),
    uuid String,
    hpc_job String DEFAULT '',
    gpu_util_pct Nullable(Float32),
    sm_active Nullable(Float32),
    gr_engine_active Nullable(Float32),
    tensor_active Nullable(Float32),
    dram_active Nullable(Float32),
    fb_used_mib Nullable(Float32),
    fb_free_mib Nullable(Float32),
    power_w Nullable(Float32),
    energy_j Nullable(Float64),
    temp_c Nullable(Float32),
    sm_clock_mhz Nullable(Float32),
    throttle_reasons Nullable(UInt32),
    xid_last Nullable(UInt32),
    source LowCardinality(String),
    pcie_tx_bytes_per_s Nullable(Float64),
    pcie_rx_bytes_per_s Nullable(Float64),
    nvlink_tx_bytes_per_s Nullable(Float64),
    nvlink_rx_bytes_per_s Nullable(Float64),
    nvlink_bytes Nullable(Float64),
    util_source LowCardinality(String) DEFAULT ''
)
ENGINE = {{mergetree ReplacingMergeTree}}
PARTITION BY toYYYYMMDD(ts)
ORDER BY (cluster, node, gpu, ts);

INSERT INTO {{sharded gpu_sample_v2 cityHash64(cluster, node)}}
SELECT cluster, node, gpu, ts, step_s, model_name, uuid, hpc_job, gpu_util_pct, sm_active, gr_engine_active,
       tensor_active, dram_active, fb_used_mib, fb_free_mib, power_w, energy_j, temp_c, sm_clock_mhz,
       throttle_reasons, xid_last, source, pcie_tx_bytes_per_s, pcie_rx_bytes_per_s, nvlink_tx_bytes_per_s,
       nvlink_rx_bytes_per_s, nvlink_bytes, util_source
FROM gpu_sample FINAL
SETTINGS max_partitions_per_insert_block = 0, max_threads = 1, do_not_merge_across_partitions_select_final = 1,
         min_insert_block_size_rows = 262144;

EXCHANGE TABLES gpu_sample{{local}} AND gpu_sample_v2{{local}} {{on_cluster}};

DROP TABLE gpu_sample_v2{{local}} {{on_cluster}};

DROP TABLE IF EXISTS node_sample_v2{{local}} {{on_cluster}};

CREATE TABLE IF NOT EXISTS node_sample_v2{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    ts DateTime('UTC'),
    step_s UInt32,
    nic_device Array(LowCardinality(String)),
    nic_rx_bytes Array(Float64),
    nic_tx_bytes Array(Float64),
    lustre_read_bytes Nullable(Float64),
    lustre_write_bytes Nullable(Float64),
    node_power_w Nullable(Float32),
    source LowCardinality(String)
)
ENGINE = {{mergetree ReplacingMergeTree}}
PARTITION BY toYYYYMMDD(ts)
ORDER BY (cluster, node, ts);

INSERT INTO {{sharded node_sample_v2 cityHash64(cluster, node)}}
SELECT cluster, node, ts, step_s, nic_device, nic_rx_bytes, nic_tx_bytes, lustre_read_bytes, lustre_write_bytes,
       node_power_w, source
FROM node_sample FINAL
SETTINGS max_partitions_per_insert_block = 0, max_threads = 1, do_not_merge_across_partitions_select_final = 1,
         min_insert_block_size_rows = 262144;

EXCHANGE TABLES node_sample{{local}} AND node_sample_v2{{local}} {{on_cluster}};

DROP TABLE node_sample_v2{{local}} {{on_cluster}};
