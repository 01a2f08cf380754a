-- Hang suspects in [from_ts, to_ts): per node, the hung runs it was in (hung_jobs.sql, included below, so
-- the rule is that file's: runs ended in the window whose GPUs all fell idle, with no NIC traffic, for at
-- least {hang_minutes} minutes before TIMEOUT, CANCELLED, FAILED or NODE_FAIL). One hang may be one bad
-- job; a node in several hangs (of different runs) is a suspect: a flaky NIC, cable or GPU that stalls
-- NCCL. Cluster-level: nodes only, no users or jobs; run it with {project} '' for the cluster's nodes
-- (with a project, the nodes of that project's hangs and runs only).
--   hangs             hung runs the node was in
--   multi_node_hangs  of those, runs on two or more nodes (where a node stalls its peers)
--   suspect           1 when the node was in two or more of the cluster's hangs: hung_jobs.sql's
--                     suspect_nodes, the cluster's whatever {project} selects (for the cluster: hangs ≥ 2)
--   hang_hours        the hangs' lengths summed (hours)
--   hung_gpu_h    the node's part of their hung GPU-hours: the run's GPUs on the node (its GPUs ÷ its
--                     nodes, as the fan-out spreads them) × the hang's length
--   first_hang_ts, last_hang_ts  the earliest and latest hang start
--   runs_ended        the runs with GPUs on the node that ended in the window (any state): what the hangs
--                     are out of, since a node in many large jobs is in many hangs of other nodes' making
--   hang_share        hangs ÷ runs_ended
--- [mart]
--- grain = "one row per node that was in a hung run"
--- scope = "project"
--- columns = ["node", "hangs", "multi_node_hangs", "suspect", "hang_hours", "hung_gpu_h", "first_hang_ts", "last_hang_ts", "runs_ended", "hang_share"]
WITH
per_node AS (
    SELECT node,
           count() AS hangs,
           countIf(length(h.nodes) >= 2) AS multi_node_hangs,
           max(has(h.suspect_nodes, node)) AS is_suspect,
           sum(h.hang_minutes) / 60 AS hang_hours,
           sum(h.gpus / length(h.nodes) * h.hang_minutes / 60) AS hung_gpu_h,
           min(h.hang_start_ts) AS first_hang_ts,
           max(h.hang_start_ts) AS last_hang_ts
    FROM ({{mart hung_jobs}}) AS h
    ARRAY JOIN h.nodes AS node
    GROUP BY node
),
ended AS (
    SELECT node, count() AS runs_ended
    FROM fct_job_run
    ARRAY JOIN nodes AS node
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND gpus > 0
      AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
    GROUP BY node
)
SELECT p.node AS node, p.hangs AS hangs, p.multi_node_hangs AS multi_node_hangs, toUInt8(p.is_suspect) AS suspect,
       p.hang_hours AS hang_hours, p.hung_gpu_h AS hung_gpu_h, p.first_hang_ts AS first_hang_ts,
       p.last_hang_ts AS last_hang_ts, e.runs_ended AS runs_ended, p.hangs / e.runs_ended AS hang_share
FROM per_node AS p
LEFT JOIN ended AS e ON e.node = p.node
ORDER BY hangs DESC, hung_gpu_h DESC, node
SETTINGS join_use_nulls = 1;
