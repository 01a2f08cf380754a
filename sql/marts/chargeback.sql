-- Every project's use of [from_ts, to_ts) (the cluster report): GPU-hours allocated on each GPU model and
-- their cost at that model's cost per allocated GPU-hour (the chargeback view: the month's capex and energy
-- of a model shared by allocation, so idle capacity is paid by those who used the machine; cost.sql has
-- the same totals). Requeued runs count: the resources were held. {project} ('' for every project) keeps
-- one project's rows; its shares and cost are still of the whole model's allocation. The runs' GPU time per
-- node and hour is the run_node_hour grain's (the part of each hour inside the window).
WITH
alloc AS (
    SELECT d.project AS project, i.gpu_model AS gpu_model,
           sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) / 3600 AS gpu_h,
           uniqExact(r.job_id, r.submit_ts) AS runs
    FROM (SELECT * FROM run_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
          AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}) AS r
    LEFT JOIN dim_account AS d ON d.account = r.account
    LEFT JOIN (SELECT node, gpu_model FROM node_inventory FINAL WHERE cluster = {cluster:String}) AS i ON i.node = r.node
    GROUP BY project, gpu_model
),
model_cost AS (
    SELECT c.gpu_model AS gpu_model,
           sum(c.allocated_gpu_s) / 3600 AS allocated_gpu_h,
           sum(c.capacity_gpu_s / 3600 * capex_per_gpu_hour(m.node_price, c.gpus, m.amortization_years))
             + sum(energy_cost(c.gpu_energy_j / 3.6e6, m.pue, m.power_price_per_kwh)) AS total_cost,
           any(m.currency) AS currency
    FROM (SELECT * FROM capacity_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')} AND gpus > 0) AS c
    INNER JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(c.gpu_model) = lower(m.gpu_model)
    GROUP BY gpu_model
)
SELECT a.project AS project, a.gpu_model AS gpu_model, a.runs AS runs, a.gpu_h AS allocated_gpu_h,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) AS share_of_model_allocation,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) * mc.total_cost AS cost, mc.currency AS currency
FROM alloc AS a
LEFT JOIN model_cost AS mc ON a.gpu_model = mc.gpu_model
WHERE {project:String} = '' OR a.project = {project:String}
ORDER BY project, gpu_model
SETTINGS join_use_nulls = 1;
