-- DCGM_FI_DEV_XID_ERRORS is a gauge holding the last Xid a GPU reported: each change to a non-zero value
-- is an event. An Xid already showing at the window's first sample started before it when the seed row
-- (the previous sample) shows it too. Only the GPUs with an Xid in the window are ordered by time (few).
-- step_s is the samples' step: the row's Xid happened in (ts - step_s, ts]. An Xid the kernel log already
-- has (a row whose source starts with 'kernel:', xid_same_event) is not stored again: the kernel's row,
-- at the driver's own time, is that event (etl/kernel_log_xid.py).
INSERT INTO xid_event (cluster, node, gpu, ts, xid, source, step_s)
SELECT {cluster:String}, e.node, e.gpu, e.ts, e.xid, {source:String}, {step_s:UInt32}
FROM (
    SELECT node, gpu, ts, toUInt32(xid_last) AS xid
    FROM (
        SELECT node, gpu, ts, xid_last, lagInFrame(xid_last) OVER series AS xid_prev
        FROM ({{input}})
        WHERE (node, gpu) IN (SELECT node, gpu FROM ({{input}}) WHERE xid_last > 0
                              AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')})
        WINDOW series AS (PARTITION BY node, gpu ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
    )
    WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != ''
        AND xid_last > 0 AND (xid_prev IS NULL OR xid_prev != xid_last)
) AS e
LEFT JOIN (
    SELECT node, gpu, xid, groupArray(ts) AS kernel_ts
    FROM xid_event
    WHERE cluster = {cluster:String} AND startsWith(source, 'kernel:')
      AND ts >= {from_ts:DateTime('UTC')} - toIntervalSecond({step_s:UInt32} + 60)
      AND ts < {to_ts:DateTime('UTC')} + toIntervalSecond(2)
    GROUP BY node, gpu, xid
) AS k ON k.node = e.node AND k.gpu = e.gpu AND k.xid = e.xid
WHERE NOT arrayExists(t -> xid_same_event(e.ts, {step_s:UInt32}, t), k.kernel_ts);
