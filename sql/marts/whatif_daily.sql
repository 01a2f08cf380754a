-- Allocated ÷ capacity GPU-hours by day per what-if scenario in [from_ts, to_ts) (allocated_of_capacity, as
-- whatif_summary.sql names it: not the report's utilization, allocated ÷ available), from the replays in the
-- session's temporary tables (whatif_summary.sql).
--- [mart]
--- grain = "one row per scenario and day"
--- kind = "whatif"
--- scope = "cluster"
WITH
days AS (SELECT arrayJoin(arrayMap(d -> toDateTime(toDate({from_ts:DateTime('UTC')}) + d, 'UTC'),
                                   range(toUInt32(dateDiff('day', {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}))))) AS day),
cap AS (
    SELECT n.scenario AS scenario, d.day AS day,
           sum(n.gpus * overlap_s(d.day, d.day + 86400, n.in_service_ts, coalesce(n.retired_ts, {to_ts:DateTime('UTC')}))) / 3600
               AS capacity_gpu_h
    FROM whatif_node AS n CROSS JOIN days AS d
    GROUP BY scenario, day
),
alloc AS (
    SELECT r.scenario AS scenario, d.day AS day,
           sum(r.gpus * overlap_s(d.day, d.day + 86400, assumeNotNull(r.start_ts), assumeNotNull(r.end_ts))) / 3600
               AS allocated_gpu_h
    FROM (SELECT * FROM whatif_run WHERE start_ts IS NOT NULL AND start_ts < {to_ts:DateTime('UTC')}
          AND end_ts > {from_ts:DateTime('UTC')}) AS r
    CROSS JOIN days AS d
    WHERE r.start_ts < d.day + 86400 AND r.end_ts > d.day
    GROUP BY scenario, day
)
SELECT c.scenario AS scenario, toDate(c.day) AS day, c.capacity_gpu_h AS capacity_gpu_h,
       ifNull(a.allocated_gpu_h, 0) AS allocated_gpu_h,
       allocated_gpu_h / nullIf(capacity_gpu_h, 0) AS allocated_of_capacity
FROM cap AS c LEFT JOIN alloc AS a ON a.scenario = c.scenario AND a.day = c.day
ORDER BY scenario = 'observed' DESC, scenario = 'replay' DESC, scenario, day
SETTINGS join_use_nulls = 1;
