-- capacity_node_hour_changes: the days (UTC) whose capacity_node_hour rows no longer match what is loaded
-- for a reason other than the runs (run_node_hour_changes.sql has those), per cluster whose grid has rows:
--   cut     the grid stops at the as-of time the history had when it was refreshed (the latest end of a
--           node's capacity in it, as every node counts to the cut; looked for from {since} on, a few days
--           before the as-of time the last load left): the days from there to the history's as-of time
--           now, either way, with the hour the cut falls in (a refresh writes that hour's rows)
--   start   the grid starts later than the history and the nodes' entry into service say it should (a job
--           load reached back into an earlier month): the days from there to the grid's first hour
--   events  node events and reservations loaded since the grid was last refreshed (slurmdbd's, which come
--           with the jobs): the days they cover
-- Read by the loads' refresh only (etl/grains.py); a capacity load refreshes the whole history itself.
--- [model]
--- kind = "query"
--- reads = ["capacity_node_hour", "cluster_as_of", "node_event", "reservation"]
WITH
grid AS (
    SELECT cluster, min(hour) AS grid_first, max(refreshed_at) AS last_refresh
    FROM capacity_node_hour
    GROUP BY cluster
),
recent AS (
    SELECT cluster, maxIfOrNull(toUnixTimestamp(hour) + capacity_gpu_s / gpus, gpus > 0 AND capacity_gpu_s > 0) AS grid_cut
    FROM capacity_node_hour FINAL
    WHERE hour >= toStartOfHour({since:DateTime('UTC')})
    GROUP BY cluster
),
state AS (
    SELECT g.cluster AS cluster, toFloat64(toUnixTimestamp(a.as_of_ts)) AS cut,
           -- no capacity from {since} on: the grid stopped before then (or has not begun)
           ifNull(r.grid_cut, toFloat64(toUnixTimestamp(greatest(g.grid_first, toStartOfHour({since:DateTime('UTC')})))))
               AS grid_cut,
           g.grid_first AS grid_first, g.last_refresh AS last_refresh, a.as_of_ts AS as_of_ts,
           greatest(toStartOfMonth(a.first_ts), toStartOfHour(n.in_service_ts)) AS expected_first
    FROM grid AS g
    INNER JOIN cluster_as_of AS a ON a.cluster = g.cluster
    INNER JOIN (SELECT cluster, min(in_service_ts) AS in_service_ts FROM node_inventory FINAL GROUP BY cluster) AS n
        ON n.cluster = g.cluster
    LEFT JOIN recent AS r ON r.cluster = g.cluster
    SETTINGS join_use_nulls = 1
),
spans AS (
    SELECT toStartOfHour(toDateTime(least(cut, grid_cut), 'UTC')) AS s0,
           toStartOfHour(toDateTime(greatest(cut, grid_cut), 'UTC')) + 3600 AS e0
    FROM state WHERE cut != grid_cut
    UNION ALL
    SELECT toDateTime(expected_first, 'UTC'), toDateTime(grid_first, 'UTC') FROM state
    UNION ALL
    SELECT v.start_ts, least(coalesce(v.end_ts, x.as_of_ts), x.as_of_ts)
    FROM node_event AS v FINAL
    INNER JOIN state AS x ON x.cluster = v.cluster
    WHERE v.loaded_at > x.last_refresh
    UNION ALL
    SELECT r.start_ts, least(r.end_ts, x.as_of_ts)
    FROM reservation AS r FINAL
    INNER JOIN state AS x ON x.cluster = r.cluster
    WHERE r.loaded_at > x.last_refresh
)
SELECT DISTINCT arrayJoin(arrayMap(i -> toDate(s0) + i, range(toUInt32(dateDiff('day', toDate(s0), toDate(e0 - 1)) + 1)))) AS day
FROM spans
WHERE e0 > s0
ORDER BY day
