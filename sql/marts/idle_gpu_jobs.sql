-- Idle-GPU jobs of {project} ('' for the whole cluster) in [from_ts, to_ts), as Princeton's Job Defense
-- Shield lists them: the runs that held GPUs at a mean utilization under {idle_util_pct} percent (the
-- config's idle threshold) for at least {idle_min_minutes} minutes, worst first. Read from the
-- run_node_hour grain (the run's GPU time on each node and hour) and the run's GPU samples inside its
-- allocation (run_sample_hour: per sample, never an hourly mean), inside the window:
--   gpu_util_pct       the run's mean GPU utilization over the samples that saw its GPUs
--   observed_minutes   the run's time with telemetry (its sampled GPU-hours ÷ its GPUs, in minutes): what
--                      the mean is over; a run idle is one with observed_minutes ≥ {idle_min_minutes} and
--                      gpu_util_pct < {idle_util_pct}. A run without telemetry is never listed (unknown).
--   attribution        'own GPUs' when dcgm-exporter's hpc_job label named the run's GPUs on every node-hour:
--                      exact, shared nodes included. 'whole nodes' when the run held every GPU of each node
--                      it was on (its GPUs ÷ its nodes ≥ the node's GPUs in node_inventory): exact too, from
--                      the samples inside its allocation. 'shared node: node share' otherwise: sacct gives
--                      no GPU indices, so the run's figure is its share of the node's samples at each time;
--                      an idle run beside a busy one is not seen, nor a busy one beside an idle one
-- Columns: job_id, submit_ts, user, account, project, state, nnodes, gpus, nodes, start_ts, end_ts (the
-- run); gpu_h (its GPU time in the window: the GPU-hours held idle), observed_gpu_h,
-- gpu_util_pct, observed_minutes, attribution; capex (gpu_h at each node's write-off per GPU-hour,
-- capex_per_gpu_hour with the cost model of its GPU model: what the idle GPUs cost, energy aside;
-- NULL where the model has no cost) and currency. idle_gpu_users.sql sums these per user and project.
-- Why idle_min_minutes = 60: an idle run held its GPUs under the idle threshold for at least an hour of
-- telemetry, not a short pause between phases.
--- [mart]
--- grain = "one row per run that held its GPUs idle"
--- scope = "project"
--- report = 22
--- parameters = { idle_min_minutes = 60 }
--- columns = ["job_id", "submit_ts", "user", "account", "project", "state", "nnodes", "gpus", "nodes", "start_ts", "end_ts", "gpu_h", "observed_gpu_h", "gpu_util_pct", "observed_minutes", "attribution", "capex", "currency"]
--- user_columns = ["user"]
--- export = 22
WITH
held AS (
    SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, r.node AS node,
           sum(r.gpu_s) AS gpu_s,
           -- the run's samples (run_sample_hour), the part of each hour inside the window
           sum(ifNull(x.observed_gpu_s, 0) * r.part) AS covered_gpu_s,
           sum(ifNull(x.util_gpu_s, 0) * r.part) AS util_gpu_s,
           min(ifNull(x.attribution, '') = 'gpu') AS own_gpus,
           sum(r.gpu_s / 3600 * capex_per_gpu_hour(m.node_price, i.gpus, m.amortization_years)) AS capex,
           any(m.currency) AS currency,
           max(r.gpus_per_node) AS gpus_per_node,
           any(i.gpus) AS node_gpus
    FROM (SELECT * REPLACE (gpus_per_node * overlap_s(s, e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}) AS gpu_s),
                 overlap_s(s, e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}) / nullIf(toInt64(e) - toInt64(s), 0)
                     AS part
          FROM run_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
          AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}) AS r
    LEFT JOIN (SELECT hour, node, job_id, submit_ts, observed_gpu_s, util_gpu_s, attribution
               FROM run_sample_hour FINAL WHERE cluster = {cluster:String}
               AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}) AS x
        ON x.hour = r.hour AND x.node = r.node AND x.job_id = r.job_id AND x.submit_ts = r.submit_ts
    -- the node's GPUs of every model (a row per model in the inventory)
    LEFT JOIN (SELECT node, sum(gpus) AS gpus FROM node_inventory FINAL WHERE cluster = {cluster:String} GROUP BY node) AS i
        ON i.node = r.node
    LEFT JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(nullIf(r.gpu_model, '')) = lower(m.gpu_model)
    WHERE {project:String} = ''
       OR r.account IN (SELECT account FROM dim_account WHERE project = {project:String})
    GROUP BY job_id, submit_ts, node
),
per_run AS (
    SELECT job_id, submit_ts,
           sum(gpu_s) / 3600 AS gpu_h,
           sum(covered_gpu_s) / 3600 AS observed_gpu_h,
           sum(util_gpu_s) / nullIf(sum(covered_gpu_s), 0) * 100 AS gpu_util_pct,
           sum(capex) AS capex,
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
       p.gpu_h AS gpu_h, p.observed_gpu_h AS observed_gpu_h, p.gpu_util_pct AS gpu_util_pct,
       p.observed_gpu_h / r.gpus * 60 AS observed_minutes,
       multiIf(p.own_gpus = 1, 'own GPUs', p.whole_nodes = 1, 'whole nodes', 'shared node: node share') AS attribution,
       p.capex AS capex, p.currency AS currency
FROM per_run AS p
INNER JOIN runs AS r ON r.job_id = p.job_id AND r.submit_ts = p.submit_ts
WHERE p.gpu_util_pct < {idle_util_pct:Float64}
  AND p.observed_gpu_h / r.gpus * 60 >= {idle_min_minutes:Float64}
ORDER BY gpu_h DESC, start_ts, job_id
SETTINGS join_use_nulls = 1;
