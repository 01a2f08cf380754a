-- Per user of {project} ('' for the whole cluster) in [from_ts, to_ts): how much of the GPUs' memory, the CPUs
-- and the memory their GPU runs used (issue 52, `ops-report users`, beside user_efficiency.sql's utilization;
-- apart from it because these read every GPU sample and sacct step of the runs, the cost the monthly report's
-- users section does not pay: docs/benchmarks.md). Each is job_detail.sql's per-run figure pooled over the
-- user's runs, its numerators summed over its denominators' sum, never a mean of the runs' ratios: so a user
-- with one run reads what `ops-report job` says of it.
--   gpu_mem_eff          GPU-memory efficiency (0-1): each run's fb_peak_share (the peak memory used ÷ the
--                        memory of its GPU that used the most: job_notes.sql's low_gpu_memory figure), pooled
--                        by the runs' GPU-hours, over the runs that have it; NULL where none has (the hourly
--                        grain keeps no free memory). Job Defense Shield's 2025 addition: a run asking for 8
--                        GPUs for the memory of one shows it here
--   cpu_eff              CPU efficiency from sacct (0-1): Σ cpu_time_s (the steps' TotalCPU) ÷ Σ cpu_held_s
--                        (NCPUS × Elapsed), over the runs whose steps carry TotalCPU; NULL where none does.
--                        CPU and memory are the whole runs' (sacct's totals), of the runs with GPU time in the
--                        window
--   mem_eff              memory efficiency (0-1): Σ max_rss_mib (each run's largest step MaxRSS) ÷ Σ
--                        req_mem_mib (the whole request, every node's), over the runs with both
--- [mart]
--- grain = "one row per user with GPU runs in the window"
--- scope = "project"
--- columns = ["user", "gpu_mem_eff", "cpu_eff", "mem_eff"]
--- user_columns = ["user"]
SELECT user,
       sumIf(gpu_h * fb_peak_share, fb_peak_share IS NOT NULL)
           / nullIf(sumIf(gpu_h, fb_peak_share IS NOT NULL), 0) AS gpu_mem_eff,
       sumIf(cpu_time_s, cpu_time_s IS NOT NULL) / nullIf(sumIf(cpu_held_s, cpu_time_s IS NOT NULL), 0) AS cpu_eff,
       sumIf(max_rss_mib, mem_eff IS NOT NULL) / nullIf(sumIf(req_mem_mib, mem_eff IS NOT NULL), 0) AS mem_eff
FROM ({{mart job_detail}})
WHERE gpus > 0
GROUP BY user
ORDER BY user;
