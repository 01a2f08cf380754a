-- law: a name that appears in two sections is one figure with one value: the cluster's capacity, available,
--   allocated and busy GPU-hours and GPU energy in utilization and in cost (in all and per GPU model); the
--   allocated GPU-hours in utilization and summed over chargeback_totals; the runs' GPU-hours in the window
--   in efficiency and summed over job_sizes, and in energy; the delivered PFLOP-days and the runs' GPU energy
--   in efficiency and in energy. (Hung jobs' hung GPU-hours and goodput's GPU-hours lost to hangs are two
--   figures: two names.)
-- why: the monthly report prints each of these under one name in two sections (utilization and cost,
--   efficiency and energy); a reader who finds two values
--   for one name cannot tell which is right, so either they are one figure or they need two names.
-- Rows: section (the two sections), key (the row), figure (the name), value (the first section's), bound
--   (the second's), off_by = value − bound.
WITH
u AS (SELECT * FROM ({{mart utilization}})),
c AS (SELECT * FROM ({{mart cost}})),
e AS (SELECT * FROM ({{mart efficiency}}) WHERE project_key = ''),
g AS (SELECT * FROM ({{mart goodput}}) WHERE project_key = ''),
compared AS (
    SELECT 'utilization vs cost' AS section, if(c.model = 'all', 'cluster', concat('gpu_model ', c.model)) AS key,
           x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM c
    INNER JOIN u ON (c.model = 'all' AND u.level = 'cluster') OR (u.level = 'gpu_model' AND u.key = c.model)
    ARRAY JOIN [('capacity_gpu_h', u.capacity_gpu_h, c.capacity_gpu_h),
                ('available_gpu_h', u.available_gpu_h, c.available_gpu_h),
                ('allocated_gpu_h', u.allocated_gpu_h, c.allocated_gpu_h), ('busy_gpu_h', u.busy_gpu_h, c.busy_gpu_h),
                ('gpu_energy_kwh', u.gpu_energy_kwh, c.gpu_energy_kwh)] AS x
    UNION ALL
    -- a model with capacity that the cost model does not price is left out of cost's 'all' row
    SELECT 'utilization vs cost', concat('gpu_model ', u.key), 'a row in cost (a cost model)', u.capacity_gpu_h,
           0
    FROM u WHERE u.level = 'gpu_model' AND u.capacity_gpu_h > 0 AND u.key NOT IN (SELECT model FROM c)
    UNION ALL
    SELECT 'utilization vs chargeback_totals', 'cluster', 'allocated_gpu_h (Σ projects)', u.allocated_gpu_h, t.gpu_h
    FROM u CROSS JOIN (SELECT sum(allocated_gpu_h) AS gpu_h FROM ({{mart chargeback_totals}})) AS t
    WHERE u.level = 'cluster' AND {project:String} = ''
    UNION ALL
    SELECT 'efficiency vs job_sizes', 'the scope', 'gpu_h (Σ size classes)', e.gpu_h, s.gpu_h
    FROM e CROSS JOIN (SELECT sum(gpu_h) AS gpu_h FROM ({{mart job_sizes}})) AS s
    UNION ALL
    SELECT 'efficiency vs energy', 'the scope', x.1, x.2, x.3
    FROM e CROSS JOIN (SELECT * FROM ({{mart energy}}) WHERE project_key = '') AS n
    ARRAY JOIN [('gpu_h', e.gpu_h, n.gpu_h),
                ('delivered_pflop_days', e.delivered_pflop_days, n.delivered_pflop_days),
                -- the runs' GPU energy: counters, else power samples × time, in both (capacity_node_hour's
                -- gpu_energy_j, migration 0020; before it efficiency counted the counters alone)
                ('gpu_energy_kwh (energy: gpu_kwh)', e.gpu_energy_kwh, n.gpu_kwh)] AS x
    -- (hung_jobs' hung_gpu_h, the allocation held while a hung run did nothing, is not goodput's
    -- lost_hang_gpu_h, the work lost since its last checkpoint: two figures, two names)
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure;
