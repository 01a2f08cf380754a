-- Xid events in [from_ts, to_ts) by code, node and GPU, with whether the code means failed hardware; up
-- to the time the loaded data reaches (data_through.sql).
--- [mart]
--- grain = "one row per node, GPU and Xid code"
--- scope = "cluster"
--- report = 14
--- columns = ["xid", "hardware", "node", "gpu", "events", "first_ts", "last_ts"]
--- filters = { hardware = "hardware" }
--- export = 10
SELECT xid, xid_is_hardware(xid) AS hardware, node, gpu, count() AS events, min(ts) AS first_ts, max(ts) AS last_ts
FROM xid_event FINAL
WHERE cluster = {cluster:String} AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}
  AND ts < (SELECT through_ts FROM ({{mart data_through}}))
GROUP BY xid, node, gpu
ORDER BY events DESC, xid, node, gpu;
