-- The users of {project} ('' for the whole cluster) whose GPU waste in [from_ts, to_ts) is over a threshold:
-- who `ops-report digest` writes to (Job Defense Shield's alerts, offline and over the warehouse's history).
-- The thresholds are here and nowhere else, as this mart's parameters (their defaults the digest's):
--   waste_idle_gpu_h = 8      idle GPU-hours (user_efficiency.sql's idle_gpu_h: runs under the idle threshold
--                             for an hour or more) at or above it: a whole 8-GPU node held idle for an hour
--   waste_util_pct = 30       pooled GPU utilization (%) under it, over at least waste_min_gpu_h observed
--                             GPU-hours: the GPUs busy less than a third of the time they were held
--   waste_gpu_mem_eff = 0.1   GPU-memory efficiency under it (peak used ÷ the GPUs' memory, pooled), over at
--                             least waste_min_gpu_h: Job Defense Shield's 10 %, a run that would fit on
--                             fewer or smaller GPUs
--   waste_min_gpu_h = 8       the GPU-hours with telemetry a user needs before utilization or memory is
--                             judged: one node-hour, so a short test run alone never sends a message
-- reasons: which thresholds the user is over, in the order above ('idle', 'low_util', 'low_gpu_memory');
-- the other columns are user_efficiency.sql's and user_resources.sql's, worst user first (its rank).
--- [mart]
--- grain = "one row per user over a waste threshold"
--- scope = "project"
--- parameters = { waste_idle_gpu_h = 8.0, waste_util_pct = 30.0, waste_gpu_mem_eff = 0.1, waste_min_gpu_h = 8.0 }
--- columns = ["user", "runs", "gpu_h", "observed_gpu_h", "gpu_util_pct", "sm_active", "tensor_active", "dram_active", "idle_runs", "idle_gpu_h", "idle_share", "unbusy_gpu_h", "grade", "worst_job_ids", "worst_waste_gpu_h", "rank", "gpu_mem_eff", "cpu_eff", "mem_eff", "reasons"]
--- user_columns = ["user"]
SELECT *
FROM (
    SELECT e.*, r.gpu_mem_eff AS gpu_mem_eff, r.cpu_eff AS cpu_eff, r.mem_eff AS mem_eff,
           arrayFilter(x -> x != '', [
               if(idle_gpu_h >= {waste_idle_gpu_h:Float64}, 'idle', ''),
               if(observed_gpu_h >= {waste_min_gpu_h:Float64}
                  AND ifNull(gpu_util_pct < {waste_util_pct:Float64}, 0), 'low_util', ''),
               if(observed_gpu_h >= {waste_min_gpu_h:Float64}
                  AND ifNull(gpu_mem_eff < {waste_gpu_mem_eff:Float64}, 0), 'low_gpu_memory', '')]) AS reasons
    FROM ({{mart user_efficiency}}) AS e
    LEFT JOIN ({{mart user_resources}}) AS r ON r.user = e.user
    SETTINGS join_use_nulls = 1
)
WHERE notEmpty(reasons)
ORDER BY rank;
