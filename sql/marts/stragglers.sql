-- Straggler nodes in [from_ts, to_ts): in a synchronous multi-node job every GPU waits for the slowest, so
-- a node whose GPUs are persistently less active than its peers' costs the whole job. For each run of
-- {project} ('' for all) on 2+ nodes with telemetry, a node is behind when its time-weighted GPU
-- utilization is under {behind_ratio} of the median of the run's nodes; per node: the multi-node runs it
-- took part in, how often it was behind, and its utilization relative to its peers on average; the nodes
-- behind in at least one run, with the ratio they were judged by. A node's utilization in an hour is the
-- run_node_hour grain's (capacity_node_hour's telemetry), weighted by the time the run held it, over the
-- hours the run held the node whole: a node's utilization in an hour it held only in part counts whatever
-- ran on it before or after (a node idle until the run started at :50 looked behind peers that were busy
-- with other jobs); a run held for no whole hour is not judged.
-- Why behind_ratio = 0.8 (the report's): a node is a straggler under 0.8 of its run's median node.
--- [mart]
--- grain = "one row per node that ran behind its peers"
--- scope = "project"
--- report = 18
--- parameters = { behind_ratio = 0.8 }
--- columns = ["node", "multi_node_runs", "runs_behind", "util_vs_peers", "util_pct", "behind_ratio"]
--- export = 14
WITH pieces AS (
    SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, r.node AS node,
           sum(r.node_util * r.held_s) / nullIf(sum(if(r.node_util IS NOT NULL, r.held_s, 0)), 0) AS util
    FROM (SELECT *, overlap_s(s, e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}) AS held_s
          FROM run_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
          AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}
          AND run_node_count >= 2 AND has_capacity AND e - s = 3600) AS r
    WHERE {project:String} = ''
       OR r.account IN (SELECT account FROM dim_account WHERE project = {project:String})
    GROUP BY job_id, submit_ts, node
    HAVING util IS NOT NULL
),
rated AS (
    SELECT *, util / nullIf(median(util) OVER (PARTITION BY job_id, submit_ts), 0) AS vs_peers,
           count() OVER (PARTITION BY job_id, submit_ts) AS nodes_seen
    FROM pieces
)
SELECT node,
       count() AS multi_node_runs,
       countIf(vs_peers < {behind_ratio:Float64}) AS runs_behind,
       avg(vs_peers) AS util_vs_peers,
       avg(util) * 100 AS util_pct,
       {behind_ratio:Float64} AS behind_ratio
FROM rated
WHERE nodes_seen >= 2
GROUP BY node
HAVING runs_behind > 0
ORDER BY runs_behind DESC, util_vs_peers, node;
