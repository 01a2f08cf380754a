-- run_node_hour_changes: the days (UTC) whose run_node_hour rows no longer match the job history, for the
-- runs that started from {from_ts} on (and runs the grain holds from then on): what a job load changed,
-- which etl/grains.py refreshes (capacity_node_hour, then run_node_hour) instead of every hour since the
-- earliest run it re-read. A run matches when the grain holds its whole fan-out (sql/intermediate/
-- run_fanout.sql) as the history now says: the same interval, nodes, GPUs per node, account and reservation,
-- one row per node and hour. Where only the end moved (a running job seen again, or ended), the days from
-- the hour of the earlier end to the later one; otherwise the days of both intervals. Read by the loads'
-- refresh only; the grain is written last, so a load killed before it is found here again on the rerun.
--- [model]
--- kind = "query"
--- reads = ["fct_job_run", "run_node_hour"]
WITH
now_runs AS (
    SELECT cluster, job_id, submit_ts, usage_start_ts AS s, usage_end_ts AS e,
           toFloat64(gpus / length(nodes)) AS gpus_per_node, arraySort(arrayDistinct(nodes)) AS node_set,
           account, reservation
    FROM fct_job_run
    WHERE NOT never_ran AND gpus > 0 AND length(nodes) > 0 AND usage_end_ts > usage_start_ts
      AND coalesce(start_ts, submit_ts) >= {from_ts:DateTime('UTC')}
),
old_runs AS (
    SELECT cluster, job_id, submit_ts, min(s) AS s, max(e) AS e, any(gpus_per_node) AS gpus_per_node,
           arraySort(groupUniqArray(node)) AS node_set, any(account) AS account, any(reservation) AS reservation,
           count() AS n_rows
    FROM run_node_hour FINAL
    WHERE hour >= toStartOfHour({from_ts:DateTime('UTC')})  -- every row of a run started from then on
    GROUP BY cluster, job_id, submit_ts
),
compared AS (
    SELECT n.s AS ns, n.e AS ne, o.s AS os, o.e AS oe,
           o.cluster IS NULL AS only_now, n.cluster IS NULL AS only_old,
           n.node_set = o.node_set AND n.gpus_per_node = o.gpus_per_node AND n.account = o.account
             AND n.reservation = o.reservation AND n.s = o.s
             AND o.n_rows = length(o.node_set) * length(hours_touched(o.s, o.e)) AS same_but_end
    FROM now_runs AS n
    FULL OUTER JOIN old_runs AS o
        ON n.cluster = o.cluster AND n.job_id = o.job_id AND n.submit_ts = o.submit_ts
    -- (a run the grain holds from before {from_ts} that the history no longer has from then on is not in
    -- question: only runs from {from_ts} on were written)
    WHERE (only_old OR only_now OR NOT same_but_end OR n.e != o.e)
      AND NOT (only_old AND o.s < {from_ts:DateTime('UTC')})
),
spans AS (
    SELECT multiIf(only_now, ns, only_old, os, same_but_end, toStartOfHour(least(ne, oe)), least(ns, os)) AS s0,
           multiIf(only_now, ne, only_old, oe, greatest(ne, oe)) AS e0
    FROM compared
)
SELECT DISTINCT arrayJoin(arrayMap(i -> toDate(s0) + i, range(toUInt32(dateDiff('day', toDate(s0), toDate(e0 - 1)) + 1)))) AS day
FROM spans
WHERE e0 > s0
ORDER BY day
SETTINGS join_use_nulls = 1
