-- capacity_node_hour: the hourly grain every capacity, utilization, idle and cost model reads (mart layer).
-- One row per node in service and hour: its GPUs' time split into what was bought, unusable, reserved and
-- allocated, and what the telemetry saw them do. Refreshed by the engine per window from the raw and fact
-- layers (sql/intermediate/capacity_node_hour.sql): recomputing an hour replaces its row.
-- Units: GPU-seconds (*_gpu_s; a GPU over an hour is 3600), joules, bytes.
CREATE TABLE IF NOT EXISTS capacity_node_hour{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node String,
    hour DateTime('UTC'),
    partition LowCardinality(String),
    gpu_model LowCardinality(String),
    rack LowCardinality(String),
    gpus UInt16,
    capacity_gpu_s Float64,      -- GPUs in service × seconds of the hour they were
    down_gpu_s Float64,          -- of which the node was DOWN
    drained_gpu_s Float64,       -- of which DRAINED (and not down)
    reserved_gpu_s Float64,      -- of the available time, inside a reservation
    reservation String,          -- the reservation holding the node then ('' if none)
    allocated_gpu_s Float64,     -- allocated to job runs (every run, requeued ones included)
    allocated_resv_gpu_s Float64, -- of which to jobs running in the reservation
    reserved_idle_gpu_s Float64, -- reserved, usable, and allocated to nobody
    free_gpu_s Float64,          -- usable, not reserved, allocated to nobody
    busy_gpu_s Float64,          -- telemetry: GPU-hours whose mean GPU utilization reached the idle threshold
    covered_gpu_s Float64,       -- telemetry: GPU time with samples
    util_gpu_s Float64,          -- Σ mean utilization (0–1) × covered time
    sm_gpu_s Float64,
    tensor_gpu_s Float64,
    dram_gpu_s Float64,
    gpu_energy_j Float64,
    throttled_gpu_s Float64,
    nic_rx_bytes Float64,
    nic_tx_bytes Float64,
    storage_read_bytes Float64,
    storage_write_bytes Float64,
    idle_util_pct Float64,       -- the threshold busy_gpu_s was computed with
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, node, hour);
-- distributed: cityHash64(cluster, node)
