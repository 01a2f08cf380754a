-- law: a count of some of the things is at most the count of them all, and a node's time in a state at most
--   the window's: runs behind their peers ≤ multi-node runs (stragglers); NODE_FAIL runs, hardware failures
--   and failures after an Xid ≤ runs ended (failures_by_size); interrupted runs and restarts ≤ runs, and
--   restarts without a start-up ≤ restarts (campaigns); unknown campaigns ≤ campaigns (goodput); GPU runs ≤
--   runs (end_states); a node's DOWN and DRAIN hours ≤ the window's hours to the through time
--   (node_failures); a hang ≤ its run's time (hung_jobs).
-- why: each left-hand side counts a subset of what the right-hand side counts (a run behind is one of the
--   multi-node runs judged, a hardware failure one of the runs that ended, ...), and a node is in a state
--   for at most the time that passed (node_failures merges nothing, so overlapping events of one state
--   would count twice and break it).
-- Rows: section, key, figure, value ≤ bound broken by off_by (counts, or hours).
WITH
through AS (SELECT through_ts FROM ({{mart data_through}})),
compared AS (
    SELECT 'stragglers' AS section, concat('node ', node) AS key, 'runs_behind ≤ multi_node_runs' AS figure,
           toFloat64(runs_behind) AS value, toFloat64(multi_node_runs) AS bound
    FROM ({{mart stragglers}})
    UNION ALL
    SELECT 'failures_by_size', concat('size class ', size_class), x.1, x.2, x.3
    FROM ({{mart failures_by_size}})
    ARRAY JOIN [('node_fail_runs ≤ runs_ended', toFloat64(node_fail_runs), toFloat64(runs_ended)),
                ('hw_failures ≤ runs_ended', toFloat64(hw_failures), toFloat64(runs_ended)),
                ('failed_after_xid ≤ hw_failures', toFloat64(failed_after_xid), toFloat64(hw_failures))] AS x
    UNION ALL
    SELECT 'campaigns', concat(user, ' ', account, ' ', job_name, ' ', toString(gpus), ' GPUs from ', formatDateTime(first_start_ts, '%F %T')),
           x.1, x.2, x.3
    FROM ({{mart campaigns}})
    ARRAY JOIN [('interrupted_runs ≤ runs', toFloat64(interrupted_runs), toFloat64(runs)),
                ('restarts ≤ runs − 1', toFloat64(restarts), toFloat64(runs) - 1),
                ('restarts_without_startup ≤ restarts', toFloat64(restarts_without_startup), toFloat64(restarts))] AS x
    UNION ALL
    SELECT 'goodput', if(project_key = '', 'the scope row', concat('project ', project_key)),
           'unknown_campaigns ≤ campaigns', toFloat64(unknown_campaigns), toFloat64(campaigns)
    FROM ({{mart goodput}})
    UNION ALL
    SELECT 'end_states', concat('state ', state), 'gpu_runs ≤ runs', toFloat64(gpu_runs), toFloat64(runs)
    FROM ({{mart end_states}})
    UNION ALL
    SELECT 'node_failures', concat('node ', f.node), x.1, x.2, x.3
    FROM ({{mart node_failures}}) AS f
    CROSS JOIN (SELECT greatest(0, toInt64(least(through_ts, {to_ts:DateTime('UTC')}))
                                   - toInt64({from_ts:DateTime('UTC')})) / 3600 AS hours FROM through) AS w
    ARRAY JOIN [('down_hours ≤ the window''s hours', f.down_hours, w.hours),
                ('drained_hours ≤ the window''s hours', f.drained_hours, w.hours)] AS x
    UNION ALL
    SELECT 'hung_jobs', concat('job ', job_id, ' submitted ', formatDateTime(submit_ts, '%F %T')),
           'hang_minutes ≤ the run''s minutes', hang_minutes, (toInt64(end_ts) - toInt64(start_ts)) / 60
    FROM ({{mart hung_jobs}})
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
ORDER BY section, off_by DESC, key, figure;
