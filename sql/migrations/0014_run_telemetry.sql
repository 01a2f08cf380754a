-- run_telemetry (issue 17): what the per-sample telemetry says about each ended run that held GPUs, one row
-- a run, written by the loads (sql/intermediate/run_telemetry.sql, etl/grains.py) for the runs of the hours
-- they refresh, so the marts that need a run's samples (hung_jobs, campaigns) read one row a run instead of
-- scanning gpu_sample and node_sample on every report (3.5 s a scan on a month of 1,024 GPUs at 60 s, and
-- the monthly report needed four). A row is written only for a run with samples: a run without any has no
-- row (unknown to the marts, never 0), and a refresh after fine_ttl_days dropped the samples keeps the row
-- written while they were there. The thresholds the row was formed with are kept beside it; they are the
-- config's ([reports] idle_util_pct, [waste] hang_nic_bytes_per_s, [goodput] ckpt_write_bytes_per_s), and
-- `ops-report etl refresh` forms every row again after they change.
CREATE TABLE IF NOT EXISTS run_telemetry {{on_cluster}}
(
    cluster LowCardinality(String),
    job_id String,
    submit_ts DateTime('UTC'),
    start_ts DateTime('UTC'),
    end_ts DateTime('UTC'),                    -- the run's end when the row was formed (marts match it)
    node_samples UInt32,                       -- node samples of its nodes whose step overlaps the run (+ one step)
    last_ckpt_ts Nullable(DateTime('UTC')),    -- its last checkpoint (campaigns.sql); NULL: none seen
    first_hour_gpu_samples UInt32,             -- GPU samples of its nodes in its first hour
    first_busy_ts Nullable(DateTime('UTC')),   -- the first of them at idle_util_pct or more
    last_nic_busy_ts Nullable(DateTime('UTC')),  -- hang fields (hung_jobs.sql): runs ended TIMEOUT, CANCELLED,
    last_gpu_busy_ts Nullable(DateTime('UTC')),  -- FAILED or NODE_FAIL only, NULL for the others
    last_busy_ts Nullable(DateTime('UTC')),
    hang_start_ts Nullable(DateTime('UTC')),   -- the first GPU sample time after last_busy_ts
    idle_samples UInt32,                       -- GPU sample times after last_busy_ts
    last_gpu_ts Nullable(DateTime('UTC')),     -- the last GPU sample time read (up to the end)
    gpu_step_s UInt32,
    idle_util_pct Float64,
    hang_nic_bytes_per_s Float64,
    ckpt_write_bytes_per_s Float64,
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYYYYMM(submit_ts)
ORDER BY (cluster, job_id, submit_ts);
