-- Per run of {project} ('' for the whole cluster; {job_id} set: that job id's runs alone, requeues included),
-- node and GPU the run held in [from_ts, to_ts): what each GPU did while the run held it, the figures
-- `ops-report job` shows per GPU and the users' GPU-memory efficiency is pooled from (docs/efficiency.md).
--   which GPUs  'gpu' (attribution) when dcgm-exporter's hpc_job label names the run's job id (job_id_raw) on
--               a GPU of the node at a sample inside the run: those GPUs, exact on a shared node, without the
--               readings another job's label names (the previous job's last sample, whose step reaches past
--               the run's start, says what that job did). Otherwise
--               'node share': sacct gives no GPU indices, so every GPU of the node that has telemetry in the
--               run's time, each standing for its share: exact for a run holding the whole node.
--   grain       'sample': gpu_sample, each sample standing for its step [ts, ts + step_s) (run_sample_hour's
--               rule), cut at the run's edges; 'hour': gpu_hour where the run's node has no sample in the run's
--               time (the fine samples expired, fine_ttl_days): each hour's means weighted by the part of the
--               hour the run held, always 'node share' (the hourly grain keeps no hpc_job label). Chosen per
--               run and node: samples wherever the node has any in the run's time.
-- Columns (one row per run × node × GPU):
--   job_id, submit_ts, user, account, node, gpu, attribution, grain
--   held_s          the run's time on the node inside the window (seconds)
--   observed_s      the part of it this GPU's telemetry covers (samples' steps; hours' covered seconds)
--   gpu_h           the run's GPU time on the node spread over the GPUs listed: held_s × its GPUs on the node
--                   (sacct's even spread) ÷ the GPUs listed there ÷ 3600, so a run's rows sum to its GPU-hours
--   util_mean_pct   time-weighted mean GPU utilization (%), over observed_s
--   util_peak_pct   the highest sample taken while the run held the GPU (a run shorter than a step: of the
--                   sample whose step covers it; at the hour grain: the highest hourly mean)
--   sm_active, tensor_active, dram_active   time-weighted mean activity (0-1)
--   fb_peak_mib     the highest GPU memory used, of those samples alike (at the hour grain: the highest of the
--                   hours the run touched,
--                   which may be a neighbour's in a shared hour)
--   fb_total_mib    the GPU's memory, used + free (sample grain; NULL at the hour grain, which keeps no free)
--   power_mean_w    time-weighted mean power
--   energy_kwh      the GPU's energy counter over the run's part of each step (the counter's step is the one
--                   ending at ts), else power × time; × the run's share where it shares the GPU
--   throttled_s     the run's time on the GPU with a throttle reason (sql/functions/gpu_is_throttled.sql)
--- [mart]
--- grain = "one row per run, node and GPU it held in the window"
--- scope = "project"
--- parameters = { job_id = "" }
--- columns = ["job_id", "submit_ts", "user", "account", "node", "gpu", "attribution", "grain", "held_s", "observed_s", "gpu_h", "util_mean_pct", "util_peak_pct", "sm_active", "tensor_active", "dram_active", "fb_peak_mib", "fb_total_mib", "power_mean_w", "energy_kwh", "throttled_s"]
--- user_columns = ["user"]
WITH
-- the runs' parts of each node-hour, [hs, he) (the fan-out every grain uses), of the job or the project: formed
-- once, as one scalar the engine computes once per statement (a CTE is evaluated at each use, and each use
-- read fct_job_run's view, FINAL and its join, again)
(SELECT groupArray((cluster, job_id, submit_ts, toString(job_id_raw), account, node, hour,
                    toFloat64(gpus_per_node), greatest(s, hour), least(e, hour + 3600), run_start_ts, run_end_ts))
 FROM ({{intermediate run_fanout}})
 WHERE cluster = {cluster:String}
   AND ({job_id:String} = '' OR job_id = {job_id:String})
   AND ({project:String} = '' OR project = {project:String})) AS fan_rows,
fan AS (
    SELECT t.1 AS cluster, t.2 AS job_id, t.3 AS submit_ts, t.4 AS raw_id, t.5 AS account, t.6 AS node,
           t.7 AS hour, t.8 AS a, t.9 AS hs, t.10 AS he, t.11 AS run_start_ts, t.12 AS run_end_ts
    FROM (SELECT arrayJoin(fan_rows) AS t)
),
held AS (
    SELECT job_id, submit_ts, node, any(raw_id) AS raw_id, any(account) AS account, any(a) AS a,
           sum(toInt64(he) - toInt64(hs)) AS held_s, min(hs) AS s0, max(he) AS s1,
           any(run_start_ts) AS run_start_ts, any(run_end_ts) AS run_end_ts
    FROM fan GROUP BY job_id, submit_ts, node
),
-- each sample of the runs' nodes cut at the run-hours its step (gauges) or the step ending at it (the energy
-- counter) reaches: one piece per sample and hour, o and oe its overlaps (a sample's figures are the sums of its
-- pieces'). Read once: every figure below is a sum, a max or an existence over these pieces, so the GPUs'
-- figures are aggregated from them in one pass rather than per sample first and joined back
pieces AS (
    SELECT f.job_id AS job_id, f.submit_ts AS submit_ts, f.node AS node, g.gpu AS gpu, g.ts AS ts,
           g.step_s AS step_s, g.hpc_job AS hpc_job, f.raw_id AS raw_id,
           toFloat64(overlap_s(g.ts, addSeconds(g.ts, g.step_s), f.hs, f.he)) AS o,
           toFloat64(overlap_s(subtractSeconds(g.ts, g.step_s), g.ts, f.hs, f.he)) AS oe,
           -- a reading taken while the run held the GPU (the peaks are of those, where there are any)
           g.ts >= f.run_start_ts AND g.ts < f.run_end_ts AS inside,
           g.gpu_util_pct AS util, g.sm_active AS sm, g.tensor_active AS tensor, g.dram_active AS dram,
           g.fb_used_mib AS fb_used, g.fb_free_mib AS fb_free, g.power_w AS power_w, g.energy_j AS energy_j,
           g.throttle_reasons AS throttle
    FROM (SELECT cluster, node, gpu, ts, step_s, hpc_job, gpu_util_pct, sm_active, tensor_active, dram_active,
                 fb_used_mib, fb_free_mib, power_w, energy_j, throttle_reasons, hour
          FROM gpu_sample FINAL
          ARRAY JOIN hours_touched(subtractSeconds(ts, step_s), addSeconds(ts, step_s)) AS hour
          WHERE cluster = {cluster:String}
            AND ts >= {from_ts:DateTime('UTC')} - toIntervalHour(1) AND ts < {to_ts:DateTime('UTC')} + toIntervalHour(1)
            -- and the runs' own span (constants once fan_rows is computed: the day partitions and the
            -- (cluster, node, gpu, ts) index skip the rest of the window)
            AND ts >= arrayMin(arrayMap(t -> t.9, fan_rows)) - toIntervalHour(1)
            AND ts < arrayMax(arrayMap(t -> t.10, fan_rows)) + toIntervalHour(1)
            AND (cluster, node) IN (SELECT {cluster:String}, node FROM held)) AS g
    INNER JOIN fan AS f ON f.cluster = g.cluster AND f.node = g.node AND f.hour = g.hour
    WHERE o > 0 OR oe > 0
),
-- per run, node and GPU, twice: mode 0 every reading, mode 1 without the readings another job's label names
-- (on the GPUs the labels name, such a reading is that job's: the one before the run's start, whose step
-- reaches into it); labelled: the run's job id labels the GPU at a sample inside the run
per_gpu AS (
    SELECT job_id, submit_ts, node, gpu, mode,
           countIf(hpc_job = raw_id AND inside) > 0 AS labelled,
           sum(if(util IS NULL, 0, o)) AS observed_s,
           sum(o * ifNull(util, 0)) / nullIf(sum(if(util IS NULL, 0, o)), 0) AS util_mean_pct,
           if(countIf(inside AND util IS NOT NULL) > 0, maxIf(util, inside), maxIf(util, o > 0)) AS util_peak_pct,
           sum(o * ifNull(sm, 0)) / nullIf(sum(if(sm IS NULL, 0, o)), 0) AS sm_active,
           sum(o * ifNull(tensor, 0)) / nullIf(sum(if(tensor IS NULL, 0, o)), 0) AS tensor_active,
           sum(o * ifNull(dram, 0)) / nullIf(sum(if(dram IS NULL, 0, o)), 0) AS dram_active,
           if(countIf(inside AND fb_used IS NOT NULL) > 0, maxIf(fb_used, inside), maxIf(fb_used, o > 0))
               AS fb_peak_mib,
           maxIf(fb_used + fb_free, o > 0) AS fb_total_mib,
           sum(o * ifNull(power_w, 0)) / nullIf(sum(if(power_w IS NULL, 0, o)), 0) AS power_mean_w,
           sum(if(energy_j IS NOT NULL, energy_j * oe / step_s, ifNull(power_w, 0) * o)) / 3.6e6 AS gpu_energy_kwh,
           sum(if(gpu_is_throttled(throttle), o, 0)) AS throttled_s
    FROM pieces
    ARRAY JOIN if(reading_is_runs(hpc_job, raw_id), [0, 1], [0]) AS mode
    GROUP BY job_id, submit_ts, node, gpu, mode
),
-- per run and node: the GPUs its job id labels inside the run ('gpu', their own readings), else every GPU
-- seen ('node share', every reading)
by_sample AS (
    SELECT job_id, submit_ts, node, gpu, if(node_labelled, 'gpu', 'node share') AS attribution,
           'sample' AS grain, observed_s, util_mean_pct, util_peak_pct, sm_active, tensor_active, dram_active,
           fb_peak_mib, fb_total_mib, power_mean_w, gpu_energy_kwh, throttled_s
    FROM (SELECT *, max(labelled) OVER (PARTITION BY job_id, submit_ts, node) AS node_labelled FROM per_gpu)
    WHERE if(node_labelled, mode = 1 AND labelled, mode = 0)
),
-- the hourly grain, of every run-node; kept below where the run's node has no sample in its time
by_hour AS (
    SELECT f.job_id AS job_id, f.submit_ts AS submit_ts, f.node AS node, h.gpu AS gpu,
           'node share' AS attribution, 'hour' AS grain,
           sum((toInt64(f.he) - toInt64(f.hs)) * least(1., h.covered_s / 3600)) AS observed_s,
           sum((toInt64(f.he) - toInt64(f.hs)) * ifNull(h.gpu_util_pct_avg, 0))
               / nullIf(sum(if(h.gpu_util_pct_avg IS NULL, 0, toInt64(f.he) - toInt64(f.hs))), 0) AS util_mean_pct,
           max(h.gpu_util_pct_avg) AS util_peak_pct,
           sum((toInt64(f.he) - toInt64(f.hs)) * ifNull(h.sm_active_avg, 0))
               / nullIf(sum(if(h.sm_active_avg IS NULL, 0, toInt64(f.he) - toInt64(f.hs))), 0) AS sm_active,
           sum((toInt64(f.he) - toInt64(f.hs)) * ifNull(h.tensor_active_avg, 0))
               / nullIf(sum(if(h.tensor_active_avg IS NULL, 0, toInt64(f.he) - toInt64(f.hs))), 0) AS tensor_active,
           sum((toInt64(f.he) - toInt64(f.hs)) * ifNull(h.dram_active_avg, 0))
               / nullIf(sum(if(h.dram_active_avg IS NULL, 0, toInt64(f.he) - toInt64(f.hs))), 0) AS dram_active,
           max(h.fb_used_mib_max) AS fb_peak_mib,
           CAST(NULL AS Nullable(Float64)) AS fb_total_mib,
           sum((toInt64(f.he) - toInt64(f.hs)) * ifNull(h.power_w_avg, 0))
               / nullIf(sum(if(h.power_w_avg IS NULL, 0, toInt64(f.he) - toInt64(f.hs))), 0) AS power_mean_w,
           sum((toInt64(f.he) - toInt64(f.hs)) / 3600
               * ifNull(h.energy_j, ifNull(h.power_w_avg, 0) * h.covered_s)) / 3.6e6 AS gpu_energy_kwh,
           sum((toInt64(f.he) - toInt64(f.hs)) / 3600 * h.throttled_s) AS throttled_s
    FROM fan AS f
    INNER JOIN (SELECT * FROM gpu_hour FINAL WHERE cluster = {cluster:String}
                AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}) AS h
        ON h.cluster = f.cluster AND h.node = f.node AND h.hour = f.hour
    GROUP BY job_id, submit_ts, node, gpu
),
-- samples wherever the run's node has any in its time, else hours; listed: the GPUs kept for the run-node
gpus AS (
    SELECT *, count() OVER (PARTITION BY job_id, submit_ts, node) AS listed
    FROM (SELECT *, countIf(grain = 'sample') OVER (PARTITION BY job_id, submit_ts, node) AS sampled_gpus
          FROM (SELECT * FROM by_sample UNION ALL SELECT * FROM by_hour))
    WHERE grain = 'sample' OR sampled_gpus = 0
)
SELECT g.job_id AS job_id, g.submit_ts AS submit_ts, r.user AS user, h.account AS account, g.node AS node,
       g.gpu AS gpu, g.attribution AS attribution, g.grain AS grain, h.held_s AS held_s,
       g.observed_s AS observed_s,
       h.held_s * h.a / g.listed / 3600 AS gpu_h,
       g.util_mean_pct AS util_mean_pct, toFloat64(g.util_peak_pct) AS util_peak_pct,
       g.sm_active AS sm_active, g.tensor_active AS tensor_active, g.dram_active AS dram_active,
       toFloat64(g.fb_peak_mib) AS fb_peak_mib, toFloat64(g.fb_total_mib) AS fb_total_mib,
       g.power_mean_w AS power_mean_w,
       -- the run's share of a GPU it shared (its GPUs on the node fewer than those listed)
       g.gpu_energy_kwh * least(1., h.a / g.listed) AS energy_kwh,
       g.throttled_s AS throttled_s
FROM gpus AS g
INNER JOIN held AS h ON h.job_id = g.job_id AND h.submit_ts = g.submit_ts AND h.node = g.node
INNER JOIN (SELECT job_id, submit_ts, user FROM fct_job_run WHERE cluster = {cluster:String}
            AND ({job_id:String} = '' OR job_id = {job_id:String})) AS r
    ON r.job_id = g.job_id AND r.submit_ts = g.submit_ts
ORDER BY job_id, submit_ts, node, gpu
SETTINGS join_use_nulls = 0;
