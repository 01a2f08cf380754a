-- GPU-hours served per project and what-if scenario in [from_ts, to_ts) (the jobs' GPUs × the part of their
-- run inside the window), with the project's median wait; from the replays in the session's temporary
-- tables (whatif_summary.sql). {project} '' for every project.
--- [mart]
--- grain = "one row per scenario and project"
--- kind = "whatif"
--- scope = "project"
SELECT scenario, project,
       sum(gpus * if(start_ts IS NULL, 0, overlap_s({from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')},
                                                    assumeNotNull(start_ts), assumeNotNull(end_ts)))) / 3600 AS gpu_h,
       countIf(submit_ts >= {from_ts:DateTime('UTC')}) AS jobs,
       quantileExactIf(0.5)(toInt64(start_ts) - toInt64(submit_ts),
                            submit_ts >= {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}) / 3600 AS wait_p50_hours
FROM whatif_run
WHERE submit_ts < {to_ts:DateTime('UTC')} AND ({project:String} = '' OR project = {project:String})
GROUP BY scenario, project
ORDER BY scenario = 'observed' DESC, scenario = 'replay' DESC, scenario, gpu_h DESC, project;
