-- Per-sample attribution (issue 28): busy, idle and allocated-but-idle GPU time from the GPU samples inside
-- each run's allocation, not from hourly means (an hour half allocated and busy counted wholly busy made
-- busy GPU-hours exceed allocated ones).
--
-- gpu_sample.hpc_job: dcgm-exporter's `hpc_job` label, the Slurm job id (SLURM_JOB_ID, a run's job_id_raw) the
-- site's prolog wrote into the exporter's HPC job-mapping directory for the GPU (dcgm-exporter
-- --hpc-job-mapping-dir, DCGM_HPC_JOB_MAPPING_DIR; '' when no job held the GPU or the site does not map).
-- With it a run's GPUs are known; without it (sacct gives no GPU indices) a run gets its share of the node.
ALTER TABLE gpu_sample{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS hpc_job String DEFAULT '' AFTER uuid;
-- the Distributed table in front of it on a cluster (on one server this is the same table: a no-op)
ALTER TABLE gpu_sample {{on_cluster}}
    ADD COLUMN IF NOT EXISTS hpc_job String DEFAULT '' AFTER uuid;

-- capacity_node_hour.allocated_observed_gpu_s: the allocated GPU time the samples saw (run_sample_hour summed
-- per node-hour); busy_gpu_s is from then on the busy part of it, so busy ≤ observed ≤ allocated.
ALTER TABLE capacity_node_hour{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS allocated_observed_gpu_s Float64 DEFAULT 0 AFTER covered_gpu_s;
ALTER TABLE capacity_node_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS allocated_observed_gpu_s Float64 DEFAULT 0 AFTER covered_gpu_s;

-- run_sample_hour: one row per run, node and hour whose GPU samples the run's allocation covers
-- (sql/intermediate/run_sample_hour.sql): the GPU time of the run the samples saw, how much of it was busy
-- (at or above the idle threshold), and its activity. Written only where samples exist: a refresh after the
-- fine samples expired (fine_ttl_days) keeps what was written while they were there. Readers join it to the
-- current fan-out (run_fanout) on the run's key, so a row of a run that no longer holds the node-hour is
-- never read. Units: GPU-seconds.
CREATE TABLE IF NOT EXISTS run_sample_hour {{on_cluster}}
(
    cluster LowCardinality(String),
    hour DateTime('UTC'),
    node String,
    job_id String,
    submit_ts DateTime('UTC'),
    attribution LowCardinality(String),  -- 'gpu': its own GPUs' samples (hpc_job); 'node share': its share of the node's
    observed_gpu_s Float64,              -- the run's GPU time in the hour covered by samples
    busy_gpu_s Float64,                  -- of which at or above idle_util_pct
    util_gpu_s Float64,                  -- Σ GPU utilization (0–1) × time
    sm_gpu_s Float64,
    tensor_gpu_s Float64,
    dram_gpu_s Float64,
    idle_util_pct Float64,
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, node, job_id, submit_ts);
