-- Reliability by GPU-count class, for runs of {project} ('' for the whole cluster) that ended in
-- [from_ts, to_ts). A run failed on hardware when it ended NODE_FAIL, or FAILED with a hardware Xid
-- (xid_is_hardware) on one of its nodes while it ran (up to a minute after its end: the Xid and the job's
-- end are logged by different daemons). Meta's model (Kokolis et al., HPCA 2025): failures per 1,000
-- node-days r_f = failures ÷ node-days run × 1000, and a job on N nodes fails on average every
-- 1 ÷ (N × r_f) days. mttf_observed_h = run hours ÷ failures of the class; mttf_model_h uses the
-- cluster-wide r_f of the same runs (the row with size_class 'all').
WITH runs AS (
    SELECT cluster, job_id, submit_ts, gpus, nnodes, nodes, state, start_ts, end_ts, wall_s
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND is_final AND gpus > 0 AND length(nodes) > 0
      AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
),
-- each run once, with whether a hardware Xid was logged on one of its nodes while it ran (up to a minute
-- after its end)
classified AS (
    SELECT r.cluster AS cluster, r.job_id AS job_id, r.submit_ts AS submit_ts, any(r.gpus) AS gpus,
           any(r.nnodes) AS nnodes, any(r.state) AS state, any(r.wall_s) AS wall_s, gpu_size_class(gpus) AS cls,
           countIf(x.ts >= r.start_ts AND x.ts <= r.end_ts + INTERVAL 1 MINUTE) > 0 AS had_xid,
           state = 'NODE_FAIL' OR (state = 'FAILED' AND had_xid) AS hw_failure
    FROM runs AS r
    ARRAY JOIN r.nodes AS node
    LEFT JOIN (SELECT cluster, node, ts FROM xid_event FINAL WHERE xid_is_hardware(xid)
               AND ts >= {from_ts:DateTime('UTC')} - INTERVAL 60 DAY AND ts < {to_ts:DateTime('UTC')} + INTERVAL 1 MINUTE) AS x
        ON x.cluster = r.cluster AND x.node = node
    GROUP BY cluster, job_id, submit_ts
    SETTINGS join_use_nulls = 1
),
per_class AS (
    SELECT
        if(grouping(cls) = 1, 'all', cls) AS size_class,
        if(grouping(cls) = 1, 0, min(gpus)) AS min_gpus,
        count() AS runs_ended,
        avg(nnodes) AS mean_nodes,
        sum(nnodes * wall_s) / 86400 AS node_days,
        sum(wall_s) / 3600 AS run_hours,
        countIf(state = 'NODE_FAIL') AS node_fail_runs,
        countIf(hw_failure) AS hw_failures,
        countIf(state = 'FAILED' AND had_xid) AS failed_after_xid,
        sumIf(gpus * wall_s, state = 'NODE_FAIL') / 3600 AS node_fail_gpu_hours,
        sumIf(gpus * wall_s, state = 'FAILED' AND had_xid) / 3600 AS failed_after_xid_gpu_hours,
        hw_failures / nullIf(node_days, 0) * 1000 AS failures_per_1000_node_days,
        run_hours / nullIf(hw_failures, 0) AS mttf_observed_h
    FROM classified
    GROUP BY GROUPING SETS ((), (cls))
)
SELECT *,
       -- the cluster-wide rate: the 'all' row's
       24 / nullIf(mean_nodes * max(if(size_class = 'all', failures_per_1000_node_days, NULL)) OVER () / 1000, 0)
           AS mttf_model_h
FROM per_class
ORDER BY size_class = 'all', min_gpus;
