-- Recompute run_telemetry (migration 0014) for the runs that ended and held GPUs on nodes over any of
-- [from_ts − 1 h, to_ts), every cluster, from the per-sample telemetry; etl/grains.py runs it with the hourly
-- grains, so a job load (a run ended or changed) and a telemetry load (its samples arrived) both reach it.
-- Each run is formed whole (all its samples, not only the window's), a row for a run with samples only.
--   checkpoints  node_sample rows of the run's nodes whose step (step_s before ts) overlaps the run, up to one
--                step after its end (a sample covers the step before it: a run shorter than a step has only
--                that one): node_samples; last_ckpt_ts the latest at which the node wrote
--                {ckpt_write_bytes_per_s} or more a second to Lustre (lustre_write_bytes ÷ step_s), placed at
--                the sample's time or the run's end, the earlier. Runs not ended COMPLETED only (a completed
--                run loses nothing).
--   start-up     GPU samples of the run's nodes in (start, start + 1 h] (or to its end): first_hour_gpu_samples,
--                and first_busy_ts, the first at which one of its nodes' GPUs reached {idle_util_pct} percent
--   hang         runs ended TIMEOUT, CANCELLED, FAILED or NODE_FAIL only: last_nic_busy_ts, the last node
--                sample in [start, end) at which its nodes moved {hang_nic_bytes_per_s} or more over their
--                NICs (received + transmitted over every NIC ÷ step_s); the run's GPU samples in [start, end)
--                from then on (its whole run when its NICs were never busy: any busy GPU sample before is
--                older), at each time the most active GPU of its nodes: last_gpu_busy_ts, the last at
--                {idle_util_pct}+ percent; last_busy_ts the later of the two; hang_start_ts the first GPU
--                sample time after it, idle_samples how many, last_gpu_ts the last, gpu_step_s the step.
--                Every GPU of each node counts: sacct does not say which GPUs of a shared node a run held, so
--                a busy neighbour keeps a run from counting as hung (never the other way round).
-- Each sample table is matched to the runs by a hash join on (cluster, node, hour): a tuple IN filter in
-- PREWHERE would not prune the sorting key (docs/benchmarks.md, "Hung and idle-GPU jobs").
--- [model]
--- kind = "incremental_by_time_range"
--- unit = "run"                      # every run overlapping the hours, formed whole from all its samples
--- grain = "hourly"
--- writes = ["run_telemetry"]
--- reads = ["fct_job_run", "node_sample", "gpu_sample"]
--- requires = ["node_sample", "gpu_sample"]  # either, in the runs' span: a row for a run with samples only
-- the runs, staged once in a temporary table of the session: the engine evaluates a CTE again wherever it is
-- named, and the runs (fct_job_run, a read of job_run FINAL) were named eleven times (docs/benchmarks.md,
-- "Issue 50")
DROP TEMPORARY TABLE IF EXISTS _rt_runs;

CREATE TEMPORARY TABLE _rt_runs ENGINE = Memory AS
SELECT cluster, job_id, submit_ts, state, nodes, assumeNotNull(start_ts) AS start_ts,
       assumeNotNull(end_ts) AS end_ts
FROM fct_job_run
WHERE NOT never_ran AND gpus > 0 AND length(nodes) > 0 AND start_ts IS NOT NULL AND end_ts IS NOT NULL
  -- (an hour before: a node sample up to one step after a run's end still covers its last part)
  AND end_ts + toIntervalHour(1) > {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')};

INSERT INTO run_telemetry (cluster, job_id, submit_ts, start_ts, end_ts, node_samples, last_ckpt_ts,
    first_hour_gpu_samples, first_busy_ts, last_nic_busy_ts, last_gpu_busy_ts, last_busy_ts, hang_start_ts,
    idle_samples, last_gpu_ts, gpu_step_s, idle_util_pct, hang_nic_bytes_per_s, ckpt_write_bytes_per_s, refreshed_at)
WITH
-- checkpoints: the interrupted runs' node samples
int_hours AS (
    SELECT cluster, job_id, submit_ts, start_ts, end_ts, node, hour
    FROM _rt_runs
    ARRAY JOIN nodes AS node
    ARRAY JOIN hours_touched(start_ts, end_ts + toIntervalHour(1)) AS hour
    WHERE state != 'COMPLETED'
),
ckpt AS (
    SELECT r.cluster AS c_cluster, r.job_id AS c_job_id, r.submit_ts AS c_submit_ts, count() AS node_samples,
           maxIf(toNullable(least(n.ts, r.end_ts)),
                 ifNull(n.lustre_write_bytes, 0) >= {ckpt_write_bytes_per_s:Float64} * n.step_s) AS last_ckpt_ts
    FROM (SELECT cluster, node, toStartOfHour(ts) AS hour, ts, step_s, lustre_write_bytes
          FROM node_sample FINAL
          PREWHERE ts > (SELECT min(start_ts) FROM int_hours)
               AND ts <= (SELECT max(end_ts) FROM int_hours) + toIntervalHour(1)) AS n
    INNER JOIN int_hours AS r ON r.cluster = n.cluster AND r.node = n.node AND r.hour = n.hour
    WHERE n.ts > r.start_ts AND toInt64(n.ts) - n.step_s < toInt64(r.end_ts)
    GROUP BY c_cluster, c_job_id, c_submit_ts
),
-- start-up: every run's first hour of GPU samples
first_hours AS (
    SELECT cluster, job_id, submit_ts, start_ts, first_hour_end_ts, node, hour
    FROM (SELECT *, least(end_ts, start_ts + toIntervalHour(1)) AS first_hour_end_ts FROM _rt_runs)
    ARRAY JOIN nodes AS node
    ARRAY JOIN hours_touched(start_ts, first_hour_end_ts) AS hour
),
startup AS (
    SELECT r.cluster AS s_cluster, r.job_id AS s_job_id, r.submit_ts AS s_submit_ts,
           uniqExact(g.ts) AS first_hour_gpu_samples,
           minIf(toNullable(g.ts), g.gpu_util_pct >= {idle_util_pct:Float64}) AS first_busy_ts
    FROM (SELECT cluster, node, toStartOfHour(ts) AS hour, ts, gpu_util_pct
          FROM gpu_sample FINAL
          PREWHERE ts > (SELECT min(start_ts) FROM first_hours)
               AND ts <= (SELECT max(first_hour_end_ts) FROM first_hours)
          WHERE gpu_util_pct IS NOT NULL) AS g
    INNER JOIN first_hours AS r ON r.cluster = g.cluster AND r.node = g.node AND r.hour = g.hour
    WHERE g.ts > r.start_ts AND g.ts <= r.first_hour_end_ts
    GROUP BY s_cluster, s_job_id, s_submit_ts
),
-- hangs: the candidates' last NIC-busy time, then their GPU samples from it on
candidates AS (
    SELECT * FROM _rt_runs WHERE state IN ('TIMEOUT', 'CANCELLED', 'FAILED', 'NODE_FAIL')
),
candidate_hours AS (
    SELECT cluster, job_id, submit_ts, start_ts, end_ts, node, hour
    FROM candidates
    ARRAY JOIN nodes AS node
    ARRAY JOIN hours_touched(start_ts, end_ts) AS hour
),
nic_busy AS (
    SELECT r.cluster AS cluster, r.job_id AS job_id, r.submit_ts AS submit_ts, max(n.ts) AS last_nic_busy_ts
    FROM (SELECT cluster, node, toStartOfHour(ts) AS hour, ts
          FROM node_sample FINAL
          PREWHERE ts >= (SELECT min(start_ts) FROM candidates) AND ts < (SELECT max(end_ts) FROM candidates)
          WHERE arraySum(nic_rx_bytes) + arraySum(nic_tx_bytes) >= {hang_nic_bytes_per_s:Float64} * step_s) AS n
    INNER JOIN candidate_hours AS r ON r.cluster = n.cluster AND r.node = n.node AND r.hour = n.hour
    WHERE n.ts >= r.start_ts AND n.ts < r.end_ts
    GROUP BY cluster, job_id, submit_ts
),
run_hours AS (
    SELECT cluster, job_id, submit_ts, from_ts, end_ts, last_nic_busy_ts, node, hour
    FROM (SELECT c.cluster AS cluster, c.job_id AS job_id, c.submit_ts AS submit_ts, c.end_ts AS end_ts,
                 c.nodes AS nodes, b.last_nic_busy_ts AS last_nic_busy_ts,
                 greatest(c.start_ts, ifNull(b.last_nic_busy_ts, c.start_ts)) AS from_ts
          FROM candidates AS c
          LEFT JOIN nic_busy AS b ON b.cluster = c.cluster AND b.job_id = c.job_id AND b.submit_ts = c.submit_ts)
    ARRAY JOIN nodes AS node
    ARRAY JOIN hours_touched(from_ts, end_ts) AS hour
),
samples AS (
    SELECT r.cluster AS cluster, r.job_id AS job_id, r.submit_ts AS submit_ts, g.ts AS ts,
           max(g.gpu_util_pct) AS util_pct, max(g.step_s) AS step_s, any(r.last_nic_busy_ts) AS last_nic_busy_ts
    FROM (SELECT cluster, node, toStartOfHour(ts) AS hour, ts, gpu_util_pct, step_s
          FROM gpu_sample FINAL
          PREWHERE ts >= (SELECT min(start_ts) FROM candidates) AND ts < (SELECT max(end_ts) FROM candidates)
          WHERE gpu_util_pct IS NOT NULL) AS g
    INNER JOIN run_hours AS r ON r.cluster = g.cluster AND r.node = g.node AND r.hour = g.hour
    WHERE g.ts >= r.from_ts AND g.ts < r.end_ts
    GROUP BY cluster, job_id, submit_ts, ts
),
hang AS (
    SELECT cluster AS h_cluster, job_id AS h_job_id, submit_ts AS h_submit_ts,
           maxIf(toNullable(ts), util_pct >= {idle_util_pct:Float64}) AS last_gpu_busy_ts,
           any(last_nic_busy_ts) AS h_last_nic_busy_ts,
           -- the later of the two, either where the other is NULL (whatever the server's greatest() does with NULL)
           greatest(coalesce(last_gpu_busy_ts, h_last_nic_busy_ts), coalesce(h_last_nic_busy_ts, last_gpu_busy_ts))
               AS last_busy_ts,
           max(ts) AS last_gpu_ts,
           max(step_s) AS gpu_step_s,
           arraySort(arrayFilter(t -> t > last_busy_ts, groupArray(ts))) AS after
    FROM samples
    GROUP BY h_cluster, h_job_id, h_submit_ts
)
SELECT r.cluster, r.job_id, r.submit_ts, r.start_ts, r.end_ts,
       toUInt32(ifNull(c.node_samples, 0)), c.last_ckpt_ts,
       toUInt32(ifNull(s.first_hour_gpu_samples, 0)), s.first_busy_ts,
       h.h_last_nic_busy_ts, h.last_gpu_busy_ts, h.last_busy_ts,
       if(length(h.after) > 0, toNullable(h.after[1]), NULL), toUInt32(length(h.after)),
       h.last_gpu_ts, toUInt32(ifNull(h.gpu_step_s, 0)),
       {idle_util_pct:Float64}, {hang_nic_bytes_per_s:Float64}, {ckpt_write_bytes_per_s:Float64}, now64(3)
FROM _rt_runs AS r
LEFT JOIN ckpt AS c ON c.c_cluster = r.cluster AND c.c_job_id = r.job_id AND c.c_submit_ts = r.submit_ts
LEFT JOIN startup AS s ON s.s_cluster = r.cluster AND s.s_job_id = r.job_id AND s.s_submit_ts = r.submit_ts
LEFT JOIN hang AS h ON h.h_cluster = r.cluster AND h.h_job_id = r.job_id AND h.h_submit_ts = r.submit_ts
WHERE c.c_job_id IS NOT NULL OR s.s_job_id IS NOT NULL OR h.h_job_id IS NOT NULL
SETTINGS join_use_nulls = 1;

DROP TEMPORARY TABLE IF EXISTS _rt_runs;
