-- Per job run of {project} ('' for the whole cluster): what its GPUs did inside [from_ts, to_ts), from
-- the telemetry of its nodes and hours (capacity_node_hour). sacct does not record which GPUs of a node a
-- job held, so the activity of a node's GPUs in an hour (utilization, SM/tensor/DRAM activity, energy) is
-- shared among the runs on it by their share of the node's allocated GPU time: exact for whole-node jobs,
-- and right in total for shared nodes because unallocated GPUs do no work (their idle power is the error).
-- NIC and storage bytes are node-level: shared by the run's part of the node's GPUs. Means are weighted by
-- the run's GPU time with telemetry; energy in kWh; delivered compute = tensor activity × the GPU model's
-- peak dense BF16 rate (cost_model.peak_bf16_tflops), in PFLOP. slowest_node / median_node_util_pct show
-- stragglers: one node of a synchronous job well below its peers slows them all.
-- runs: the runs that held GPUs in the window (those run_node_hour spreads, and any that held them for no
-- time at all: listed with nothing); pieces: their GPU time per node and hour (run_node_hour)
WITH runs AS (
    SELECT cluster, job_id, submit_ts, user, account, project, partition, state, gpus, nnodes, start_ts, end_ts,
           wall_s, is_superseded, nodes
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0
      AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
),
pieces AS (
    SELECT cluster, job_id, submit_ts, node, hour, gpu_s
    FROM ({{intermediate run_node_hour}})
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
),
shared AS (
    SELECT p.cluster AS cluster, p.job_id AS job_id, p.submit_ts AS submit_ts, p.node AS node,
           sum(p.gpu_s) AS gpu_s,
           sum(p.gpu_s * c.covered_gpu_s / nullIf(c.capacity_gpu_s, 0)) AS covered_gpu_s,
           sum(p.gpu_s / nullIf(c.allocated_gpu_s, 0) * c.util_gpu_s) AS util_gpu_s,
           sum(p.gpu_s / nullIf(c.allocated_gpu_s, 0) * c.sm_gpu_s) AS sm_gpu_s,
           sum(p.gpu_s / nullIf(c.allocated_gpu_s, 0) * c.tensor_gpu_s) AS tensor_gpu_s,
           sum(p.gpu_s / nullIf(c.allocated_gpu_s, 0) * c.dram_gpu_s) AS dram_gpu_s,
           sum(p.gpu_s / nullIf(c.allocated_gpu_s, 0) * c.gpu_energy_j) AS gpu_energy_j,
           sum(p.gpu_s / nullIf(c.capacity_gpu_s, 0) * c.nic_rx_bytes) AS nic_rx_bytes,
           sum(p.gpu_s / nullIf(c.capacity_gpu_s, 0) * c.nic_tx_bytes) AS nic_tx_bytes,
           sum(p.gpu_s / nullIf(c.capacity_gpu_s, 0) * c.storage_read_bytes) AS storage_read_bytes,
           sum(p.gpu_s / nullIf(c.capacity_gpu_s, 0) * c.storage_write_bytes) AS storage_write_bytes,
           sum(p.gpu_s / nullIf(c.allocated_gpu_s, 0) * c.tensor_gpu_s * ifNull(m.peak_bf16_tflops, 0)) / 1000 AS pflop,
           any(c.gpu_model) AS gpu_model
    FROM pieces AS p
    LEFT JOIN (SELECT * FROM capacity_node_hour FINAL
               WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')}) AS c
        ON p.cluster = c.cluster AND p.node = c.node AND p.hour = c.hour
    LEFT JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(c.gpu_model) = lower(m.gpu_model)
    GROUP BY cluster, job_id, submit_ts, node
)
SELECT
    r.job_id AS job_id, r.submit_ts AS submit_ts, r.user AS user, r.account AS account, r.project AS project,
    r.partition AS partition, r.state AS state, r.gpus AS gpus, r.nnodes AS nnodes, r.start_ts AS start_ts,
    r.end_ts AS end_ts, r.wall_s AS wall_s, r.is_superseded AS is_superseded, r.nodes AS nodes,
    any(sh.gpu_model) AS gpu_model,
    sum(sh.gpu_s) / 3600 AS gpu_hours,
    sum(sh.covered_gpu_s) / 3600 AS telemetry_gpu_hours,
    sum(sh.util_gpu_s) / nullIf(sum(sh.covered_gpu_s), 0) * 100 AS gpu_util_pct,
    sum(sh.sm_gpu_s) / nullIf(sum(sh.covered_gpu_s), 0) AS sm_active,
    sum(sh.tensor_gpu_s) / nullIf(sum(sh.covered_gpu_s), 0) AS tensor_active,
    sum(sh.dram_gpu_s) / nullIf(sum(sh.covered_gpu_s), 0) AS dram_active,
    sum(sh.gpu_energy_j) / 3.6e6 AS gpu_energy_kwh,
    sum(sh.nic_rx_bytes) AS nic_rx_bytes, sum(sh.nic_tx_bytes) AS nic_tx_bytes,
    sum(sh.storage_read_bytes) AS storage_read_bytes, sum(sh.storage_write_bytes) AS storage_write_bytes,
    sum(sh.pflop) AS delivered_pflop,
    -- the node whose GPUs were least active, against the median of the run's nodes (stragglers)
    arrayMin(groupArray(sh.util_gpu_s / nullIf(sh.covered_gpu_s, 0))) * 100 AS slowest_node_util_pct,
    median(sh.util_gpu_s / nullIf(sh.covered_gpu_s, 0)) * 100 AS median_node_util_pct,
    argMin(sh.node, sh.util_gpu_s / nullIf(sh.covered_gpu_s, 0)) AS slowest_node
FROM runs AS r
LEFT JOIN shared AS sh ON r.cluster = sh.cluster AND r.job_id = sh.job_id AND r.submit_ts = sh.submit_ts
GROUP BY job_id, submit_ts, user, account, project, partition, state, gpus, nnodes, start_ts, end_ts, wall_s,
         is_superseded, nodes
ORDER BY gpu_hours DESC
SETTINGS join_use_nulls = 1;
