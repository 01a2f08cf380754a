-- Refresh job_run (migration 0012: the job-run model of sql/intermediate/fct_job_run.sql, materialized) for
-- the jobs a load wrote runs of from {from_ts} on: every run of a job whose loaded record job_run does not
-- hold yet (or of every such job, {every} = 1: `ops-report etl refresh`), since a job's new run can make its
-- earlier run superseded. Run by the job loads (etl/grains.py) before the hourly grains, which read the runs
-- through fct_job_run; once a range of job ids [{job_lo}, {job_hi}), so that a statement holds a bounded
-- number of runs whatever the load's size.
--- [model]
--- kind = "incremental_by_key"
--- grain = "job_run"
--- writes = ["job_run"]
--- reads = ["job_run_model"]
--- settings = { query_plan_enable_optimizations = 0 }
-- settings: its statements planned without the query plan's optimization passes: the same rows, the reads still
-- bounded by the key conditions written on the tables, cheaper to plan and to run (docs/benchmarks.md, "Issue
-- 50: sacct loads in bounded memory", round 10: a demo night's statement 0.178 -> 0.145 CPU-s, a 50,000-run range
-- of a 1 M-job warehouse 0.47 -> 0.36 at the same peak)
INSERT INTO job_run
SELECT *, now64(3)
FROM job_run_model(from_ts = {from_ts:DateTime('UTC')}, every = {every:UInt8},
                   job_lo = {job_lo:String}, job_hi = {job_hi:String});
