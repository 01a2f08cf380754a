-- Whether a GPU reading (gpu_sample) may stand for a run on a GPU that run's job id labels: its hpc_job label
-- is the run's job id (job_id_raw) or empty. A reading another job's label names is that job's, never the run's
-- (the previous job's last reading, whose step reaches past the run's start, says what that job did). The one
-- rule of which readings are a run's: run_sample_hour (hence idle_gpu_jobs, users, the monthly report's idle
-- figures) and run_gpus (`ops-report job`) both apply it (docs/efficiency.md).
CREATE OR REPLACE FUNCTION reading_is_runs {{on_cluster}} AS (hpc_job, run_job_id_raw) ->
    hpc_job = '' OR hpc_job = run_job_id_raw;
