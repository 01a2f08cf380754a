-- Node health scorecard of [from_ts, to_ts): every in-service node of the cluster (or of reservation
-- {reservation}, '' for all), what went wrong on it, one score with its reasons, ranked, and whether it is
-- on the swap list ("nodes to swap for reserve nodes before the next reservation"). Cluster-level: nodes
-- only, no users or jobs. The evidence, each from the mart of its own section (included below, so the
-- rules are theirs):
--   hw_xids, xid_codes   hardware Xid events on the node's GPUs (xid_is_hardware: 48, 63, 64, 74, 79, 92,
--                        94, 95), and every Xid code seen with its count ('79×2, 13×1'); lone_hw_xids: of
--                        them, those without a DOWN or DRAIN of the node beginning within 10 minutes of
--                        them (an Xid and the DOWN it caused are one fault)
--   down_events, drain_events, planned_drain_events, down_hours, drained_hours, event_reasons
--                        node_failures.sql; a planned drain (its reason matches {planned_drain_reasons}:
--                        maintenance, a firmware update) is work the site chose, never a fault
--   fault_events         down_events + the unplanned drains + lone_hw_xids: the node's hardware faults
--   throttled_hours, temp_c_max   throttling.sql, summed (hours) and maxed over the node's GPUs
--   runs_behind          stragglers.sql: multi-node runs in which the node was the one behind its peers
--   multi_runs, failed_runs   GPU runs on two or more nodes, the node among them, that ended in the window,
--                        and those FAILED or NODE_FAIL: a node that breaks takes its peers' runs with it
--   failed_expected      multi_runs × the cluster's share of failed multi-node runs: what its share predicts
--   hangs                hang_suspect_nodes.sql's multi-node hangs of the node (a single-node hang is its job's)
--   hang_hours_exposed   the node's hours in the runs that can hang: multi-node runs of at least the GPU
--                        count of the window's smallest multi-node hang (hangs hit large runs; a node in many
--                        of them is in many hangs of other nodes' making)
--   hang_expected        hang_hours_exposed × the cluster's hangs per such node-hour
--   failed_p, hang_p     the chance of so many or more by chance alone: the Poisson upper tail at the
--                        expectation; significant below {swap_alpha} ÷ the nodes scored (Bonferroni: with
--                        100 nodes one of them is 2 deviations off every month by chance)
-- Score (points; docs/monthly.md, Definitions, "node health"):
--   3 a hardware fault (a DOWN, an unplanned DRAIN with its Xid, a lone hardware Xid), 1 an unplanned
--   DRAIN without one, 1 a day throttled in 30 days of the window, 2 a run behind its peers beyond the second (a run's slowest node can
--   be behind once or twice by chance: uneven input), and {swap_min_score} (the swap list on its own) for
--   failed runs or hangs significantly above the node's share. One fault in a month is chance on a healthy
--   node (4 in 1,000 node-days fail); two are a repeater
--   swap   1 when score >= {swap_min_score}; rank: by score, then node
--   reasons  the non-zero parts, in that order
-- Why swap_min_score = 6: two faults (3 each), a week throttled, or five runs behind their peers put a node on
-- the swap list; failed multi-node runs or hangs significantly above its share (a Poisson upper tail below
-- swap_alpha = 0.01 ÷ the nodes scored) score the whole 6. A drain whose reason matches planned_drain_reasons is
-- planned work, never a fault. reservation '' scores every node, a name only that reservation's.
--- [mart]
--- grain = "one row per in-service node (the scorecard)"
--- rule = "Points: 3 a hardware fault (a DOWN, a DRAIN for an Xid, a lone hardware Xid; an Xid and its DOWN are one), 1 another unplanned DRAIN, 1 a day throttled in 30 days, 2 a run behind its peers beyond the second, and the whole score (swap_min_score) for failed multi-node runs or hangs significantly above the node's share (Poisson, Bonferroni over the nodes). Planned drains (maintenance, firmware) score nothing: one fault in a month is chance, two a repeater."
--- scope = "cluster"
--- report = 24
--- parameters = { planned_drain_reasons = "(?i)maint|firmware|upgrade|planned|scheduled", reservation = "", swap_alpha = 0.01, swap_min_score = 6.0 }
--- columns = ["node", "gpu_model", "rack", "hw_xids", "xid_codes", "lone_hw_xids", "down_events", "drain_events", "planned_drain_events", "xid_drain_events", "down_hours", "drained_hours", "event_reasons", "fault_events", "other_drain_events", "throttled_hours", "temp_c_max", "runs_behind", "multi_runs", "failed_runs", "failed_expected", "hangs", "hang_hours_exposed", "hang_expected", "failed_p", "hang_p", "score", "swap", "rank", "reasons"]
--- export = 24
WITH
inventory AS (
    -- one row a node: a node with GPUs of several models has a row per model (its models joined by '+')
    SELECT node, arrayStringConcat(arraySort(groupArray(toString(gpu_model))), '+') AS gpu_model, sum(gpus) AS gpus,
           any(rack) AS rack
    FROM node_inventory FINAL
    WHERE cluster = {cluster:String} AND in_service_ts < {to_ts:DateTime('UTC')}
      AND (retired_ts IS NULL OR retired_ts > {from_ts:DateTime('UTC')})
      AND ({reservation:String} = ''
           OR node IN (SELECT arrayJoin(argMax(nodes, start_ts)) FROM reservation FINAL
                       WHERE cluster = {cluster:String} AND name = {reservation:String}))
    GROUP BY node
),
-- an Xid and the DOWN or DRAIN that began within 10 minutes of it on its node are one fault (the kernel logs
-- the Xid seconds before Slurm takes the node; dcgm-exporter's sample of it may come a step after)
node_stops AS (
    SELECT node, groupArray(start_ts) AS stops FROM node_event FINAL
    WHERE cluster = {cluster:String} AND state IN ('DOWN', 'DRAIN')
      AND start_ts >= {from_ts:DateTime('UTC')} - INTERVAL 1 DAY AND start_ts < {to_ts:DateTime('UTC')} + INTERVAL 1 DAY
    GROUP BY node
),
hw_xid AS (
    SELECT x.node AS node,
           arrayFilter(s -> abs(toInt64(s) - toInt64(x.ts)) <= 600, ifNull(s.stops, [])) AS matched
    FROM (SELECT node, ts FROM xid_event FINAL
          WHERE cluster = {cluster:String} AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}
            AND xid_is_hardware(xid)) AS x
    LEFT JOIN node_stops AS s ON s.node = x.node
),
lone AS (
    SELECT node, countIf(empty(matched)) AS lone_hw_xids, arrayDistinct(arrayFlatten(groupArray(matched))) AS xid_stops
    FROM hw_xid GROUP BY node
),
xids AS (
    SELECT node, sumIf(n, hw) AS hw_xids,
           arrayStringConcat(arrayMap(x -> concat(toString(x.1), '×', toString(x.2)),
                                      arraySort(x -> (-toInt64(x.2), x.1), groupArray((xid, n)))), ', ') AS xid_codes
    FROM (SELECT node, xid, count() AS n, any(xid_is_hardware(xid)) AS hw
          FROM xid_event FINAL
          WHERE cluster = {cluster:String} AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}
          GROUP BY node, xid)
    GROUP BY node
),
-- the unplanned drains of the window that an Xid caused (the rest count a point each)
xid_drains AS (
    SELECT e.node AS node, count() AS xid_drain_events
    FROM node_event AS e FINAL
    INNER JOIN (SELECT node, arrayJoin(xid_stops) AS stop_ts FROM lone) AS l
        ON l.node = e.node AND l.stop_ts = e.start_ts
    WHERE e.cluster = {cluster:String} AND e.state = 'DRAIN' AND e.start_ts >= {from_ts:DateTime('UTC')}
      AND NOT match(e.reason, {planned_drain_reasons:String})
    GROUP BY e.node
),
events AS (SELECT node, down_events, drain_events, planned_drain_events, down_hours, drained_hours, reasons
           FROM ({{mart node_failures}})),
