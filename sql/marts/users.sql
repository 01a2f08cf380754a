-- The users of {project} in [from_ts, to_ts): GPU jobs started, GPU-hours held inside the window, and how
-- their GPU jobs ended. Never called without a project: a project report must not list other projects' users.
-- Jobs are GPU jobs, as in every section of the report (job_sizes' jobs, run_times' jobs_started): a
-- CPU-only job holds no GPU-hour, and counting it here gave project taifl 3,547 jobs started in 2016-12
-- where job_sizes had none (phillips.log). `ops-report summary` counts every job (Open XDMoD's definitions).
--- [mart]
--- grain = "one row per user of the project"
--- scope = "project"
--- report = 11
--- columns = ["user", "jobs_started", "gpu_h", "completed", "failed"]
--- user_columns = ["user"]
--- export = 29
--- project_only = true
SELECT user,
       countIf(NOT is_superseded AND start_ts >= {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}) AS jobs_started,
       sum(gpus * overlap_s(usage_start_ts, usage_end_ts, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) / 3600 AS gpu_h,
       countIf(is_final AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')} AND state = 'COMPLETED') AS completed,
       countIf(is_final AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
               AND state IN ('FAILED', 'NODE_FAIL', 'TIMEOUT', 'OUT_OF_MEMORY')) AS failed
FROM fct_job_run
WHERE cluster = {cluster:String} AND project = {project:String} AND NOT never_ran AND gpus > 0
  AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
GROUP BY user
ORDER BY gpu_h DESC, user;
