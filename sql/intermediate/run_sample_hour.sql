-- Recompute run_sample_hour (migration 0015) for the whole hours of [from_ts, to_ts): for every run, node and
-- hour, the part of the run's allocation the GPU samples saw and what they saw it do. etl/grains.py runs it
-- first of the hourly grains: capacity_node_hour's busy and observed time are its sums.
--   fan-out    sql/intermediate/run_fanout.sql, included: the run's part of each node-hour, [hs, he), and its
--              GPUs on the node (gpus_per_node)
--   samples    the GPU samples inside the run's allocation: taken at a time ts with hs ≤ ts < he (a gauge is a
--              reading at its time: a sample after the run's end reads the next job or an idle GPU, one before
--              its start the previous job), each standing for its step (step_s) of the GPU's time; busy when
--              its utilization reached {idle_util_pct} percent
--   'gpu'      a node-hour whose samples carry dcgm-exporter's hpc_job label (the Slurm job id, job_id_raw, of
--              the job holding the GPU at the scrape, as the site's prolog maps it): each run reads the samples
--              its id labels, exact on shared nodes; a run no sample of such a node-hour names has no row
--              (unknown, never idle: a run shorter than a step may fall between two scrapes)
--   'node      a node-hour without the label (sacct says how many GPUs a run held, not which): at each sample
--   share'     time the runs holding the node share its sampled, busy and active GPUs by their GPUs there
--              (up to what they hold: unallocated GPUs do no work), so a node-hour's sums are exact, a run's
--              only when it held the whole node
-- A run's observed time in a node-hour is its samples' steps, at most what it held (gpus_per_node × (he −
-- hs)); busy and the activities are the same shares of it as of its samples: busy ≤ observed ≤ allocated.
-- Rows are written only where samples exist: the node-hours of the window that have samples lose their old
-- rows first (a run moved or no longer seen by any sample leaves none behind), and a refresh after the fine
-- samples expired keeps what was written while they were there.
DELETE FROM run_sample_hour
WHERE hour >= toDateTime({from_ts:DateTime('UTC')}, 'UTC') AND hour < toDateTime({to_ts:DateTime('UTC')}, 'UTC')
  AND (cluster, node, hour) IN (
      SELECT DISTINCT cluster, node, toStartOfHour(ts) FROM gpu_sample
      WHERE ts >= toDateTime({from_ts:DateTime('UTC')}, 'UTC') AND ts < toDateTime({to_ts:DateTime('UTC')}, 'UTC'));

INSERT INTO run_sample_hour (cluster, hour, node, job_id, submit_ts, attribution, observed_gpu_s, busy_gpu_s,
    util_gpu_s, sm_gpu_s, tensor_gpu_s, dram_gpu_s, idle_util_pct, refreshed_at)
WITH
    toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
    toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1,
fan AS (
    SELECT cluster, job_id, submit_ts, toString(job_id_raw) AS raw_id, node, hour, gpus_per_node,
           greatest(s, hour) AS hs, least(e, hour + 3600) AS he,
           toFloat64(gpus_per_node * (toInt64(he) - toInt64(hs))) AS held_gpu_s
    FROM ({{intermediate run_fanout}})
),
g AS (
    SELECT cluster, node, gpu, ts, toStartOfHour(ts) AS hour, toFloat64(step_s) AS step, hpc_job,
           toFloat64(assumeNotNull(gpu_util_pct)) AS util_pct, toFloat64(ifNull(sm_active, 0)) AS sm,
           toFloat64(ifNull(tensor_active, 0)) AS tensor, toFloat64(ifNull(dram_active, 0)) AS dram
    FROM gpu_sample FINAL
    PREWHERE ts >= w0 AND ts < w1
    WHERE gpu_util_pct IS NOT NULL
),
labelled AS (
    SELECT DISTINCT cluster, node, hour FROM g WHERE hpc_job != ''
),
-- 'gpu': the samples the run's job id labels, inside its allocation (a requeued job's runs share the id)
own AS (
    SELECT f.cluster AS cluster, f.hour AS hour, f.node AS node, f.job_id AS job_id, f.submit_ts AS submit_ts,
           toFloat64(any(f.held_gpu_s)) AS held, count() AS n, sum(g.step) AS seen,
           -- (sum(if()), not sumIf: the engine makes sumIf over the joined rows Nullable, NULL where none is busy)
           sum(if(g.util_pct >= {idle_util_pct:Float64}, 1, 0)) AS nb, sum(g.util_pct) / 100 AS u,
           sum(g.sm) AS sm, sum(g.tensor) AS tensor, sum(g.dram) AS dram
    FROM g
    INNER JOIN fan AS f ON f.cluster = g.cluster AND f.node = g.node AND f.hour = g.hour AND f.raw_id = g.hpc_job
    WHERE g.ts >= f.hs AND g.ts < f.he
    GROUP BY cluster, hour, node, job_id, submit_ts
),
-- 'node share': the node's samples at each time, shared by the runs holding it then
node_step AS (
    SELECT cluster, node, hour, ts, max(step) AS step, toFloat64(count()) AS n,
           toFloat64(sum(if(util_pct >= {idle_util_pct:Float64}, 1, 0))) AS nb, sum(util_pct) / 100 AS u,
           sum(sm) AS sm, sum(tensor) AS tensor, sum(dram) AS dram
    FROM g
    WHERE (cluster, node, hour) NOT IN (SELECT cluster, node, hour FROM labelled)
    GROUP BY cluster, node, hour, ts
),
held_at AS (
    SELECT f.cluster AS cluster, f.hour AS hour, f.node AS node, f.job_id AS job_id, f.submit_ts AS submit_ts,
           f.held_gpu_s AS held, toFloat64(f.gpus_per_node) AS a, n.ts AS ts, n.step AS step, n.n AS n, n.nb AS nb, n.u AS u,
           n.sm AS sm, n.tensor AS tensor, n.dram AS dram
    FROM node_step AS n
    INNER JOIN fan AS f ON f.cluster = n.cluster AND f.node = n.node AND f.hour = n.hour
    WHERE n.ts >= f.hs AND n.ts < f.he
),
shared AS (
    SELECT cluster, hour, node, job_id, submit_ts, any(held) AS held,
           sum(step * a / alloc * least(n, alloc)) AS seen,
           sum(step * a / alloc * least(nb, alloc)) AS busy_s,
           sum(step * a / alloc * least(u, alloc)) AS util_s,
           sum(step * a / alloc * least(sm, alloc)) AS sm_s,
           sum(step * a / alloc * least(tensor, alloc)) AS tensor_s,
           sum(step * a / alloc * least(dram, alloc)) AS dram_s
    FROM (SELECT *, sum(a) OVER (PARTITION BY cluster, node, ts) AS alloc FROM held_at)
    GROUP BY cluster, hour, node, job_id, submit_ts
)
SELECT cluster, hour, node, job_id, submit_ts, 'gpu', least(seen, held) AS observed, observed * nb / n,
       observed * u / n, observed * sm / n, observed * tensor / n, observed * dram / n,
       {idle_util_pct:Float64}, now64(3)
FROM own
UNION ALL
SELECT cluster, hour, node, job_id, submit_ts, 'node share', observed, busy_s * k, util_s * k, sm_s * k,
       tensor_s * k, dram_s * k, {idle_util_pct:Float64}, now64(3)
FROM (SELECT *, least(seen, held) AS observed, if(seen > 0, observed / seen, 0) AS k FROM shared);
