-- The grains every report reads besides capacity_node_hour (issue 16): kept up to date by the loads that
-- change their inputs (etl/grains.py), for the hours and days a load changed; reports only read them.
--
-- run_node_hour: the run → node → hour fan-out (sql/intermediate/run_fanout.sql: a run's GPUs spread evenly
-- over its nodes, every run that held resources), one row per run, node and hour it held the node, with
-- the node's telemetry in that hour from capacity_node_hour, as rates a run's share is multiplied by: per
-- GPU-second allocated on the node (activity, energy: shared by allocation) and per GPU-second of the
-- node's capacity (telemetry coverage, NIC and storage bytes: shared by the node's GPUs). What chargeback,
-- the daily timeline, stragglers and the per-run efficiency read (sql/marts/job_efficiency.sql), for any
-- window: [s, e) is the part of the hour the run held the node, so a window that cuts an hour takes its
-- part. Refreshed by sql/intermediate/run_node_hour.sql: a refreshed hour's rows are replaced, and a row
-- the refresh no longer produces is marked deleted (is_deleted, read away by FINAL), so reloads and
-- backfills leave it as a clean load does. The rows keep the run's account; the project is mapped when
-- read (the config's [projects] may change without a load).
CREATE TABLE IF NOT EXISTS run_node_hour {{on_cluster}}
(
    cluster LowCardinality(String),
    hour DateTime('UTC'),
    node String,
    job_id String,
    submit_ts DateTime('UTC'),
    account LowCardinality(String),
    reservation LowCardinality(String),
    run_node_count UInt32,         -- the run's nodes
    gpus_per_node Float64,         -- the run's GPUs ÷ its nodes
    s DateTime('UTC'),             -- the part of the hour the run held the node: [s, e)
    e DateTime('UTC'),
    gpu_s Float64,                 -- gpus_per_node × (e − s)
    gpu_model String,              -- the node's, from capacity_node_hour ('' when the node has no capacity row)
    has_capacity UInt8,            -- 1 when capacity_node_hour has the node and hour
    -- the node's telemetry in the hour (NULL where its divisor is 0 or there is no capacity row)
    covered_per_capacity Nullable(Float64),    -- covered_gpu_s ÷ capacity_gpu_s
    util_per_allocated Nullable(Float64),      -- util_gpu_s ÷ allocated_gpu_s
    sm_per_allocated Nullable(Float64),
    tensor_per_allocated Nullable(Float64),
    dram_per_allocated Nullable(Float64),
    energy_j_per_allocated Nullable(Float64),
    nic_rx_per_capacity Nullable(Float64),     -- bytes ÷ capacity_gpu_s
    nic_tx_per_capacity Nullable(Float64),
    read_per_capacity Nullable(Float64),
    write_per_capacity Nullable(Float64),
    node_util Nullable(Float64),               -- util_gpu_s ÷ covered_gpu_s: the node's mean GPU utilization (0–1)
    is_deleted UInt8,
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(refreshed_at, is_deleted)}}
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, node, job_id, submit_ts);

-- gpu_day: the hourly GPU rollups (gpu_hour) summed per GPU and day, for the marts that read a GPU over a
-- month (the heatmap, throttling): a day's row holds every hour gpu_hour has of it. Refreshed with the
-- hourly rollups by the telemetry loads (sql/intermediate/gpu_day.sql); a mart reads it for the whole
-- days of its window that ended by the time the loaded data reaches, and gpu_hour for the other hours.
CREATE TABLE IF NOT EXISTS gpu_day {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    gpu UInt16,
    day Date,
    model_name LowCardinality(String),
    covered_s UInt64,
    util_pct_s Nullable(Float64),   -- Σ gpu_util_pct_avg × covered_s
    power_w_s Nullable(Float64),    -- Σ power_w_avg × covered_s
    throttled_s UInt64,
    temp_c_max Nullable(Float64),
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYear(day)
ORDER BY (cluster, node, gpu, day);

-- job_run: the job-run model (sql/intermediate/fct_job_run.sql: the loaded runs deduplicated, requeued
-- runs marked superseded, the interval each held its resources, XDMoD's bins), one row per run, as the
-- table fct_job_run reads: every job statistic reads runs, and the model's window over each job's runs is
-- computed when runs are loaded, not by every read. The job loads refresh the jobs they wrote
-- (sql/intermediate/job_run.sql); the upgrade rebuilds every run when the model's file changes. The
-- columns are slurm_job_run's, then the model's (a column added to slurm_job_run is added here too).
CREATE TABLE IF NOT EXISTS job_run {{on_cluster}}
(
    cluster LowCardinality(String),
    job_id String,
    job_id_raw UInt64,
    array_job_id UInt64,
    array_task_id Int64,
    het_job_id UInt64,
    het_job_offset Int32,
    job_name String,
    user LowCardinality(String),
    uid Nullable(UInt32),
    account LowCardinality(String),
    group_name LowCardinality(String),
    partition LowCardinality(String),
    qos LowCardinality(String),
    reservation LowCardinality(String),
    state LowCardinality(String),
    cancelled_by_uid Nullable(UInt32),
    exit_code Nullable(Int32),
    exit_signal Nullable(Int32),
    submit_ts DateTime('UTC'),
    eligible_ts Nullable(DateTime('UTC')),
    start_ts Nullable(DateTime('UTC')),
    end_ts Nullable(DateTime('UTC')),
    as_of_ts DateTime('UTC'),
    elapsed_s UInt64,
    timelimit_s Nullable(UInt64),
    timelimit_kind LowCardinality(String),
    nnodes UInt32,
    ncpus UInt32,
    req_cpus Nullable(UInt32),
    req_mem String,
    alloc_mem_mib Nullable(Float64),
    gpus UInt32,
    gpu_type LowCardinality(String),
    billing Nullable(UInt64),
    alloc_tres String,
    req_tres String,
    node_list String,
    nodes Array(String),
    is_final UInt8,
    never_ran UInt8,
    source LowCardinality(String),
    source_line UInt64,
    _version UInt64,
    next_submit_ts Nullable(DateTime('UTC')),
    next_user Nullable(String),
    next_job_name Nullable(String),
    is_superseded Nullable(UInt8),
    usage_start_ts Nullable(DateTime('UTC')),
    usage_end_ts Nullable(DateTime('UTC')),
    wall_s Nullable(Int64),
    gpu_count_bin String,
    job_size_bin String,
    wall_time_bin String,
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYYYYMM(submit_ts)
ORDER BY (cluster, job_id, submit_ts);

-- as_of_by_cluster: how far each cluster's loaded job history reaches (sql/intermediate/cluster_as_of.sql:
-- the latest time a loaded job record describes or a source was read through, and the earliest start),
-- one row per cluster, as the view cluster_as_of reads it: the capacity grain and every mart that stops
-- at the as-of time read it, and it changes only when jobs are loaded (sql/intermediate/as_of_by_cluster.sql).
CREATE TABLE IF NOT EXISTS as_of_by_cluster {{on_cluster}}
(
    cluster LowCardinality(String),
    as_of_ts DateTime('UTC'),
    first_ts DateTime('UTC'),
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(refreshed_at)}}
ORDER BY cluster;
