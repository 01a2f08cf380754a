-- Node health scorecard of [from_ts, to_ts): every in-service node of the cluster (or of reservation
-- {reservation}, '' for all), what went wrong on it, one score with its reasons, ranked, and whether it is
-- on the swap list ("nodes to swap for reserve nodes before the next reservation"). Cluster-level: nodes
-- only, no users or jobs. The evidence, each from the mart of its own section (included below, so the
-- rules are theirs):
--   hw_xids, xid_codes   hardware Xid events on the node's GPUs (xid_is_hardware: 48, 63, 64, 74, 79, 92,
--                        94, 95), and every Xid code seen with its count ('79×2, 13×1')
--   down_events, drain_events, down_hours, drained_hours, event_reasons   node_failures.sql
--   throttled_hours, temp_c_max   throttling.sql, summed (hours) and maxed over the node's GPUs
--   runs_behind          stragglers.sql: multi-node runs in which the node was the one behind its peers
--   runs_ended, failed_runs       GPU runs on the node that ended in the window, and those FAILED or NODE_FAIL
--   failed_expected      runs_ended × the cluster's share of failed runs (over every node's runs): what
--                        its share of runs predicts; failed_excess = failed_runs − failed_expected, and
--                        failed_z = failed_excess ÷ √failed_expected (at least 1): standard deviations
--                        above it, as for a Poisson count
--   hangs, hang_expected, hang_excess   hang_suspect_nodes.sql's hangs, against runs_ended × the cluster's
--                        hangs per run ended, the same way (a node in large jobs is in many hangs of other
--                        nodes' making; only what exceeds its share counts), hang_z likewise
-- Score (points; docs/monthly.md, Definitions, "node health"):
--   3 a hardware Xid event, 3 a DOWN event, 1 a DRAIN event, 1 a day throttled, 2 a run behind its peers
--   beyond the second (a run's slowest node can be behind once or twice by chance: uneven input), 2 per standard deviation beyond 2 of failed runs (failed_z − 2) and of hangs (hang_z − 2) above
--   the node's share: chance alone puts a node 2 deviations off in one month in 40
--   swap   1 when score >= {swap_min_score}; rank: by score, then node
--   reasons  the non-zero parts, in that order
WITH
inventory AS (
    SELECT node, gpu_model, gpus, rack
    FROM node_inventory FINAL
    WHERE cluster = {cluster:String} AND in_service_ts < {to_ts:DateTime('UTC')}
      AND (retired_ts IS NULL OR retired_ts > {from_ts:DateTime('UTC')})
      AND ({reservation:String} = ''
           OR node IN (SELECT arrayJoin(argMax(nodes, start_ts)) FROM reservation FINAL
                       WHERE cluster = {cluster:String} AND name = {reservation:String}))
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
events AS (SELECT node, down_events, drain_events, down_hours, drained_hours, reasons FROM ({{mart node_failures}})),
throttle AS (
    SELECT node, sum(throttled_hours) AS throttled_hours, max(temp_c_max) AS temp_c_max
    FROM ({{mart throttling}}) GROUP BY node
),
behind AS (SELECT node, runs_behind FROM ({{mart stragglers}})),
-- runs ended and hangs per node, over every node of the cluster (the rates are the cluster's, whatever
-- {reservation} selects); the hangs are formed once, here
per_node AS (
    SELECT d.node AS node, d.runs_ended AS runs_ended, d.failed_runs AS failed_runs, ifNull(h.hangs, 0) AS hangs,
           sum(d.failed_runs) OVER () / nullIf(sum(d.runs_ended) OVER (), 0) AS failed_per_run,
           sum(ifNull(h.hangs, 0)) OVER () / nullIf(sum(d.runs_ended) OVER (), 0) AS hangs_per_run
    FROM (SELECT node, count() AS runs_ended, countIf(state IN ('FAILED', 'NODE_FAIL')) AS failed_runs
          FROM fct_job_run
          ARRAY JOIN nodes AS node
          WHERE cluster = {cluster:String} AND NOT never_ran AND gpus > 0
            AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
          GROUP BY node) AS d
    LEFT JOIN (SELECT node, hangs FROM ({{mart hang_suspect_nodes}})) AS h ON h.node = d.node
),
card AS (
    SELECT i.node AS node, i.gpu_model AS gpu_model, i.rack AS rack,
           ifNull(x.hw_xids, 0) AS hw_xids, ifNull(x.xid_codes, '') AS xid_codes,
           ifNull(e.down_events, 0) AS down_events, ifNull(e.drain_events, 0) AS drain_events,
           ifNull(e.down_hours, 0) AS down_hours, ifNull(e.drained_hours, 0) AS drained_hours,
           ifNull(e.reasons, '') AS event_reasons,
           ifNull(t.throttled_hours, 0) AS throttled_hours, t.temp_c_max AS temp_c_max,
           ifNull(b.runs_behind, 0) AS runs_behind,
           ifNull(d.runs_ended, 0) AS runs_ended, ifNull(d.failed_runs, 0) AS failed_runs,
           runs_ended * ifNull(d.failed_per_run, 0) AS failed_expected,
           failed_runs - failed_expected AS failed_excess,
           ifNull(d.hangs, 0) AS hangs,
           runs_ended * ifNull(d.hangs_per_run, 0) AS hang_expected,
           hangs - hang_expected AS hang_excess,
           -- failed runs and hangs count by how far above the node's share they are, in standard
           -- deviations (Poisson: √expected) beyond 2: a node in thousands of runs is 2√n off by chance
           (failed_runs - failed_expected) / sqrt(greatest(failed_expected, 1)) AS failed_z,
           (hangs - hang_expected) / sqrt(greatest(hang_expected, 1)) AS hang_z,
           3 * hw_xids + 3 * down_events + drain_events + throttled_hours / 24 + 2 * greatest(runs_behind - 2, 0)
               + 2 * greatest(failed_z - 2, 0) + 2 * greatest(hang_z - 2, 0) AS score
    FROM inventory AS i
    LEFT JOIN xids AS x ON x.node = i.node
    LEFT JOIN events AS e ON e.node = i.node
    LEFT JOIN throttle AS t ON t.node = i.node
    LEFT JOIN behind AS b ON b.node = i.node
    LEFT JOIN per_node AS d ON d.node = i.node
)
SELECT *,
       toUInt8(score >= {swap_min_score:Float64}) AS swap,
       row_number() OVER (ORDER BY score DESC, node) AS rank,
       arrayStringConcat(arrayFilter(s -> s != '', [
           if(hw_xids > 0, concat(toString(hw_xids), ' hardware Xid (Xids seen: ', xid_codes, ')'), ''),
           if(down_events > 0, concat(toString(down_events), ' DOWN (', toString(round(down_hours, 1)), ' h)'), ''),
           if(drain_events > 0, concat(toString(drain_events), ' DRAIN (', toString(round(drained_hours, 1)), ' h)'), ''),
           if(throttled_hours > 0, concat(toString(round(throttled_hours, 1)), ' h throttled, max ',
                                          toString(round(ifNull(temp_c_max, 0))), ' °C'), ''),
           if(runs_behind > 0, concat('behind its peers in ', toString(runs_behind), ' runs'), ''),
           if(failed_z > 2, concat(toString(failed_runs), ' failed runs, ', toString(round(failed_expected, 1)),
                                        ' expected'), ''),
           if(hang_z > 2, concat(toString(hangs), ' hangs, ', toString(round(hang_expected, 1)), ' expected'), '')
       ]), '; ') AS reasons
FROM card
ORDER BY rank
SETTINGS join_use_nulls = 1;
