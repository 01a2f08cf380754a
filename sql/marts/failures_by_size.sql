-- Reliability by GPU-count class, for runs of {project} ('' for the whole cluster) that ended in
-- [from_ts, to_ts). A run failed on hardware when it ended NODE_FAIL, or ended FAILED within
-- {xid_failure_minutes} minutes after a hardware Xid (xid_is_hardware) on one of its nodes, while it ran (up
-- to a minute after its end: the Xid and the job's end are logged by different daemons); an Xid earlier in
-- a run that went on working did not end it (analytics/marts.py gives the default and why).
-- GPU-hours: hw_lost_gpu_h is the work the hardware failures lost, since each run's last checkpoint
-- (campaigns.sql's rule: run_telemetry's last_ckpt_ts, the run's start when it wrote none; NULL when a
-- failed run has no telemetry); node_fail_run_gpu_h and xid_failed_run_gpu_h are the whole runs'
-- GPU-hours (what the runs held, not what they lost). Meta's model (Kokolis et al., HPCA 2025): failures per 1,000
-- node-days r_f = failures ÷ node-days run × 1000, and a job on N nodes fails on average every
-- 1 ÷ (N × r_f) days. mttf_observed_h = run hours ÷ failures of the class (the scope's runs); mttf_model_h
-- uses the cluster's r_f, cluster_failures_per_1000_node_days: over every run of the cluster that ended in
-- the window, whatever {project} selects (the hardware is the cluster's: a project's report gives the same
-- model MTTF per job size as the cluster's). Only this rate is read from other projects' runs: a number,
-- no job or user.
-- Why xid_failure_minutes = 10: after a fatal Xid the process on that GPU fails within seconds and its peers on
-- the other nodes when their collective times out (PyTorch's NCCL watchdog default is 10 minutes); an Xid
-- earlier in a run that went on working did not end it.
--- [mart]
--- grain = "one row per job size class, and the scope ('')"
--- scope = "project"
--- report = 6
--- previous = true
--- parameters = { xid_failure_minutes = 10.0 }
--- columns = ["size_class", "min_gpus", "runs_ended", "mean_nodes", "node_days", "run_hours", "node_fail_runs", "hw_failures", "failed_after_xid", "node_fail_run_gpu_h", "xid_failed_run_gpu_h", "hw_lost_gpu_h", "failures_per_1000_node_days", "mttf_observed_h", "cluster_failures_per_1000_node_days", "mttf_model_h"]
--- export = 9
WITH runs AS (
    SELECT cluster, job_id, submit_ts, gpus, nnodes, nodes, state, start_ts, end_ts, wall_s,
           {project:String} = '' OR project = {project:String} AS in_scope
    FROM fct_job_run
    WHERE cluster = {cluster:String}
      AND NOT never_ran AND is_final AND gpus > 0 AND length(nodes) > 0
      AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
),
-- each run once, with whether a hardware Xid was logged on one of its nodes while it ran (up to a minute
-- after its end)
classified AS (
    SELECT r.cluster AS cluster, r.job_id AS job_id, r.submit_ts AS submit_ts, any(r.gpus) AS gpus,
           any(r.nnodes) AS nnodes, any(r.state) AS state, any(r.wall_s) AS wall_s, any(r.in_scope) AS in_scope,
           gpu_size_class(gpus) AS cls,
           countIf(x.ts >= r.start_ts AND x.ts <= r.end_ts + INTERVAL 1 MINUTE
                   AND x.ts >= r.end_ts - toIntervalSecond(toInt64({xid_failure_minutes:Float64} * 60))) > 0 AS had_xid,
           state = 'NODE_FAIL' OR (state = 'FAILED' AND had_xid) AS hw_failure,
           any(r.start_ts) AS start_ts, any(r.end_ts) AS end_ts
    FROM runs AS r
    ARRAY JOIN r.nodes AS node
    LEFT JOIN (SELECT cluster, node, ts FROM xid_event FINAL WHERE xid_is_hardware(xid)
               AND ts >= {from_ts:DateTime('UTC')} - INTERVAL 60 DAY AND ts < {to_ts:DateTime('UTC')} + INTERVAL 1 MINUTE) AS x
        ON x.cluster = r.cluster AND x.node = node
    GROUP BY cluster, job_id, submit_ts
    SETTINGS join_use_nulls = 1
),
-- the work a hardware failure lost: since the run's last checkpoint (NULL: no telemetry row for the run)
lost AS (
    SELECT c.*, t.job_id != '' AS has_telemetry,
           if(has_telemetry, c.gpus * (toInt64(c.end_ts) - toInt64(coalesce(t.last_ckpt_ts, c.start_ts))), NULL)
               AS lost_gpu_s
    FROM classified AS c
    LEFT JOIN (SELECT job_id, submit_ts, end_ts, last_ckpt_ts FROM run_telemetry FINAL
               WHERE cluster = {cluster:String}) AS t
        ON t.job_id = c.job_id AND t.submit_ts = c.submit_ts AND t.end_ts = c.end_ts
),
-- one pass over the runs: the scope's figures (in_scope) by size class and in all, and in the same pass the
-- cluster's rate (every run of the cluster that ended in the window; the () set's). A scalar subquery of its
-- own would evaluate `classified` (runs × nodes × the Xid log) a second time: ClickHouse inlines a CTE.
per_class AS (
    SELECT
        if(grouping(cls) = 1, 'all', cls) AS size_class,
        if(grouping(cls) = 1, 0, minIf(gpus, in_scope)) AS min_gpus,
        countIf(in_scope) AS runs_ended,
        avgIf(nnodes, in_scope) AS mean_nodes,
        sumIf(nnodes * wall_s, in_scope) / 86400 AS node_days,
        sumIf(wall_s, in_scope) / 3600 AS run_hours,
        countIf(in_scope AND state = 'NODE_FAIL') AS node_fail_runs,
        countIf(in_scope AND hw_failure) AS hw_failures,
        countIf(in_scope AND state = 'FAILED' AND had_xid) AS failed_after_xid,
        sumIf(gpus * wall_s, in_scope AND state = 'NODE_FAIL') / 3600 AS node_fail_run_gpu_h,
        sumIf(gpus * wall_s, in_scope AND state = 'FAILED' AND had_xid) / 3600 AS xid_failed_run_gpu_h,
        if(countIf(in_scope AND hw_failure AND lost_gpu_s IS NULL) > 0, NULL,
           sumIf(ifNull(lost_gpu_s, 0), in_scope AND hw_failure) / 3600) AS hw_lost_gpu_h,
        hw_failures / nullIf(node_days, 0) * 1000 AS failures_per_1000_node_days,
        run_hours / nullIf(hw_failures, 0) AS mttf_observed_h,
        countIf(hw_failure) / nullIf(sum(nnodes * wall_s) / 86400, 0) * 1000 AS rate_here
    FROM lost
    GROUP BY GROUPING SETS ((), (cls))
    -- a size class only other projects ran: no row, as when the scope's runs alone were grouped
    HAVING grouping(cls) = 1 OR runs_ended > 0
)
SELECT * EXCEPT rate_here,
       max(if(size_class = 'all', rate_here, NULL)) OVER () AS cluster_failures_per_1000_node_days,
       24 / nullIf(mean_nodes * cluster_failures_per_1000_node_days / 1000, 0) AS mttf_model_h
FROM per_class
ORDER BY size_class = 'all', min_gpus;
