-- fct_job_run: one row per job run (grain: run), deduplicated, with the attributes every job statistic
-- groups by. Open XDMoD's Jobs-realm conventions: usage spans [start, end]; a job with no allocated nodes
-- never ran; bins as XDMoD defines them (job-times.json, gpu-buckets.json, processor buckets).
-- The model (job_run_model, below) is computed from the loaded runs and kept in the table job_run
-- (migration 0012): the job loads refresh it for the jobs they wrote (sql/intermediate/job_run.sql,
-- etl/grains.py), and rebuilt for every run whenever this file's model changes: job_run's fingerprint
-- follows the views it reads (core/grain_versions.py), so the next writer (`ops-report init`, a load) rebuilds
-- it in bounded ranges of job ids (etl/grains.py rebuild_stale). (An INSERT of every run here, run by the
-- upgrade as a changed file's statement, held memory growing with the history and wrote every row a second
-- time before the ranged rebuild wrote it a third.) fct_job_run reads the table, with each
-- account's project (dim_account.sql: the config's mapping may change without a load).
-- job_run_model(from_ts = …, every = …, job_lo = …, job_hi = …) is a parameterized view: every run of the jobs
-- with a run from from_ts on whose loaded record job_run does not hold yet, or of all those jobs with every = 1,
-- among the job ids in [job_lo, job_hi) (job_hi '' : no upper bound). The range is a prefix of the tables'
-- sorting key after the cluster, so a piece reads only its ids' granules: the window below sorts every column
-- of the runs it reads, and over all of a 1 M-job first load it held 1.0 GB (etl/grains.py cuts the refresh
-- into ranges of a bounded number of runs; docs/benchmarks.md, "Issue 50: sacct loads in bounded memory"). A load so
-- recomputes the jobs it changed, not the window over every job since the earliest run it re-read. A record
-- is held when every column of slurm_job_run but source_line (where in its file it was last read) is the
-- same in job_run: comparing _version alone missed a corrected line reloaded at the same version (the same
-- run, the same as-of time), which the raw table took and job_run kept the old values of until `ops-report
-- etl refresh` (issue 27). The hashes leave out job_run's own columns (the model's, below). The view calls no function of sql/functions/, so that ClickHouse expanding those into a
-- view's stored query when it is created (sql/README.md, "Templates") cannot keep an old rule here.
--- [model]
--- kind = "view"
--- defines = ["job_run_model", "fct_job_run"]
--- reads = ["slurm_job_run", "dim_account", "job_run"]
CREATE OR REPLACE VIEW job_run_model {{on_cluster}} AS
WITH
runs AS (
    SELECT * FROM slurm_job_run FINAL
    WHERE job_id >= {job_lo:String} AND (job_id < {job_hi:String} OR {job_hi:String} = '')
      AND (cluster, job_id) IN (
        SELECT s.cluster, s.job_id
        FROM (SELECT cluster, job_id, submit_ts, cityHash64(tuple(* EXCEPT (source_line))) AS h
              FROM slurm_job_run FINAL
              WHERE job_id >= {job_lo:String} AND (job_id < {job_hi:String} OR {job_hi:String} = '')
                AND coalesce(start_ts, submit_ts) >= {from_ts:DateTime('UTC')}) AS s
        LEFT JOIN (SELECT cluster, job_id, submit_ts,
                          cityHash64(tuple(* EXCEPT (source_line, next_submit_ts, next_user, next_job_name,
                                                     is_superseded, usage_start_ts, usage_end_ts, wall_s,
                                                     gpu_count_bin, job_size_bin, wall_time_bin,
                                                     refreshed_at))) AS h,
                          1 AS held
                   FROM job_run FINAL
                   WHERE job_id >= {job_lo:String} AND (job_id < {job_hi:String} OR {job_hi:String} = '')
                     AND coalesce(start_ts, submit_ts) >= {from_ts:DateTime('UTC')}) AS j
            ON j.cluster = s.cluster AND j.job_id = s.job_id AND j.submit_ts = s.submit_ts AND j.h = s.h
        WHERE {every:UInt8} = 1 OR NOT ifNull(j.held, 0))  -- (whatever the caller's join_use_nulls)
),

-- An earlier run of a requeued job (sacct --duplicates) is superseded by the next run of the same job id,
-- user and name submitted once it ended. A reused id (controller reset) is a different job: its runs
-- are far apart in time, so the same test keeps them apart.
sequenced AS (
    SELECT
        *,
        leadInFrame(toNullable(submit_ts)) OVER w AS next_submit_ts,
        leadInFrame(toNullable(user)) OVER w AS next_user,
        leadInFrame(toNullable(job_name)) OVER w AS next_job_name
    FROM runs
    WINDOW w AS (PARTITION BY cluster, job_id ORDER BY submit_ts ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING)
),

flagged AS (
    SELECT
        *,
        toUInt8(
            next_submit_ts IS NOT NULL
            AND next_user = user
            AND next_job_name = job_name
            AND (state LIKE 'REQUEUE%' OR state IN ('PREEMPTED', 'NODE_FAIL', 'FAILED', 'TIMEOUT', 'BOOT_FAIL'))
            AND next_submit_ts >= coalesce(start_ts, submit_ts)
            AND next_submit_ts <= coalesce(end_ts, as_of_ts) + 3600
        ) AS is_superseded
    FROM sequenced
),

usage AS (
    SELECT
        *,
        -- the interval the run held its resources; running jobs count up to the time of their last load.
        -- A final run whose End sacct printed as Unknown ends at its as-of time (Start + Elapsed): it ran
        -- (tests/test_sacct_other_sites.py, slurm2sql's job 43977780)
        if(never_ran, NULL, start_ts) AS usage_start_ts,
        if(never_ran, NULL, if(is_final, coalesce(end_ts, as_of_ts), as_of_ts)) AS usage_end_ts,
        if(never_ran OR start_ts IS NULL, 0,
           greatest(toInt64(if(is_final, coalesce(end_ts, as_of_ts), as_of_ts)) - toInt64(start_ts), 0)) AS wall_s
    FROM flagged
),

binned AS (
    SELECT
        u.*,
        multiIf(gpus <= 8, toString(gpus),
                gpus <= 16, '9 - 16', gpus <= 32, '17 - 32', gpus <= 64, '33 - 64',
                gpus <= 128, '65 - 128', gpus <= 256, '129 - 256', gpus <= 512, '257 - 512',
                gpus <= 1024, '513 - 1024', gpus <= 2048, '1k - 2k', gpus <= 4096, '2k - 4k', '> 4k')
            AS gpu_count_bin,
        multiIf(ncpus <= 1, '1', ncpus <= 2, '2', ncpus <= 4, '3 - 4', ncpus <= 8, '5 - 8',
                ncpus <= 16, '9 - 16', ncpus <= 32, '17 - 32', ncpus <= 64, '33 - 64',
                ncpus <= 128, '65 - 128', ncpus <= 256, '129 - 256', ncpus <= 512, '257 - 512',
                ncpus <= 1024, '513 - 1k', ncpus <= 2048, '1k - 2k', ncpus <= 4096, '2k - 4k',
                ncpus <= 8192, '4k - 8k', ncpus <= 16384, '8k - 16k', ncpus <= 32768, '16k - 32k',
                ncpus <= 65536, '32k - 64k', ncpus <= 131072, '64k - 128k', '> 128k')
            AS job_size_bin,
        multiIf(wall_s < 1, '0 - 1s', wall_s < 30, '1 - 30s', wall_s < 1800, '30s - 30min',
                wall_s < 3600, '30 - 60min', wall_s < 18000, '1 - 5hr', wall_s < 36000, '5 - 10hr',
                wall_s < 64800, '10 - 18hr', '18+hr')
            AS wall_time_bin
    FROM usage AS u
)

SELECT * FROM binned;

CREATE OR REPLACE VIEW fct_job_run {{on_cluster}} AS
SELECT j.* EXCEPT (gpu_count_bin, job_size_bin, wall_time_bin, refreshed_at),
       ifNull(d.project, j.account) AS project,  -- the account's project (dim_account.sql)
       j.gpu_count_bin AS gpu_count_bin, j.job_size_bin AS job_size_bin, j.wall_time_bin AS wall_time_bin
FROM job_run AS j FINAL
LEFT JOIN dim_account AS d ON d.account = j.account
SETTINGS join_use_nulls = 1;
