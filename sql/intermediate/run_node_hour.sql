-- Recompute run_node_hour (see migration 0012 for the columns) for the whole hours of [from_ts, to_ts),
-- after capacity_node_hour has been refreshed for them (etl/grains.py runs the two in that order):
--   fan-out    sql/intermediate/run_fanout.sql, included: every run that held GPUs on nodes, its GPUs
--              spread evenly over its nodes, one row per node and hour it held; [s, e) is the part of the
--              hour it held the node
--   telemetry  the node's row of capacity_node_hour for the hour, as rates a run's GPU-seconds there are
--              multiplied by: the node's activity per GPU-second allocated on it (runs sharing a node share
--              its activity by their allocation: exact for whole-node jobs, right in total for shared nodes
--              because unallocated GPUs do no work), its telemetry coverage and NIC/storage bytes
--              per GPU-second of its capacity (node-level counters, shared by the run's part of the GPUs),
--              and its mean GPU utilization (node_util: stragglers)
--   energy     the run's GPU energy per its GPU-second there (energy_j_per_allocated, counter_j_per_allocated
--              of it from counters; it_j_per_allocated adds the rest of the node's, shared by allocation):
--              a run whose hpc_job label names its GPUs has its own (run_sample_hour's gpu_energy_j, by the
--              one attribution rule, migration 0025) and the node-hour's rest, capacity_node_hour's GPU energy
--              less the labelled runs' (their readings' steps counted in the hour each is read in, as
--              gpu_hour counts them: the idle GPUs', the unlabelled readings', another job's), goes to the
--              other runs there by their GPU time, or where every run there is labelled, to all of them by
--              their GPU time, as the whole node-hour's went before: the node-hours' sums do not move
--   replaced   the hours' rows are written again; a row of these hours the fan-out no longer produces (a
--              run shortened, moved, or no longer holding GPUs) is written deleted (is_deleted = 1), so FINAL
--              shows what a clean refresh would
--- [model]
--- kind = "incremental_by_time_range"
--- unit = "hour"
--- grain = "hourly"
--- writes = ["run_node_hour"]
--- reads = ["run_fanout", "capacity_node_hour", "run_sample_hour"]
--- settings = { query_plan_enable_optimizations = 0 }
-- settings: its statements planned without the query plan's optimization passes: the same rows, the reads still
-- bounded by the key conditions written on the tables, cheaper to plan and to run (docs/benchmarks.md, "Issue
-- 50: sacct loads in bounded memory", round 10: over a 100 k-job first load 1.33 -> 0.96 CPU-s, a day of a
-- site with telemetry 0.27 -> 0.23)
INSERT INTO run_node_hour
WITH
    toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
    toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1,
