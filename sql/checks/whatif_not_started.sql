-- law: the what-if's jobs not started (the observed scenario of whatif_summary) = the GPU jobs pending at the
--   window's end in the job history: submitted before to_ts, not started before it and not cancelled before
--   it (fct_job_run, every run of a requeued job a job of its own, as the what-if takes them), GPU jobs by
--   the GPUs they hold or ask for (asked_gpus: a job that never started has no AllocTRES).
-- needs: whatif
-- why: the observed scenario is the history as it happened, so what it leaves waiting at the end is what
--   was waiting then, whenever it was submitted: a job queued before the window and still queued at its end
--   is pending at the end as much as one submitted in it.
-- Rows: section, key, figure, value (the what-if's) = bound (the history's), off_by = value − bound (jobs).
SELECT 'whatif_summary vs fct_job_run' AS section, 'scenario observed' AS key,
       'jobs_not_started = GPU jobs pending at to_ts' AS figure, toFloat64(s.jobs_not_started) AS value,
       toFloat64(p.pending) AS bound, value - bound AS off_by
FROM (SELECT jobs_not_started FROM ({{mart whatif_summary}}) WHERE scenario = 'observed') AS s
CROSS JOIN (SELECT count() AS pending FROM fct_job_run
            WHERE cluster = {cluster:String} AND asked_gpus(gpus, req_tres) > 0 AND submit_ts < {to_ts:DateTime('UTC')}
              AND (start_ts IS NULL OR start_ts >= {to_ts:DateTime('UTC')})
              AND NOT (never_ran AND end_ts IS NOT NULL AND end_ts < {to_ts:DateTime('UTC')})) AS p
WHERE law_breaks_eq(value, bound);
