-- fct_lustre_job_io: Lustre I/O per Slurm job run and file system (grain: run x file system), from the
-- servers' job_stats (lustre_job_io) joined to the job history (slurm_job_run). The jobid label carries
-- SLURM_JOB_ID, a run's job_id_raw; a requeued job keeps its id, so of the runs with that id the I/O goes to
-- the latest one started by the I/O's last step (else the latest). I/O whose id no loaded job has keeps NULL
-- job attributes. Reads and writes are OST bytes and requests (operation read_bytes / write_bytes),
-- metadata_ops every MDT operation.
--- [model]
--- kind = "view"
--- defines = ["fct_lustre_job_io"]
--- reads = ["lustre_job_io", "slurm_job_run"]
CREATE OR REPLACE VIEW fct_lustre_job_io {{on_cluster}} AS
WITH
io AS (
    SELECT
        cluster,
        job_id AS job_id_raw,
        fs,
        sumIf(bytes, operation = 'read_bytes') AS read_bytes,
        sumIf(bytes, operation = 'write_bytes') AS write_bytes,
        sumIf(ops, operation = 'read_bytes' AND component = 'ost') AS read_ops,
        sumIf(ops, operation = 'write_bytes' AND component = 'ost') AS write_ops,
        sumIf(ops, component = 'mdt') AS metadata_ops,
        min(ts) AS first_ts,
        max(ts) AS last_ts,
        groupUniqArrayIf(host, host != '') AS client_hosts
    FROM lustre_job_io FINAL
    WHERE job_id != 0
    GROUP BY cluster, job_id, fs
),

runs AS (
    SELECT cluster, job_id_raw, job_id, submit_ts, start_ts, end_ts, user, account, partition, job_name, state,
           nnodes, gpus
    FROM slurm_job_run FINAL
),

matched AS (
    SELECT
        io.*,
        r.job_id AS job_id,
        r.submit_ts AS submit_ts,
        r.start_ts AS start_ts,
        r.end_ts AS end_ts,
        r.user AS user,
        r.account AS account,
        r.partition AS partition,
        r.job_name AS job_name,
        r.state AS state,
        r.nnodes AS nnodes,
        r.gpus AS gpus,
        row_number() OVER (PARTITION BY io.cluster, io.job_id_raw, io.fs
                           ORDER BY ifNull(r.start_ts <= io.last_ts, 0) DESC, r.submit_ts DESC) AS rank
    FROM io
    LEFT JOIN runs AS r ON r.cluster = io.cluster AND r.job_id_raw = io.job_id_raw
    SETTINGS join_use_nulls = 1
)

SELECT * EXCEPT rank FROM matched WHERE rank = 1;
