-- Nodes that went DOWN or were DRAINED in [from_ts, to_ts): how often, for how long inside the window,
-- why (the reasons Slurm recorded), and the cluster's hardware failure rate as the nodes saw it:
-- DOWN events per 1,000 in-service node-days. repeated = DOWN at least twice ("lemon" candidates).
-- planned_drain_events: of the DRAIN events, those whose reason matches {planned_drain_reasons} (an re2
-- regular expression: maintenance, firmware and the like, work the site planned, not a fault of the node).
-- Events stop where the loaded data does (data_through.sql: the window's end, or the as-of time of a month
-- in progress); an event still open at the last load lasts to then.
-- planned_drain_reasons: a drain whose reason matches is planned work (maintenance, firmware), never a fault.
--- [mart]
--- grain = "one row per node with a DOWN or DRAIN event"
--- scope = "cluster"
--- report = 16
--- parameters = { planned_drain_reasons = "(?i)maint|firmware|upgrade|planned|scheduled" }
--- columns = ["node", "down_events", "drain_events", "planned_drain_events", "down_hours", "drained_hours", "reasons", "repeated", "cluster_down_per_1000_node_days"]
--- export = 12
WITH
    (SELECT through_ts FROM ({{mart data_through}})) AS cut_ts,
ev AS (
    SELECT node, state, reason, start_ts,
           overlap_s(start_ts, coalesce(end_ts, cut_ts), {from_ts:DateTime('UTC')}, cut_ts) AS in_window_s
    FROM node_event FINAL
    WHERE cluster = {cluster:String} AND start_ts < cut_ts
      AND coalesce(end_ts, cut_ts) > {from_ts:DateTime('UTC')}
),
node_days AS (
    -- node_gpus: a node with GPUs of several models has a row per model, each its part of the node's time
    SELECT sum(capacity_gpu_s / node_gpus) / 86400 AS d FROM capacity_node_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')} AND gpus > 0
)
SELECT node,
       countIf(state = 'DOWN' AND start_ts >= {from_ts:DateTime('UTC')}) AS down_events,
       countIf(state = 'DRAIN' AND start_ts >= {from_ts:DateTime('UTC')}) AS drain_events,
       countIf(state = 'DRAIN' AND start_ts >= {from_ts:DateTime('UTC')} AND match(reason, {planned_drain_reasons:String}))
           AS planned_drain_events,
       sumIf(in_window_s, state = 'DOWN') / 3600 AS down_hours,
       sumIf(in_window_s, state = 'DRAIN') / 3600 AS drained_hours,
       arrayStringConcat(arraySort(groupUniqArray(reason)), '; ') AS reasons,
       down_events >= 2 AS repeated,
       (SELECT countIf(state = 'DOWN' AND start_ts >= {from_ts:DateTime('UTC')}) FROM ev) * 1000
           / nullIf((SELECT d FROM node_days), 0) AS cluster_down_per_1000_node_days
FROM ev
GROUP BY node
ORDER BY down_events DESC, down_hours + drained_hours DESC, node;
