-- law: a run's GPU activity is one figure: job_efficiency's observed GPU-hours and utilization (the monthly
--   report's largest jobs) = run_observed's (idle_gpu_jobs', `users`'), for every run both list.
-- why: both read the run's readings by one attribution rule (sql/functions/reading_is_runs.sql), summed from the
--   run_sample_hour grain over the same run_node_hour rows with the same part of each hour inside the window:
--   they differ by float rounding alone (law_breaks_eq's billionth). A figure reading the node-hour's rates
--   shared by allocated GPU time instead (job_efficiency before round 5) breaks it on a shared node where the
--   hpc_job label names the runs' GPUs.
-- Rows: section, key (the run), figure, value (job_efficiency) = bound (run_observed) broken by off_by.
WITH
compared AS (
    SELECT 'job_efficiency vs run_observed' AS section,
           concat('job ', j.job_id, ' submitted ', formatDateTime(j.submit_ts, '%F %T')) AS key,
           f.1 AS figure, f.2 AS value, f.3 AS bound
    FROM (SELECT job_id, submit_ts, observed_gpu_h, gpu_util_pct FROM ({{mart job_efficiency}})) AS j
    INNER JOIN (SELECT job_id, submit_ts, observed_gpu_h, gpu_util_pct FROM ({{mart run_observed}})) AS o
        ON o.job_id = j.job_id AND o.submit_ts = j.submit_ts
    ARRAY JOIN [('job_efficiency observed_gpu_h = run_observed observed_gpu_h', ifNull(j.observed_gpu_h, 0),
                 ifNull(o.observed_gpu_h, 0)),
                ('job_efficiency gpu_util_pct = run_observed gpu_util_pct', ifNull(j.gpu_util_pct, 0),
                 ifNull(o.gpu_util_pct, 0))] AS f
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure;
