-- The runs of job {job_id} (every run of the id: requeues included; '' every run of {project}) that held
-- resources in [from_ts, to_ts): who, where, when, and how well it used its CPUs, memory and GPUs, for
-- `ops-report job` (docs/efficiency.md). The GPU figures pool sql/marts/run_gpus.sql's rows of the run:
-- GPU-hour weighted, never a mean of means.
--   wait_s          start − submit
--   cpu_time_s      the sum of the steps' TotalCPU (sacct adds the steps up for the job line; MaxRSS exists
--                   only on steps, migration 0022): steps of the same job id that started inside the run
--   cpu_held_s      NCPUS × sacct's Elapsed: the CPU-seconds the run held (cpu_eff's denominator, which
--                   user_resources.sql pools: one definition of CPU efficiency for a run and a user)
--   cpu_eff         cpu_time_s ÷ cpu_held_s: seff's and jobstats' CPU efficiency (0-1; NULL without
--                   steps carrying TotalCPU)
--   req_mem_mib     the memory the run was given: AllocTRES mem= (the job's total), else ReqMem read as
--                   Slurm prints it (a c suffix: per CPU × NCPUS; n: per node × nodes; none: the job's)
--   max_rss_mib     the largest MaxRSS of its steps (one task's peak resident memory)
--   mem_eff         max_rss_mib ÷ req_mem_mib, as the issue and seff define it on one node (MaxRSS is one
--                   task's peak: on several nodes a lower bound of the run's use)
--   gpu_h           GPU-hours in the window (run_gpus' rows summed: its GPUs × its time)
--   gpu_util_pct, sm_active, tensor_active, dram_active   pooled over its GPUs, weighted by observed time
--   util_peak_pct   the highest of its GPUs' peaks
--   fb_peak_mib, fb_total_mib, fb_peak_share   its GPUs' highest memory used, and the GPU's memory; the share
--                   (0-1) is of the GPU that used the most (NULL at the hour grain, which keeps no total)
--   energy_kwh, throttled_s   summed over its GPUs
--   grain           'sample', 'hour', or 'sample+hour' when its nodes were read at different grains; '' with
--                   no telemetry
--   attribution     'gpu' (hpc_job named its GPUs on every node), 'node share', or both '+'-joined
--- [mart]
--- grain = "one row per run of the job"
--- scope = "project"
--- parameters = { job_id = "" }
--- columns = ["job_id", "submit_ts", "run", "runs", "is_superseded", "user", "account", "project", "partition", "qos", "job_name", "state", "exit_code", "exit_signal", "start_ts", "end_ts", "wait_s", "wall_s", "timelimit_s", "nnodes", "nodes", "ncpus", "gpus", "gpu_type", "cpu_time_s", "cpu_held_s", "cpu_eff", "req_mem_mib", "max_rss_mib", "mem_eff", "gpu_h", "gpu_util_pct", "util_peak_pct", "sm_active", "tensor_active", "dram_active", "fb_peak_mib", "fb_total_mib", "fb_peak_share", "energy_kwh", "throttled_s", "grain", "attribution"]
--- user_columns = ["user"]
WITH
runs AS (
    SELECT cluster, job_id, submit_ts, is_superseded, user, account, project, partition, qos, job_name, state,
           exit_code, exit_signal, start_ts, end_ts, usage_start_ts, usage_end_ts, wall_s, elapsed_s,
           timelimit_s, nnodes, nodes, ncpus, gpus, gpu_type, alloc_mem_mib, req_mem
    FROM fct_job_run
    WHERE cluster = {cluster:String}
      AND ({job_id:String} = '' OR job_id = {job_id:String})
      AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran
      AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
),
steps AS (
    SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, sum(s.total_cpu_s) AS cpu_time_s,
           max(s.max_rss_mib) AS max_rss_mib
    FROM runs AS r
    INNER JOIN (SELECT job_id, start_ts, total_cpu_s, max_rss_mib FROM slurm_job_step FINAL
                WHERE cluster = {cluster:String} AND ({job_id:String} = '' OR job_id = {job_id:String})) AS s
        ON s.job_id = r.job_id
    -- a requeued job's runs share the id: a step is the run's it started in
    WHERE s.start_ts >= r.usage_start_ts AND s.start_ts <= r.usage_end_ts
    GROUP BY job_id, submit_ts
),
gpu AS (
    SELECT job_id, submit_ts, sum(gpu_h) AS gpu_h,
           sum(observed_s * util_mean_pct) / nullIf(sumIf(observed_s, util_mean_pct IS NOT NULL), 0) AS gpu_util_pct,
           max(util_peak_pct) AS util_peak_pct,
           sum(observed_s * sm_active) / nullIf(sumIf(observed_s, sm_active IS NOT NULL), 0) AS sm_active,
           sum(observed_s * tensor_active) / nullIf(sumIf(observed_s, tensor_active IS NOT NULL), 0) AS tensor_active,
           sum(observed_s * dram_active) / nullIf(sumIf(observed_s, dram_active IS NOT NULL), 0) AS dram_active,
           max(g.fb_peak_mib) AS fb_peak_mib, max(g.fb_total_mib) AS fb_total_mib,
           max(g.fb_peak_mib / g.fb_total_mib) AS fb_peak_share,
           sum(energy_kwh) AS energy_kwh, sum(throttled_s) AS throttled_s,
           arrayStringConcat(arraySort(groupUniqArray(grain)), '+') AS grain,
           arrayStringConcat(arraySort(groupUniqArray(attribution)), '+') AS attribution
    FROM ({{mart run_gpus}}) AS g
    GROUP BY job_id, submit_ts
),
-- ReqMem as sacct prints it: 4000M, 2252800K, 7996Mc (per CPU), 5150Mn (per node)
mem AS (
    SELECT job_id, submit_ts,
           toFloat64OrNull(extract(req_mem, '^([0-9.]+)')) AS v,
           multiIf(match(req_mem, '^[0-9.]+K'), 1 / 1024, match(req_mem, '^[0-9.]+G'), 1024,
                   match(req_mem, '^[0-9.]+T'), 1024 * 1024, 1) AS unit_mib,
           multiIf(endsWith(req_mem, 'c'), toFloat64(ncpus), endsWith(req_mem, 'n'), toFloat64(nnodes), 1) AS times
    FROM runs
)
SELECT r.job_id AS job_id, r.submit_ts AS submit_ts,
       row_number() OVER (PARTITION BY r.job_id ORDER BY r.submit_ts) AS run,
       count() OVER (PARTITION BY r.job_id) AS runs,
       r.is_superseded AS is_superseded, r.user AS user, r.account AS account, r.project AS project,
       r.partition AS partition, r.qos AS qos, r.job_name AS job_name, r.state AS state, r.exit_code AS exit_code,
       r.exit_signal AS exit_signal, r.start_ts AS start_ts, r.end_ts AS end_ts,
       toInt64(r.start_ts) - toInt64(r.submit_ts) AS wait_s, r.wall_s AS wall_s, r.timelimit_s AS timelimit_s,
       r.nnodes AS nnodes, r.nodes AS nodes, r.ncpus AS ncpus, r.gpus AS gpus, r.gpu_type AS gpu_type,
       s.cpu_time_s AS cpu_time_s, toFloat64(r.ncpus) * r.elapsed_s AS cpu_held_s,
       s.cpu_time_s / nullIf(cpu_held_s, 0) AS cpu_eff,
       coalesce(r.alloc_mem_mib, m.v * m.unit_mib * m.times) AS req_mem_mib,
       s.max_rss_mib AS max_rss_mib,
       s.max_rss_mib / nullIf(req_mem_mib, 0) AS mem_eff,
       g.gpu_h AS gpu_h, g.gpu_util_pct AS gpu_util_pct, g.util_peak_pct AS util_peak_pct,
       g.sm_active AS sm_active, g.tensor_active AS tensor_active, g.dram_active AS dram_active,
       g.fb_peak_mib AS fb_peak_mib, g.fb_total_mib AS fb_total_mib, g.fb_peak_share AS fb_peak_share,
       g.energy_kwh AS energy_kwh, g.throttled_s AS throttled_s, ifNull(g.grain, '') AS grain,
       ifNull(g.attribution, '') AS attribution
FROM runs AS r
LEFT JOIN steps AS s ON s.job_id = r.job_id AND s.submit_ts = r.submit_ts
LEFT JOIN gpu AS g ON g.job_id = r.job_id AND g.submit_ts = r.submit_ts
LEFT JOIN mem AS m ON m.job_id = r.job_id AND m.submit_ts = r.submit_ts
ORDER BY job_id, submit_ts
SETTINGS join_use_nulls = 1;
