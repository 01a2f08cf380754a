-- MIG GPU instances held by the runs of {project} ('' for the whole cluster) in [from_ts, to_ts): what each
-- instance did while the run held it. dcgm-exporter's HPC job mapping labels an instance's series with the job
-- that holds it (hpc_job, from the mapping file named <gpu>.<instance>: dcgm-exporter
-- internal/pkg/transformation/hpc.go), so the attribution is by that label, to the run of that job id whose
-- [start, end) has the sample (gpu_instance_sample, sql/migrations/0019_gpu_instances.sql). An instance's
-- ratios are of its own slice (a 1g.10gb slice at 1.0 is one seventh of an H100's engines busy).
--   samples, observed_h    the instance's samples in the run, and the time they cover (Σ step_s)
--   gr_engine_active_mean  mean DCGM_FI_PROF_GR_ENGINE_ACTIVE of the instance (0–1); NULL without that field
--   tensor_active_mean, dram_active_mean   the same for the tensor pipes and memory interface
--   fb_used_mib_max        the most framebuffer the instance used
-- Instances without a job label (no mapping) are not anyone's: they are left out.
--- [mart]
--- grain = "one row per run and MIG GPU instance it held"
--- scope = "project"
--- columns = ["job_id", "submit_ts", "user", "account", "project", "node", "gpu", "gpu_instance", "profile", "samples", "observed_h", "gr_engine_active_mean", "tensor_active_mean", "dram_active_mean", "fb_used_mib_max"]
--- user_columns = ["user"]
WITH
s AS (
    SELECT node, gpu, gpu_instance, profile, hpc_job, ts, step_s, gr_engine_active, tensor_active, dram_active,
           fb_used_mib
    FROM gpu_instance_sample FINAL
    WHERE cluster = {cluster:String} AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}
      AND hpc_job != ''
),
r AS (
    SELECT job_id, toString(job_id_raw) AS raw_id, submit_ts, user, account, assumeNotNull(start_ts) AS s0,
           coalesce(end_ts, toDateTime('2106-01-01 00:00:00', 'UTC')) AS s1
    FROM slurm_job_run FINAL
    WHERE cluster = {cluster:String} AND start_ts IS NOT NULL AND start_ts < {to_ts:DateTime('UTC')}
      AND (end_ts IS NULL OR end_ts > {from_ts:DateTime('UTC')})
      AND toString(job_id_raw) IN (SELECT hpc_job FROM s)
      AND ({project:String} = ''
           OR account IN (SELECT account FROM dim_account WHERE project = {project:String}))
)
SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, r.user AS user, r.account AS account,
       any(p.project) AS project, s.node AS node, s.gpu AS gpu, s.gpu_instance AS gpu_instance,
       any(s.profile) AS profile, count() AS samples, round(sum(s.step_s) / 3600, 6) AS observed_h,
       avg(s.gr_engine_active) AS gr_engine_active_mean, avg(s.tensor_active) AS tensor_active_mean,
       avg(s.dram_active) AS dram_active_mean, max(s.fb_used_mib) AS fb_used_mib_max
FROM s
INNER JOIN r ON r.raw_id = s.hpc_job
LEFT JOIN dim_account AS p ON p.account = r.account
WHERE s.ts >= r.s0 AND s.ts < r.s1
GROUP BY job_id, submit_ts, user, account, node, gpu, gpu_instance
ORDER BY job_id, submit_ts, node, gpu, gpu_instance;
