-- How job runs of {project} ('' for the whole cluster) ended in [from_ts, to_ts): every run that ran and
-- ended in the window (a requeued job's earlier runs are outcomes too), by count and by the GPU-hours
-- they held inside the window.
--- [mart]
--- grain = "one row per final state"
--- scope = "project"
--- report = 5
--- columns = ["state", "runs", "gpu_runs", "gpu_h", "run_share", "gpu_h_share"]
--- export = 6
SELECT
    state,
    count() AS runs,
    countIf(gpus > 0) AS gpu_runs,
    sum(gpus * overlap_s(usage_start_ts, usage_end_ts, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) / 3600 AS gpu_h,
    runs / sum(runs) OVER () AS run_share,
    gpu_h / nullIf(sum(gpu_h) OVER (), 0) AS gpu_h_share
FROM fct_job_run
WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
  AND NOT never_ran AND is_final AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
GROUP BY state
ORDER BY gpu_h DESC, runs DESC;
