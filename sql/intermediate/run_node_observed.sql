-- run_node_observed: per run and node, inside [from_ts, to_ts) of {cluster}, the GPU time the run held and what
-- its GPUs did by the one attribution rule: the run_sample_hour grain (sql/intermediate/run_sample_hour.sql,
-- sql/functions/reading_is_runs.sql: the readings of the GPUs dcgm-exporter's hpc_job label names for the
-- run, else its share of the node's), the part of each hour inside the window. Written once for the two
-- marts that read a run's activity, so that they cannot drift apart: run_observed.sql (idle_gpu_jobs,
-- `users`) and job_efficiency.sql (the monthly report's largest jobs; law run_activity_agrees).
--   gpu_s           gpus_per_node × the run's seconds on the node inside the window (run_node_hour)
--   covered_gpu_s   of those, the GPU-seconds the samples' steps covered; busy_gpu_s those at or over the
--                   idle threshold; util_gpu_s, sm_gpu_s, tensor_gpu_s, dram_gpu_s the activities × time
--   own_gpus        1 when the label named the run's GPUs in every node-hour
--   gpu_energy_j    the run's GPU energy (run_node_hour's energy_j_per_allocated: a labelled run's own GPUs'
--                   counters, run_sample_hour's, and a share of the node-hour's rest)
--   nic_*_bytes, storage_*_bytes  the node-hour's rates shared by the run's part of the node's allocated GPU
--                   time: the sample grain carries no byte figure
--   gpu_model       the node's (capacity_node_hour; NULL where it has no capacity row)
-- An included query (kind "include", as run_fanout): nothing creates or runs it on its own.
--- [model]
--- kind = "include"
--- reads = ["run_node_hour", "run_sample_hour"]
SELECT r.cluster AS cluster, r.job_id AS job_id, r.submit_ts AS submit_ts, r.node AS node,
       any(r.account) AS account, any(nullIf(r.gpu_model, '')) AS gpu_model, max(r.gpus_per_node) AS gpus_per_node,
       sum(r.gpu_s) AS gpu_s,
       -- (the fractional figures summed in fixed point, docs/sql.md "Sums": a Float64 sum of the hours' parts
       -- moved in its last digit from one evaluation to the next; NULL where every part is, as the float sum was)
       toFloat64(sum(accurateCastOrNull(ifNull(x.observed_gpu_s, 0) * r.part, 'Decimal(38, 9)'))) AS covered_gpu_s,
       toFloat64(sum(accurateCastOrNull(ifNull(x.busy_gpu_s, 0) * r.part, 'Decimal(38, 9)'))) AS busy_gpu_s,
       toFloat64(sum(accurateCastOrNull(ifNull(x.util_gpu_s, 0) * r.part, 'Decimal(38, 9)'))) AS util_gpu_s,
       toFloat64(sum(accurateCastOrNull(ifNull(x.sm_gpu_s, 0) * r.part, 'Decimal(38, 9)'))) AS sm_gpu_s,
       toFloat64(sum(accurateCastOrNull(ifNull(x.tensor_gpu_s, 0) * r.part, 'Decimal(38, 9)'))) AS tensor_gpu_s,
       toFloat64(sum(accurateCastOrNull(ifNull(x.dram_gpu_s, 0) * r.part, 'Decimal(38, 9)'))) AS dram_gpu_s,
       min(ifNull(x.attribution, '') = 'gpu') AS own_gpus,
       toFloat64(sum(accurateCastOrNull(r.gpu_s * r.energy_j_per_allocated, 'Decimal(38, 9)'))) AS gpu_energy_j,
       toFloat64(sum(accurateCastOrNull(r.gpu_s * r.nic_rx_per_capacity, 'Decimal(38, 9)'))) AS nic_rx_bytes,
       toFloat64(sum(accurateCastOrNull(r.gpu_s * r.nic_tx_per_capacity, 'Decimal(38, 9)'))) AS nic_tx_bytes,
       toFloat64(sum(accurateCastOrNull(r.gpu_s * r.read_per_capacity, 'Decimal(38, 9)'))) AS storage_read_bytes,
       toFloat64(sum(accurateCastOrNull(r.gpu_s * r.write_per_capacity, 'Decimal(38, 9)'))) AS storage_write_bytes
FROM (SELECT * REPLACE (gpus_per_node * overlap_s(s, e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}) AS gpu_s),
             overlap_s(s, e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}) / nullIf(toInt64(e) - toInt64(s), 0)
                 AS part
      FROM run_node_hour FINAL WHERE cluster = {cluster:String}
      AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
      AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}) AS r
LEFT JOIN (SELECT hour, node, job_id, submit_ts, observed_gpu_s, busy_gpu_s, util_gpu_s, sm_gpu_s, tensor_gpu_s,
                  dram_gpu_s, attribution
           FROM run_sample_hour FINAL WHERE cluster = {cluster:String}
           AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}) AS x
    ON x.hour = r.hour AND x.node = r.node AND x.job_id = r.job_id AND x.submit_ts = r.submit_ts
GROUP BY cluster, job_id, submit_ts, node
