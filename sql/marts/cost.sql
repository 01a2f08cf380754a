-- Investment effectiveness of [from_ts, to_ts) by GPU model, from the cost model (cost_model, config
-- [cost.<model>]) and capacity_node_hour:
--   capex        capacity GPU-hours × capex_per_gpu_hour (sql/functions/): what the hardware costs while it
--                exists, used or not
--   energy       energy_cost of the GPU energy from telemetry (× PUE × power price) (node energy beyond the GPUs is not metered
--                per job; the IPMI node power is in the telemetry tables)
--   per available / allocated / busy GPU-hour: total ÷ those hours
--   idle_cost    capex of the available GPU-hours nobody was allocated
--   pflop_days   delivered tensor compute: Σ tensor activity × time × peak dense BF16 rate, in PFLOP/s-days
SELECT
    if(grouping(c.gpu_model) = 1, 'all', c.gpu_model) AS model,
    any(m.currency) AS currency,
    sum(c.capacity_gpu_s) / 3600 AS capacity_gpu_h,
    (sum(c.capacity_gpu_s) - sum(c.down_gpu_s) - sum(c.drained_gpu_s)) / 3600 AS available_gpu_h,
    sum(c.allocated_gpu_s) / 3600 AS allocated_gpu_h,
    sum(c.busy_gpu_s) / 3600 AS busy_gpu_h,
    sum(c.gpu_energy_j) / 3.6e6 AS gpu_energy_kwh,
    sum(c.gpu_energy_j) / 3.6e6 * any(m.pue) AS facility_energy_kwh,
    sum(c.capacity_gpu_s / 3600 * capex_per_gpu_hour(m.node_price, c.gpus, m.amortization_years)) AS capex,
    sum(energy_cost(c.gpu_energy_j / 3.6e6, m.pue, m.power_price_per_kwh)) AS energy_cost,
    capex + energy_cost AS total_cost,
    total_cost / nullIf(available_gpu_h, 0) AS cost_per_available_gpu_h,
    total_cost / nullIf(allocated_gpu_h, 0) AS cost_per_allocated_gpu_h,
    total_cost / nullIf(busy_gpu_h, 0) AS cost_per_busy_gpu_h,
    sum(greatest(0, c.capacity_gpu_s - c.down_gpu_s - c.drained_gpu_s - c.allocated_gpu_s) / 3600
        * capex_per_gpu_hour(m.node_price, c.gpus, m.amortization_years)) AS idle_cost,
    sum(c.tensor_gpu_s * m.peak_bf16_tflops) / 1000 / 86400 AS pflop_days,
    total_cost / nullIf(pflop_days, 0) AS cost_per_pflop_day
FROM (SELECT * FROM capacity_node_hour FINAL WHERE cluster = {cluster:String}
      AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')} AND gpus > 0) AS c
INNER JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(c.gpu_model) = lower(m.gpu_model)
GROUP BY GROUPING SETS ((), (c.gpu_model))
ORDER BY model = 'all', model;
