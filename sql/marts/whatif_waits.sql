-- Queue waits by size class (gpu_size_class) per what-if scenario over [from_ts, to_ts), from the replays in
-- the session's temporary tables (whatif_summary.sql says what they hold): jobs submitted in the window,
-- those that started in it, p50 and p90 of their waits (start − submit, hours), those still waiting at its
-- end; and wait_p50_ratio, the class's median wait ÷ the observed one (for 'replay': the replay's error,
-- NULL where the observed median is 0 or the class did not run).
--- [mart]
--- grain = "one row per scenario and job size class"
--- kind = "whatif"
--- scope = "cluster"
WITH w AS (
    SELECT scenario, gpu_size_class(gpus) AS size_class, min(gpus) AS min_gpus,
           count() AS jobs,
           countIf(start_ts < {to_ts:DateTime('UTC')}) AS jobs_started,
           quantileExactIf(0.5)(toInt64(start_ts) - toInt64(submit_ts), start_ts < {to_ts:DateTime('UTC')}) / 3600
               AS wait_p50_hours,
           quantileExactIf(0.9)(toInt64(start_ts) - toInt64(submit_ts), start_ts < {to_ts:DateTime('UTC')}) / 3600
               AS wait_p90_hours
    FROM whatif_run
    WHERE submit_ts >= {from_ts:DateTime('UTC')} AND submit_ts < {to_ts:DateTime('UTC')}
    GROUP BY scenario, size_class
)
SELECT w.scenario AS scenario, w.size_class AS size_class, w.jobs AS jobs, w.jobs_started AS jobs_started,
       w.jobs - w.jobs_started AS jobs_waiting, w.wait_p50_hours AS wait_p50_hours, w.wait_p90_hours AS wait_p90_hours,
       w.wait_p50_hours / nullIf(o.wait_p50_hours, 0) AS wait_p50_ratio,
       w.wait_p50_hours - o.wait_p50_hours AS wait_p50_error_hours
FROM w LEFT JOIN (SELECT size_class, wait_p50_hours FROM w WHERE scenario = 'observed') AS o
    ON o.size_class = w.size_class
ORDER BY w.scenario = 'observed' DESC, w.scenario = 'replay' DESC, w.scenario, w.min_gpus
SETTINGS join_use_nulls = 1;
