-- Energy and carbon of {project} ('' for the whole cluster) in [from_ts, to_ts): job_energy.sql's runs summed,
-- one row for the scope (project_key '') and one per project, with the compute they delivered
-- (efficiency.sql's delivered_pflop_days: tensor activity × time × the model's peak BF16 rate). Only what is
-- attributed to runs: the energy of a node-hour nobody was allocated is not in these rows.
--   runs, gpu_h                 the runs with GPU time in the window, and that time
--   gpu_kwh, rest_kwh, it_kwh       the GPUs', the rest of the nodes' (IPMI power − GPUs), and both
--   facility_kwh, kg_co2e           × PUE; × each hour's carbon intensity (job_energy.sql: the hourly intensity
--                                   loaded for the cluster, else [energy] carbon_g_per_kwh). NULL when a run
--                                   that used energy has no carbon figure (an hour with neither), or no run has one
--   kwh_per_gpu_h, kg_co2e_per_gpu_h      it_kwh and kg_co2e ÷ gpu_h
--   facility_kwh_per_pflop_day      facility_kwh ÷ delivered PFLOP-days
--   gpu_counter_share               the part of gpu_kwh measured by the GPUs' energy counters (the rest:
--                                   power samples × time)
--   node_power_measured_share       the part of gpu_h of the runs whose every node-hour had its node energy
--                                   measured (job_energy's node_power 'measured'; the rest has no, or only
--                                   some, rest-of-node energy: rest_kwh counts only what was measured)
--   carbon_hourly_share             the part of facility_kwh priced at an hourly carbon intensity (the rest at
--                                   the constant, or not at all)
--- [mart]
--- grain = "one row per project, and the scope ('')"
--- scope = "project"
--- report = 25
--- columns = ["project_key", "runs", "gpu_h", "gpu_kwh", "rest_kwh", "it_kwh", "facility_kwh", "kg_co2e", "kwh_per_gpu_h", "kg_co2e_per_gpu_h", "delivered_pflop_days", "facility_kwh_per_pflop_day", "gpu_counter_share", "node_power_measured_share", "carbon_hourly_share"]
--- export = 25
WITH
-- Each run's figures taken to fixed point (Decimal, 1e-12 of the unit) and summed as Decimal, converted to Float64
-- after: a Float64 sum depends on the order the engine's threads hand in their parts (it_kwh 26482.3362598351
-- in one evaluation, 26482.33625983511 in the next); a Decimal sum is exact, so in any order the same
jobs AS (SELECT project, toDecimal128(gpu_h, 12) AS gpu_h, toDecimal128(gpu_kwh, 12) AS gpu_kwh,
                toDecimal128(gpu_counter_kwh, 12) AS gpu_counter_kwh, toDecimal128(rest_kwh, 12) AS rest_kwh,
                toDecimal128(it_kwh, 12) AS it_kwh, toDecimal128(facility_kwh, 12) AS facility_kwh,
                toDecimal128(kg_co2e, 12) AS kg_co2e, node_power,
                toDecimal128(carbon_hourly_kwh, 12) AS carbon_hourly_kwh
         FROM ({{mart job_energy}})),
sums AS (
    SELECT if(grouping(project) = 1, '', project) AS project_key,
           count() AS n_runs, toFloat64(sum(j.gpu_h)) AS t_gpu_h, toFloat64(sum(j.gpu_kwh)) AS t_gpu_kwh,
           toFloat64(sum(j.rest_kwh)) AS t_rest_kwh, toFloat64(sum(j.it_kwh)) AS t_it_kwh,
           toFloat64(sum(j.facility_kwh)) AS t_facility_kwh,
           if(countIf(j.kg_co2e IS NULL AND j.it_kwh > 0) > 0 OR countIf(j.kg_co2e IS NOT NULL) = 0, NULL,
              toFloat64(sum(ifNull(j.kg_co2e, 0)))) AS t_kg_co2e,
           toFloat64(sum(j.carbon_hourly_kwh)) / nullIf(t_facility_kwh, 0) AS carbon_hourly_share,
           toFloat64(sum(j.gpu_counter_kwh)) / nullIf(t_gpu_kwh, 0) AS gpu_counter_share,
           toFloat64(sumIf(j.gpu_h, j.node_power = 'measured')) / nullIf(t_gpu_h, 0) AS node_power_measured_share
    FROM jobs AS j
    GROUP BY GROUPING SETS ((), (project))
),
delivered AS (SELECT project_key, delivered_pflop_days FROM ({{mart efficiency}}))
SELECT s.project_key AS project_key, s.n_runs AS runs, s.t_gpu_h AS gpu_h, s.t_gpu_kwh AS gpu_kwh,
       s.t_rest_kwh AS rest_kwh, s.t_it_kwh AS it_kwh, s.t_facility_kwh AS facility_kwh, s.t_kg_co2e AS kg_co2e,
       s.t_it_kwh / nullIf(s.t_gpu_h, 0) AS kwh_per_gpu_h,
       s.t_kg_co2e / nullIf(s.t_gpu_h, 0) AS kg_co2e_per_gpu_h,
       d.delivered_pflop_days AS delivered_pflop_days,
       s.t_facility_kwh / nullIf(delivered_pflop_days, 0) AS facility_kwh_per_pflop_day,
       s.gpu_counter_share AS gpu_counter_share, s.node_power_measured_share AS node_power_measured_share,
       s.carbon_hourly_share AS carbon_hourly_share
FROM sums AS s
LEFT JOIN delivered AS d ON d.project_key = s.project_key
ORDER BY project_key
SETTINGS join_use_nulls = 1;
