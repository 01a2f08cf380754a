-- Xid events in [from_ts, to_ts) by code (xid_events.sql, included below, summed over nodes and GPUs):
-- events, the nodes and GPUs that logged the code, whether it means failed hardware, first and last time.
--- [mart]
--- grain = "one row per Xid code"
--- scope = "cluster"
--- report = 15
--- columns = ["xid", "hardware", "events", "nodes", "gpus", "first_ts", "last_ts"]
--- filters = { hardware = "hardware" }
--- export = 11
SELECT x.xid AS xid, any(x.hardware) AS hardware, sum(x.events) AS events, uniqExact(x.node) AS nodes,
       uniqExact(x.node, x.gpu) AS gpus, min(x.first_ts) AS first_ts, max(x.last_ts) AS last_ts
FROM ({{mart xid_events}}) AS x
GROUP BY xid
ORDER BY events DESC, xid;
