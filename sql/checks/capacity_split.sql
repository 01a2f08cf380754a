-- law: capacity = down + drained + available and available = allocated + reserved unused + free, in every
--   node-hour of the capacity grain, at every level and key of utilization, on every day of the daily
--   timeline; and the idle split (free, reserved unused, down, drained shares of idle_capacity) with the
--   allocated share sums to capacity.
-- why: every in-service GPU-second is in exactly one state: down, drained, allocated to a job, reserved and
--   unused, or free (usable, unreserved, unallocated). Nothing is counted twice and nothing is left out, so
--   the parts add up to the whole in each hour and in any sum of hours.
-- Rows: section, key, figure (the whole = the sum of its parts), value (the whole), bound (the parts),
--   off_by = value − bound, in GPU-hours (shares for idle_capacity's shares).
WITH
compared AS (
    SELECT 'capacity_node_hour' AS section, concat(node, if(gpus = node_gpus, '', concat(' ', gpu_model)), ' ', formatDateTime(hour, '%F %R')) AS key,
           c.1 AS figure, c.2 AS value, c.3 AS bound
    FROM (SELECT * FROM capacity_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')})
    ARRAY JOIN [('capacity = down + drained + allocated + reserved unused + free', capacity_gpu_s / 3600,
                 (down_gpu_s + drained_gpu_s + allocated_gpu_s + reserved_idle_gpu_s + free_gpu_s) / 3600)] AS c
    UNION ALL
    SELECT 'utilization', concat(level, if(key = '', '', ' '), key), c.1, c.2, c.3
    FROM ({{mart utilization}})
    ARRAY JOIN [('capacity_gpu_h = available_gpu_h + down_gpu_h + drained_gpu_h', capacity_gpu_h,
                 available_gpu_h + down_gpu_h + drained_gpu_h),
                ('unavailable_gpu_h = down_gpu_h + drained_gpu_h', unavailable_gpu_h, down_gpu_h + drained_gpu_h),
                ('available_gpu_h = allocated_gpu_h + reserved_idle_gpu_h + free_gpu_h', available_gpu_h,
                 allocated_gpu_h + reserved_idle_gpu_h + free_gpu_h)] AS c
    UNION ALL
    SELECT 'utilization_daily', toString(day), c.1, c.2, c.3
    FROM ({{mart utilization_daily}})
    ARRAY JOIN [('capacity_gpu_h = down + drained + allocated + reserved_idle + free', capacity_gpu_h,
                 down_gpu_h + drained_gpu_h + allocated_gpu_h + reserved_idle_gpu_h + free_gpu_h)] AS c
    UNION ALL
    SELECT 'idle_capacity', concat(i.level, if(i.key = '', '', ' '), i.key), c.1, c.2, c.3
    FROM ({{mart idle_capacity}}) AS i
    INNER JOIN (SELECT level, key, allocated_gpu_h FROM ({{mart utilization}})) AS u
        ON u.level = i.level AND u.key = i.key
    ARRAY JOIN [('capacity_gpu_h = free + reserved_idle + down + drained + allocated (utilization)', i.capacity_gpu_h,
                 i.free_gpu_h + i.reserved_idle_gpu_h + i.down_gpu_h + i.drained_gpu_h + u.allocated_gpu_h),
                ('1 = free + reserved_idle + down + drained shares + allocated ÷ capacity',
                 if(i.capacity_gpu_h > 0, 1, NULL),
                 i.free_share + i.reserved_idle_share + i.down_share + i.drained_share
                   + u.allocated_gpu_h / nullIf(i.capacity_gpu_h, 0))] AS c
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure;
