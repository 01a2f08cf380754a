-- Every project's use of [from_ts, to_ts) (the cluster report): GPU-hours allocated on each GPU model and
-- their cost at that model's cost per allocated GPU-hour (the chargeback view: the month's capex and energy
-- of a model shared by allocation, so idle capacity is paid by those who used the machine; the totals are
-- cost.sql's, included). Requeued runs count: the resources were held. {project} ('' for every project) keeps
-- one project's rows; its shares and cost are still of the whole model's allocation. The runs' GPU time is
-- run_allocation_daily.sql's (the allocation defined once: focus_cost.sql prices the same rows by day).
--- [mart]
--- grain = "one row per project and GPU model"
--- scope = "project"
--- report = 9
--- previous = true
--- columns = ["project", "gpu_model", "runs", "allocated_gpu_h", "share_of_model_allocation", "cost", "currency"]
--- export = 17
WITH
-- the runs' GPU time on each model, day by day (run_allocation_daily.sql, which focus_cost prices too)
alloc AS (
    SELECT project, gpu_model, sum(gpu_s) / 3600 AS gpu_h, uniqExact(job_id, submit_ts) AS runs
    FROM ({{mart run_allocation_daily}})
    GROUP BY project, gpu_model
),
-- each model's allocated GPU-hours and total cost (capex and energy) as cost.sql gives them
model_cost AS (
    SELECT model AS gpu_model, allocated_gpu_h, total_cost, currency
    FROM ({{mart cost}})
    WHERE model != 'all'
)
-- a run on a node the inventory does not list is on '(not in the inventory)' (run_allocation_daily.sql)
SELECT a.project AS project, a.gpu_model AS gpu_model, a.runs AS runs,
       a.gpu_h AS allocated_gpu_h,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) AS share_of_model_allocation,
       a.gpu_h / nullIf(mc.allocated_gpu_h, 0) * mc.total_cost AS cost, mc.currency AS currency
FROM alloc AS a
LEFT JOIN model_cost AS mc ON a.gpu_model = mc.gpu_model
ORDER BY project, gpu_model
SETTINGS join_use_nulls = 1;
