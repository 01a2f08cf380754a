-- How far the figures of [from_ts, to_ts) reach for {cluster}: to_ts, or the as-of time of the cluster's
-- loaded job history (sql/intermediate/cluster_as_of.sql) when that falls before it. One row:
--   through_ts  where every statistic of the window stops: capacity, down, drained, reserved, allocated and
--               idle time, node events, Xids, and telemetry (hourly: the hours that ended by then)
--   partial     1 when through_ts < to_ts: the window is still in progress in the loaded data
--   as_of_ts    the history's as-of time (NULL for a cluster without job records, which is not cut)
-- sql/intermediate/capacity_node_hour.sql makes the same cut in the grain; marts that read raw time series
-- include this one (`{{mart data_through}}`) to stop at the same time.
--- [mart]
--- grain = "one row: where the window's figures stop"
--- scope = "cluster"
--- columns = ["through_ts", "partial", "as_of_ts"]
SELECT least({to_ts:DateTime('UTC')}, ifNull(a.as_of, {to_ts:DateTime('UTC')})) AS through_ts,
       through_ts < {to_ts:DateTime('UTC')} AS partial,
       a.as_of AS as_of_ts
FROM (SELECT maxOrNull(as_of_ts) AS as_of FROM cluster_as_of WHERE cluster = {cluster:String}) AS a;
