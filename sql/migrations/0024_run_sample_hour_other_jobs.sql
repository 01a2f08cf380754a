-- run_sample_hour's readings another job's hpc_job label names (round 5, one rule for a run's readings,
-- sql/functions/reading_is_runs.sql): on a GPU the run's job id labels, the step of the previous job's last
-- reading reaches past the run's start. That reading is the previous job's, so the run's own figures
-- (observed_gpu_s, busy_gpu_s, util_gpu_s, the activities: what idle_gpu_jobs and users read) leave it out,
-- as `ops-report job` does; the GPU was still allocated to the run and seen in that time, so the node-hour's
-- allocated observed and busy time (capacity_node_hour: utilization's figures, held to DuckDB over the raw
-- samples by tests/test_monthly_crosscheck.py) count it. Kept apart here for that sum: GPU-seconds, 0 on
-- 'node share' rows and on rows written before this migration (the grain is rebuilt on upgrade).
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS other_job_gpu_s Float64 DEFAULT 0 AFTER dram_gpu_s;
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS other_job_busy_gpu_s Float64 DEFAULT 0 AFTER other_job_gpu_s;
