-- A load's counter edges -> counter_edge (sql/migrations/0018_counter_edge.sql): per series, its last sample
-- in the window. {{input}} is the load's own rows (no seed rows) as node, key, ts, value (etl/telemetry_insert.py
-- renders it per kind: the raw counter values, NULLs left out of the map), already one row a series there: its
-- last sample in the window with a counter value (the map built for that row only, not for every sample).
INSERT INTO counter_edge (cluster, kind, node, key, ts, value)
SELECT {cluster:String}, {kind:String}, node, key, last.1, last.2
FROM (
    SELECT node, key, argMax(tuple(ts, value), ts) AS last
    FROM ({{input}})
    WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND notEmpty(value)
    GROUP BY node, key
);
