-- Investment effectiveness of [from_ts, to_ts) by GPU model, from the cost model (cost_model, config
-- [cost.<model>]) and capacity_node_hour:
--   capex        capacity GPU-hours × capex_per_gpu_hour (sql/functions/): what the hardware costs while it
--                exists, used or not; a GPU-hour of a model is its model's node price shared by the node's
--                GPUs (node_gpus: on a node with several models, all of them; issue 49)
--   energy       energy_cost (× PUE × power price) of the IT energy measured, node-hour by node-hour, as
--                capacity_node_hour holds it (formed once by its refresh, migration 0020): the whole node's, IPMI
--                power × the time its GPUs' samples cover, where the node reported power; the GPUs' alone where
--                it did not (their energy counters, else power samples × time). Telemetry of the hours that
--                ended by the through time (data_through.sql), as the rest of the grain's.
--     gpu_energy_kwh       the GPUs' part; it_energy_kwh what is charged; facility_energy_kwh it × PUE
--     ipmi_energy_share    the part of it_energy_kwh measured at the node (IPMI)
--     energy_basis         'node (IPMI)' (every node-hour with energy reported node power), 'GPUs only (no
--                          IPMI)' (none did), 'node (IPMI) where measured, else GPUs only', or 'none' (no energy)
--   per available / allocated / busy GPU-hour: total ÷ those hours
--   idle_cost    capex of the available GPU-hours nobody was allocated
--   pflop_days   delivered tensor compute: Σ tensor activity × time × peak dense BF16 rate, in PFLOP/s-days
--- [mart]
--- grain = "one row per GPU model, and 'all'"
--- scope = "cluster"
--- report = 12
--- previous = true
--- columns = ["model", "currency", "capacity_gpu_h", "available_gpu_h", "allocated_gpu_h", "busy_gpu_h", "gpu_energy_kwh", "it_energy_kwh", "facility_energy_kwh", "ipmi_energy_share", "energy_basis", "capex", "energy_cost", "total_cost", "cost_per_available_gpu_h", "cost_per_allocated_gpu_h", "cost_per_busy_gpu_h", "idle_cost", "pflop_days", "cost_per_pflop_day"]
--- filters = { gpu_model = "model" }
--- export = 16
WITH
grain AS (
    SELECT *, node_energy_measured(node_power_w_avg, node_covered_s) AS ipmi
    FROM capacity_node_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')} AND gpus > 0
)
SELECT
    if(grouping(c.gpu_model) = 1, 'all', c.gpu_model) AS model,
    any(m.currency) AS currency,
    sum(c.capacity_gpu_s) / 3600 AS capacity_gpu_h,
    (sum(c.capacity_gpu_s) - sum(c.down_gpu_s) - sum(c.drained_gpu_s)) / 3600 AS available_gpu_h,
    sum(c.allocated_gpu_s) / 3600 AS allocated_gpu_h,
    sum(c.busy_gpu_s) / 3600 AS busy_gpu_h,
    sum(c.gpu_energy_j) / 3.6e6 AS gpu_energy_kwh,
    sum(c.it_energy_j) / 3.6e6 AS it_energy_kwh,
    sum(c.it_energy_j / 3.6e6 * m.pue) AS facility_energy_kwh,
    sumIf(c.it_energy_j, c.ipmi = 1) / 3.6e6 / nullIf(it_energy_kwh, 0) AS ipmi_energy_share,
    multiIf(countIf(c.it_energy_j > 0) = 0, 'none', countIf(c.it_energy_j > 0 AND c.ipmi = 0) = 0, 'node (IPMI)',
            countIf(c.it_energy_j > 0 AND c.ipmi = 1) = 0, 'GPUs only (no IPMI)',
            'node (IPMI) where measured, else GPUs only') AS energy_basis,
    sum(c.capacity_gpu_s / 3600 * capex_per_gpu_hour(m.node_price, c.node_gpus, m.amortization_years)) AS capex,
    sum(energy_cost(c.it_energy_j / 3.6e6, m.pue, m.power_price_per_kwh)) AS energy_cost,
    capex + energy_cost AS total_cost,
    total_cost / nullIf(available_gpu_h, 0) AS cost_per_available_gpu_h,
    total_cost / nullIf(allocated_gpu_h, 0) AS cost_per_allocated_gpu_h,
    total_cost / nullIf(busy_gpu_h, 0) AS cost_per_busy_gpu_h,
    sum(greatest(0, c.capacity_gpu_s - c.down_gpu_s - c.drained_gpu_s - c.allocated_gpu_s) / 3600
        * capex_per_gpu_hour(m.node_price, c.node_gpus, m.amortization_years)) AS idle_cost,
    sum(c.tensor_gpu_s * m.peak_bf16_tflops) / 1000 / 86400 AS pflop_days,
    total_cost / nullIf(pflop_days, 0) AS cost_per_pflop_day
FROM grain AS c
INNER JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(c.gpu_model) = lower(m.gpu_model)
GROUP BY GROUPING SETS ((), (c.gpu_model))
-- no 'all' row when no node-hour was priced (no inventory, no cost model): its zeros would say that nothing
-- was allocated where utilization counts the GPUs the jobs held
HAVING grouping(c.gpu_model) = 0 OR count() > 0
ORDER BY model = 'all', model;
