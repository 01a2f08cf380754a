-- Observation 2: run time and queue wait per GPU-count class, for GPU jobs of {project} ('' for the whole
-- cluster) that ended in [from_ts, to_ts) (run time: start to end of the last run) and that started in it
-- (wait: start − submit of the last run). cdf_s holds the run-time quantiles 0.01, 0.02, … 1.00 (exact).
--- [mart]
--- grain = "one row per job size class"
--- scope = "project"
--- report = 4
--- columns = ["size_class", "min_gpus", "jobs_ended", "run_p50_s", "run_p90_s", "run_p99_s", "run_mean_s", "cdf_s", "jobs_started", "wait_p50_s", "wait_p90_s", "wait_mean_s"]
--- export = 5
SELECT
    gpu_size_class(gpus) AS size_class,
    min(gpus) AS min_gpus,
    countIf(ended) AS jobs_ended,
    quantileExactIf(0.5)(wall_s, ended) AS run_p50_s,
    quantileExactIf(0.9)(wall_s, ended) AS run_p90_s,
    quantileExactIf(0.99)(wall_s, ended) AS run_p99_s,
    avgIf(wall_s, ended) AS run_mean_s,
    quantilesExactIf(0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.11, 0.12, 0.13, 0.14, 0.15, 0.16,
        0.17, 0.18, 0.19, 0.2, 0.21, 0.22, 0.23, 0.24, 0.25, 0.26, 0.27, 0.28, 0.29, 0.3, 0.31, 0.32, 0.33, 0.34,
        0.35, 0.36, 0.37, 0.38, 0.39, 0.4, 0.41, 0.42, 0.43, 0.44, 0.45, 0.46, 0.47, 0.48, 0.49, 0.5, 0.51, 0.52,
        0.53, 0.54, 0.55, 0.56, 0.57, 0.58, 0.59, 0.6, 0.61, 0.62, 0.63, 0.64, 0.65, 0.66, 0.67, 0.68, 0.69, 0.7,
        0.71, 0.72, 0.73, 0.74, 0.75, 0.76, 0.77, 0.78, 0.79, 0.8, 0.81, 0.82, 0.83, 0.84, 0.85, 0.86, 0.87, 0.88,
        0.89, 0.9, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0)(wall_s, ended) AS cdf_s,
    countIf(started) AS jobs_started,
    quantileExactIf(0.5)(wait_s, started) AS wait_p50_s,
    quantileExactIf(0.9)(wait_s, started) AS wait_p90_s,
    avgIf(wait_s, started) AS wait_mean_s
FROM (
    SELECT gpus, wall_s, toInt64(start_ts) - toInt64(submit_ts) AS wait_s,
           is_final AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')} AS ended,
           start_ts >= {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')} AS started
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND NOT is_superseded AND gpus > 0 AND start_ts IS NOT NULL
)
WHERE ended OR started
GROUP BY size_class
ORDER BY min_gpus;
