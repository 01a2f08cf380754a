-- The users of {project} in [from_ts, to_ts): GPU jobs started, GPU-hours held inside the window, and how
-- their GPU jobs ended. Never called without a project: a project report must not list other projects' users.
-- Jobs are GPU jobs, as in every section of the report (job_sizes' jobs, run_times' jobs_started): a
-- CPU-only job holds no GPU-hour, and counting it here gave project taifl 3,547 jobs started in 2016-12
-- where job_sizes had none (phillips.log). `ops-report summary` counts every job (Open XDMoD's definitions).
-- Beside those, how well each user used the GPUs (issue 52): user_efficiency.sql's columns for the same
-- project and window (pooled utilization and activity, idle and unbusy GPU-hours, the grade, the
-- three most wasteful runs and the rank), defined there; a user without GPU time in the window has them NULL.
-- Not user_resources.sql's GPU memory, CPU and memory: they read every sample and step (docs/benchmarks.md).
--- [mart]
--- grain = "one row per user of the project"
--- scope = "project"
--- report = 11
--- columns = ["user", "jobs_started", "gpu_h", "completed", "failed", "runs", "gpu_util_pct", "sm_active", "tensor_active", "dram_active", "idle_runs", "idle_gpu_h", "idle_share", "unbusy_gpu_h", "grade", "worst_job_ids", "worst_waste_gpu_h", "rank"]
--- user_columns = ["user"]
--- export = 29
--- project_only = true
WITH jobs AS (
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
)
SELECT j.user AS user, j.jobs_started AS jobs_started, j.gpu_h AS gpu_h, j.completed AS completed,
       j.failed AS failed, e.runs AS runs, e.gpu_util_pct AS gpu_util_pct, e.sm_active AS sm_active,
       e.tensor_active AS tensor_active, e.dram_active AS dram_active,
       e.idle_runs AS idle_runs, e.idle_gpu_h AS idle_gpu_h, e.idle_share AS idle_share,
       e.unbusy_gpu_h AS unbusy_gpu_h, e.grade AS grade, e.worst_job_ids AS worst_job_ids,
       e.worst_waste_gpu_h AS worst_waste_gpu_h, e.rank AS rank
FROM jobs AS j
LEFT JOIN ({{mart user_efficiency}}) AS e ON e.user = j.user
ORDER BY gpu_h DESC, user
SETTINGS join_use_nulls = 1;
