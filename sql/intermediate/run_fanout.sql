-- run_fanout: the fan-out from job runs to the hourly grain (grain: run × node × hour): one row for every
-- hour of [from_ts, to_ts) in which a run held one of its nodes. The rule every model that spreads a run's
-- GPUs over nodes and hours uses, written once: the capacity grain's allocation
-- (sql/intermediate/capacity_node_hour.sql) and the run_node_hour grain (sql/intermediate/run_node_hour.sql,
-- what chargeback, the daily timeline, job efficiency and stragglers read) include it.
--   runs      fct_job_run: every run that held GPUs on nodes (superseded runs of requeued jobs included:
--             the resources were held), clipped to the window: [s, e) = [usage_start_ts, usage_end_ts) ∩
--             [from_ts, to_ts); a run still running counts to the time it was last seen
--   spread    sacct records a run's GPUs, not which node held how many: gpus_per_node = gpus ÷ its nodes
--             (alloc_tres: what GPU models they were, for a node with several, sql/functions/gpu_model_share.sql)
--   held_s    the seconds of the hour the run held the node; gpu_s = gpus_per_node × held_s
--   run_start_ts, run_end_ts  the whole run, unclipped (run_sample_hour finds the GPUs a run held by the
--             samples its job id labels inside it, which may lie outside the window)
-- Every cluster is here: a reader keeps its own (WHERE cluster = …, pushed down to the read of the runs).
-- An included query, not a (parameterized) view: ClickHouse expands SQL functions (overlap_s,
-- hours_touched) into a view's stored query when the view is created, so a changed rule would not reach
-- it (sql/README.md, "Templates"). Nothing creates or runs it on its own.
--- [model]
--- kind = "include"
--- reads = ["fct_job_run"]
SELECT cluster, job_id, submit_ts, job_id_raw, account, project, reservation, alloc_tres, run_node_count, node, hour, s, e,
       gpus_per_node, run_start_ts, run_end_ts,
       overlap_s(hour, hour + 3600, s, e) AS held_s,
       gpus_per_node * held_s AS gpu_s
FROM (
    SELECT cluster, job_id, submit_ts, job_id_raw, account, project, reservation, alloc_tres, nodes,
           length(nodes) AS run_node_count,
           gpus / length(nodes) AS gpus_per_node, usage_start_ts AS run_start_ts, usage_end_ts AS run_end_ts,
           greatest(usage_start_ts, {from_ts:DateTime('UTC')}) AS s, least(usage_end_ts, {to_ts:DateTime('UTC')}) AS e
    FROM fct_job_run
    WHERE NOT never_ran AND gpus > 0 AND length(nodes) > 0
      AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
)
ARRAY JOIN nodes AS node
ARRAY JOIN hours_touched(s, e) AS hour;
