-- Each project's chargeback for [from_ts, to_ts) over all GPU models (chargeback.sql, included below, for
-- {project}, '' for every project): allocated GPU-hours, their share of the cluster's available GPU-hours
-- (utilization.sql), and the cost charged.
--- [mart]
--- grain = "one row per project"
--- scope = "project"
--- report = 10
--- previous = true
--- columns = ["project", "allocated_gpu_h", "share_of_available", "cost", "currency"]
--- export = 18
SELECT c.project AS project,
       sum(c.allocated_gpu_h) AS allocated_gpu_h,
       sum(c.allocated_gpu_h)
         / nullIf((SELECT available_gpu_h FROM ({{mart utilization}}) WHERE level = 'cluster'), 0) AS share_of_available,
       sum(c.cost) AS cost,
       any(c.currency) AS currency
FROM ({{mart chargeback}}) AS c
GROUP BY project
ORDER BY project;
