-- Every project's use of [from_ts, to_ts) (the cluster report): GPU-hours allocated on each GPU model and
-- their cost at that model's cost per allocated GPU-hour (the chargeback view: the month's capex and energy
-- of a model shared by allocation, so idle capacity is paid by those who used the machine; the totals are
-- cost.sql's, included). Requeued runs count: the resources were held. {project} ('' for every project) keeps
-- one project's rows; its shares and cost are still of the whole model's allocation. The runs' GPU time per
-- node and hour is the run_node_hour grain's (the part of each hour inside the window).
--- [mart]
--- grain = "one row per project and GPU model"
--- scope = "project"
--- report = 9
--- previous = true
--- columns = ["project", "gpu_model", "runs", "allocated_gpu_h", "share_of_model_allocation", "cost", "currency"]
--- export = 17
WITH
alloc AS (
    SELECT d.project AS project, i.gpu_model AS gpu_model,
           sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})
               * gpu_model_share(ifNull(t.alloc_tres, ''), i.gpu_model, i.gpus, i.node_gpus, i.node_models)) / 3600
               AS gpu_h,
           uniqExact(r.job_id, r.submit_ts) AS runs
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
    GROUP BY project, gpu_model
),
-- each model's allocated GPU-hours and total cost (capex and energy) as cost.sql gives them
model_cost AS (
    SELECT model AS gpu_model, allocated_gpu_h, total_cost, currency
    FROM ({{mart cost}})
    WHERE model != 'all'
)
-- a run on a node the inventory does not list: '(not in the inventory)', as utilization names its GPU-hours
-- (a NULL key would match nothing when a project's rows are joined to the cluster's)
SELECT a.project AS project, ifNull(a.gpu_model, '(not in the inventory)') AS gpu_model, a.runs AS runs,
       a.gpu_h AS allocated_gpu_h,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) AS share_of_model_allocation,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) * mc.total_cost AS cost, mc.currency AS currency
FROM alloc AS a
LEFT JOIN model_cost AS mc ON a.gpu_model = mc.gpu_model
WHERE {project:String} = '' OR a.project = {project:String}
ORDER BY project, gpu_model
SETTINGS join_use_nulls = 1;
