-- The time series of each GPU a run of job {job_id} held, for the charts of `ops-report job --format html`:
-- one point per GPU sample whose step [ts, ts + step_s) overlaps the run (within [from_ts, to_ts)), or per hour
-- of gpu_hour where run_gpus.sql read the hourly grain (its rows say which GPUs, which grain). The GPUs are run_gpus'
-- own: the labelled ones ('gpu'), else every GPU of the node ('node share').
-- Columns: job_id, submit_ts, node, gpu, grain, point_ts (the sample's time, or the hour's start),
-- util_pct (the sample's, or the hour's mean), fb_used_mib (the hour's highest at the hour grain), power_w.
--- [mart]
--- grain = "one row per GPU of a run of the job and sample (or hour)"
--- scope = "project"
--- parameters = { job_id = "" }
--- columns = ["job_id", "submit_ts", "node", "gpu", "grain", "point_ts", "util_pct", "fb_used_mib", "power_w"]
WITH
gpus AS (
    SELECT g.job_id AS job_id, g.submit_ts AS submit_ts, g.node AS node, g.gpu AS gpu, g.grain AS grain,
           greatest(r.usage_start_ts, {from_ts:DateTime('UTC')}) AS s,
           least(r.usage_end_ts, {to_ts:DateTime('UTC')}) AS e
    FROM ({{mart run_gpus}}) AS g
    INNER JOIN (SELECT job_id, submit_ts, usage_start_ts, usage_end_ts FROM fct_job_run
                WHERE cluster = {cluster:String} AND ({job_id:String} = '' OR job_id = {job_id:String})) AS r
        ON r.job_id = g.job_id AND r.submit_ts = g.submit_ts
)
SELECT * FROM (
    SELECT g.job_id AS job_id, g.submit_ts AS submit_ts, g.node AS node, g.gpu AS gpu, g.grain AS grain,
           x.ts AS point_ts, toFloat64(x.gpu_util_pct) AS util_pct, toFloat64(x.fb_used_mib) AS fb_used_mib,
           toFloat64(x.power_w) AS power_w
    FROM gpus AS g
    INNER JOIN (SELECT node, gpu, ts, step_s, gpu_util_pct, fb_used_mib, power_w FROM gpu_sample FINAL
                WHERE cluster = {cluster:String} AND ts >= {from_ts:DateTime('UTC')} - toIntervalHour(1)
                  AND ts < {to_ts:DateTime('UTC')}
                  AND node IN (SELECT node FROM gpus WHERE grain = 'sample')) AS x
        ON x.node = g.node AND x.gpu = g.gpu
    WHERE g.grain = 'sample' AND addSeconds(x.ts, x.step_s) > g.s AND x.ts < g.e
    UNION ALL
    SELECT g.job_id, g.submit_ts, g.node, g.gpu, g.grain, h.hour, h.gpu_util_pct_avg, h.fb_used_mib_max,
           h.power_w_avg
    FROM gpus AS g
    INNER JOIN (SELECT node, gpu, hour, gpu_util_pct_avg, fb_used_mib_max, power_w_avg FROM gpu_hour FINAL
                WHERE cluster = {cluster:String} AND hour >= toStartOfHour({from_ts:DateTime('UTC')})
                  AND hour < {to_ts:DateTime('UTC')}
                  AND node IN (SELECT node FROM gpus WHERE grain = 'hour')) AS h
        ON h.node = g.node AND h.gpu = g.gpu
    WHERE g.grain = 'hour' AND h.hour + 3600 > g.s AND h.hour < g.e
)
ORDER BY job_id, submit_ts, node, gpu, point_ts;
