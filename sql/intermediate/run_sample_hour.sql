-- Recompute run_sample_hour (migration 0015) for the whole hours of [from_ts, to_ts): for every run, node and
-- hour, the part of the run's allocation the GPU samples saw and what they saw it do. etl/grains.py runs it
-- first of the hourly grains: capacity_node_hour's busy and observed time are its sums.
--   fan-out    sql/intermediate/run_fanout.sql, included: the run's part of each node-hour, [hs, he), and its
--              GPUs on the node (gpus_per_node, a)
--   step       a GPU sample at ts stands for its step [ts, ts + step_s): a gauge reading is the GPU's state
--              from its scrape until the next one (Prometheus' and VictoriaMetrics' own model of a gauge: a
--              query at t returns the last sample at or before t; the generator's and dcgm-exporter's samples
--              are readings at ts, and hpc_job names the job holding the GPU from ts). The step is split
--              over the hours it touches, and a run gets the overlap of each step with its allocation,
--              fractional at the run's edges: where samples follow each other every step, observed =
--              allocated, with no cap. (The Prometheus source's gauges are avg_over_time over the step
--              before ts: read so, one step late.) Steps of at most an hour: the samples of the hour before
--              the window are read for the step that reaches into it.
--   'gpu'      a run whose job id (job_id_raw) dcgm-exporter's hpc_job label names on a GPU of the node, at a
--              sample inside the run ([run_start_ts, run_end_ts), within an hour of the node-hour): the
--              run held those GPUs, and every step of theirs that overlaps its part of the node-hour counts
--              unless another job's label names its reading (sql/functions/reading_is_runs.sql, run_gpus' rule:
--              the previous job's last reading, whose step reaches past the run's start, is that job's; an
--              unlabelled one before the first labelled sample covers the run's start).
--              Its allocation there, a GPUs (sacct's even spread), is shared by the G GPUs named: each
--              GPU-second counts a ÷ G (a = G unless a multi-node run's GPUs are spread unevenly)
--   'node      every other run (the site has no mapping, or a run shorter than a step that fell between two
--   share'     scrapes, which no label names): in each step piece of the node, L seconds, the samples' GPU
--              time less what the identified runs took of it, R, is shared by these runs by their GPU time
--              there, a × overlap: observed = a × overlap × min(1, R ÷ H), H the sum of the runs' a × overlap
--              in the piece; busy = a × overlap × min(1, busy time left ÷ D), D the GPU time they could hold,
--              min(R, C × L) with C the GPUs they held at once (H ÷ L, at least the largest run's a), and at
--              least H: unallocated GPUs do no work, so the busy time goes to the runs; the activities alike.
--              A node-hour's sums are exact, a run's only when it held the whole node
--   other      'gpu' rows keep apart the readings another job's label names (other_job_gpu_s,
--   jobs'      other_job_busy_gpu_s, migration 0024): not the run's figures, but the GPU was allocated to it
--   readings   and seen, so capacity_node_hour's allocated observed and busy time add them
--   energy     'gpu' rows carry the run's GPU energy by the same rule (migration 0025): the energy counter's
--              steps of its readings, each [ts - step_s, ts) (the counter's step ends at the reading, as
--              run_gpus reads it), cut at the hours and counted for the part the run held; the steps another
--              job's label names kept apart (other_job_energy_j); the parts read at the next hour's samples
--              said (next_hour_*: gpu_hour counts a step in the hour it ends in). 'node share' rows carry none:
--              run_node_hour shares the node-hour's rest (capacity_node_hour's GPU energy less the 'gpu' runs')
-- busy ≤ observed ≤ allocated in every row by construction (observed + other_job_gpu_s ≤ allocated). Rows are
-- written only where samples exist: in the
-- node-hours of the window that samples' steps cover, the old rows the refresh does not write again are
-- deleted (a run moved or no longer seen by any sample leaves none behind; the rows written again replace
-- their old versions, ReplacingMergeTree), and a refresh after the fine samples expired keeps what was
-- written while they were there.
--- [model]
--- kind = "incremental_by_time_range"
--- unit = "hour"
--- grain = "hourly"
--- writes = ["run_sample_hour"]
--- reads = ["gpu_sample", "run_fanout"]
--- requires = "gpu_sample"             # in the hours it reads: rows are written only where samples are
-- The inputs several parts of the insert read are staged once, in temporary tables of the session: the
-- engine evaluates a CTE again wherever it is named, so the window's samples (gpu_sample FINAL) and the
-- fan-out were read, and the labels joined, up to six times a refresh (docs/benchmarks.md, "Issue 50").
-- Those holding a row per sample are MergeTree, written to disk as they come (a piece of a 4,000-node site
-- holds tens of millions of samples: kept in memory, they would be held beside the joins' own tables).
-- (the staged tables a refresh killed in this session left, dropped in one statement: each is a round trip
-- and a plan, 13 of a night's ~100 statements when dropped one by one)
DROP TEMPORARY TABLE IF EXISTS _rsh_fan, _rsh_g, _rsh_piece, _rsh_ident, _rsh_own_piece, _rsh_touched, _rsh_new,
    _rsh_energy, _rsh_gh;

-- fan: the window's fan-out, each run's part [hs, he) of each node-hour
CREATE TEMPORARY TABLE _rsh_fan ENGINE = Memory AS
SELECT cluster, job_id, submit_ts, toString(job_id_raw) AS raw_id, node, hour, toFloat64(gpus_per_node) AS a,
       greatest(s, hour) AS hs, least(e, hour + 3600) AS he, run_start_ts, run_end_ts
FROM ({{intermediate run_fanout}});

-- the samples whose step may reach into the window, or whose label may name a run there
CREATE TEMPORARY TABLE _rsh_g ENGINE = MergeTree ORDER BY tuple() AS
WITH
    toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
    toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1
SELECT cluster, node, gpu, ts, addSeconds(ts, step_s) AS te, hpc_job, gpu_util_pct IS NOT NULL AS has_util,
       toFloat64(ifNull(gpu_util_pct, 0)) AS util_pct, toFloat64(ifNull(sm_active, 0)) AS sm,
       toFloat64(ifNull(tensor_active, 0)) AS tensor, toFloat64(ifNull(dram_active, 0)) AS dram,
       -- the energy counter's step ends at the reading: [es, ts) (migration 0025)
       subtractSeconds(ts, step_s) AS es, energy_j, power_w
FROM gpu_sample FINAL
PREWHERE ts >= w0 - toIntervalHour(1) AND ts < w1 + toIntervalHour(1);

-- the node-hours of the window any sample's step touches (with a utilisation or not): where the refresh
-- replaces the rows. Read by the guard below only, which is false wherever the grain holds no row of the
-- window (a first load's refresh, the demo backfill's): then none is staged (the constant subquery ends the
-- read; ~4 % of that refresh's CPU, docs/benchmarks.md "Issue 51", round 10)
CREATE TEMPORARY TABLE _rsh_touched ENGINE = Memory AS
WITH
    toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
    toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1
SELECT DISTINCT cluster, node, hour
FROM _rsh_g
ARRAY JOIN hours_touched(ts, te) AS hour
WHERE hour >= w0 AND hour < w1
  AND (SELECT count() > 0 FROM run_sample_hour WHERE hour >= toDateTime({from_ts:DateTime('UTC')}, 'UTC')
                                                 AND hour < toDateTime({to_ts:DateTime('UTC')}, 'UTC'));

-- each sample's step cut at the hours (and the window) it touches: [ps, pe)
CREATE TEMPORARY TABLE _rsh_piece ENGINE = MergeTree ORDER BY tuple() AS
WITH
    toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
    toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1
SELECT cluster, node, gpu, ts, hpc_job, util_pct, sm, tensor, dram, hour,
       greatest(ts, hour) AS ps, least(te, hour + 3600) AS pe
FROM _rsh_g
ARRAY JOIN hours_touched(ts, te) AS hour
WHERE has_util AND hour >= w0 AND hour < w1;

-- 'gpu': the GPUs a run's job id labels inside the run (a requeued job's runs share the id)
CREATE TEMPORARY TABLE _rsh_ident ENGINE = Memory AS
WITH
-- the labelled samples per GPU and hour (lh)
labels AS (
    SELECT cluster, node, hpc_job, gpu, toStartOfHour(ts) AS lh, groupArray(ts) AS tss
    FROM _rsh_g WHERE has_util AND hpc_job != '' GROUP BY cluster, node, hpc_job, gpu, lh
)
SELECT f.cluster AS cluster, f.hour AS hour, f.node AS node, f.job_id AS job_id, f.submit_ts AS submit_ts,
       any(f.a) AS a, any(f.hs) AS hs, any(f.he) AS he, any(f.raw_id) AS raw_id, l.gpu AS gpu
-- each run's node-hour looks at the labels of the hour itself and of the hours either side of it: the fan-out
-- offered to three hours rather than the labels (the same pairs; the join's table is the labels', a third the
-- rows: round 10)
FROM (SELECT *, hour + toIntervalHour(d) AS lh FROM _rsh_fan ARRAY JOIN [-1, 0, 1] AS d) AS f
INNER JOIN labels AS l ON l.cluster = f.cluster AND l.node = f.node AND l.lh = f.lh AND l.hpc_job = f.raw_id
WHERE arrayExists(t -> t >= f.run_start_ts AND t < f.run_end_ts, l.tss)
GROUP BY cluster, hour, node, job_id, submit_ts, gpu;

-- the energy of each GPU-hour (the hour a counter's step ends in, gpu_hour's) as capacity_node_hour counts it:
-- its counters' steps, and for a GPU-hour without a counter its mean power × each reading's step
CREATE TEMPORARY TABLE _rsh_gh ENGINE = Memory AS
SELECT cluster, node, gpu, toStartOfHour(ts) AS th, countIf(energy_j IS NOT NULL) > 0 AS has_counter,
       avg(power_w) AS power_avg
FROM _rsh_g
GROUP BY cluster, node, gpu, th;

-- each identified GPU's step pieces, with the part of each that the run held (o); mine: whether the reading is
-- the run's, not one another job's label names (reading_is_runs: run_gpus' rule, so `users` and `ops-report
-- job` call the same runs idle). Only its own readings count below; the others still count the GPU among the
-- run's (k), so that a GPU whose first step in the hour is the previous job's does not put its share of the
-- allocation on the run's other GPUs
CREATE TEMPORARY TABLE _rsh_own_piece ENGINE = MergeTree ORDER BY tuple() AS
SELECT i.cluster AS cluster, i.hour AS hour, i.node AS node, i.job_id AS job_id, i.submit_ts AS submit_ts,
       i.a AS a, i.gpu AS gpu, p.ts AS ts, toFloat64(overlap_s(p.ps, p.pe, i.hs, i.he)) AS o,
       reading_is_runs(p.hpc_job, i.raw_id) AS mine,
       p.util_pct AS util_pct, p.sm AS sm, p.tensor AS tensor, p.dram AS dram
FROM _rsh_ident AS i
INNER JOIN _rsh_piece AS p ON p.cluster = i.cluster AND p.node = i.node AND p.hour = i.hour AND p.gpu = i.gpu
WHERE p.pe > i.hs AND p.ps < i.he;

-- a 'gpu' run's GPU energy per node-hour (migration 0025): the counter steps of the readings the rule gives it
-- (reading_is_runs, as its other figures), each step's energy spread evenly over it and counted for the part the
-- run held; the steps of readings another job's label names kept apart (not the run's: the node-hour's rest).
-- Not scaled by the allocation's spread over the GPUs (k): joules drawn by the GPUs the label names
-- Each part is summed as Decimal microjoules, then converted (docs/sql.md, deterministic sums): Float64 parts
-- added in the order the engine's threads give came out a last bit apart between two refreshes of the same rows
-- (engineer F, round 6: 286 of 18,623 rows over 6 demo nights, 4.3e-16 relative), so no refresh could be
-- compared with another table for table.
CREATE TEMPORARY TABLE _rsh_energy ENGINE = Memory AS
SELECT cluster, hour, node, job_id, submit_ts,
       if(sum(if(mine, n_j, 0)) = 0, NULL, toFloat64(sum(if(mine, s_j, toDecimal128(0, 6))))) AS own_j,
       toFloat64(sum(if(mine, s_c, toDecimal128(0, 6)))) AS own_c,
       toFloat64(sum(if(mine, toDecimal128(0, 6), s_j))) AS other_j,
       toFloat64(sum(if(mine AND nxt, s_j, toDecimal128(0, 6)))) AS next_j,
       toFloat64(sum(if(mine AND nxt, s_c, toDecimal128(0, 6)))) AS next_c,
       toFloat64(sum(if(NOT mine AND nxt, s_j, toDecimal128(0, 6)))) AS other_next_j
-- the parts summed first by whose reading and in which hour read (mine, nxt), then those four sums a run's: the
-- join's rows pay two plain sums, not six conditional ones (Decimal sums: the same totals in any grouping)
FROM (SELECT cluster, hour, node, job_id, submit_ts, mine, nxt, count(part_j) AS n_j,
             ifNull(sum(part_j), toDecimal128(0, 6)) AS s_j, sum(part_c) AS s_c
      FROM (SELECT i.cluster AS cluster, i.hour AS hour, i.node AS node, i.job_id AS job_id,
                   i.submit_ts AS submit_ts, reading_is_runs(e.hpc_job, i.raw_id) AS mine, e.nxt AS nxt,
                   -- (accurateCastOrNull: a NULL power stays NULL, and a value no Decimal holds is no figure)
                   accurateCastOrNull(e.e_j * toFloat64(overlap_s(e.ps, e.pe, i.hs, i.he)) / e.step,
                                      'Decimal(38, 6)') AS part_j,
                   -- the counter's part: c_j is e_j where the GPU-hour has a counter and 0 where not, so its
                   -- part is part_j or 0, without a second cast (ifNull: a value no Decimal holds is 0 here)
                   if(e.c_j = 0, toDecimal128(0, 6), ifNull(part_j, toDecimal128(0, 6))) AS part_c
            -- each reading's counter step [es, ts) cut at the hours of the window: [ps, pe), its energy e_j (c_j of
            -- it from the counter; NULL where the GPU-hour has neither a counter nor a power), nxt where the step
            -- is read in a later hour than the piece's (the law and run_node_hour's rest count it in the hour it
            -- is read in). Cut here as the join reads them, not staged: nothing else reads them, and a table of a
            -- row per sample, written and read back, cost as much as the cut (docs/benchmarks.md "Round 11")
            FROM (WITH
                      toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
                      toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1
                  SELECT cluster, node, gpu, hpc_job, hour, greatest(es, hour) AS ps, least(ts, hour + 3600) AS pe,
                         step, e_j, c_j, toStartOfHour(ts) > hour AS nxt
                  FROM (SELECT g.cluster AS cluster, g.node AS node, g.gpu AS gpu, g.hpc_job AS hpc_job, g.es AS es,
                               g.ts AS ts, toFloat64(toInt64(g.ts) - toInt64(g.es)) AS step,
                               if(h.has_counter, toFloat64(ifNull(g.energy_j, 0)), h.power_avg * step) AS e_j,
                               if(h.has_counter, toFloat64(ifNull(g.energy_j, 0)), 0.) AS c_j
                        FROM _rsh_g AS g
                        INNER JOIN _rsh_gh AS h ON h.cluster = g.cluster AND h.node = g.node AND h.gpu = g.gpu
                                                AND h.th = toStartOfHour(g.ts))
                  ARRAY JOIN hours_touched(es, ts) AS hour
                  WHERE hour >= w0 AND hour < w1 AND step > 0) AS e
            INNER JOIN _rsh_ident AS i ON i.cluster = e.cluster AND i.node = e.node AND i.hour = e.hour
                                      AND i.gpu = e.gpu
            WHERE e.pe > i.hs AND e.ps < i.he)
      GROUP BY cluster, hour, node, job_id, submit_ts, mine, nxt)
GROUP BY cluster, hour, node, job_id, submit_ts;

DROP TEMPORARY TABLE _rsh_g, _rsh_gh;

-- the rows of the window, staged, so that the old rows are deleted only where some are not written again: a
-- lightweight DELETE of the touched node-hours' rows rewrote the row mask of the month's part every night,
-- though every row it matched was written again (0.3-0.5 s of a night's 3.8 s refresh on the loaded machine,
-- docs/benchmarks.md "Issue 50", round 3)
CREATE TEMPORARY TABLE _rsh_new ENGINE = Memory AS
WITH
own AS (
    SELECT cluster, hour, node, job_id, submit_ts, any(a) / uniqExact(gpu) AS k, sum(o * mine) AS seen,
           -- (sum(if()), not sumIf: the engine makes sumIf over the joined rows Nullable, NULL where none is busy)
           sum(if(mine AND util_pct >= {idle_util_pct:Float64}, o, 0)) AS busy_s,
           sum(o * mine * util_pct / 100) AS util_s,
           sum(o * mine * sm) AS sm_s, sum(o * mine * tensor) AS tensor_s, sum(o * mine * dram) AS dram_s,
           -- the other jobs' readings in the run's time: the node-hour's sums count them (migration 0024)
           sum(o * (1 - mine)) AS other_s, sum(if(NOT mine AND util_pct >= {idle_util_pct:Float64}, o, 0)) AS other_busy_s
    FROM _rsh_own_piece
    GROUP BY cluster, hour, node, job_id, submit_ts
),
-- what the identified runs took of each step piece of the node (GPU-seconds, and their busy and active parts)
claimed AS (
    SELECT cluster, node, hour, ts, sum(o) AS cl, sum(if(util_pct >= {idle_util_pct:Float64}, o, 0)) AS cl_busy,
           sum(o * util_pct / 100) AS cl_util, sum(o * sm) AS cl_sm, sum(o * tensor) AS cl_tensor,
           sum(o * dram) AS cl_dram
    FROM _rsh_own_piece
    WHERE mine
    GROUP BY cluster, node, hour, ts
),
-- 'node share': the node's step pieces less what the identified runs took: r sampled GPU-seconds left, of
-- which busy_left busy (and the activities alike), shared by the runs no label names
node_piece AS (
    SELECT n.cluster AS cluster, n.node AS node, n.hour AS hour, n.ts AS ts, n.ps AS ps, n.pe AS pe,
           toFloat64(toInt64(n.pe) - toInt64(n.ps)) AS l,
           greatest(0., n.n * l - ifNull(c.cl, 0)) AS r,
           greatest(0., n.nb * l - ifNull(c.cl_busy, 0)) AS busy_left,
           greatest(0., n.u * l - ifNull(c.cl_util, 0)) AS util_left,
           greatest(0., n.sm * l - ifNull(c.cl_sm, 0)) AS sm_left,
           greatest(0., n.tensor * l - ifNull(c.cl_tensor, 0)) AS tensor_left,
           greatest(0., n.dram * l - ifNull(c.cl_dram, 0)) AS dram_left
    FROM (SELECT cluster, node, hour, ts, min(ps) AS ps, max(pe) AS pe, toFloat64(count()) AS n,
                 toFloat64(sum(if(util_pct >= {idle_util_pct:Float64}, 1, 0))) AS nb, sum(util_pct) / 100 AS u,
                 sum(sm) AS sm, sum(tensor) AS tensor, sum(dram) AS dram
          FROM _rsh_piece GROUP BY cluster, node, hour, ts) AS n
    LEFT JOIN claimed AS c ON c.cluster = n.cluster AND c.node = n.node AND c.hour = n.hour AND c.ts = n.ts
),
unnamed AS (
    SELECT f.* FROM _rsh_fan AS f
    LEFT ANTI JOIN (SELECT DISTINCT cluster, hour, node, job_id, submit_ts FROM _rsh_ident) AS i
        ON i.cluster = f.cluster AND i.hour = f.hour AND i.node = f.node AND i.job_id = f.job_id
       AND i.submit_ts = f.submit_ts
),
held_at AS (
    SELECT f.cluster AS cluster, f.hour AS hour, f.node AS node, f.job_id AS job_id, f.submit_ts AS submit_ts,
           n.ts AS ts, f.a AS a, f.a * toFloat64(overlap_s(n.ps, n.pe, f.hs, f.he)) AS ao, n.l AS l, n.r AS r,
           n.busy_left AS busy_left, n.util_left AS util_left, n.sm_left AS sm_left, n.tensor_left AS tensor_left,
           n.dram_left AS dram_left
    FROM node_piece AS n
    INNER JOIN unnamed AS f ON f.cluster = n.cluster AND f.node = n.node AND f.hour = n.hour
    WHERE n.pe > f.hs AND n.ps < f.he
),
-- h: the runs' GPU time in the piece; c: the GPUs they held at once (their mean over the piece, at least the
-- largest run's); the busy time left goes to the runs over the GPU time they could hold (the sampled time
-- left, at most c × l), never more than they held: unallocated GPUs do no work
shared AS (
    SELECT cluster, hour, node, job_id, submit_ts,
           sum(ao * least(1., r / h)) AS seen,
           sum(ao * least(1., busy_left / d)) AS busy_s,
           sum(ao * least(1., util_left / d)) AS util_s,
           sum(ao * least(1., sm_left / d)) AS sm_s,
           sum(ao * least(1., tensor_left / d)) AS tensor_s,
           sum(ao * least(1., dram_left / d)) AS dram_s
    FROM (SELECT *, greatest(h, least(r, greatest(h / l, max(a) OVER (PARTITION BY cluster, node, hour, ts)) * l)) AS d
          FROM (SELECT *, sum(ao) OVER (PARTITION BY cluster, node, hour, ts) AS h FROM held_at WHERE ao > 0))
    GROUP BY cluster, hour, node, job_id, submit_ts
)
SELECT o.cluster, o.hour, o.node, o.job_id, o.submit_ts, 'gpu', o.seen * o.k, o.busy_s * o.k, o.util_s * o.k,
       o.sm_s * o.k, o.tensor_s * o.k, o.dram_s * o.k, o.other_s * o.k, o.other_busy_s * o.k, e.own_j, e.own_c,
       e.other_j, e.next_j, e.next_c, e.other_next_j, {idle_util_pct:Float64}, now64(3)
FROM own AS o
LEFT JOIN _rsh_energy AS e ON e.cluster = o.cluster AND e.hour = o.hour AND e.node = o.node AND e.job_id = o.job_id
                          AND e.submit_ts = o.submit_ts
UNION ALL
SELECT cluster, hour, node, job_id, submit_ts, 'node share', seen, busy_s, util_s, sm_s, tensor_s, dram_s, 0., 0.,
       CAST(NULL AS Nullable(Float64)), 0., 0., 0., 0., 0., {idle_util_pct:Float64}, now64(3)
FROM shared;

-- a guard (etl/grains.py runs the statement after a SELECT only where it returns true): whether an old row of
-- the touched node-hours is not written again. Most nights none is (the hour before the night's day, written
-- again as it was), and the DELETE is skipped. (A DELETE cannot name the session's temporary tables: the
-- engine runs it as a mutation, outside the session.)
SELECT count() > 0 FROM run_sample_hour
WHERE hour >= toDateTime({from_ts:DateTime('UTC')}, 'UTC') AND hour < toDateTime({to_ts:DateTime('UTC')}, 'UTC')
  AND (cluster, node, hour) IN (SELECT cluster, node, hour FROM _rsh_touched)
  AND (cluster, hour, node, job_id, submit_ts) NOT IN (SELECT cluster, hour, node, job_id, submit_ts FROM _rsh_new);

-- then every old row of the touched node-hours goes (those written again as well: they are written next)
DELETE FROM run_sample_hour
WHERE hour >= toDateTime({from_ts:DateTime('UTC')}, 'UTC') AND hour < toDateTime({to_ts:DateTime('UTC')}, 'UTC')
  AND (cluster, node, hour) IN (
      SELECT DISTINCT cluster, node, hour FROM gpu_sample
      ARRAY JOIN hours_touched(ts, addSeconds(ts, step_s)) AS hour
      WHERE ts >= toDateTime({from_ts:DateTime('UTC')}, 'UTC') - toIntervalHour(1)
        AND ts < toDateTime({to_ts:DateTime('UTC')}, 'UTC'));

INSERT INTO run_sample_hour (cluster, hour, node, job_id, submit_ts, attribution, observed_gpu_s, busy_gpu_s,
    util_gpu_s, sm_gpu_s, tensor_gpu_s, dram_gpu_s, other_job_gpu_s, other_job_busy_gpu_s, gpu_energy_j,
    gpu_counter_energy_j, other_job_energy_j, next_hour_energy_j, next_hour_counter_j, other_next_hour_j,
    idle_util_pct, refreshed_at)
SELECT * FROM _rsh_new;

DROP TEMPORARY TABLE IF EXISTS _rsh_fan, _rsh_piece, _rsh_ident, _rsh_own_piece, _rsh_touched, _rsh_new,
    _rsh_energy;
