-- law: what `ops-report job` says a run's GPUs did (run_gpus) fits in the time the run held them: per GPU,
--   its busy seconds (observed_s × util_mean_pct ÷ 100) ≤ its observed seconds ≤ held_s; per run, its busy
--   GPU-hours ≤ its observed GPU-hours ≤ its GPU-hours (each GPU weighted by the run's GPUs it stands for,
--   gpu_h ÷ held_s).
-- why: a reading stands for its step cut at the run's edges (an hour's mean for the part of the hour the run
--   held), so a GPU is seen for at most the time the run held it, and busy for at most the time it was seen;
--   more is a reading counted twice (two samples whose steps overlap), a step not cut at the run's edges or a
--   utilization over 100 %.
-- Rows: section (per GPU or per run), key (the run, and node and GPU), figure, value ≤ bound broken by off_by
--   (seconds per GPU, GPU-hours per run).
WITH
compared AS (
    SELECT 'run_gpus per GPU' AS section,
           concat('job ', job_id, ' submitted ', formatDateTime(submit_ts, '%F %T'), ' ', node, ' GPU ',
                  toString(gpu)) AS key,
           x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM ({{mart run_gpus}})
    ARRAY JOIN [('busy s (observed_s × util_mean_pct ÷ 100) ≤ observed_s',
                 observed_s * ifNull(util_mean_pct, 0) / 100, observed_s),
                ('observed_s ≤ held_s', observed_s, toFloat64(held_s))] AS x
    UNION ALL
    SELECT 'run_gpus per run', concat('job ', job_id, ' submitted ', formatDateTime(submit_ts, '%F %T')),
           x.1, x.2, x.3
    FROM (SELECT job_id, submit_ts,
                 sum(gpu_h * observed_s / nullIf(held_s, 0) * ifNull(util_mean_pct, 0) / 100) AS busy_gpu_h,
                 sum(gpu_h * observed_s / nullIf(held_s, 0)) AS observed_gpu_h, sum(gpu_h) AS held_gpu_h
          FROM ({{mart run_gpus}}) GROUP BY job_id, submit_ts)
    ARRAY JOIN [('busy_gpu_h ≤ observed_gpu_h', busy_gpu_h, observed_gpu_h),
                ('observed_gpu_h ≤ gpu_h', observed_gpu_h, held_gpu_h)] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
ORDER BY section, off_by DESC, key, figure;
