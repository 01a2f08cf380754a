-- law: every GPU-hour figure of work lost or overhead is at most the allocated GPU-hours of the runs it is
--   about: a hung run's hung GPU-hours ≤ its GPUs × its run time; an idle-GPU run's idle GPU-hours ≤ its GPUs
--   × its time in the window, and its GPU-hours with telemetry ≤ those; a campaign's GPU-hours lost, by
--   cause and in all, and its restart start-up and overhead GPU-hours ≤ its GPU-hours; the same for goodput's
--   rows; idle-GPU users' idle GPU-hours ≤ their scope's allocated GPU-hours; the GPU-hours the hardware
--   failures lost (failures_by_size) ≤ the GPU-hours of those runs.
-- why: a GPU-hour can be lost, idle or spent restarting only while a job holds the GPU: what nobody held was
--   never at stake, and a run cannot lose more than it held.
-- Rows: section, key (the run, campaign, project or size class), figure, value (lost or overhead) ≤ bound
--   (allocated) broken by off_by, GPU-hours.
WITH
compared AS (
    SELECT 'hung_jobs' AS section, concat('job ', job_id, ' submitted ', formatDateTime(submit_ts, '%F %T')) AS key,
           'hung_gpu_h ≤ gpus × (end_ts − start_ts)' AS figure, hung_gpu_h AS value,
           gpus * (toInt64(end_ts) - toInt64(start_ts)) / 3600 AS bound
    FROM ({{mart hung_jobs}})
    UNION ALL
    SELECT 'idle_gpu_jobs', concat('job ', job_id, ' submitted ', formatDateTime(submit_ts, '%F %T')), x.1, x.2, x.3
    FROM ({{mart idle_gpu_jobs}})
    ARRAY JOIN [('gpu_h ≤ gpus × its time in the window', gpu_h,
                 gpus * overlap_s(start_ts, end_ts, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}) / 3600),
                ('observed_gpu_h ≤ gpu_h', observed_gpu_h, gpu_h)] AS x
    UNION ALL
    SELECT 'campaigns', concat(user, ' ', account, ' ', job_name, ' ', toString(gpus), ' GPUs from ', formatDateTime(first_start_ts, '%F %T')),
           x.1, x.2, x.3
    FROM ({{mart campaigns}})
    ARRAY JOIN [('lost_gpu_h ≤ gpu_h', lost_gpu_h, gpu_h),
                ('Σ lost_*_gpu_h by cause ≤ gpu_h', lost_hang_gpu_h + lost_node_fail_gpu_h
                   + lost_failed_gpu_h + lost_timeout_gpu_h + lost_other_gpu_h, gpu_h),
                ('restart_startup_gpu_h ≤ gpu_h', restart_startup_gpu_h, gpu_h)] AS x
    UNION ALL
    SELECT 'goodput', if(project_key = '', 'the scope row', concat('project ', project_key)), x.1, x.2, x.3
    FROM ({{mart goodput}})
    ARRAY JOIN [('lost_gpu_h ≤ gpu_h', lost_gpu_h, gpu_h),
                ('restart_overhead_gpu_h ≤ gpu_h', restart_overhead_gpu_h, gpu_h)] AS x
    UNION ALL
    SELECT 'idle_gpu_users', if(i.level = 'all', 'the scope (all)', concat('project ', i.project)),
           'idle gpu_h ≤ the allocated GPU-hours of the scope (chargeback_totals)', i.gpu_h, a.allocated_gpu_h
    FROM (SELECT * FROM ({{mart idle_gpu_users}}) WHERE level IN ('all', 'project')) AS i
    INNER JOIN (SELECT if(grouping(t.project) = 1, '', t.project) AS a_project,
                       if(grouping(t.project) = 1, 'all', 'project') AS a_level, sum(t.allocated_gpu_h) AS allocated_gpu_h
                FROM ({{mart chargeback_totals}}) AS t GROUP BY GROUPING SETS ((), (t.project))) AS a
        ON a.a_level = i.level AND a.a_project = i.project
    UNION ALL
    SELECT 'failures_by_size', concat('size class ', size_class),
           'hw_lost_gpu_h ≤ node_fail_run_gpu_h + xid_failed_run_gpu_h (the failed runs'' GPU-hours)',
           hw_lost_gpu_h, node_fail_run_gpu_h + xid_failed_run_gpu_h
    FROM ({{mart failures_by_size}})
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
ORDER BY section, off_by DESC, key, figure;
