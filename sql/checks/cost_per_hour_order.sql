-- law: cost per busy GPU-hour ≥ cost per allocated GPU-hour ≥ cost per available GPU-hour ≥ 0, for every GPU
--   model and for all of them.
-- why: the three divide one total cost by busy, allocated and available GPU-hours, and busy ≤ allocated ≤
--   available (capacity_order); the same cost over fewer hours costs more per hour. A figure that cannot be
--   formed (no busy hour: NULL) is not compared.
-- Rows: section, key (the model), figure, value ≤ bound broken by off_by, in the cost model's currency.
WITH
compared AS (
    SELECT 'cost' AS section, model AS key, x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM ({{mart cost}})
    ARRAY JOIN [('cost_per_allocated_gpu_h ≤ cost_per_busy_gpu_h', cost_per_allocated_gpu_h, cost_per_busy_gpu_h),
                ('cost_per_available_gpu_h ≤ cost_per_allocated_gpu_h', cost_per_available_gpu_h,
                 cost_per_allocated_gpu_h),
                ('0 ≤ cost_per_available_gpu_h', 0, cost_per_available_gpu_h),
                ('idle_cost ≤ capex', idle_cost, capex)] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
ORDER BY section, off_by DESC, key, figure;