throttle AS (
    SELECT node, sum(throttled_hours) AS throttled_hours, max(temp_c_max) AS temp_c_max
    FROM ({{mart throttling}}) GROUP BY node
),
behind AS (SELECT node, runs_behind FROM ({{mart stragglers}})),
hangs AS (SELECT node, multi_node_hangs AS hangs FROM ({{mart hang_suspect_nodes}})),
-- the smallest multi-node run that hung in the window: runs of that size and more can hang
hang_size AS (SELECT min(gpus) AS g FROM ({{mart hung_jobs}}) WHERE length(nodes) >= 2),
-- multi-node runs, failures and hang exposure per node, over every node of the cluster (the rates are the
-- cluster's, whatever {reservation} selects)
per_node AS (
    SELECT d.node AS node, d.multi_runs AS multi_runs, d.failed_runs AS failed_runs,
           d.hang_hours_exposed AS hang_hours_exposed, ifNull(h.hangs, 0) AS hangs,
           sum(d.failed_runs) OVER () / nullIf(sum(d.multi_runs) OVER (), 0) AS failed_per_run,
           sum(ifNull(h.hangs, 0)) OVER () / nullIf(sum(d.hang_hours_exposed) OVER (), 0) AS hangs_per_hour
    FROM (SELECT node, count() AS multi_runs, countIf(state IN ('FAILED', 'NODE_FAIL')) AS failed_runs,
                 sumIf(wall_s, gpus >= ifNull((SELECT g FROM hang_size), 4294967295)) / 3600 AS hang_hours_exposed
          FROM fct_job_run
          ARRAY JOIN nodes AS node
          WHERE cluster = {cluster:String} AND NOT never_ran AND gpus > 0 AND length(nodes) >= 2
            AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
          GROUP BY node) AS d
    LEFT JOIN hangs AS h ON h.node = d.node
),
card AS (
    SELECT i.node AS node, i.gpu_model AS gpu_model, i.rack AS rack,
           ifNull(x.hw_xids, 0) AS hw_xids, ifNull(x.xid_codes, '') AS xid_codes,
           ifNull(lo.lone_hw_xids, 0) AS lone_hw_xids,
           ifNull(e.down_events, 0) AS down_events, ifNull(e.drain_events, 0) AS drain_events,
           ifNull(e.planned_drain_events, 0) AS planned_drain_events,
           ifNull(xd.xid_drain_events, 0) AS xid_drain_events,
           ifNull(e.down_hours, 0) AS down_hours, ifNull(e.drained_hours, 0) AS drained_hours,
           ifNull(e.reasons, '') AS event_reasons,
           down_events + xid_drain_events + lone_hw_xids AS fault_events,
           drain_events - planned_drain_events - xid_drain_events AS other_drain_events,
           ifNull(t.throttled_hours, 0) AS throttled_hours, t.temp_c_max AS temp_c_max,
           ifNull(b.runs_behind, 0) AS runs_behind,
           ifNull(d.multi_runs, 0) AS multi_runs, ifNull(d.failed_runs, 0) AS failed_runs,
           multi_runs * ifNull(d.failed_per_run, 0) AS failed_expected,
           ifNull(d.hangs, 0) AS hangs, ifNull(d.hang_hours_exposed, 0) AS hang_hours_exposed,
           hang_hours_exposed * ifNull(d.hangs_per_hour, 0) AS hang_expected,
           -- P(X >= n) for X ~ Poisson(expected): 1 − the terms below n (0 when n > 0 = expected... = 1 at n 0)
           if(failed_runs = 0, 1., if(failed_expected <= 0, 0., greatest(1 - arraySum(arrayMap(
               k -> exp(k * log(failed_expected) - failed_expected - lgamma(k + 1)), range(failed_runs))), 0.)))
               AS failed_p,
           if(hangs = 0, 1., if(hang_expected <= 0, 0., greatest(1 - arraySum(arrayMap(
               k -> exp(k * log(hang_expected) - hang_expected - lgamma(k + 1)), range(hangs))), 0.)))
               AS hang_p,
           {swap_alpha:Float64} / count() OVER () AS alpha_node,
           failed_p < alpha_node AS failed_significant,
           hang_p < alpha_node AS hang_significant,
           -- days throttled per 30 days of the window: a GPU hot every afternoon scores the same in any window
           3 * fault_events + other_drain_events
               + throttled_hours / 24 * 30 * 86400
                 / (toInt64({to_ts:DateTime('UTC')}) - toInt64({from_ts:DateTime('UTC')}))
               + 2 * greatest(runs_behind - 2, 0)
               + {swap_min_score:Float64} * (failed_significant OR hang_significant) AS score
    FROM inventory AS i
    LEFT JOIN xids AS x ON x.node = i.node
    LEFT JOIN lone AS lo ON lo.node = i.node
    LEFT JOIN xid_drains AS xd ON xd.node = i.node
    LEFT JOIN events AS e ON e.node = i.node
    LEFT JOIN throttle AS t ON t.node = i.node
    LEFT JOIN behind AS b ON b.node = i.node
    LEFT JOIN per_node AS d ON d.node = i.node
)
SELECT * EXCEPT (alpha_node, failed_significant, hang_significant),
       toUInt8(score >= {swap_min_score:Float64}) AS swap,
       row_number() OVER (ORDER BY score DESC, node) AS rank,
       arrayStringConcat(arrayFilter(s -> s != '', [
           if(fault_events > 0, concat(toString(fault_events), ' hardware fault',
                                       if(fault_events > 1, 's', ''), ' (Xids seen: ', xid_codes, ')'), ''),
           if(down_events > 0, concat(toString(down_events), ' DOWN (', toString(round(down_hours, 1)), ' h)'), ''),
           if(drain_events - planned_drain_events > 0,
              concat(toString(drain_events - planned_drain_events), ' DRAIN (', toString(round(drained_hours, 1)), ' h)'), ''),
           if(throttled_hours > 0, concat(toString(round(throttled_hours, 1)), ' h throttled, max ',
                                          toString(round(ifNull(temp_c_max, 0))), ' °C'), ''),
           if(runs_behind > 0, concat('behind its peers in ', toString(runs_behind), ' runs'), ''),
           if(failed_significant, concat(toString(failed_runs), ' failed multi-node runs, ',
                                         toString(round(failed_expected, 1)), ' expected'), ''),
           if(hang_significant, concat(toString(hangs), ' hangs, ', toString(round(hang_expected, 1)), ' expected'), '')
       ]), '; ') AS reasons
FROM card
ORDER BY rank
SETTINGS join_use_nulls = 1;
