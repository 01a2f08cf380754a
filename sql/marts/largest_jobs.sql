-- The {top_jobs} runs of {project} ('' for all) holding the most GPU-hours in [from_ts, to_ts), with their
-- efficiency and slowest node (job_efficiency.sql, included below): the monthly report's largest jobs and
-- its Gantt chart.
SELECT j.* EXCEPT (submit_ts)
FROM ({{mart job_efficiency}}) AS j  -- (with runs_limit = top_jobs: the efficiency of those runs alone)
ORDER BY j.gpu_hours DESC, j.start_ts, j.job_id
LIMIT {top_jobs:UInt32};
