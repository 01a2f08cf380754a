-- Per run of {project} ('' for the whole cluster) with GPU time in [from_ts, to_ts): what the GPU samples saw
-- its GPUs do, from the run_sample_hour grain (kept by the loads), the part of each hour inside the window. The
-- one per-run reading of the samples that idle_gpu_jobs.sql (which runs are idle) and user_efficiency.sql (a
-- user's pooled utilization, `ops-report users`, the monthly report's users) both take, so the two and
-- `ops-report job` (run_gpus.sql) mean the same by a run's utilization:
--   which readings  a run's own GPUs where dcgm-exporter's hpc_job label names its job id (run_sample_hour's
--                   'gpu': those GPUs' readings, less any another job's label names, sql/functions/
--                   reading_is_runs.sql, run_gpus' rule); its share of the node's readings where no label
--                   names it ('node share', as run_gpus does for such a run)
--   gpu_h           the GPU-hours it held in the window (run_node_hour: gpus_per_node × its time; job_efficiency's)
--   observed_gpu_h  of those, the GPU-hours the samples' steps covered: what the means are over
--   gpu_util_pct    Σ util × observed GPU-seconds ÷ Σ observed GPU-seconds (%); sm_active, tensor_active,
--                   dram_active alike (0-1). NULL without telemetry
--   busy_gpu_h      the observed GPU-hours at or over the config's idle threshold (idle_util_pct)
--   own_gpus        1 when the label named its GPUs on every node-hour (exact on shared nodes too)
--   whole_nodes     1 when it held every GPU of each node it was on (node_inventory): node share exact too
--   capex, currency its GPU-hours at each node's write-off per GPU-hour (cost_model; NULL without a cost)
--- [mart]
--- grain = "one row per run with GPU time in the window"
--- scope = "project"
--- columns = ["job_id", "submit_ts", "user", "account", "project", "state", "nnodes", "gpus", "nodes", "start_ts", "end_ts", "gpu_h", "observed_gpu_h", "busy_gpu_h", "gpu_util_pct", "sm_active", "tensor_active", "dram_active", "own_gpus", "whole_nodes", "capex", "currency"]
--- user_columns = ["user"]
WITH
held AS (
    -- the run's GPU time and samples per node (sql/intermediate/run_node_observed.sql, job_efficiency's too)
    SELECT o.job_id AS job_id, o.submit_ts AS submit_ts, o.node AS node, o.gpu_s AS gpu_s,
           o.covered_gpu_s AS covered_gpu_s, o.busy_gpu_s AS busy_gpu_s, o.util_gpu_s AS util_gpu_s,
           o.sm_gpu_s AS sm_gpu_s, o.tensor_gpu_s AS tensor_gpu_s, o.dram_gpu_s AS dram_gpu_s,
           o.own_gpus AS own_gpus,
           o.gpu_s / 3600 * capex_per_gpu_hour(m.node_price, i.gpus, m.amortization_years) AS capex,
           m.currency AS currency, o.gpus_per_node AS gpus_per_node, i.gpus AS node_gpus
    FROM ({{intermediate run_node_observed}}) AS o
    -- the node's GPUs of every model (a row per model in the inventory)
    LEFT JOIN (SELECT node, sum(gpus) AS gpus FROM node_inventory FINAL WHERE cluster = {cluster:String} GROUP BY node) AS i
        ON i.node = o.node
    LEFT JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(o.gpu_model) = lower(m.gpu_model)
    WHERE {project:String} = ''
       OR o.account IN (SELECT account FROM dim_account WHERE project = {project:String})
),
per_run AS (
    SELECT job_id, submit_ts,
           sum(gpu_s) / 3600 AS gpu_h,
           -- (the nodes' fractional figures added in fixed point, as run_node_observed.sql adds the hours':
           -- docs/sql.md "Sums")
           toFloat64(sum(accurateCastOrNull(covered_gpu_s, 'Decimal(38, 9)'))) AS covered_s,
           covered_s / 3600 AS observed_gpu_h,
           toFloat64(sum(accurateCastOrNull(busy_gpu_s, 'Decimal(38, 9)'))) / 3600 AS busy_gpu_h,
           toFloat64(sum(accurateCastOrNull(util_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) * 100
               AS gpu_util_pct,
           toFloat64(sum(accurateCastOrNull(sm_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) AS sm_active,
           toFloat64(sum(accurateCastOrNull(tensor_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) AS tensor_active,
           toFloat64(sum(accurateCastOrNull(dram_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) AS dram_active,
           toFloat64(sum(accurateCastOrNull(capex, 'Decimal(38, 9)'))) AS capex,
           any(currency) AS currency,
           min(ifNull(gpus_per_node >= node_gpus, 0)) AS whole_nodes,
           min(own_gpus) AS own_gpus
    FROM held
    GROUP BY job_id, submit_ts
),
runs AS (
    SELECT job_id, submit_ts, user, account, project, state, nnodes, gpus, nodes, start_ts, end_ts
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0
      AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
)
SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, r.user AS user, r.account AS account, r.project AS project,
       r.state AS state, r.nnodes AS nnodes, r.gpus AS gpus, r.nodes AS nodes, r.start_ts AS start_ts,
       r.end_ts AS end_ts,
       p.gpu_h AS gpu_h, p.observed_gpu_h AS observed_gpu_h, p.busy_gpu_h AS busy_gpu_h,
       p.gpu_util_pct AS gpu_util_pct, p.sm_active AS sm_active, p.tensor_active AS tensor_active,
       p.dram_active AS dram_active, p.own_gpus AS own_gpus, p.whole_nodes AS whole_nodes,
       p.capex AS capex, p.currency AS currency
FROM per_run AS p
INNER JOIN runs AS r ON r.job_id = p.job_id AND r.submit_ts = p.submit_ts
SETTINGS join_use_nulls = 1;
