-- Recompute capacity_node_hour for the whole hours of [from_ts, to_ts) (see migration 0007 for the
-- columns). Every input is clipped to the window, so a month is exact at its boundaries.
--   model      one row per node, GPU model and hour (migration 0021): a node with GPUs of several models
--              (Gres=gpu:h100:2,gpu:h200:4) has a row per model, each with its model's GPUs; its down,
--              drained and reserved time is the node's, for each model's GPUs; a run's GPU time there is
--              split by sql/functions/gpu_model_share.sql (its typed TRES, else in proportion to the node's
--              GPUs of each model), and so are its samples' observed and busy time; the node's telemetry
--              (GPU samples carry no Slurm GPU type) is split in proportion to the node's GPUs of each
--              model. A node with one model: share 1, its figures as before
--   cut        nothing is known of a cluster's use after the as-of time of its loaded job history
--              (sql/intermediate/cluster_as_of.sql): every figure stops at least(to_ts, as_of), the through_ts
--              of sql/marts/data_through.sql. The hours after it keep a row with nothing in it, so a
--              refresh replaces what an earlier refresh (or an earlier version of this file) wrote there.
--              A cluster without job records is not cut.
--   capacity   node_inventory: GPUs × the part of the hour between in_service_ts and retired_ts (or the cut)
--   down/drain node_event: overlapping events of a node are merged first (a node DOWN during a drain
--              counts once: as down); an event still open at the last load lasts to the cut;
--              GPUs a draining node's running jobs still hold are allocated, not drained (as sreport)
--   reserved   reservation: its nodes × the part of the hour it covers (to the cut), minus the unusable part
--   idle split the usable time nobody was allocated: reserved_idle (inside a reservation), else free
--   allocated  the runs' GPU time on each node and hour (sql/intermediate/run_fanout.sql: every run
--              that held resources, superseded runs of requeued jobs included; its GPUs spread evenly over
--              its nodes); a run counts to its end or, still running, to the time it was last seen: never
--              past the cut
--   telemetry  gpu_hour / node_hour rollups of the hours that ended by the cut (an hourly rollup cannot be
--              split: the part of an hour before the cut has capacity and allocation, no telemetry)
--   energy     the GPUs' (counters, else power samples × time), the node's IPMI power and the IT energy
--              (it_energy_j): formed once here, what cost, chargeback and job_energy read (migration 0020)
--   busy       per sample, inside the runs' allocations (sql/intermediate/run_sample_hour.sql, refreshed just
--              before): allocated_observed_gpu_s the allocated time the GPU samples saw, busy_gpu_s the part
--              of it at or above {idle_util_pct} percent: each run's figure is its samples' steps'
--              overlap with its allocation, so busy ≤ observed ≤ allocated in every node-hour with no cap
--              (an hourly mean counted a half-allocated busy hour as wholly busy)
--- [model]
--- kind = "incremental_by_time_range"
--- unit = "hour"
--- grain = "hourly"
--- writes = ["capacity_node_hour"]
--- reads = ["node_inventory", "node_event", "reservation", "cluster_as_of", "run_fanout", "run_sample_hour", "gpu_hour", "node_hour"]
--- requires = "node_inventory"
INSERT INTO capacity_node_hour
WITH
    toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
    toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1,
