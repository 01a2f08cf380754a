-- law: the size classes add up to the whole: failures_by_size's classes to its 'all' row (runs ended,
--   node-days, run hours, NODE_FAIL runs, hardware failures, failures after an Xid, their runs' GPU-hours and the GPU-hours
--   they lost), and
--   the shares of job_sizes (jobs, GPU-hours) and of end_states (runs, GPU-hours) to 1.
-- why: every run has one GPU count, so one size class, and one final state: the classes and the states
--   split the runs without loss or overlap, and shares of a whole add up to it.
-- Rows: section, key, figure, value (the sum of the parts), bound (the whole, or 1), off_by = value − bound.
WITH
f AS (SELECT * FROM ({{mart failures_by_size}})),
parts AS (
    SELECT sum(runs_ended) AS runs_ended, sum(node_days) AS node_days, sum(run_hours) AS run_hours,
           sum(node_fail_runs) AS node_fail_runs, sum(hw_failures) AS hw_failures,
           sum(failed_after_xid) AS failed_after_xid, sum(node_fail_run_gpu_h) AS node_fail_run_gpu_h,
           sum(xid_failed_run_gpu_h) AS xid_failed_run_gpu_h, sum(hw_lost_gpu_h) AS hw_lost_gpu_h,
           count() AS part_rows
    FROM f WHERE size_class != 'all'
),
compared AS (
    SELECT 'failures_by_size' AS section, 'Σ size classes = all' AS key, x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM parts AS p CROSS JOIN (SELECT * FROM f WHERE size_class = 'all') AS t
    ARRAY JOIN [('runs_ended', toFloat64(p.runs_ended), toFloat64(t.runs_ended)), ('node_days', p.node_days, t.node_days),
                ('run_hours', p.run_hours, t.run_hours),
                ('node_fail_runs', toFloat64(p.node_fail_runs), toFloat64(t.node_fail_runs)),
                ('hw_failures', toFloat64(p.hw_failures), toFloat64(t.hw_failures)),
                ('failed_after_xid', toFloat64(p.failed_after_xid), toFloat64(t.failed_after_xid)),
                ('node_fail_run_gpu_h', p.node_fail_run_gpu_h, t.node_fail_run_gpu_h),
                ('xid_failed_run_gpu_h', p.xid_failed_run_gpu_h, t.xid_failed_run_gpu_h),
                ('hw_lost_gpu_h', p.hw_lost_gpu_h, t.hw_lost_gpu_h)] AS x
    WHERE p.part_rows > 0
    UNION ALL
    SELECT 'job_sizes', 'Σ size classes', x.1, x.2, x.3
    FROM (SELECT sum(job_share) AS js, sum(gpu_h_share) AS gs, sum(jobs) AS jobs, sum(gpu_h) AS gpu_h
          FROM ({{mart job_sizes}})) AS s
    ARRAY JOIN [('Σ job_share = 1', s.js, if(s.jobs > 0, 1., NULL)),
                ('Σ gpu_h_share = 1', s.gs, if(s.gpu_h > 0, 1., NULL))] AS x
    UNION ALL
    SELECT 'end_states', 'Σ states', x.1, x.2, x.3
    FROM (SELECT sum(run_share) AS rs, sum(gpu_h_share) AS gs, sum(runs) AS runs, sum(gpu_h) AS gpu_h
          FROM ({{mart end_states}})) AS s
    ARRAY JOIN [('Σ run_share = 1', s.rs, if(s.runs > 0, 1., NULL)),
                ('Σ gpu_h_share = 1', s.gs, if(s.gpu_h > 0, 1., NULL))] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure;
