-- The notes an expert would make on the runs of job {job_id} ('' every run of {project}) in [from_ts, to_ts),
-- each with its figure, for `ops-report job` (docs/efficiency.md). One row per note; a run with nothing to
-- say has none. The rules are the marts' own, included, never restated:
--   idle_gpu       a GPU of the run (run_gpus.sql) whose mean utilization over the run was under the idle
--                  threshold ({idle_util_pct}, the config's [reports] idle_util_pct), seen for {idle_min_minutes}
--                  or more: idle_gpu_jobs.sql's rule for a run, per GPU (its mean, not its peak: an idle GPU's
--                  samples read a few percent of noise): figure its mean utilization (%), detail node and GPU
--   cpu_bound      the run's GPUs pooled under {cpu_bound_util_pct} % busy while its CPUs were
--                  {cpu_bound_cpu_eff} or more busy (job_detail.sql's cpu_eff), seen {idle_min_minutes} or more:
--                  the GPUs wait on the CPUs (data loading, preprocessing): figure the CPU efficiency (%),
--                  detail the GPU utilization
--   low_gpu_memory the run's GPU that used the most memory used under {gpu_mem_low_share} of it
--                  (job_detail.sql's fb_peak_share), seen for {idle_min_minutes} or more: figure that share in
--                  %; needs the sample grain (the hourly grain keeps no GPU memory total)
--   hang_at_end    the run is one of hung_jobs.sql's (its GPUs busy, then all idle with no network traffic
--                  for at least hung_jobs' hang_minutes until it was killed): figure the hang's minutes, no
--                  threshold of its own (hung_jobs' is its declaration's)
--   node_behind    stragglers.sql's rule on the run's own GPUs: a node of a run on 2+ nodes whose GPU
--                  utilization (run_gpus, pooled over its GPUs) is under {behind_ratio} of the median of the
--                  run's nodes: figure its utilization ÷ the median, detail the node
--   no_checkpoint  an interrupted run (not COMPLETED: a completed run loses nothing) of {no_ckpt_hours} hours
--                  or more with node samples and no checkpoint seen (run_telemetry's last_ckpt_ts: a node
--                  wrote [reports] ckpt_write_bytes_per_s or more to Lustre, sql/intermediate/run_telemetry.sql):
--                  figure its hours
--   long_wait      the run waited longer than the 90th percentile of the jobs of its size class started in
--                  the window (run_times.sql's wait_p90_s): figure its wait in hours, detail the p90
-- Why cpu_bound_util_pct = 30, cpu_bound_cpu_eff = 0.8: GPUs under 30 % are the issue's CPU-bound run, and a job's
-- CPUs over 80 % busy are the bottleneck (a GPU job's CPUs mostly wait).
-- Why gpu_mem_low_share = 0.1: Job Defense Shield's GPU-memory alert; no_ckpt_hours = 12: a run that long
-- with no checkpoint loses half a day when a node fails.
--- [mart]
--- grain = "one row per note on a run of the job"
--- scope = "project"
--- parameters = { job_id = "", idle_min_minutes = 60, cpu_bound_util_pct = 30, cpu_bound_cpu_eff = 0.8, gpu_mem_low_share = 0.1, behind_ratio = 0.8, no_ckpt_hours = 12 }
--- columns = ["job_id", "submit_ts", "note", "figure", "unit", "threshold", "detail"]
WITH
detail AS (SELECT * FROM ({{mart job_detail}})),
per_node AS (
    SELECT job_id, submit_ts, node,
           sum(observed_s * util_mean_pct) / nullIf(sumIf(observed_s, util_mean_pct IS NOT NULL), 0) AS util
    FROM ({{mart run_gpus}})
    GROUP BY job_id, submit_ts, node
),
rated AS (
    SELECT job_id, submit_ts, node, util,
           util / nullIf(median(util) OVER (PARTITION BY job_id, submit_ts), 0) AS vs_peers,
           count() OVER (PARTITION BY job_id, submit_ts) AS nodes_seen
    FROM per_node WHERE util IS NOT NULL
)
SELECT * FROM (
SELECT job_id, submit_ts, 'idle_gpu' AS note, toFloat64(util_mean_pct) AS figure, '%' AS unit,
       toFloat64({idle_util_pct:Float64}) AS threshold, concat(node, ' GPU ', toString(gpu)) AS detail
FROM ({{mart run_gpus}})
WHERE observed_s >= {idle_min_minutes:Float64} * 60 AND util_mean_pct < {idle_util_pct:Float64}
UNION ALL
SELECT job_id, submit_ts, 'cpu_bound', cpu_eff * 100, '%', {cpu_bound_cpu_eff:Float64} * 100,
       concat('GPUs ', toString(round(gpu_util_pct, 1)), ' % busy')
FROM detail
WHERE cpu_eff >= {cpu_bound_cpu_eff:Float64} AND gpu_util_pct < {cpu_bound_util_pct:Float64}
  AND (job_id, submit_ts) IN (SELECT job_id, submit_ts FROM ({{mart run_gpus}})
                              WHERE observed_s >= {idle_min_minutes:Float64} * 60)
UNION ALL
SELECT job_id, submit_ts, 'low_gpu_memory', fb_peak_share * 100, '%', {gpu_mem_low_share:Float64} * 100,
       concat(toString(round(fb_peak_mib)), ' of ', toString(round(fb_total_mib)), ' MiB')
FROM detail
WHERE fb_peak_share < {gpu_mem_low_share:Float64}
  AND (job_id, submit_ts) IN (SELECT job_id, submit_ts FROM ({{mart run_gpus}})
                              WHERE observed_s >= {idle_min_minutes:Float64} * 60)
UNION ALL
SELECT job_id, submit_ts, 'hang_at_end', hang_minutes, 'min', CAST(NULL AS Nullable(Float64)),
       concat('idle from ', toString(hang_start_ts))
FROM ({{mart hung_jobs}})
WHERE {job_id:String} = '' OR job_id = {job_id:String}
UNION ALL
SELECT job_id, submit_ts, 'node_behind', vs_peers, 'x median', {behind_ratio:Float64}, node
FROM rated
WHERE nodes_seen >= 2 AND vs_peers < {behind_ratio:Float64}
UNION ALL
SELECT d.job_id, d.submit_ts, 'no_checkpoint', d.wall_s / 3600, 'h', toFloat64({no_ckpt_hours:Float64}), d.state
FROM detail AS d
INNER JOIN (SELECT job_id, submit_ts, node_samples, last_ckpt_ts FROM run_telemetry FINAL
            WHERE cluster = {cluster:String} AND ({job_id:String} = '' OR job_id = {job_id:String})) AS t
    ON t.job_id = d.job_id AND t.submit_ts = d.submit_ts
WHERE d.state != 'COMPLETED' AND d.wall_s >= {no_ckpt_hours:Float64} * 3600 AND t.node_samples > 0
  AND t.last_ckpt_ts IS NULL
UNION ALL
SELECT d.job_id, d.submit_ts, 'long_wait', d.wait_s / 3600, 'h', w.wait_p90_s / 3600,
       concat('p90 of ', w.size_class, ' GPU jobs')
FROM detail AS d
INNER JOIN (SELECT size_class, wait_p90_s FROM ({{mart run_times}})) AS w ON w.size_class = gpu_size_class(d.gpus)
WHERE d.gpus > 0 AND d.wait_s > w.wait_p90_s
)
ORDER BY job_id, submit_ts, note, detail;
