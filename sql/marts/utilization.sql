-- Capacity, availability, allocation and idle capacity of [from_ts, to_ts), from capacity_node_hour, for
-- the cluster and by GPU model and partition (level says which rows are which). GPU-hours throughout.
-- Partitions, two ways (a node may be in several: Partitions=h100,all):
--   'partition'         the partition a node is counted under (node_inventory.partition, the first it is in):
--                       every node-hour in one row, so these rows add up to the cluster's
--   'partition_member'  every partition a node is in (node_inventory.partitions at the last snapshot; a node
--                       without that list, its one partition): a partition's own view of its nodes, as sinfo
--                       shows it. A node in two partitions counts in both, so these rows may add up to more
--                       than the cluster (never read a cluster total from them); each is at most the cluster's,
--                       and where no node is shared they are the 'partition' rows.
--                       Its allocated figures are any run's on those nodes (a node held by a job of another
--                       partition is not free for this one).
--   available       = capacity − down − drained (unavailable = down + drained)
--   utilization     = allocated ÷ available
--   reserved_idle   = usable reserved time allocated to nobody
--   free            = usable time, not reserved, allocated to nobody
--   (so available = allocated + reserved_idle + free, hour by hour)
--   allocated_observed = allocated GPU-hours the GPU samples saw (telemetry coverage inside the runs'
--                     allocations, per sample: sql/intermediate/run_sample_hour.sql)
--   busy            = of those, the samples at or above the idle threshold: busy ≤ observed ≤ allocated
--   allocated_idle  = allocated_observed − busy: allocated GPU time the samples saw idle
--                     (sql/functions/allocated_idle_gpu_s.sql); allocated time no sample saw is unknown
--   idle_util_pct   = the idle threshold (percent) the grain's busy hours were computed with (the highest,
--                     should hours of the window have been refreshed under different settings)
-- A month in progress counts to the time the loaded job history reaches, not to its end: the grain is
-- cut there (sql/intermediate/capacity_node_hour.sql, data_through.sql).
--- [mart]
--- grain = "one row per level (cluster, GPU model, partition, partition_member) and key"
--- scope = "cluster"
--- report = 1
--- previous = true
--- columns = ["level", "key", "capacity_gpu_h", "down_gpu_h", "drained_gpu_h", "available_gpu_h", "unavailable_gpu_h", "allocated_gpu_h", "reserved_gpu_h", "reserved_idle_gpu_h", "free_gpu_h", "allocated_idle_gpu_h", "allocated_observed_gpu_h", "utilization", "busy_gpu_h", "telemetry_gpu_h", "gpu_energy_kwh", "idle_util_pct", "observed_own_gpu_share"]
--- filters = { level = "level" }
--- export = 1
SELECT
    lk.1 AS level,
    lk.2 AS key,
    sum(capacity_gpu_s) / 3600 AS capacity_gpu_h,
    sum(down_gpu_s) / 3600 AS down_gpu_h,
    sum(drained_gpu_s) / 3600 AS drained_gpu_h,
    (sum(capacity_gpu_s) - sum(down_gpu_s) - sum(drained_gpu_s)) / 3600 AS available_gpu_h,
    (sum(down_gpu_s) + sum(drained_gpu_s)) / 3600 AS unavailable_gpu_h,
    sum(allocated_gpu_s) / 3600 AS allocated_gpu_h,
    sum(reserved_gpu_s) / 3600 AS reserved_gpu_h,
    sum(reserved_idle_gpu_s) / 3600 AS reserved_idle_gpu_h,
    sum(free_gpu_s) / 3600 AS free_gpu_h,
    toFloat64(sum(allocated_idle_s)) / 3600 AS allocated_idle_gpu_h,
    toFloat64(sum(allocated_observed_gpu_s)) / 3600 AS allocated_observed_gpu_h,
    allocated_gpu_h / nullIf(available_gpu_h, 0) AS utilization,
    toFloat64(sum(busy_gpu_s)) / 3600 AS busy_gpu_h,
    toFloat64(sum(covered_gpu_s)) / 3600 AS telemetry_gpu_h,
    toFloat64(sum(gpu_energy_j)) / 3.6e6 AS gpu_energy_kwh,
    max(idle_util_pct) AS idle_util_pct,
    -- how the observed time was attributed to the runs (run_sample_hour): the share by the runs' own GPUs
    -- (dcgm-exporter's hpc_job label), the rest by their share of the node's samples (the whole window's)
    -- (the other jobs' readings in a labelled run's time, migration 0024, are seen time by the label too)
    (SELECT toFloat64(sumIf(toDecimal128(observed_gpu_s + other_job_gpu_s, 6), attribution = 'gpu'))
                / nullIf(toFloat64(sum(toDecimal128(observed_gpu_s + other_job_gpu_s, 6))), 0)
     FROM run_sample_hour FINAL
     WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')})
        AS observed_own_gpu_share
-- each node's sums over the window first, then its levels: the ARRAY JOIN below repeats 114 rows a few times,
-- not a year's million node-hours (7x faster over a year: docs/benchmarks.md, Grafana). The idle part is
-- taken per node-hour (allocated_idle_gpu_s is not linear), then summed. The telemetry's fractional seconds and
-- joules are summed as Decimal (to the µs and µJ, exactly, in any order) and converted after: a Float64 sum
-- depends on the order the engine's threads hand in their parts (docs/sql.md: sum exact units, then convert).
FROM (SELECT c.node AS node, c.gpu_model AS gpu_model, c.partition AS partition,
             sum(c.capacity_gpu_s) AS capacity_gpu_s, sum(c.down_gpu_s) AS down_gpu_s,
             sum(c.drained_gpu_s) AS drained_gpu_s, sum(c.allocated_gpu_s) AS allocated_gpu_s,
             sum(c.reserved_gpu_s) AS reserved_gpu_s, sum(c.reserved_idle_gpu_s) AS reserved_idle_gpu_s,
             sum(c.free_gpu_s) AS free_gpu_s,
             sum(toDecimal128(allocated_idle_gpu_s(c.allocated_observed_gpu_s, c.busy_gpu_s), 6)) AS allocated_idle_s,
             sum(toDecimal128(c.allocated_observed_gpu_s, 6)) AS allocated_observed_gpu_s,
             sum(toDecimal128(c.busy_gpu_s, 6)) AS busy_gpu_s,
             sum(toDecimal128(c.covered_gpu_s, 6)) AS covered_gpu_s, sum(toDecimal128(c.gpu_energy_j, 6)) AS gpu_energy_j,
             max(c.idle_util_pct) AS idle_util_pct
      FROM capacity_node_hour AS c FINAL
      WHERE c.cluster = {cluster:String} AND c.hour >= {from_ts:DateTime('UTC')} AND c.hour < {to_ts:DateTime('UTC')}
      GROUP BY node, gpu_model, partition
      UNION ALL
      -- runs on nodes the inventory does not list (a site that loaded none, or a node missing from it): the
      -- GPUs they held are allocated GPU-hours all the same (chargeback's '(not in the inventory)' rows, from
      -- the same run_node_hour rows), but nothing else of the node is known, so its capacity and every other
      -- figure is unknown (NULL), never 0: a cluster row with such nodes has the inventory's capacity, and
      -- capacity_split breaks where its allocation does not fit it (the node to add to the inventory)
      SELECT r.node AS node, '(not in the inventory)' AS gpu_model, '(not in the inventory)' AS partition,
             CAST(NULL AS Nullable(Float64)) AS capacity_gpu_s, CAST(NULL AS Nullable(Float64)) AS down_gpu_s,
             CAST(NULL AS Nullable(Float64)) AS drained_gpu_s,
             sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}))
                 AS allocated_gpu_s,
             CAST(NULL AS Nullable(Float64)) AS reserved_gpu_s, CAST(NULL AS Nullable(Float64)) AS reserved_idle_gpu_s,
             CAST(NULL AS Nullable(Float64)) AS free_gpu_s, CAST(NULL AS Nullable(Decimal128(6))) AS allocated_idle_s,
             CAST(NULL AS Nullable(Decimal128(6))) AS allocated_observed_gpu_s,
             CAST(NULL AS Nullable(Decimal128(6))) AS busy_gpu_s,
             CAST(NULL AS Nullable(Decimal128(6))) AS covered_gpu_s, CAST(NULL AS Nullable(Decimal128(6))) AS gpu_energy_j,
             CAST(NULL AS Nullable(Float64)) AS idle_util_pct
      FROM run_node_hour AS r FINAL
      WHERE r.cluster = {cluster:String} AND r.hour >= toStartOfHour({from_ts:DateTime('UTC')})
        AND r.hour < {to_ts:DateTime('UTC')} AND r.e > {from_ts:DateTime('UTC')} AND r.s < {to_ts:DateTime('UTC')}
        AND r.node NOT IN (SELECT node FROM node_inventory FINAL WHERE cluster = {cluster:String})
      GROUP BY r.node) AS h
-- (a node with GPUs of several models has a row per model in the inventory: its partitions once)
LEFT JOIN (SELECT node, any(partitions) AS partitions FROM node_inventory FINAL WHERE cluster = {cluster:String}
           GROUP BY node) AS m ON m.node = h.node
-- each node-hour once per level it is in: the cluster, its GPU model, its partition, every partition it is in
ARRAY JOIN arrayConcat([('cluster', ''), ('gpu_model', h.gpu_model), ('partition', h.partition)],
                       arrayMap(p -> ('partition_member', p), if(empty(m.partitions), [h.partition], m.partitions)))
    AS lk
GROUP BY level, key
ORDER BY level, key;
