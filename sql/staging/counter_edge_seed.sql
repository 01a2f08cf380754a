-- The seed of each series a load has, from counter_edge: the latest edge before the load's first sample of the
-- series, at most 7 days before the window (a series silent longer starts afresh: its first step is unknown,
-- as a series' first sample always is). {{first}} is the load's series as node, key, first (its first sample's
-- time). A seed row only sets the previous value of its series' first step; one inside the window (an earlier
-- load of the same day) is put at the second before the window, where no window row is, and still before every
-- row of its series (they all come after it), so no statement ever stores it as a sample.
SELECT e.node AS node, e.key AS key, least(max(e.ts), {from_ts:DateTime('UTC')} - 1) AS ts,
    argMax(e.value, e.ts) AS value
FROM counter_edge AS e
INNER JOIN ({{first}}) AS f ON e.node = f.node AND e.key = f.key
WHERE e.cluster = {cluster:String} AND e.kind = {kind:String}
    AND e.ts >= {from_ts:DateTime('UTC')} - toIntervalDay(7) AND e.ts < f.first
GROUP BY e.node, e.key
