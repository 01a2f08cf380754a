-- law: a project's users add up to the project: the GPU-hours of its users (users) = its allocated GPU-hours
--   (chargeback_totals) = its runs' GPU-hours (efficiency, and summed over job_sizes), and the GPU jobs its
--   users started = the jobs of its size classes (job_sizes); the users' runs and GPU-hours in
--   user_efficiency (`ops-report users`) = the project's runs (efficiency) and its users' GPU-hours (users).
-- scope: each project
-- why: every run has one user, so the users split the project's runs; each of these marts sums the same
--   runs' GPUs × their time inside the window (jobs counted once, by their last run, in both).
-- Rows: section (the two marts), key, figure, value (the sum over the users), bound (the project's figure),
--   off_by = value − bound; the runner adds the project.
WITH
users AS (SELECT sum(gpu_h) AS gpu_h, sum(jobs_started) AS jobs FROM ({{mart users}})),
compared AS (
    SELECT 'users vs chargeback_totals' AS section, 'the project' AS key, 'Σ users gpu_h = allocated_gpu_h' AS figure,
           u.gpu_h AS value, ifNull(t.allocated_gpu_h, 0) AS bound
    FROM users AS u
    LEFT JOIN (SELECT allocated_gpu_h, 1 AS one FROM ({{mart chargeback_totals}})) AS t ON t.one = 1
    UNION ALL
    SELECT 'users vs efficiency', 'the project', 'Σ users gpu_h = gpu_h', u.gpu_h, ifNull(e.gpu_h, 0)
    FROM users AS u
    LEFT JOIN (SELECT gpu_h, 1 AS one FROM ({{mart efficiency}}) WHERE project_key = {project:String}) AS e
        ON e.one = 1
    UNION ALL
    SELECT 'users vs job_sizes', 'the project', x.1, x.2, x.3
    FROM users AS u CROSS JOIN (SELECT sum(gpu_h) AS gpu_h, sum(jobs) AS jobs FROM ({{mart job_sizes}})) AS s
    ARRAY JOIN [('Σ users gpu_h = Σ size classes gpu_h', u.gpu_h, s.gpu_h),
                ('Σ users jobs_started = Σ size classes jobs', toFloat64(u.jobs), toFloat64(s.jobs))] AS x
    UNION ALL
    -- the users' efficiency figures (`ops-report users`, run_observed's runs) against the section's own
    SELECT 'user_efficiency vs users', 'the project', x.1, x.2, x.3
    FROM users AS u
    CROSS JOIN (SELECT sum(runs) AS runs, sum(gpu_h) AS gpu_h FROM ({{mart user_efficiency}})) AS ue
    LEFT JOIN (SELECT runs, 1 AS one FROM ({{mart efficiency}}) WHERE project_key = {project:String}) AS e
        ON e.one = 1
    ARRAY JOIN [('Σ user_efficiency gpu_h = Σ users gpu_h', ue.gpu_h, u.gpu_h),
                ('Σ user_efficiency runs = efficiency runs', toFloat64(ue.runs), toFloat64(ifNull(e.runs, 0)))] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure
SETTINGS join_use_nulls = 1;
