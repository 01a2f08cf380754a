-- Slurm accounting, one row per job run and per job step, as loaded (raw layer).
--
-- Template slots (rendered by ops_warehouse.migrations for the configured deployment):
--   {{local}}        "_local" on a cluster, where the plain name is the Distributed table
--   {{on_cluster}}   "ON CLUSTER <name>" on a cluster
--   {{mergetree E}}  engine E, or its Replicated* form with a per-shard path
--   {{mergetree_all E}} engine E, or Replicated* replicated to every node (small dimensions)
--   "-- distributed: KEY" after a statement: on a cluster, a Distributed table sharded by KEY.
--
-- A job run is identified by (cluster, job_id, submit_ts): slurmdbd's own unique key is (id_job,
-- time_submit), which keeps requeued runs and ids reused after a controller reset apart, and job_id is the
-- display id so every array task (123_4) and het component (123+1) is its own row.
-- _version makes a later state of the same run replace an earlier one, whatever the load order:
-- ended records outrank running/pending ones, then the time the record describes (as_of_ts) decides.

CREATE TABLE IF NOT EXISTS slurm_job_run{{local}} {{on_cluster}}
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
    _version UInt64
)
ENGINE = {{mergetree ReplacingMergeTree(_version)}}
PARTITION BY toYYYYMM(submit_ts)
ORDER BY (cluster, job_id, submit_ts);
-- distributed: cityHash64(cluster, job_id)

-- Steps (.batch, .extern, .0, ...) are kept apart and never counted as jobs.
CREATE TABLE IF NOT EXISTS slurm_job_step{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    job_id String,
    job_id_raw UInt64,
    step_id String,
    step_name String,
    state LowCardinality(String),
    exit_code Nullable(Int32),
    exit_signal Nullable(Int32),
    start_ts DateTime('UTC'),
    end_ts Nullable(DateTime('UTC')),
    elapsed_s UInt64,
    nnodes UInt32,
    ncpus UInt32,
    ntasks Nullable(UInt32),
    gpus UInt32,
    alloc_tres String,
    node_list String,
    nodes Array(String),
    source LowCardinality(String),
    source_line UInt64,
    _version UInt64
)
ENGINE = {{mergetree ReplacingMergeTree(_version)}}
PARTITION BY toYYYYMM(start_ts)
ORDER BY (cluster, job_id, step_id, start_ts);
-- distributed: cityHash64(cluster, job_id)

-- Every input line that could not be loaded, with where it came from and why. Reloading the same file
-- replaces its rows rather than adding to them.
CREATE TABLE IF NOT EXISTS etl_quarantine{{local}} {{on_cluster}}
(
    source String,
    line_no UInt64,
    reason String,
    raw String,
    loaded_at DateTime('UTC')
)
ENGINE = {{mergetree ReplacingMergeTree(loaded_at)}}
ORDER BY (source, line_no);
-- distributed: cityHash64(source)

-- One row per ETL run of one source: what was read, loaded and quarantined.
CREATE TABLE IF NOT EXISTS etl_run_log{{local}} {{on_cluster}}
(
    run_id UUID,
    source_kind LowCardinality(String),
    source String,
    started_at DateTime64(3, 'UTC'),
    finished_at DateTime64(3, 'UTC'),
    rows_read UInt64,
    rows_loaded UInt64,
    rows_quarantined UInt64,
    status LowCardinality(String),
    error String
)
ENGINE = {{mergetree MergeTree}}
ORDER BY (started_at, run_id);
-- distributed: rand()

-- Slurm account -> reporting project, synced from the config file (accounts not listed map to themselves).
CREATE TABLE IF NOT EXISTS account_project {{on_cluster}}
(
    account String,
    project String,
    synced_at DateTime('UTC') DEFAULT now()
)
ENGINE = {{mergetree_all ReplacingMergeTree(synced_at)}}
ORDER BY account;
