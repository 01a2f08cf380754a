-- slurmdbd's node events -> node_event rows: a node DOWN or DRAINED over [start, end) with its reason.
-- The state word: base state in the low 4 bits (1 = DOWN), NODE_STATE_DRAIN (0x200) and NODE_STATE_FAIL
-- (0x2000) flags; cluster-level rows (no node: TRES changes, registrations) are not node events.
SELECT
    {cluster:String} AS cluster,
    e.node_name AS node,
    toDateTime(e.time_start, 'UTC') AS start_ts,
    if(e.time_end = 0, NULL, toDateTime(e.time_end, 'UTC')) AS end_ts,
    multiIf(bitAnd(e.state, 15) = 1, 'DOWN', bitAnd(e.state, 512 + 8192) != 0, 'DRAIN', 'UNKNOWN') AS state,
    ifNull(e.reason, '') AS reason,
    toString(e.reason_uid) AS user
FROM {{mysql event_table}} AS e
WHERE e.node_name != '' AND e.time_start < toUnixTimestamp({to_ts:DateTime('UTC')})
  AND (e.time_end = 0 OR e.time_end >= toUnixTimestamp({from_ts:DateTime('UTC')}));
