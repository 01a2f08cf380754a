-- law: a run's GPU-hours are one figure: Σ run_gpus gpu_h (`ops-report job`, per node and GPU) = job_efficiency's
--   gpu_h (the run_node_hour grain: chargeback's, `users`'), for every run run_gpus lists on each of its nodes.
-- why: both are the run's GPUs on a node × its time there inside the window, from the same fan-out
--   (sql/intermediate/run_fanout.sql), run_gpus spreading a node's share over the GPUs it lists: integer
--   seconds × the same GPU counts, so they differ by float rounding alone (law_breaks_eq's billionth). A run
--   with a node without telemetry has no run_gpus rows there and is left out.
-- Rows: section, key (the run), figure, value (Σ run_gpus) = bound (job_efficiency) broken by off_by, GPU-hours.
WITH
per_run AS (
    SELECT job_id, submit_ts, sum(gpu_h) AS gpus_gpu_h, uniqExact(node) AS nodes_listed
    FROM ({{mart run_gpus}}) GROUP BY job_id, submit_ts
),
compared AS (
    SELECT 'run_gpus vs job_efficiency' AS section,
           concat('job ', p.job_id, ' submitted ', formatDateTime(p.submit_ts, '%F %T')) AS key,
           'Σ run_gpus gpu_h = job_efficiency gpu_h' AS figure, p.gpus_gpu_h AS value, ifNull(j.gpu_h, 0) AS bound
    FROM per_run AS p
    LEFT JOIN (SELECT job_id, submit_ts, gpu_h, nnodes FROM ({{mart job_efficiency}})) AS j
        ON j.job_id = p.job_id AND j.submit_ts = p.submit_ts
    WHERE j.nnodes IS NULL OR p.nodes_listed = j.nnodes
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure
SETTINGS join_use_nulls = 1;
