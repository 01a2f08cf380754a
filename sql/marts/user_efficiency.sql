-- Per user of {project} ('' for the whole cluster) in [from_ts, to_ts): how well their GPU runs used the GPUs
-- they held, pooled over the runs (issue 52, `ops-report users`, docs/efficiency.md). Every ratio is a sum of
-- GPU-seconds over a sum of GPU-seconds, weighted by GPU time, never a mean of the runs' means: jobscope's
-- authors found a mean of per-job means at 82 % where the partition was 66 % idle, because many small busy
-- jobs outvote a few large idle ones.
--   runs, gpu_h          the runs with GPU time in the window (run_observed.sql's rows: requeued runs each
--                        count) and the GPU-hours they held inside it (job_efficiency's)
--   observed_gpu_h       of those, the GPU-hours with telemetry: what the pooled figures are over
--   gpu_util_pct         pooled utilization: Σ run util × run observed GPU-h ÷ Σ observed GPU-h, each run's
--                        figure run_observed's: the readings of the GPUs its hpc_job label names (run_gpus'
--                        rule, what `ops-report job` shows), its share of the node's only where no label names
--                        it. (Not job_efficiency's node share by allocated GPU time: a 1-GPU idle session beside
--                        busy runs read the node's mean there, 22.1 % for user003 on the demo, 1.8 % here)
--   sm_active, tensor_active, dram_active   the same pooling of the activity fractions (0-1)
--   (GPU-memory, CPU and memory efficiency: user_resources.sql, apart because they read every sample and
--   step of the runs: 35 s more per month of a 256-GPU, 1-minute cluster for the report's users, where
--   these columns read the grains in 0.06 s; docs/benchmarks.md)
--   idle_gpu_h           GPU-hours of the runs idle_gpu_jobs.sql lists (its rule: mean utilization under
--                        {idle_util_pct} % over at least idle_min_minutes of telemetry), idle_runs their count
--   idle_share           idle_gpu_h ÷ gpu_h
--   unbusy_gpu_h         observed GPU-hours not busy: Σ observed GPU-h × (1 − util): what the user's GPUs
--                        held and did not use, idle runs or not (a run's waste_gpu_h, summed)
--   grade                on pooled utilization U (%) and idle share S, the first that holds:
--                          A  U ≥ 80 and S < 0.05
--                          B  U ≥ 60 and S < 0.10
--                          C  U ≥ 40 and S < 0.20
--                          D  U ≥ 20 and S < 0.40
--                          F  otherwise
--                        '' when the user's runs had no telemetry (nothing to grade). A grade takes both,
--                        so a user whose busy runs hide whole idle runs does not get an A.
--   worst_job_ids, worst_waste_gpu_h   the user's three runs with the most unbusy GPU-hours (ties: the
--                        earlier start, then the job id), most first: what `ops-report job JOBID` explains
--   rank                 1 for the most wasteful user of the scope: the most idle GPU-hours, then the most
--                        unbusy GPU-hours, then the user's name (idle_gpu_users.sql ranks by the first alone)
--- [mart]
--- grain = "one row per user with GPU runs in the window"
--- scope = "project"
--- columns = ["user", "runs", "gpu_h", "observed_gpu_h", "gpu_util_pct", "sm_active", "tensor_active", "dram_active", "idle_runs", "idle_gpu_h", "idle_share", "unbusy_gpu_h", "grade", "worst_job_ids", "worst_waste_gpu_h", "rank"]
--- user_columns = ["user"]
WITH
runs AS (
    SELECT job_id, submit_ts, user, start_ts, gpu_h,
           ifNull(observed_gpu_h, 0) AS observed_gpu_h,
           ifNull(observed_gpu_h * gpu_util_pct / 100, 0) AS busy_gpu_h,
           ifNull(observed_gpu_h * sm_active, 0) AS sm_gpu_h,
           ifNull(observed_gpu_h * tensor_active, 0) AS tensor_gpu_h,
           ifNull(observed_gpu_h * dram_active, 0) AS dram_gpu_h,
           ifNull(observed_gpu_h * (1 - gpu_util_pct / 100), 0) AS waste_gpu_h
    FROM ({{mart run_observed}})
),
idle AS (SELECT job_id, submit_ts, gpu_h AS idle_gpu_h FROM ({{mart idle_gpu_jobs}})),
per_user AS (
    SELECT r.user AS user,
           count() AS runs,
           sum(r.gpu_h) AS gpu_h,
           sum(r.observed_gpu_h) AS observed_gpu_h,
           sum(r.busy_gpu_h) / nullIf(sum(r.observed_gpu_h), 0) * 100 AS gpu_util_pct,
           sum(r.sm_gpu_h) / nullIf(sum(r.observed_gpu_h), 0) AS sm_active,
           sum(r.tensor_gpu_h) / nullIf(sum(r.observed_gpu_h), 0) AS tensor_active,
           sum(r.dram_gpu_h) / nullIf(sum(r.observed_gpu_h), 0) AS dram_active,
           countIf(i.idle_gpu_h IS NOT NULL) AS idle_runs,
           sum(ifNull(i.idle_gpu_h, 0)) AS idle_gpu_h,
           sum(r.waste_gpu_h) AS unbusy_gpu_h,
           -- the three most unbusy runs, most first
           arraySlice(arraySort(x -> (-x.2, x.3, x.1),
                                groupArray((r.job_id, r.waste_gpu_h, r.start_ts))), 1, 3) AS worst
    FROM runs AS r
    LEFT JOIN idle AS i ON i.job_id = r.job_id AND i.submit_ts = r.submit_ts
    GROUP BY r.user
)
SELECT user, runs, gpu_h, observed_gpu_h, gpu_util_pct, sm_active, tensor_active, dram_active,
       idle_runs, idle_gpu_h,
       idle_gpu_h / nullIf(gpu_h, 0) AS idle_share,
       unbusy_gpu_h,
       multiIf(gpu_util_pct IS NULL, '',
               gpu_util_pct >= 80 AND idle_gpu_h / nullIf(gpu_h, 0) < 0.05, 'A',
               gpu_util_pct >= 60 AND idle_gpu_h / nullIf(gpu_h, 0) < 0.10, 'B',
               gpu_util_pct >= 40 AND idle_gpu_h / nullIf(gpu_h, 0) < 0.20, 'C',
               gpu_util_pct >= 20 AND idle_gpu_h / nullIf(gpu_h, 0) < 0.40, 'D', 'F') AS grade,
       arrayMap(x -> x.1, worst) AS worst_job_ids,
       arrayMap(x -> x.2, worst) AS worst_waste_gpu_h,
       row_number() OVER (ORDER BY idle_gpu_h DESC, unbusy_gpu_h DESC, user) AS rank
FROM per_user
ORDER BY rank
SETTINGS join_use_nulls = 1;
