-- Idle-GPU jobs of {project} ('' for the whole cluster) in [from_ts, to_ts), as Princeton's Job Defense
-- Shield lists them: the runs that held GPUs at a mean utilization under {idle_util_pct} percent (the
-- config's idle threshold) for at least {idle_min_minutes} minutes, worst first. Read from run_observed.sql
-- (the run's GPU time on each node and hour, run_node_hour, and the run's GPU samples inside its allocation,
-- run_sample_hour: per sample, never an hourly mean; the readings another job's label names left out, as
-- `ops-report job` leaves them), inside the window:
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
SELECT job_id, submit_ts, user, account, project, state, nnodes, gpus, nodes, start_ts, end_ts,
       gpu_h, observed_gpu_h, gpu_util_pct,
       observed_gpu_h / gpus * 60 AS observed_minutes,
       multiIf(own_gpus = 1, 'own GPUs', whole_nodes = 1, 'whole nodes', 'shared node: node share') AS attribution,
       capex, currency
FROM ({{mart run_observed}})
WHERE gpu_util_pct < {idle_util_pct:Float64}
  AND observed_gpu_h / gpus * 60 >= {idle_min_minutes:Float64}
ORDER BY gpu_h DESC, start_ts, job_id;
