-- Whether [from_ts, to_ts) still has per-sample GPU telemetry (gpu_sample), which hung_jobs.sql reads:
-- the hourly rollups outlive it when [telemetry] fine_ttl_days is set, so a month past it has no hangs to
-- find, and "no hung jobs" there means "unknown", not "none". One row:
--   covered          1 when the window has at least one GPU sample of the cluster
--   first_sample_ts  the first and last sample time in the window (NULL when none): hangs are looked for
--   last_sample_ts   between them only
--   step_s           the longest sampling step in the window (a hang's length is exact to within one)
--- [mart]
--- grain = "one row: whether per-sample telemetry covers the window"
--- scope = "cluster"
--- report = 20
--- columns = ["covered", "first_sample_ts", "last_sample_ts", "step_s"]
--- export = 20
SELECT toUInt8(count() > 0) AS covered,
       if(covered = 1, min(ts), NULL) AS first_sample_ts,
       if(covered = 1, max(ts), NULL) AS last_sample_ts,
       if(covered = 1, max(step_s), NULL) AS step_s
FROM gpu_sample
WHERE cluster = {cluster:String} AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')};
