-- Idle-GPU jobs of {project} ('' for the whole cluster) in [from_ts, to_ts) summed per user and project:
-- the runs idle_gpu_jobs.sql lists (mean GPU utilization under {idle_util_pct} percent over at least
-- {idle_min_minutes} minutes with telemetry), included below, so the rule is that file's. Rows at three
-- levels: 'all' (every run in scope: project '' and user ''; there is always this row, with 0 runs when
-- nothing was idle), 'project' (user '') and 'user'.
--   runs                  idle runs
--   gpu_h             the GPU-hours they held in the window (idle)
--   whole_node_gpu_h  of those, runs on whole nodes (attribution exact)
--   shared_gpu_h      of those, runs on shared nodes (node-level mean: see idle_gpu_jobs.sql)
--   capex                 their write-off cost (idle_gpu_jobs.sql's capex), currency
--   share_of_project      the row's GPU-hours ÷ its project's (1 for a project row, NULL for 'all')
--   rank_in_project       user rows: 1 for the user with the most idle GPU-hours in the project (ties
--                         by user name); the report's "top users per project" are the first ranks.
--                         0 on the other rows
--   worst_job_id          the run with the most idle GPU-hours (ties: the earliest start)
--- [mart]
--- grain = "one row per user, per project, and the scope ('all')"
--- scope = "project"
--- report = 23
--- columns = ["level", "project", "user", "runs", "gpu_h", "whole_node_gpu_h", "shared_gpu_h", "capex", "currency", "share_of_project", "rank_in_project", "worst_job_id"]
--- user_columns = ["user"]
--- export = 23
WITH
jobs AS (SELECT job_id, user, project, start_ts, gpu_h AS run_gpu_h, attribution, capex AS run_capex, currency
         FROM ({{mart idle_gpu_jobs}})),
grouped AS (
    SELECT multiIf(grouping(project) = 1, 'all', grouping(user) = 1, 'project', 'user') AS level,
           if(grouping(project) = 1, '', project) AS project_key,
           if(grouping(user) = 1, '', user) AS user_key,
           count() AS runs,
           -- the runs' figures taken to fixed point and summed as Decimal (exact, so in any order the same),
           -- converted after: a Float64 sum depends on the order the engine's threads hand in their parts
           sum(toDecimal128(run_gpu_h, 12)) AS d_gpu_h,
           sumIf(toDecimal128(run_gpu_h, 12), attribution = 'whole nodes') AS d_whole_node_gpu_h,
           sumIf(toDecimal128(run_gpu_h, 12), attribution != 'whole nodes') AS d_shared_gpu_h,
           sum(toDecimal128(run_capex, 12)) AS d_capex,
           any(currency) AS currency,
           argMin(job_id, (-run_gpu_h, start_ts)) AS worst_job_id
    FROM jobs
    GROUP BY GROUPING SETS ((), (project), (project, user))
)
SELECT level, project_key AS project, user_key AS user, runs, toFloat64(d_gpu_h) AS gpu_h,
       toFloat64(d_whole_node_gpu_h) AS whole_node_gpu_h, toFloat64(d_shared_gpu_h) AS shared_gpu_h,
       toFloat64(d_capex) AS capex, currency,
       if(level = 'all', NULL,
          gpu_h / nullIf(toFloat64(sumIf(d_gpu_h, level = 'project') OVER (PARTITION BY project_key)), 0))
           AS share_of_project,
       if(level = 'user',
          row_number() OVER (PARTITION BY project_key, level = 'user' ORDER BY d_gpu_h DESC, user_key), 0)
           AS rank_in_project,
       worst_job_id
FROM grouped
ORDER BY level != 'all', project, level = 'user', rank_in_project, user;
