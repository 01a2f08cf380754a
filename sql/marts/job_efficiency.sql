-- Per job run of {project} ('' for the whole cluster): what its GPUs did inside [from_ts, to_ts), from
-- the run_node_hour grain (the run's GPU time on each node and hour, kept by the loads: sql/intermediate/
-- run_node_hour.sql) and, for what the GPUs did, the run_sample_hour grain: the one attribution rule
-- (sql/functions/reading_is_runs.sql; the readings of the GPUs dcgm-exporter's hpc_job label names for the
-- run, else its share of the node's), the part of each hour inside the window, read per run and node by
-- sql/intermediate/run_node_observed.sql, which run_observed.sql includes too: so a run's observed_gpu_h,
-- gpu_util_pct, SM/tensor/DRAM activity, delivered compute and per-node straggler figures are run_observed's,
-- `users`' and `ops-report job`'s (law: sql/checks/run_activity_agrees.sql). GPU energy by the same rule
-- (run_node_hour's energy_j_per_allocated: a labelled run's own GPUs' counters, from run_sample_hour, and a
-- share of the node-hour's rest; law run_energy_within_node); NIC and storage bytes stay the node-hour's
-- rates shared by the run's part of the node's allocated GPU time (the sample grain carries no byte figure).
-- Means are weighted by the run's GPU time with telemetry;
-- energy in kWh; delivered compute = tensor activity × the GPU model's peak dense BF16 rate
-- (cost_model.peak_bf16_tflops), in PFLOP. slowest_node / median_node_util_pct show stragglers: one node
-- of a synchronous job well below its peers slows them all.
-- largest: with {runs_limit} > 0 (the largest-jobs mart), only the runs holding the most GPU-hours in the
-- window, ranked on the grain's GPU time alone (ties kept), so that the telemetry shares below are summed for
-- those runs and not for all of the month's; when the grain holds fewer runs than that, every run.
-- runs: the runs that held GPUs in the window (those the grain holds, and any that held them for no time at
-- all: listed with nothing); shared: their GPU time and telemetry share per node, inside the window
-- runs_limit: the efficiency of only the runs holding the most GPU-hours (0: every run; largest_jobs.sql sets it
-- to top_jobs, so that it forms the efficiency of those runs alone).
--- [mart]
--- grain = "one row per run with GPU time in the window"
--- scope = "project"
--- parameters = { runs_limit = 0 }
--- columns = ["job_id", "submit_ts", "user", "account", "project", "partition", "state", "gpus", "nnodes", "start_ts", "end_ts", "wall_s", "is_superseded", "nodes", "gpu_model", "gpu_h", "observed_gpu_h", "gpu_util_pct", "sm_active", "tensor_active", "dram_active", "gpu_energy_kwh", "nic_rx_bytes", "nic_tx_bytes", "storage_read_bytes", "storage_write_bytes", "delivered_pflop", "slowest_node_util_pct", "median_node_util_pct", "slowest_node"]
--- user_columns = ["user"]
--- export = 8
WITH
-- (the largest runs' keys as one array, a scalar subquery: the engine evaluates it once a query, where a CTE
-- is evaluated again wherever it is named, here four times: 5 reads of the month's grain rows where 2 do, the
-- ranking and the shares; docs/benchmarks.md "Issue 51: the monthly report's marts", round 3)
(SELECT groupArray((job_id, submit_ts)) FROM (
    SELECT job_id, submit_ts
    FROM run_node_hour FINAL
    WHERE {runs_limit:UInt32} > 0 AND cluster = {cluster:String}
      AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
      AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}
      AND ({project:String} = '' OR account IN (SELECT account FROM dim_account WHERE project = {project:String}))
    GROUP BY job_id, submit_ts
    ORDER BY sum(gpus_per_node * overlap_s(s, e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) DESC
    LIMIT {runs_limit:UInt32} WITH TIES)) AS largest,
{runs_limit:UInt32} = 0 OR length(largest) < {runs_limit:UInt32} AS every_run,
runs AS (
    SELECT cluster, job_id, submit_ts, user, account, project, partition, state, gpus, nnodes, start_ts, end_ts,
           wall_s, is_superseded, nodes
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0
      AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
      AND (every_run OR has(largest, (job_id, submit_ts)))
),
shared AS (
    -- the run's GPU time, samples and node-share figures per node (sql/intermediate/run_node_observed.sql,
    -- run_observed's too: one reading of a run's activity)
    SELECT o.cluster AS cluster, o.job_id AS job_id, o.submit_ts AS submit_ts, o.node AS node,
           o.gpu_s AS gpu_s, o.covered_gpu_s AS covered_gpu_s, o.util_gpu_s AS util_gpu_s, o.sm_gpu_s AS sm_gpu_s,
           o.tensor_gpu_s AS tensor_gpu_s, o.dram_gpu_s AS dram_gpu_s, o.gpu_energy_j AS gpu_energy_j,
           o.nic_rx_bytes AS nic_rx_bytes, o.nic_tx_bytes AS nic_tx_bytes,
           o.storage_read_bytes AS storage_read_bytes, o.storage_write_bytes AS storage_write_bytes,
           o.tensor_gpu_s * ifNull(m.peak_bf16_tflops, 0) / 1000 AS pflop,
           o.gpu_model AS gpu_model
    FROM ({{intermediate run_node_observed}}) AS o
    LEFT JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(o.gpu_model) = lower(m.gpu_model)
    WHERE (every_run OR has(largest, (o.job_id, o.submit_ts)))
      AND ({project:String} = ''
           OR o.account IN (SELECT account FROM dim_account WHERE project = {project:String}))
),
per_run AS (
    SELECT cluster, job_id, submit_ts,
           any(gpu_model) AS gpu_model,
           sum(gpu_s) / 3600 AS gpu_h,
           -- (the nodes' fractional figures added in fixed point, as run_node_observed.sql adds the hours':
           -- docs/sql.md "Sums")
           toFloat64(sum(accurateCastOrNull(covered_gpu_s, 'Decimal(38, 9)'))) AS covered_s,
           covered_s / 3600 AS observed_gpu_h,
           toFloat64(sum(accurateCastOrNull(util_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) * 100
               AS gpu_util_pct,
           toFloat64(sum(accurateCastOrNull(sm_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) AS sm_active,
           toFloat64(sum(accurateCastOrNull(tensor_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) AS tensor_active,
           toFloat64(sum(accurateCastOrNull(dram_gpu_s, 'Decimal(38, 9)'))) / nullIf(covered_s, 0) AS dram_active,
           toFloat64(sum(accurateCastOrNull(gpu_energy_j, 'Decimal(38, 9)'))) / 3.6e6 AS gpu_energy_kwh,
           toFloat64(sum(accurateCastOrNull(nic_rx_bytes, 'Decimal(38, 9)'))) AS nic_rx_bytes,
           toFloat64(sum(accurateCastOrNull(nic_tx_bytes, 'Decimal(38, 9)'))) AS nic_tx_bytes,
           toFloat64(sum(accurateCastOrNull(storage_read_bytes, 'Decimal(38, 9)'))) AS storage_read_bytes,
           toFloat64(sum(accurateCastOrNull(storage_write_bytes, 'Decimal(38, 9)'))) AS storage_write_bytes,
           toFloat64(sum(accurateCastOrNull(pflop, 'Decimal(38, 9)'))) AS delivered_pflop,
           -- each node's mean utilization: the least active node against the median of the run's nodes
           groupArray(util_gpu_s / nullIf(covered_gpu_s, 0)) AS node_utils,
           median(util_gpu_s / nullIf(covered_gpu_s, 0)) * 100 AS median_node_util_pct,
           argMin(node, util_gpu_s / nullIf(covered_gpu_s, 0)) AS slowest_node
    FROM shared
    GROUP BY cluster, job_id, submit_ts
)
SELECT
    r.job_id AS job_id, r.submit_ts AS submit_ts, r.user AS user, r.account AS account, r.project AS project,
    r.partition AS partition, r.state AS state, r.gpus AS gpus, r.nnodes AS nnodes, r.start_ts AS start_ts,
    r.end_ts AS end_ts, r.wall_s AS wall_s, r.is_superseded AS is_superseded, r.nodes AS nodes,
    p.gpu_model AS gpu_model, p.gpu_h AS gpu_h, p.observed_gpu_h AS observed_gpu_h,
    p.gpu_util_pct AS gpu_util_pct, p.sm_active AS sm_active, p.tensor_active AS tensor_active,
    p.dram_active AS dram_active, p.gpu_energy_kwh AS gpu_energy_kwh, p.nic_rx_bytes AS nic_rx_bytes,
    p.nic_tx_bytes AS nic_tx_bytes, p.storage_read_bytes AS storage_read_bytes,
    p.storage_write_bytes AS storage_write_bytes, p.delivered_pflop AS delivered_pflop,
    -- (a run without telemetry on any node: 0, the minimum of no values)
    arrayMin(p.node_utils) * 100 AS slowest_node_util_pct,
    p.median_node_util_pct AS median_node_util_pct, p.slowest_node AS slowest_node
FROM runs AS r
LEFT JOIN per_run AS p ON r.cluster = p.cluster AND r.job_id = p.job_id AND r.submit_ts = p.submit_ts
ORDER BY gpu_h DESC
SETTINGS join_use_nulls = 1;
