-- Every project's use of [from_ts, to_ts) (the cluster report): GPU-hours allocated on each GPU model and
-- their cost at that model's cost per allocated GPU-hour (the chargeback view: the month's capex and energy
-- of a model shared by allocation, so idle capacity is paid by those who used the machine; the totals are
-- cost.sql's, included). Requeued runs count: the resources were held. {project} ('' for every project) keeps
-- one project's rows; its shares and cost are still of the whole model's allocation. The runs' GPU time per
-- node and hour is the run_node_hour grain's (the part of each hour inside the window).
--- [mart]
--- grain = "one row per project and GPU model"
--- scope = "project"
--- report = true
--- depends = ["cost"]
--- columns = ["project", "gpu_model", "runs", "allocated_gpu_h", "share_of_model_allocation", "cost", "currency"]
--- export = 17
WITH
alloc AS (
    SELECT d.project AS project, i.gpu_model AS gpu_model,
           sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) / 3600 AS gpu_h,
           uniqExact(r.job_id, r.submit_ts) AS runs
    FROM (SELECT * FROM run_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
          AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}) AS r
    LEFT JOIN dim_account AS d ON d.account = r.account
    -- a node with GPUs of several models: its models joined by '+', as run_node_hour labels it
    LEFT JOIN (SELECT node, arrayStringConcat(arraySort(groupArray(toString(gpu_model))), '+') AS gpu_model
               FROM node_inventory FINAL WHERE cluster = {cluster:String} GROUP BY node) AS i ON i.node = r.node
    GROUP BY project, gpu_model
),
-- each model's allocated GPU-hours and total cost (capex and energy) as cost.sql gives them
model_cost AS (
    SELECT model AS gpu_model, allocated_gpu_h, total_cost, currency
    FROM ({{mart cost}})
    WHERE model != 'all'
)
SELECT a.project AS project, a.gpu_model AS gpu_model, a.runs AS runs, a.gpu_h AS allocated_gpu_h,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) AS share_of_model_allocation,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) * mc.total_cost AS cost, mc.currency AS currency
FROM alloc AS a
LEFT JOIN model_cost AS mc ON a.gpu_model = mc.gpu_model
WHERE {project:String} = '' OR a.project = {project:String}
ORDER BY project, gpu_model
SETTINGS join_use_nulls = 1;
