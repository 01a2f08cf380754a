-- Hourly rollups of the telemetry, kept for years after the fine rows expire (TTL, set from the config).
-- They are refreshed by the engine from the fine tables for each loaded window (sql/intermediate/
-- telemetry_hourly.sql), not by a materialized view on insert: an insert-triggered view would count a
-- reloaded window twice, and every load here must be idempotent. Rows are keyed by series and hour.

CREATE TABLE IF NOT EXISTS gpu_hour{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    gpu UInt16,
    hour DateTime('UTC'),
    model_name LowCardinality(String),
    samples UInt32,
    covered_s UInt32,
    gpu_util_pct_avg Nullable(Float64),
    sm_active_avg Nullable(Float64),
    tensor_active_avg Nullable(Float64),
    dram_active_avg Nullable(Float64),
    fb_used_mib_max Nullable(Float64),
    power_w_avg Nullable(Float64),
    power_w_max Nullable(Float64),
    energy_j Nullable(Float64),
    temp_c_max Nullable(Float64),
    throttled_s UInt32,
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYear(hour)
ORDER BY (cluster, node, gpu, hour);
-- distributed: cityHash64(cluster, node)

CREATE TABLE IF NOT EXISTS node_hour{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    hour DateTime('UTC'),
    samples UInt32,
    nic_rx_bytes UInt64,
    nic_tx_bytes UInt64,
    lustre_read_bytes UInt64,
    lustre_write_bytes UInt64,
    node_power_w_avg Nullable(Float64),
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYear(hour)
ORDER BY (cluster, node, hour);
-- distributed: cityHash64(cluster, node)
