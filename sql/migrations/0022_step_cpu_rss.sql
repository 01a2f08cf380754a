-- The steps' use of CPUs and memory (issue 52, `ops-report job`: CPU and memory efficiency, as seff and
-- jobstats report them), from sacct's TotalCPU (user + system CPU time of the step's tasks, a duration) and
-- MaxRSS (the largest resident set of any one task of the step, with a unit: 1828196K). Kept on the steps
-- only: MaxRSS exists only there, and the job line's TotalCPU is the sum of its steps' (sacct adds them
-- up), so a job's CPU time is the sum over its steps (sql/marts/job_detail.sql). NULL where the input has no
-- such field (sacct without them, slurmdbd), never 0: absent is not empty.
ALTER TABLE slurm_job_step{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS total_cpu_s Nullable(Float64);
ALTER TABLE slurm_job_step{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS max_rss_mib Nullable(Float64);
-- the Distributed table in front of it on a cluster (on one server this is the same table: a no-op)
ALTER TABLE slurm_job_step {{on_cluster}}
    ADD COLUMN IF NOT EXISTS total_cpu_s Nullable(Float64);
ALTER TABLE slurm_job_step {{on_cluster}}
    ADD COLUMN IF NOT EXISTS max_rss_mib Nullable(Float64);
