-- law: per-project figures sum to the scope's: efficiency's, goodput's and energy's project rows add up to
--   their scope row (project_key ''), and goodput's GPU-hours lost by cause add up to its GPU-hours lost, in
--   every row.
-- why: every run belongs to one project (its account's) and every campaign to one user, account and job name,
--   so the projects split the scope's runs without overlap; every interrupted run's lost work has one cause.
-- Rows: section, key (the row checked), figure, value (the sum of the parts), bound (the total),
--   off_by = value − bound.
WITH
e AS (SELECT * FROM ({{mart efficiency}})),
e_parts AS (
    SELECT sum(runs) AS runs, sum(gpu_h) AS gpu_h, sum(observed_gpu_h) AS observed_gpu_h,
           sum(gpu_energy_kwh) AS gpu_energy_kwh, sum(nic_rx_bytes) AS nic_rx_bytes, sum(nic_tx_bytes) AS nic_tx_bytes,
           sum(storage_read_bytes) AS storage_read_bytes, sum(storage_write_bytes) AS storage_write_bytes,
           sum(delivered_pflop) AS delivered_pflop, count() AS part_rows
    FROM e WHERE project_key != ''
),
g AS (SELECT * FROM ({{mart goodput}})),
g_parts AS (
    SELECT sum(campaigns) AS campaigns, sum(unknown_campaigns) AS unknown_campaigns, sum(gpu_h) AS gpu_h,
           sum(lost_gpu_h) AS lost_gpu_h, sum(lost_hang_gpu_h) AS lost_hang_gpu_h,
           sum(lost_node_fail_gpu_h) AS lost_node_fail_gpu_h, sum(lost_failed_gpu_h) AS lost_failed_gpu_h,
           sum(lost_timeout_gpu_h) AS lost_timeout_gpu_h, sum(lost_other_gpu_h) AS lost_other_gpu_h,
           sum(initial_wait_hours) AS initial_wait_hours, sum(restart_wait_hours) AS restart_wait_hours,
           sum(restart_startup_hours) AS restart_startup_hours,
           sum(restart_overhead_gpu_h) AS restart_overhead_gpu_h, count() AS part_rows
    FROM g WHERE project_key != ''
),
en AS (SELECT * FROM ({{mart energy}})),
en_parts AS (
    SELECT sum(runs) AS runs, sum(gpu_h) AS gpu_h, sum(gpu_kwh) AS gpu_kwh, sum(rest_kwh) AS rest_kwh,
           sum(it_kwh) AS it_kwh, sum(facility_kwh) AS facility_kwh, sum(delivered_pflop_days) AS delivered_pflop_days,
           count() AS part_rows
    FROM en WHERE project_key != ''
),
compared AS (
    SELECT 'efficiency' AS section, 'Σ projects = the scope row' AS key, x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM e_parts AS p CROSS JOIN (SELECT * FROM e WHERE project_key = '') AS t
    ARRAY JOIN [('runs', toFloat64(p.runs), toFloat64(t.runs)), ('gpu_h', p.gpu_h, t.gpu_h),
                ('observed_gpu_h', p.observed_gpu_h, t.observed_gpu_h),
                ('gpu_energy_kwh', p.gpu_energy_kwh, t.gpu_energy_kwh),
                ('nic_rx_bytes', p.nic_rx_bytes, t.nic_rx_bytes), ('nic_tx_bytes', p.nic_tx_bytes, t.nic_tx_bytes),
                ('storage_read_bytes', p.storage_read_bytes, t.storage_read_bytes),
                ('storage_write_bytes', p.storage_write_bytes, t.storage_write_bytes),
                ('delivered_pflop', p.delivered_pflop, t.delivered_pflop)] AS x
    WHERE p.part_rows > 0
    UNION ALL
    SELECT 'goodput', 'Σ projects = the scope row', x.1, x.2, x.3
    FROM g_parts AS p CROSS JOIN (SELECT * FROM g WHERE project_key = '') AS t
    ARRAY JOIN [('campaigns', toFloat64(p.campaigns), toFloat64(t.campaigns)),
                ('unknown_campaigns', toFloat64(p.unknown_campaigns), toFloat64(t.unknown_campaigns)),
                ('gpu_h', p.gpu_h, t.gpu_h), ('lost_gpu_h', p.lost_gpu_h, t.lost_gpu_h),
                ('lost_hang_gpu_h', p.lost_hang_gpu_h, t.lost_hang_gpu_h),
                ('lost_node_fail_gpu_h', p.lost_node_fail_gpu_h, t.lost_node_fail_gpu_h),
                ('lost_failed_gpu_h', p.lost_failed_gpu_h, t.lost_failed_gpu_h),
                ('lost_timeout_gpu_h', p.lost_timeout_gpu_h, t.lost_timeout_gpu_h),
                ('lost_other_gpu_h', p.lost_other_gpu_h, t.lost_other_gpu_h),
                ('initial_wait_hours', p.initial_wait_hours, t.initial_wait_hours),
                ('restart_wait_hours', p.restart_wait_hours, t.restart_wait_hours),
                ('restart_startup_hours', p.restart_startup_hours, t.restart_startup_hours),
                ('restart_overhead_gpu_h', p.restart_overhead_gpu_h, t.restart_overhead_gpu_h)] AS x
    WHERE p.part_rows > 0
    UNION ALL
    SELECT 'goodput', if(project_key = '', 'the scope row', concat('project ', project_key)),
           'Σ lost_*_gpu_h by cause = lost_gpu_h',
           lost_hang_gpu_h + lost_node_fail_gpu_h + lost_failed_gpu_h + lost_timeout_gpu_h
             + lost_other_gpu_h, lost_gpu_h
    FROM g
    UNION ALL
    SELECT 'energy', 'Σ projects = the scope row', x.1, x.2, x.3
    FROM en_parts AS p CROSS JOIN (SELECT * FROM en WHERE project_key = '') AS t
    ARRAY JOIN [('runs', toFloat64(p.runs), toFloat64(t.runs)), ('gpu_h', p.gpu_h, t.gpu_h),
                ('gpu_kwh', p.gpu_kwh, t.gpu_kwh), ('rest_kwh', p.rest_kwh, t.rest_kwh), ('it_kwh', p.it_kwh, t.it_kwh),
                ('facility_kwh', p.facility_kwh, t.facility_kwh),
                ('delivered_pflop_days', p.delivered_pflop_days, t.delivered_pflop_days)] AS x
    WHERE p.part_rows > 0
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, key, abs(off_by) DESC, figure;
