-- The {top_jobs} runs of {project} ('' for all) holding the most GPU-hours in [from_ts, to_ts), with their
-- efficiency and slowest node (job_efficiency.sql, included below): the monthly report's largest jobs and
-- its Gantt chart.
-- Why top_jobs = 15: the report lists the 15 runs holding the most GPU-hours; it records the value it ran with.
--- [mart]
--- grain = "one row per run, the top_jobs runs by GPU-hours"
--- scope = "project"
--- report = 8
--- parameters = { top_jobs = 15 }
--- columns = ["job_id", "user", "account", "project", "partition", "state", "gpus", "nnodes", "start_ts", "end_ts", "wall_s", "is_superseded", "nodes", "gpu_model", "gpu_h", "observed_gpu_h", "gpu_util_pct", "sm_active", "tensor_active", "dram_active", "gpu_energy_kwh", "nic_rx_bytes", "nic_tx_bytes", "storage_read_bytes", "storage_write_bytes", "delivered_pflop", "slowest_node_util_pct", "median_node_util_pct", "slowest_node"]
--- user_columns = ["user"]
SELECT j.* EXCEPT (submit_ts)
FROM ({{mart job_efficiency}}) AS j  -- (with runs_limit = top_jobs: the efficiency of those runs alone)
ORDER BY j.gpu_h DESC, j.start_ts, j.job_id
LIMIT {top_jobs:UInt32};
