-- Gauge rows of Xids the kernel log also has (xid_same_event): the kernel-log load deletes them, keeping the
-- kernel's exact time, so an Xid both saw counts once whichever was loaded first (the gauge's load leaves out
-- such rows itself: xid_event.sql). [from_ts, to_ts) is the kernel log's window.
SELECT g.node, g.gpu, toUInt32(g.ts) AS ts_s, g.xid
FROM xid_event AS g
INNER JOIN (SELECT node, gpu, xid, groupArray(ts) AS kernel_ts FROM xid_event
            WHERE cluster = {cluster:String} AND startsWith(source, 'kernel:')
              AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}
            GROUP BY node, gpu, xid) AS k
    ON k.node = g.node AND k.gpu = g.gpu AND k.xid = g.xid
WHERE g.cluster = {cluster:String} AND NOT startsWith(g.source, 'kernel:')
  AND g.ts >= {from_ts:DateTime('UTC')} - toIntervalSecond(2)
  AND g.ts < {to_ts:DateTime('UTC')} + toIntervalSecond(g.step_s + 60)
  AND arrayExists(t -> xid_same_event(g.ts, g.step_s, t), k.kernel_ts)
ORDER BY g.node, g.gpu, g.ts, g.xid;
