-- Downsampled telemetry, wide by grain: one row per GPU per step, one per node per step (per-NIC detail in
-- arrays aligned with nic_device), plus Xid events. Counters (energy, NIC, Lustre) are stored as the amount in the step ending at ts
-- (resets handled at load), so any later roll-up is a plain sum. A row is keyed by its series and time:
-- reloading a window replaces, never adds.

CREATE TABLE IF NOT EXISTS gpu_sample{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    gpu UInt16,
    ts DateTime('UTC'),
    step_s UInt32,
    model_name LowCardinality(String),
    uuid String,
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
    source LowCardinality(String)
)
ENGINE = {{mergetree ReplacingMergeTree}}
PARTITION BY toYYYYMM(ts)
ORDER BY (cluster, node, gpu, ts);
-- distributed: cityHash64(cluster, node)

CREATE TABLE IF NOT EXISTS node_sample{{local}} {{on_cluster}}
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
PARTITION BY toYYYYMM(ts)
ORDER BY (cluster, node, ts);
-- distributed: cityHash64(cluster, node)

-- DCGM_FI_DEV_XID_ERRORS is a gauge holding the last Xid: each change to a non-zero value is an event.
CREATE TABLE IF NOT EXISTS xid_event{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    gpu UInt16,
    ts DateTime('UTC'),
    xid UInt32,
    source LowCardinality(String)
)
ENGINE = {{mergetree ReplacingMergeTree}}
ORDER BY (cluster, node, gpu, ts, xid);
-- distributed: cityHash64(cluster, node)

-- Where each incremental source got to.
CREATE TABLE IF NOT EXISTS etl_watermark {{on_cluster}}
(
    source String,
    watermark_ts DateTime('UTC'),
    updated_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(updated_at)}}
ORDER BY source;