-- the labelled runs' GPU energy per node-hour, counted in the hour each step is read in (gpu_hour's, hence
-- capacity_node_hour's): a row's steps less those read in the next hour, and the previous hour's rows' those
labelled AS (
    -- (summed as Decimal microjoules: Float64 added in the threads' order came out a last bit apart between two
    -- refreshes of the same rows, docs/sql.md)
    SELECT cluster, node, hour, toFloat64(sum(toDecimal128(j, 6))) AS own_j, toFloat64(sum(toDecimal128(c, 6))) AS own_c
    FROM (SELECT cluster, node, hour, ifNull(gpu_energy_j, 0) - next_hour_energy_j AS j,
                 gpu_counter_energy_j - next_hour_counter_j AS c
          FROM run_sample_hour FINAL WHERE hour >= w0 AND hour < w1 AND attribution = 'gpu'
          UNION ALL
          -- (the shifted hour under another name inside: the engine reads a SELECT's alias in its WHERE)
          SELECT cluster, node, read_hour AS hour, j, c
          FROM (SELECT cluster, node, hour + toIntervalHour(1) AS read_hour, next_hour_energy_j AS j,
                       next_hour_counter_j AS c
                FROM run_sample_hour FINAL
                WHERE hour >= w0 - toIntervalHour(1) AND hour < w1 - toIntervalHour(1) AND attribution = 'gpu'))
    GROUP BY cluster, node, hour
),
fresh_rates AS (
    SELECT f.cluster AS cluster, f.hour AS hour, f.node AS node, f.job_id AS job_id, f.submit_ts AS submit_ts,
           f.account AS account, f.reservation AS reservation, toUInt32(f.run_node_count) AS run_node_count,
           toFloat64(f.gpus_per_node) AS gpus_per_node,
           greatest(f.s, f.hour) AS s, least(f.e, f.hour + 3600) AS e, toFloat64(f.gpu_s) AS gpu_s,
           ifNull(c.gpu_model, '') AS gpu_model,
           toUInt8(c.cluster IS NOT NULL) AS has_capacity,
           c.covered_gpu_s / nullIf(c.capacity_gpu_s, 0) AS covered_per_capacity,
           c.util_gpu_s / nullIf(c.allocated_gpu_s, 0) AS util_per_allocated,
           c.sm_gpu_s / nullIf(c.allocated_gpu_s, 0) AS sm_per_allocated,
           c.tensor_gpu_s / nullIf(c.allocated_gpu_s, 0) AS tensor_per_allocated,
           c.dram_gpu_s / nullIf(c.allocated_gpu_s, 0) AS dram_per_allocated,
           -- the run's own GPU energy where the label names its GPUs; the node-hour's rest after the labelled
           -- runs' (never below 0: a step read after the cut, which capacity_node_hour leaves out)
           ifNull(x.attribution = 'gpu', 0) AS is_labelled,
           if(is_labelled, ifNull(x.gpu_energy_j, 0), 0) AS own_j,
           if(is_labelled, x.gpu_counter_energy_j, 0) AS own_c,
           greatest(0., c.gpu_energy_j - ifNull(l.own_j, 0)) AS rest_j,
           greatest(0., c.gpu_counter_energy_j - ifNull(l.own_c, 0)) AS rest_c,
           c.allocated_gpu_s AS allocated_gpu_s,
           (c.it_energy_j - c.gpu_energy_j) / nullIf(c.allocated_gpu_s, 0) AS rest_of_node_j_per_allocated,
           node_energy_measured(c.node_power_w_avg, c.node_covered_s) AS node_power_measured,
           c.nic_rx_bytes / nullIf(c.capacity_gpu_s, 0) AS nic_rx_per_capacity,
           c.nic_tx_bytes / nullIf(c.capacity_gpu_s, 0) AS nic_tx_per_capacity,
           c.storage_read_bytes / nullIf(c.capacity_gpu_s, 0) AS read_per_capacity,
           c.storage_write_bytes / nullIf(c.capacity_gpu_s, 0) AS write_per_capacity,
           c.util_gpu_s / nullIf(c.covered_gpu_s, 0) AS node_util
    FROM ({{intermediate run_fanout}}) AS f
    -- the node-hour whole: a node with GPUs of several models has a row per model in the grain (migration
    -- 0021), whose figures sum to the node's; a run there is labelled with its models joined by '+'
    LEFT JOIN (SELECT cluster, node, hour, arrayStringConcat(arraySort(groupArray(toString(gpu_model))), '+') AS gpu_model,
                      sum(capacity_gpu_s) AS capacity_gpu_s, sum(allocated_gpu_s) AS allocated_gpu_s,
                      sum(covered_gpu_s) AS covered_gpu_s, sum(util_gpu_s) AS util_gpu_s, sum(sm_gpu_s) AS sm_gpu_s,
                      sum(tensor_gpu_s) AS tensor_gpu_s, sum(dram_gpu_s) AS dram_gpu_s,
                      sum(gpu_energy_j) AS gpu_energy_j, sum(gpu_counter_energy_j) AS gpu_counter_energy_j,
                      sum(it_energy_j) AS it_energy_j, any(node_power_w_avg) AS node_power_w_avg,
                      max(node_covered_s) AS node_covered_s, sum(nic_rx_bytes) AS nic_rx_bytes,
                      sum(nic_tx_bytes) AS nic_tx_bytes, sum(storage_read_bytes) AS storage_read_bytes,
                      sum(storage_write_bytes) AS storage_write_bytes
               FROM capacity_node_hour FINAL WHERE hour >= w0 AND hour < w1
               GROUP BY cluster, node, hour) AS c
        ON c.cluster = f.cluster AND c.node = f.node AND c.hour = f.hour
    LEFT JOIN (SELECT cluster, node, hour, job_id, submit_ts, attribution, gpu_energy_j, gpu_counter_energy_j
               FROM run_sample_hour FINAL WHERE hour >= w0 AND hour < w1) AS x
        ON x.cluster = f.cluster AND x.node = f.node AND x.hour = f.hour AND x.job_id = f.job_id
       AND x.submit_ts = f.submit_ts
    LEFT JOIN labelled AS l ON l.cluster = f.cluster AND l.node = f.node AND l.hour = f.hour
),
-- the rest per GPU-second: to the unlabelled runs of the node-hour by their GPU time, or where none is, to
-- every run by its GPU time (of the node's allocated GPU time)
fresh AS (
    SELECT *,
           if(unlabelled_gpu_s > 0, if(is_labelled, 0., 1. / unlabelled_gpu_s), 1. / nullIf(allocated_gpu_s, 0))
               AS rest_share,
           own_j / nullIf(gpu_s, 0) + rest_j * rest_share AS energy_j_per_allocated,
           own_c / nullIf(gpu_s, 0) + rest_c * rest_share AS counter_j_per_allocated,
           energy_j_per_allocated + rest_of_node_j_per_allocated AS it_j_per_allocated
    FROM (SELECT *, sum(if(is_labelled, 0., gpu_s)) OVER (PARTITION BY cluster, node, hour) AS unlabelled_gpu_s
          FROM fresh_rates)
),
gone AS (
    SELECT cluster, hour, node, job_id, submit_ts
    FROM run_node_hour FINAL
    WHERE hour >= w0 AND hour < w1
      AND (cluster, hour, node, job_id, submit_ts) NOT IN (
          SELECT cluster, hour, node, job_id, submit_ts FROM ({{intermediate run_fanout}}))
)
SELECT cluster, hour, node, job_id, submit_ts, account, reservation, run_node_count, gpus_per_node, s, e, gpu_s,
       gpu_model, has_capacity, covered_per_capacity, util_per_allocated, sm_per_allocated, tensor_per_allocated,
       dram_per_allocated, energy_j_per_allocated, counter_j_per_allocated, it_j_per_allocated, node_power_measured,
       nic_rx_per_capacity, nic_tx_per_capacity, read_per_capacity,
       write_per_capacity, node_util, 0 AS is_deleted, now64(3) AS refreshed_at
FROM fresh
UNION ALL
SELECT cluster, hour, node, job_id, submit_ts, '', '', 0, 0, hour, hour, 0, '', 0, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, 1, now64(3)
FROM gone
SETTINGS join_use_nulls = 1;
