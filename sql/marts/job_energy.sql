-- Energy and carbon of each run of {project} ('' for the whole cluster) in [from_ts, to_ts), from what was
-- measured. Per node and hour:
--   GPU energy   the GPUs' energy counters (dcgm-exporter's DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, gpu_hour's
--                energy_j); for a GPU-hour without a counter, its mean power × the time its samples cover
--                (power_w_avg × covered_s): the fallback, and said (gpu_energy_source)
--   node energy  the node's power from IPMI (ipmi_exporter's DCMI reading, node_hour's node_power_w_avg) × the
--                time its GPUs' samples cover; the rest of the node = node energy − GPU energy (0 when the node
--                reports no power: node_power 'missing')
-- Both formed once per node-hour by the capacity grain's refresh (capacity_node_hour: gpu_energy_j,
-- gpu_counter_energy_j, node_power_w_avg, it_energy_j; migration 0020), for the hours that ended by the cut.
-- A run's GPU part by the one attribution rule (round 6, run_node_hour): where dcgm-exporter's hpc_job label
-- names its GPUs, their counters' steps over its time (run_sample_hour's gpu_energy_j), and a share of the
-- node-hour's rest (its unallocated GPUs', the unlabelled readings'), taken by the runs no label names there
-- by their GPU time, else by all its runs; a run no label names, its share of the node's allocated GPU time.
-- The rest of the node's energy is shared by allocated GPU time: the energy of a node's unallocated GPUs goes
-- to the runs on it (they held the node), and a node-hour with no run is nobody's (energy.sql counts it as
-- idle). run_node_hour keeps the run's energy per GPU-second of it in the node-hour (energy_j_per_allocated,
-- counter_j_per_allocated, it_j_per_allocated), so its part is its GPU-seconds in the window × those rates.
-- Columns: job_id, submit_ts, user, account, project, gpus, gpu_model, gpu_h (in the window);
--   gpu_kwh (gpu_counter_kwh of it from counters), rest_kwh (the rest of its nodes), it_kwh = gpu_kwh + rest_kwh;
--   facility_kwh   it_kwh × the GPU model's PUE (cost_model: [cost.<model>] pue)
--   kg_co2e        each hour's facility energy × that hour's grid carbon intensity ÷ 1000: the hourly intensity
--                  loaded for the cluster (carbon_intensity, `ops-report etl carbon`) where the table has the
--                  hour, else {carbon_g_per_kwh} (the config's [energy] carbon_g_per_kwh; -1: not set). NULL when
--                  an hour in which the run used energy has neither, or when none of its hours has an intensity
--   gpu_energy_source  'counters', 'power samples', 'counters and power samples', or 'none' (no telemetry)
--   node_power     'measured' (the node energy of every node-hour of the run was measured: IPMI power and GPU
--                  samples to multiply it by, sql/functions/node_energy_measured.sql, as cost's IPMI share),
--                  'partial' or 'missing'
--   carbon_source  which intensity its node-hours took: 'hourly' (all from the table), 'constant' (none),
--                  'hourly and constant', 'hourly with gaps' (the rest had none: no constant), or 'none'
--   carbon_hourly_kwh  the part of facility_kwh priced at an hourly intensity
--- [mart]
--- grain = "one row per run with GPU time in the window"
--- scope = "project"
--- columns = ["job_id", "submit_ts", "user", "account", "project", "gpus", "gpu_model", "gpu_h", "gpu_kwh", "gpu_counter_kwh", "rest_kwh", "it_kwh", "facility_kwh", "kg_co2e", "gpu_energy_source", "node_power", "carbon_source", "carbon_hourly_kwh"]
--- user_columns = ["user"]
--- export = 26
WITH
intensity AS (
    SELECT hour, g_co2e_per_kwh
    FROM carbon_intensity FINAL
    WHERE cluster = {cluster:String} AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
),
shared AS (
    SELECT h.job_id AS job_id, h.submit_ts AS submit_ts, h.gpu_model AS gpu_model,
           h.gpus_per_node * overlap_s(h.s, h.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}) AS gpu_s,
           gpu_s * h.counter_j_per_allocated AS counter_j,
           gpu_s * (h.energy_j_per_allocated - h.counter_j_per_allocated) AS power_j,
           -- the node's IT energy (sql/functions/it_energy_j.sql) less its GPUs': 0 where it reports no power
           gpu_s * (h.it_j_per_allocated - h.energy_j_per_allocated) AS rest_j,
           h.node_power_measured AS node_measured,
           -- the hour's intensity: the table's, else the constant, else NULL
           toUInt8(ci.g_co2e_per_kwh IS NOT NULL) AS hourly,
           coalesce(ci.g_co2e_per_kwh, if({carbon_g_per_kwh:Float64} < 0, NULL, {carbon_g_per_kwh:Float64}))
               AS g_per_kwh
    FROM run_node_hour AS h FINAL
    LEFT JOIN intensity AS ci ON ci.hour = h.hour
    WHERE h.cluster = {cluster:String} AND h.hour >= toStartOfHour({from_ts:DateTime('UTC')})
      AND h.hour < {to_ts:DateTime('UTC')} AND h.e > {from_ts:DateTime('UTC')} AND h.s < {to_ts:DateTime('UTC')}
      AND ({project:String} = ''
           OR h.account IN (SELECT account FROM dim_account WHERE project = {project:String}))
),
priced AS (
    -- the node-hour's IT energy, priced at g_per_kwh
    SELECT *, ifNull(counter_j, 0) + ifNull(power_j, 0) + ifNull(rest_j, 0) AS it_j
    FROM shared
),
per_run AS (
    -- The energies summed as Decimal (millijoules: each node-hour's share taken to the mJ, then added exactly),
    -- converted to kWh after: a Float64 sum depends on the order the engine's threads hand in their parts, and
    -- gave figures that changed in the last digits from one evaluation to the next (docs/sql.md)
    SELECT job_id, submit_ts, min(gpu_model) AS gpu_model, sum(gpu_s) / 3600 AS gpu_h,
           toFloat64(sum(toDecimal128(ifNull(counter_j, 0), 3))) AS counter_j,
           toFloat64(sum(toDecimal128(ifNull(power_j, 0), 3))) AS power_j,
           toFloat64(sum(toDecimal128(ifNull(rest_j, 0), 3))) AS rest_j,
           min(node_measured) AS all_measured, max(node_measured) AS any_measured,
           -- Σ IT energy (J) × the hour's intensity (g/kWh); the energy of the node-hours priced hourly
           toFloat64(sum(toDecimal128(it_j * ifNull(g_per_kwh, 0), 3))) AS it_j_g,
           toFloat64(sumIf(toDecimal128(it_j, 3), hourly = 1)) AS hourly_it_j,
           count() AS n_hours, sum(hourly) AS n_hourly, countIf(g_per_kwh IS NOT NULL) AS n_priced,
           countIf(g_per_kwh IS NULL AND it_j > 0) AS n_unpriced_energy
    FROM priced
    GROUP BY job_id, submit_ts
)
SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, j.user AS user, j.account AS account, j.project AS project,
       j.gpus AS gpus, r.gpu_model AS gpu_model, r.gpu_h AS gpu_h,
       (r.counter_j + r.power_j) / 3.6e6 AS gpu_kwh,
       r.counter_j / 3.6e6 AS gpu_counter_kwh,
       r.rest_j / 3.6e6 AS rest_kwh,
       gpu_kwh + rest_kwh AS it_kwh,
       it_kwh * ifNull(m.pue, 1) AS facility_kwh,
       if(r.n_priced = 0 OR r.n_unpriced_energy > 0, NULL, r.it_j_g / 3.6e6 * ifNull(m.pue, 1) / 1000) AS kg_co2e,
       multiIf(r.counter_j > 0 AND r.power_j > 0, 'counters and power samples', r.counter_j > 0, 'counters',
               r.power_j > 0, 'power samples', 'none') AS gpu_energy_source,
       multiIf(r.all_measured = 1, 'measured', r.any_measured = 1, 'partial', 'missing') AS node_power,
       multiIf(r.n_hourly = r.n_hours, 'hourly', r.n_priced = 0, 'none', r.n_hourly = 0, 'constant',
               r.n_priced = r.n_hours, 'hourly and constant', 'hourly with gaps') AS carbon_source,
       r.hourly_it_j / 3.6e6 * ifNull(m.pue, 1) AS carbon_hourly_kwh
FROM per_run AS r
INNER JOIN (SELECT job_id, submit_ts, user, account, project, gpus FROM fct_job_run
            WHERE cluster = {cluster:String}) AS j ON j.job_id = r.job_id AND j.submit_ts = r.submit_ts
LEFT JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(nullIf(r.gpu_model, '')) = lower(m.gpu_model)
ORDER BY it_kwh DESC, job_id, submit_ts
SETTINGS join_use_nulls = 1;
