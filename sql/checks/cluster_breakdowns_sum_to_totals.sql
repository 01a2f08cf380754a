-- law: per-model and per-partition figures sum to the cluster's: utilization's gpu_model rows and its
--   partition rows each add up to its cluster row, cost's model rows to its 'all' row; chargeback's
--   projects add up, model by model, to the model's allocated GPU-hours (utilization) and its total cost
--   (cost), their shares of the model's allocation to 1, and chargeback_totals' projects to the cluster's
--   allocated GPU-hours and to the cost of the models that were allocated.
-- why: every node-hour has one GPU model and one partition it is counted under (its 'partition' row; the
--   'partition_member' rows, which count a node in each partition it is in, have their own law), and every
--   allocated GPU-second one run of one project, so splitting the cluster by model, partition or project splits each figure without loss or
--   overlap; chargeback divides each model's whole cost among the projects that used it.
-- Rows: section, key (which breakdown and which total), figure, value (the sum of the parts), bound (the
--   total), off_by = value − bound. Chargeback's laws are of the whole cluster: checked when no project is
--   given (a project's report holds only its own chargeback rows).
WITH
u AS (SELECT * FROM ({{mart utilization}})),
u_parts AS (
    SELECT level, sum(capacity_gpu_h) AS capacity_gpu_h, sum(down_gpu_h) AS down_gpu_h,
           sum(drained_gpu_h) AS drained_gpu_h, sum(available_gpu_h) AS available_gpu_h,
           sum(allocated_gpu_h) AS allocated_gpu_h, sum(reserved_gpu_h) AS reserved_gpu_h,
           sum(reserved_idle_gpu_h) AS reserved_idle_gpu_h, sum(free_gpu_h) AS free_gpu_h,
           sum(allocated_idle_gpu_h) AS allocated_idle_gpu_h, sum(busy_gpu_h) AS busy_gpu_h,
           sum(telemetry_gpu_h) AS telemetry_gpu_h, sum(gpu_energy_kwh) AS gpu_energy_kwh
    FROM u WHERE level NOT IN ('cluster', 'partition_member') GROUP BY level  -- members overlap: their own law
),
c AS (SELECT * FROM ({{mart cost}})),
c_parts AS (
    SELECT sum(capacity_gpu_h) AS capacity_gpu_h, sum(available_gpu_h) AS available_gpu_h,
           sum(allocated_gpu_h) AS allocated_gpu_h, sum(busy_gpu_h) AS busy_gpu_h,
           sum(gpu_energy_kwh) AS gpu_energy_kwh, sum(capex) AS capex, sum(energy_cost) AS energy_cost,
           sum(total_cost) AS total_cost, sum(idle_cost) AS idle_cost, sum(pflop_days) AS pflop_days, count() AS part_rows
    FROM c WHERE model != 'all'
),
charged AS (
    SELECT ifNull(gpu_model, '(not in the inventory)') AS model, sum(allocated_gpu_h) AS allocated_gpu_h, sum(cost) AS cost,
           sum(share_of_model_allocation) AS shares
    FROM ({{mart chargeback}}) GROUP BY model
),
by_model AS (
    SELECT if(ch.model != '', ch.model, m.key) AS model, ifNull(ch.allocated_gpu_h, 0) AS charged_gpu_h,
           ifNull(m.allocated_gpu_h, 0) AS model_gpu_h, ch.cost AS charged_cost, cm.total_cost AS model_cost,
           ch.shares AS shares
    FROM charged AS ch
    FULL OUTER JOIN (SELECT key, allocated_gpu_h FROM u WHERE level = 'gpu_model' AND allocated_gpu_h > 0) AS m
        ON m.key = ch.model
    LEFT JOIN (SELECT model, total_cost FROM c WHERE model != 'all') AS cm ON cm.model = if(ch.model != '', ch.model, m.key)
    SETTINGS join_use_nulls = 1
),
totals AS (SELECT sum(allocated_gpu_h) AS allocated_gpu_h, sum(cost) AS cost FROM ({{mart chargeback_totals}})),
compared AS (
    SELECT 'utilization' AS section, concat('Σ ', p.level, ' rows = cluster row') AS key, x.1 AS figure,
           x.2 AS value, x.3 AS bound
    FROM u_parts AS p CROSS JOIN (SELECT * FROM u WHERE level = 'cluster') AS t
    ARRAY JOIN [('capacity_gpu_h', p.capacity_gpu_h, t.capacity_gpu_h), ('down_gpu_h', p.down_gpu_h, t.down_gpu_h),
                ('drained_gpu_h', p.drained_gpu_h, t.drained_gpu_h),
                ('available_gpu_h', p.available_gpu_h, t.available_gpu_h),
                ('allocated_gpu_h', p.allocated_gpu_h, t.allocated_gpu_h),
                ('reserved_gpu_h', p.reserved_gpu_h, t.reserved_gpu_h),
                ('reserved_idle_gpu_h', p.reserved_idle_gpu_h, t.reserved_idle_gpu_h),
                ('free_gpu_h', p.free_gpu_h, t.free_gpu_h),
                ('allocated_idle_gpu_h', p.allocated_idle_gpu_h, t.allocated_idle_gpu_h),
                ('busy_gpu_h', p.busy_gpu_h, t.busy_gpu_h), ('telemetry_gpu_h', p.telemetry_gpu_h, t.telemetry_gpu_h),
                ('gpu_energy_kwh', p.gpu_energy_kwh, t.gpu_energy_kwh)] AS x
    UNION ALL
    SELECT 'cost', 'Σ model rows = all', x.1, x.2, x.3
    FROM c_parts AS p CROSS JOIN (SELECT * FROM c WHERE model = 'all') AS t
    ARRAY JOIN [('capacity_gpu_h', p.capacity_gpu_h, t.capacity_gpu_h),
                ('available_gpu_h', p.available_gpu_h, t.available_gpu_h),
                ('allocated_gpu_h', p.allocated_gpu_h, t.allocated_gpu_h), ('busy_gpu_h', p.busy_gpu_h, t.busy_gpu_h),
                ('gpu_energy_kwh', p.gpu_energy_kwh, t.gpu_energy_kwh), ('capex', p.capex, t.capex),
                ('energy_cost', p.energy_cost, t.energy_cost), ('total_cost', p.total_cost, t.total_cost),
                ('idle_cost', p.idle_cost, t.idle_cost), ('pflop_days', p.pflop_days, t.pflop_days)] AS x
    WHERE p.part_rows > 0
    UNION ALL
    SELECT 'chargeback', concat('model ', model), x.1, x.2, x.3
    FROM by_model
    ARRAY JOIN [('Σ projects allocated_gpu_h = the model''s allocated_gpu_h (utilization)', charged_gpu_h, model_gpu_h),
                ('Σ projects cost = the model''s total_cost (cost)', charged_cost, model_cost),
                ('Σ projects share_of_model_allocation = 1', shares, if(shares IS NULL, NULL, 1))] AS x
    WHERE {project:String} = ''
    UNION ALL
    SELECT 'chargeback_totals', 'Σ projects = cluster', x.1, x.2, x.3
    FROM totals AS t
    CROSS JOIN (SELECT allocated_gpu_h FROM u WHERE level = 'cluster') AS cl
    CROSS JOIN (SELECT sum(total_cost) AS cost FROM c
                WHERE model IN (SELECT key FROM u WHERE level = 'gpu_model' AND allocated_gpu_h > 0)) AS used
    ARRAY JOIN [('Σ allocated_gpu_h = utilization''s allocated_gpu_h', t.allocated_gpu_h, cl.allocated_gpu_h),
                ('Σ cost = cost of the models allocated (cost)', t.cost, used.cost)] AS x
    WHERE {project:String} = ''
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, key, abs(off_by) DESC, figure;
