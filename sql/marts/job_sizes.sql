-- Observation 1: share of jobs vs share of GPU-hours by GPU-count class, for GPU jobs of {project}
-- ('' for the whole cluster) in [from_ts, to_ts).
--   jobs       GPU jobs that started in the window, counted once (the last run of a requeued job)
--   gpu_h  allocated GPUs × the part of every run (requeued ones included) inside the window
--- [mart]
--- grain = "one row per job size class"
--- scope = "project"
--- report = 3
--- columns = ["size_class", "min_gpus", "jobs", "gpu_h", "job_share", "gpu_h_share"]
--- export = 4
SELECT
    gpu_size_class(gpus) AS size_class,
    min(gpus) AS min_gpus,
    countIf(NOT is_superseded AND start_ts >= {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}) AS jobs,
    sum(gpus * overlap_s(usage_start_ts, usage_end_ts, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) / 3600 AS gpu_h,
    jobs / sum(jobs) OVER () AS job_share,
    gpu_h / sum(gpu_h) OVER () AS gpu_h_share
FROM fct_job_run
WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
  AND NOT never_ran AND gpus > 0
  AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
GROUP BY size_class
ORDER BY min_gpus;
