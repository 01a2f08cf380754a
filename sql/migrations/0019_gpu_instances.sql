-- Exporter versions (issue 31).
--
-- gpu_sample.util_source: which exporter field gpu_util_pct was read from. DCGM_FI_DEV_GPU_UTIL where the
-- exporter publishes it; where it does not (a counters list without it, as dcgm-exporter's DCP example and
-- NVIDIA's MIG example scrape have, or a GPU in MIG mode, where NVML has no device utilization),
-- DCGM_FI_PROF_GR_ENGINE_ACTIVE × 100 (the ratio of time the graphics engine was active: the profiling
-- field of the same meaning). '' when neither came. Rows loaded before this migration have ''.
ALTER TABLE gpu_sample{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS util_source LowCardinality(String) DEFAULT '';
-- the Distributed table in front of it on a cluster (on one server this is the same table: a no-op)
ALTER TABLE gpu_sample {{on_cluster}}
    ADD COLUMN IF NOT EXISTS util_source LowCardinality(String) DEFAULT '';

-- A MIG GPU instance's samples: dcgm-exporter publishes a series per GPU instance (labels GPU_I_ID,
-- GPU_I_PROFILE) beside the physical GPU's own series (no GPU_I_ID). The physical GPU's row stays in
-- gpu_sample (before, an instance's value could replace the GPU's own); each instance's row is here, with the
-- job dcgm-exporter's HPC job mapping labels it with (hpc_job: the mapping file named <gpu>.<instance>), so
-- a MIG slice's activity is attributed to the job that held it (marts/mig_jobs.sql). Activity ratios are of
-- the instance's own slice.
CREATE TABLE IF NOT EXISTS gpu_instance_sample{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    gpu UInt16,
    gpu_instance UInt16,            -- GPU_I_ID
    ts DateTime('UTC'),
    step_s UInt32,
    profile LowCardinality(String), -- GPU_I_PROFILE: 1g.10gb, 3g.40gb, ...
    uuid String,                    -- the physical GPU's
    hpc_job String,                 -- '' without a job mapping
    gr_engine_active Nullable(Float32),
    sm_active Nullable(Float32),
    tensor_active Nullable(Float32),
    dram_active Nullable(Float32),
    fb_used_mib Nullable(Float32),
    fb_free_mib Nullable(Float32),
    source LowCardinality(String)
)
ENGINE = {{mergetree ReplacingMergeTree}}
PARTITION BY toYYYYMM(ts)
ORDER BY (cluster, node, gpu, gpu_instance, ts);
-- distributed: cityHash64(cluster, node)
