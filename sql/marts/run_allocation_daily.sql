-- The allocation the chargeback charges, defined once: each run's GPU time inside [from_ts, to_ts) on each GPU
-- model, day by day, with its project. chargeback.sql sums it over the window (and counts the runs),
-- focus_cost.sql prices it day by day; both read these rows, so their GPU-hours cannot part (the law
-- sql/checks/focus_matches_chargeback.sql holds them equal). Requeued runs count: the resources were held.
-- {project} ('' for every project) keeps one project's rows.
--   gpu_s         the run's GPUs on the node × the part of each of its node-hours inside the window
--                 (the run_node_hour grain), × the model's part of the node's GPUs for the run
--                 (sql/functions/gpu_model_share.sql, from its AllocTRES; a node of one model: all of it)
--   busy_gpu_s    gpu_s × the node's GPU utilization in the hour (run_node_hour's util_per_allocated; no
--                 telemetry: 0)
--   energy_j      gpu_s × the GPUs' energy per allocated GPU-second (energy_j_per_allocated; none: 0)
-- A run on a node the inventory does not list is on '(not in the inventory)', as utilization names its
-- GPU-hours (a NULL key would match nothing when a project's rows are joined to the cluster's). A row may
-- hold 0 GPU-seconds (a typed run's share of a model it did not ask for): the run still counts there, as it
-- did before the allocation was shared.
--- [mart]
--- grain = "one row per run, GPU model and day"
--- scope = "project"
--- columns = ["day", "project", "gpu_model", "job_id", "submit_ts", "gpu_s", "busy_gpu_s", "energy_j"]
SELECT toDate(r.hour) AS day, d.project AS project, ifNull(i.gpu_model, '(not in the inventory)') AS gpu_model,
       r.job_id AS job_id, r.submit_ts AS submit_ts,
       sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})
           * gpu_model_share(ifNull(t.alloc_tres, ''), i.gpu_model, i.gpus, i.node_gpus, i.node_models)) AS gpu_s,
       sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})
           * gpu_model_share(ifNull(t.alloc_tres, ''), i.gpu_model, i.gpus, i.node_gpus, i.node_models)
           * ifNull(r.util_per_allocated, 0)) AS busy_gpu_s,
       sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})
           * gpu_model_share(ifNull(t.alloc_tres, ''), i.gpu_model, i.gpus, i.node_gpus, i.node_models)
           * ifNull(r.energy_j_per_allocated, 0)) AS energy_j
FROM (SELECT * FROM run_node_hour FINAL WHERE cluster = {cluster:String}
      AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
      AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}) AS r
LEFT JOIN dim_account AS d ON d.account = r.account
-- a row per GPU model of the run's node: on a node with several, the run's part of each model is the
-- capacity grain's (sql/functions/gpu_model_share.sql, from the run's AllocTRES); one model: all of it
LEFT JOIN (SELECT node, gpu_model, gpus, toUInt16(sum(gpus) OVER (PARTITION BY node)) AS node_gpus,
                   groupArray(toString(gpu_model)) OVER (PARTITION BY node) AS node_models
            FROM node_inventory FINAL WHERE cluster = {cluster:String}) AS i ON i.node = r.node
LEFT JOIN (SELECT job_id, submit_ts, alloc_tres FROM fct_job_run WHERE cluster = {cluster:String}
           AND usage_end_ts > {from_ts:DateTime('UTC')} AND usage_start_ts < {to_ts:DateTime('UTC')}) AS t
    ON t.job_id = r.job_id AND t.submit_ts = r.submit_ts
WHERE {project:String} = '' OR d.project = {project:String}
GROUP BY day, project, gpu_model, job_id, submit_ts
ORDER BY day, project, gpu_model, job_id, submit_ts
SETTINGS join_use_nulls = 1;
