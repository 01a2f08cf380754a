-- The nodes of {cluster} a what-if replay places jobs on (analytics/whatif.py): each node of the inventory
-- in service at some time before to_ts, with the intervals of [from_ts, to_ts) in which it was down or
-- drained (node_event, any state: no job starts on it then), as [start, end) epoch-second pairs.
--- [mart]
--- grain = "one row per scenario and GPU model"
--- kind = "whatif"
--- scope = "cluster"
SELECT i.node AS node, i.partition AS partition, i.gpu_model AS gpu_model, i.gpus AS gpus,
       i.in_service_ts AS in_service_ts, i.retired_ts AS retired_ts,
       ifNull(e.unusable, []) AS unusable
-- one row a node, which the replay places jobs on: a node with GPUs of several models (a row per model in the
-- inventory, migration 0021) is one node of all its GPUs, its models joined by '+'
FROM (SELECT node, any(partition) AS partition, arrayStringConcat(arraySort(groupArray(toString(gpu_model))), '+')
                 AS gpu_model, sum(gpus) AS gpus, min(in_service_ts) AS in_service_ts, any(retired_ts) AS retired_ts
      FROM (SELECT * FROM node_inventory FINAL WHERE cluster = {cluster:String}
            AND in_service_ts < {to_ts:DateTime('UTC')} AND (retired_ts IS NULL OR retired_ts > {from_ts:DateTime('UTC')}))
      GROUP BY node) AS i
LEFT JOIN (SELECT node,
                  groupArray((toInt64(start_ts), toInt64(least(coalesce(end_ts, {to_ts:DateTime('UTC')}),
                                                              {to_ts:DateTime('UTC')})))) AS unusable
           FROM node_event FINAL
           WHERE cluster = {cluster:String} AND start_ts < {to_ts:DateTime('UTC')}
             AND coalesce(end_ts, {to_ts:DateTime('UTC')}) > {from_ts:DateTime('UTC')}
           GROUP BY node) AS e ON e.node = i.node
ORDER BY i.partition, i.node
SETTINGS join_use_nulls = 1;
