-- law: busy ≤ allocated ≤ available ≤ capacity GPU-hours, in every node-hour of the capacity grain (each GPU
--   model's row of a node with several: the key names the model), at every
--   level and key of the utilization and cost marts and on every day of the daily timeline; a reservation's
--   used ≤ reserved GPU-hours; nothing unused is negative.
-- why: a GPU is busy only while a job holds it (no work runs on an unallocated GPU), a job can be allocated
--   only GPUs the scheduler could give (not down, not drained: a draining node's running jobs keep theirs
--   and are not counted drained), and what is available is what was bought less what was down or drained.
--   Sums of figures that hold in every node-hour hold at every level: a breakdown cannot break it.
-- Rows: section (the mart or grain), key (level and key, the day, or node and hour), figure (the law's
--   comparison), value ≤ bound broken by off_by, in GPU-hours.
WITH
per_node_hour AS (
    SELECT concat(node, if(gpus = node_gpus, '', concat(' ', gpu_model)), ' ', formatDateTime(hour, '%F %R')) AS key,
           busy_gpu_s / 3600 AS busy, allocated_observed_gpu_s / 3600 AS observed, allocated_gpu_s / 3600 AS allocated,
           (capacity_gpu_s - down_gpu_s - drained_gpu_s) / 3600 AS available, capacity_gpu_s / 3600 AS capacity,
           gpus AS gpus_in_node
    FROM capacity_node_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')}
),
compared AS (
    SELECT 'capacity_node_hour' AS section, key, c.1 AS figure, c.2 AS value, c.3 AS bound
    FROM per_node_hour
    ARRAY JOIN [('busy ≤ allocated observed', busy, observed), ('allocated observed ≤ allocated', observed, allocated),
                ('busy ≤ allocated', busy, allocated), ('allocated ≤ available', allocated, available),
                ('available ≤ capacity', available, capacity), ('0 ≤ available', 0., available),
                ('capacity ≤ GPUs × 1 h', capacity, toFloat64(gpus_in_node))] AS c
    UNION ALL
    SELECT 'utilization', concat(level, if(key = '', '', ' '), key), c.1, c.2, c.3
    FROM ({{mart utilization}})
    ARRAY JOIN [('busy_gpu_h ≤ allocated_observed_gpu_h', busy_gpu_h, allocated_observed_gpu_h),
                ('busy_gpu_h + allocated_idle_gpu_h ≤ allocated_gpu_h', busy_gpu_h + allocated_idle_gpu_h, allocated_gpu_h),
                ('allocated_gpu_h ≤ available_gpu_h', allocated_gpu_h, available_gpu_h),
                ('available_gpu_h ≤ capacity_gpu_h', available_gpu_h, capacity_gpu_h),
                ('reserved_idle_gpu_h ≤ reserved_gpu_h', reserved_idle_gpu_h, reserved_gpu_h),
                ('0 ≤ free_gpu_h', 0., free_gpu_h), ('0 ≤ reserved_idle_gpu_h', 0., reserved_idle_gpu_h),
                ('utilization ≤ 1', utilization, 1.)] AS c
    UNION ALL
    SELECT 'cost', model, c.1, c.2, c.3
    FROM ({{mart cost}})
    ARRAY JOIN [('busy_gpu_h ≤ allocated_gpu_h', busy_gpu_h, allocated_gpu_h),
                ('allocated_gpu_h ≤ available_gpu_h', allocated_gpu_h, available_gpu_h),
                ('available_gpu_h ≤ capacity_gpu_h', available_gpu_h, capacity_gpu_h)] AS c
    UNION ALL
    SELECT 'utilization_daily', toString(day), c.1, c.2, c.3
    FROM ({{mart utilization_daily}})
    ARRAY JOIN [('allocated_gpu_h ≤ capacity − down − drained', allocated_gpu_h,
                 capacity_gpu_h - down_gpu_h - drained_gpu_h),
                ('allocated_idle_gpu_h ≤ allocated_gpu_h', allocated_idle_gpu_h, allocated_gpu_h)] AS c
    UNION ALL
    SELECT 'reservations', reservation, 'used_gpu_h ≤ reserved_gpu_h', used_gpu_h, reserved_gpu_h
    FROM ({{mart reservations}})
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
ORDER BY section, off_by DESC, key, figure;
