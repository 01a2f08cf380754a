-- DCGM_FI_DEV_XID_ERRORS is a gauge holding the last Xid a GPU reported: each change to a non-zero value
-- is an event. An Xid already showing at the window's first sample started before it when the seed row
-- (the previous sample) shows it too. Only the GPUs with an Xid in the window are ordered by time (few).
INSERT INTO xid_event (cluster, node, gpu, ts, xid, source)
SELECT {cluster:String}, node, gpu, ts, toUInt32(xid_last), {source:String}
FROM (
    SELECT node, gpu, ts, xid_last, lagInFrame(xid_last) OVER series AS xid_prev
    FROM ({{input}})
    WHERE (node, gpu) IN (SELECT node, gpu FROM ({{input}}) WHERE xid_last > 0
                          AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')})
    WINDOW series AS (PARTITION BY node, gpu ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
)
WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != ''
    AND xid_last > 0 AND (xid_prev IS NULL OR xid_prev != xid_last);
