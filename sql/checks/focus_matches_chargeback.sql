-- law: the FOCUS export is the chargeback: per project and GPU model, the FOCUS rows' BilledCost summed over
--   the window's days = chargeback's cost, and their ConsumedQuantity = chargeback's allocated GPU-hours
--   (focus_cost, chargeback; each side 0 where the other has a row it lacks).
-- why: focus_cost prices each day's allocated GPU-hours at the model's cost per allocated GPU-hour for the
--   window, and chargeback charges a project its share of the model's allocation × the model's cost: the
--   same price × the same GPU-hours (both read run_allocation_daily's rows), which the days split without
--   overlap (each run-hour lies in one day).
-- Rows: section, key (project / GPU model), figure, value (Σ of the FOCUS rows), bound (chargeback's),
--   off_by = value − bound.
WITH
focus AS (
    SELECT SubAccountId AS project, x_GpuModel AS gpu_model, toFloat64(sum(BilledCost)) AS cost,
           toFloat64(sum(ConsumedQuantity)) AS gpu_h
    FROM ({{mart focus_cost}})
    GROUP BY project, gpu_model
),
charge AS (SELECT project, gpu_model, ifNull(cost, 0) AS cost, allocated_gpu_h AS gpu_h FROM ({{mart chargeback}})),
joined AS (
    SELECT coalesce(f.project, c.project) AS project, coalesce(f.gpu_model, c.gpu_model) AS gpu_model,
           ifNull(f.cost, 0) AS f_cost, ifNull(c.cost, 0) AS c_cost, ifNull(f.gpu_h, 0) AS f_gpu_h,
           ifNull(c.gpu_h, 0) AS c_gpu_h
    FROM focus AS f
    FULL OUTER JOIN charge AS c ON f.project = c.project AND f.gpu_model = c.gpu_model
    SETTINGS join_use_nulls = 1
),
compared AS (
    SELECT 'focus_cost vs chargeback' AS section, concat(project, ' / ', gpu_model) AS key, x.1 AS figure,
           x.2 AS value, x.3 AS bound
    FROM joined
    ARRAY JOIN [('Σ BilledCost = cost', f_cost, c_cost),
                ('Σ ConsumedQuantity = allocated_gpu_h', f_gpu_h, c_gpu_h)] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure;
