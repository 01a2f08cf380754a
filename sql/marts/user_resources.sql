-- Per user of {project} ('' for the whole cluster) in [from_ts, to_ts): how much of the GPUs' memory, the CPUs
-- and the memory their GPU runs used (issue 52, `ops-report users`, beside user_efficiency.sql's utilization;
-- apart from it because these read every GPU sample and sacct step of the runs, the cost the monthly report's
-- users section does not pay: docs/benchmarks.md). Pooled over the runs, never a mean of their ratios.
--   gpu_mem_eff          GPU-memory efficiency (0-1): each GPU's peak memory used ÷ its memory (run_gpus.sql's
--                        fb_peak_mib ÷ fb_total_mib), pooled by the GPU-hours of the rows that have both;
--                        NULL where none has (the hourly grain keeps no free memory). Job Defense Shield's
--                        2025 addition: a run asking for 8 GPUs for the memory of one shows it here
--   cpu_eff              CPU efficiency from sacct (0-1): Σ the runs' CPU time (their steps' TotalCPU) ÷ Σ
--                        their CPUs × wall time, over the runs whose steps carry TotalCPU (job_detail.sql's
--                        per-run figure, pooled); NULL where none does. CPU and memory are the whole runs'
--                        (sacct's totals), of the runs with GPU time in the window
--   mem_eff              memory efficiency (0-1): Σ the runs' largest step MaxRSS ÷ Σ their requested memory
--                        (job_detail.sql's mem_eff, pooled by the request), over the runs with both
--- [mart]
--- grain = "one row per user with GPU runs in the window"
--- scope = "project"
--- columns = ["user", "gpu_mem_eff", "cpu_eff", "mem_eff"]
--- user_columns = ["user"]
WITH
-- per run, its GPUs' peak memory ÷ their memory, summed by GPU-hours, and those GPU-hours
memory AS (
    SELECT job_id, submit_ts,
           sumIf(gpu_h * fb_peak_mib / fb_total_mib, fb_total_mib > 0 AND fb_peak_mib IS NOT NULL) AS fb_gpu_h,
           sumIf(gpu_h, fb_total_mib > 0 AND fb_peak_mib IS NOT NULL) AS fb_seen_gpu_h
    FROM ({{mart run_gpus}})
    GROUP BY job_id, submit_ts
),
-- per run, from sacct: CPU time and CPU-seconds held, peak memory and the memory requested
sacct AS (
    SELECT job_id, submit_ts, cpu_time_s,
           if(cpu_time_s IS NULL, NULL, toFloat64(ncpus) * wall_s) AS cpu_held_s,
           if(mem_eff IS NULL, NULL, max_rss_mib) AS rss_mib,
           if(mem_eff IS NULL, NULL, req_mem_mib) AS req_mib
    FROM ({{mart job_detail}})
),
runs AS (SELECT job_id, submit_ts, user FROM ({{mart job_detail}}) WHERE gpus > 0)
SELECT r.user AS user,
       sum(ifNull(m.fb_gpu_h, 0)) / nullIf(sum(ifNull(m.fb_seen_gpu_h, 0)), 0) AS gpu_mem_eff,
       sum(c.cpu_time_s) / nullIf(sum(c.cpu_held_s), 0) AS cpu_eff,
       sum(c.rss_mib) / nullIf(sum(c.req_mib), 0) AS mem_eff
FROM runs AS r
LEFT JOIN memory AS m ON m.job_id = r.job_id AND m.submit_ts = r.submit_ts
LEFT JOIN sacct AS c ON c.job_id = r.job_id AND c.submit_ts = r.submit_ts
GROUP BY r.user
ORDER BY user
SETTINGS join_use_nulls = 1;
