-- Lustre I/O per job, from the servers' job_stats (HPE/GSI lustre_exporter, whamcloud lustrefs-exporter:
-- lustre_job_{read,write}_{bytes,samples}_total, lustre_job_stats_total), loaded by sql/staging/lustre_job_io.sql.
-- One row per job, file system, component (ost/mdt), operation, jobid string and step ending at ts: bytes and
-- operations in that step, summed over the file system's targets; steps without I/O are not stored. job_id is
-- the Slurm job id the jobid label carries (SLURM_JOB_ID, so slurm_job_run.job_id_raw; 0 for a jobid that is
-- no Slurm job's, e.g. bash.0); uid and host are the jobid's own when its form has them (%j:%u:%H). Read and
-- write are the operations read_bytes / write_bytes (bytes and request counts); the others (open, close,
-- getattr, punch, ...) have operations only. Keyed by series and time: reloading a window replaces.
CREATE TABLE IF NOT EXISTS lustre_job_io{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    job_id UInt64,
    fs LowCardinality(String),
    component LowCardinality(String),
    operation LowCardinality(String),
    jobid String,
    uid Nullable(UInt32),
    host String,
    ts DateTime('UTC'),
    step_s UInt32,
    bytes Float64,
    ops Float64,
    source LowCardinality(String)
)
ENGINE = {{mergetree ReplacingMergeTree}}
PARTITION BY toYYYYMM(ts)
ORDER BY (cluster, job_id, fs, component, operation, jobid, ts);
-- distributed: cityHash64(cluster, job_id)