cuts AS (
    SELECT cluster, least(w1, as_of_ts) AS cut FROM cluster_as_of
),
nodes AS (
    SELECT n.cluster AS cluster, n.node AS node, n.partition AS partition, n.gpu_model AS gpu_model,
           n.rack AS rack, n.gpus AS gpus, n.in_service_ts AS in_service_ts,
           coalesce(n.retired_ts, toDateTime('2106-01-01 00:00:00', 'UTC')) AS retired,
           ifNull(c.cut, w1) AS cut,
           toUInt16(sum(n.gpus) OVER (PARTITION BY n.cluster, n.node)) AS node_gpus,
           groupArray(toString(n.gpu_model)) OVER (PARTITION BY n.cluster, n.node) AS node_models
    FROM (SELECT * FROM node_inventory FINAL WHERE in_service_ts < w1 AND coalesce(retired_ts, w1) > w0) AS n
    LEFT JOIN cuts AS c ON c.cluster = n.cluster
),
clusters AS (
    SELECT DISTINCT cluster, cut FROM nodes
),
grid AS (
    SELECT cluster, node, hour, partition, gpu_model, rack, gpus, node_gpus,
           -- the node's telemetry counted under this model (see "model" above)
           if(length(node_models) <= 1 OR node_gpus = 0, 1., gpus / node_gpus) AS tel_share,
           toFloat64(gpus * overlap_s(hour, hour + 3600, in_service_ts, least(retired, cut))) AS capacity_gpu_s
    FROM nodes
    ARRAY JOIN hours_touched(greatest(w0, in_service_ts), least(w1, retired)) AS hour
),
events AS (
    SELECT v.cluster AS cluster, v.node AS node, greatest(v.start_ts, w0) AS s,
           least(coalesce(v.end_ts, x.cut), x.cut) AS e, v.state AS state
    FROM (SELECT * FROM node_event FINAL WHERE start_ts < w1 AND coalesce(end_ts, w1) > w0) AS v
    INNER JOIN clusters AS x ON x.cluster = v.cluster
    WHERE v.start_ts < x.cut
),
classed AS (
    SELECT cluster, node, s, e, 'unusable' AS cls FROM events
    UNION ALL
    SELECT cluster, node, s, e, 'down' AS cls FROM events WHERE state = 'DOWN'
),
-- merge overlapping intervals per node and class: a new group starts where an interval begins after
-- every earlier one has ended
flagged AS (
    SELECT cluster, node, cls, s, e,
           if(s > max(e) OVER (PARTITION BY cluster, node, cls ORDER BY s, e
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 1, 0) AS starts_group
    FROM classed
),
grouped AS (
    SELECT cluster, node, cls, s, e,
           sum(starts_group) OVER (PARTITION BY cluster, node, cls ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS grp
    FROM flagged
),
merged AS (
    SELECT cluster, node, cls, min(s) AS s, max(e) AS e FROM grouped GROUP BY cluster, node, cls, grp
),
unusable AS (
    SELECT cluster, node, hour,
           sumIf(overlap_s(hour, hour + 3600, s, e), cls = 'down') AS down_s,
           sumIf(overlap_s(hour, hour + 3600, s, e), cls = 'unusable') AS unusable_s
    FROM merged
    ARRAY JOIN hours_touched(s, e) AS hour
    GROUP BY cluster, node, hour
),
reserved AS (
    SELECT cluster, node, hour, least(sum(overlap_s(hour, hour + 3600, s, e)), 3600) AS reserved_s,
           arrayStringConcat(arraySort(groupUniqArray(name)), ',') AS reservation
    FROM (
        SELECT r.cluster AS cluster, r.name AS name, greatest(r.start_ts, w0) AS s, least(r.end_ts, x.cut) AS e,
               r.nodes AS nodes
        FROM (SELECT * FROM reservation FINAL WHERE start_ts < w1 AND end_ts > w0) AS r
        INNER JOIN clusters AS x ON x.cluster = r.cluster
        WHERE r.start_ts < x.cut
    )
    ARRAY JOIN nodes AS node
    ARRAY JOIN hours_touched(s, e) AS hour
    GROUP BY cluster, node, hour
),
allocated AS (
    -- the seen and busy GPU-seconds summed exactly (Decimal, as run_node_observed's): their fractions are the
    -- samples', and a Float64 sum of a node-hour's runs took the order the engine's threads gave, so busy_gpu_s
    -- differed in its last bit between two refreshes of the same rows (docs/benchmarks.md, round 11)
    SELECT cluster, node, hour, gpu_model, sum(gpu_s * share) AS allocated_gpu_s,
           sumIf(gpu_s * share, reservation != '') AS allocated_resv_gpu_s,
           toFloat64(sum(accurateCastOrNull(observed_gpu_s * share, 'Decimal(38, 9)'))) AS allocated_observed_gpu_s,
           toFloat64(sum(accurateCastOrNull(busy_gpu_s * share, 'Decimal(38, 9)'))) AS busy_gpu_s
    FROM (
        SELECT f.cluster AS cluster, f.node AS node, f.hour AS hour, m.gpu_model AS gpu_model, f.gpu_s AS gpu_s,
               -- (the readings another job's label names, in the run's allocated time: seen, not the run's)
               f.reservation AS reservation, ifNull(x.observed_gpu_s + x.other_job_gpu_s, 0) AS observed_gpu_s,
               ifNull(x.busy_gpu_s + x.other_job_busy_gpu_s, 0) AS busy_gpu_s,
               gpu_model_share(f.alloc_tres, m.gpu_model, m.gpus, m.node_gpus, m.node_models) AS share
        FROM ({{intermediate run_fanout}}) AS f
        INNER JOIN (SELECT DISTINCT cluster, node, gpu_model, gpus, node_gpus, node_models FROM nodes) AS m
            ON m.cluster = f.cluster AND m.node = f.node
        LEFT JOIN (SELECT cluster, node, hour, job_id, submit_ts, observed_gpu_s, busy_gpu_s, other_job_gpu_s,
                          other_job_busy_gpu_s
                   FROM run_sample_hour FINAL WHERE hour >= w0 AND hour < w1) AS x
            ON x.cluster = f.cluster AND x.node = f.node AND x.hour = f.hour AND x.job_id = f.job_id
           AND x.submit_ts = f.submit_ts
    )
    GROUP BY cluster, node, hour, gpu_model
),
gpu_tel AS (
    SELECT cluster, node, hour,
           sum(covered_s) AS covered_gpu_s,
           -- rounded to the microsecond (the millijoule): a float sum depends on the order the engine adds the
           -- GPUs' rows in, which differs with the window a refresh reads, and the same samples must give the
           -- same row whichever refresh wrote it (a load of a week of days, or a backfill of one)
           round(sum(ifNull(gpu_util_pct_avg, 0) / 100 * covered_s), 6) AS util_gpu_s,
           round(sum(ifNull(sm_active_avg, 0) * covered_s), 6) AS sm_gpu_s,
           round(sum(ifNull(tensor_active_avg, 0) * covered_s), 6) AS tensor_gpu_s,
           round(sum(ifNull(dram_active_avg, 0) * covered_s), 6) AS dram_gpu_s,
           -- the GPUs' energy: their counters, and for a GPU-hour without one its mean power × covered time
           round(sum(ifNull(energy_j, 0))
                 + ifNull(sumIf(power_w_avg * covered_s, energy_j IS NULL AND power_w_avg IS NOT NULL), 0), 3)
               AS gpu_energy_j,
           round(sum(ifNull(energy_j, 0)), 3) AS gpu_counter_energy_j,
           max(covered_s) AS node_covered_s,
           sum(throttled_s) AS throttled_gpu_s
    FROM (SELECT t.* FROM (SELECT * FROM gpu_hour FINAL WHERE hour >= w0 AND hour < w1) AS t
          INNER JOIN clusters AS x ON x.cluster = t.cluster WHERE t.hour + 3600 <= x.cut)
    GROUP BY cluster, node, hour
),
node_tel AS (
    SELECT t.cluster AS cluster, t.node AS node, t.hour AS hour, t.nic_rx_bytes AS nic_rx_bytes,
           t.nic_tx_bytes AS nic_tx_bytes, t.lustre_read_bytes AS lustre_read_bytes,
           t.lustre_write_bytes AS lustre_write_bytes, t.node_power_w_avg AS node_power_w_avg
    FROM (SELECT * FROM node_hour FINAL WHERE hour >= w0 AND hour < w1) AS t
    INNER JOIN clusters AS x ON x.cluster = t.cluster
    WHERE t.hour + 3600 <= x.cut
)
SELECT
    g.cluster, g.node, g.hour, g.partition, g.gpu_model, g.rack, g.gpus, g.node_gpus,
    g.capacity_gpu_s,
    least(toFloat64(g.gpus * ifNull(u.down_s, 0)), g.capacity_gpu_s) AS down_gpu_s,
    -- a draining node runs its jobs to their end: GPUs still allocated count as allocated, not drained
    greatest(0., least(toFloat64(g.gpus * (ifNull(u.unusable_s, 0) - ifNull(u.down_s, 0))),
                      g.capacity_gpu_s - down_gpu_s - ifNull(a.allocated_gpu_s, 0))) AS drained_gpu_s,
    -- reserved time that was available: not down, not drained, but a draining node's GPUs its running jobs
    -- still held count (as allocated, so as reserved: a job ran in the reservation there)
    greatest(0., least(toFloat64(g.gpus * ifNull(r.reserved_s, 0)), g.capacity_gpu_s - down_gpu_s - drained_gpu_s))
        AS reserved_gpu_s,
    ifNull(r.reservation, '') AS reservation,
    ifNull(a.allocated_gpu_s, 0.) AS allocated_gpu_s,
    ifNull(a.allocated_resv_gpu_s, 0) AS allocated_resv_gpu_s,
    -- the idle split of the usable time nobody was allocated: reserved first, the rest free
    greatest(0., least(reserved_gpu_s, g.capacity_gpu_s - down_gpu_s - drained_gpu_s - allocated_gpu_s))
        AS reserved_idle_gpu_s,
    greatest(0., g.capacity_gpu_s - down_gpu_s - drained_gpu_s - allocated_gpu_s - reserved_idle_gpu_s) AS free_gpu_s,
    ifNull(a.busy_gpu_s, 0), ifNull(t.covered_gpu_s, 0) * g.tel_share, ifNull(a.allocated_observed_gpu_s, 0),
    ifNull(t.util_gpu_s, 0) * g.tel_share, ifNull(t.sm_gpu_s, 0) * g.tel_share,
    ifNull(t.tensor_gpu_s, 0) * g.tel_share, ifNull(t.dram_gpu_s, 0) * g.tel_share,
    ifNull(t.gpu_energy_j, 0) * g.tel_share, ifNull(t.gpu_counter_energy_j, 0) * g.tel_share,
    n.node_power_w_avg, ifNull(t.node_covered_s, 0),
    -- the node-hour's IT energy (sql/functions/it_energy_j.sql): IPMI power × the time its GPUs' samples cover
    -- where the node's energy was measured (sql/functions/node_energy_measured.sql), else the GPUs' energy
    ifNull(it_energy_j(if(node_energy_measured(n.node_power_w_avg, ifNull(t.node_covered_s, 0)) = 1,
                          n.node_power_w_avg, NULL),
                       ifNull(t.node_covered_s, 0), ifNull(t.gpu_energy_j, 0)), 0) * g.tel_share,
    ifNull(t.throttled_gpu_s, 0) * g.tel_share,
    ifNull(n.nic_rx_bytes, 0) * g.tel_share, ifNull(n.nic_tx_bytes, 0) * g.tel_share,
    ifNull(n.lustre_read_bytes, 0) * g.tel_share, ifNull(n.lustre_write_bytes, 0) * g.tel_share,
    {idle_util_pct:Float64},
    now64(3)
FROM grid AS g
LEFT JOIN unusable AS u USING (cluster, node, hour)
LEFT JOIN reserved AS r USING (cluster, node, hour)
LEFT JOIN allocated AS a USING (cluster, node, hour, gpu_model)
LEFT JOIN gpu_tel AS t USING (cluster, node, hour)
LEFT JOIN node_tel AS n USING (cluster, node, hour)
SETTINGS join_use_nulls = 1;
