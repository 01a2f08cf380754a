-- What a what-if scenario gives over [from_ts, to_ts), one row a scenario, from the replays analytics/whatif.py
-- hands over in two temporary tables of its session (it writes nothing to the warehouse):
--   whatif_run    one row a job and scenario: submit_ts, start_ts, end_ts (NULL start: it did not start; its
--                 end_ts then when it was cancelled in the queue, NULL while it waited),
--                 gpus, account, project; 'observed' holds the jobs as they ran, 'replay' the unchanged replay,
--                 the others a changed cluster or load
--   whatif_node   one row a node and scenario: gpu_model, gpus, in_service_ts, retired_ts
-- Columns:
--   nodes, capacity_gpu_h   the nodes in service during the window, and their GPUs × that time
--   allocated_gpu_h         the jobs' GPUs × the part of their run inside the window
--   allocated_of_capacity       allocated ÷ capacity GPU-hours (not the report's utilization, allocated ÷
--                               available: the replay does not count down or drained time as unavailable)
--   unallocated_gpu_h       capacity − allocated (not the report's idle GPU-hours: those are the idle-GPU
--                               runs' allocated hours, idle_gpu_users.sql)
--   jobs, jobs_started          jobs submitted in the window; of them, those that started in it
--   jobs_not_started            jobs submitted before the window's end (in it, or earlier and still waiting at its
--                               start) that had not started by its end (a replay whose cluster is smaller
--                               leaves more); jobs still pending when the history was last seen among them
--   wait_hours                  the jobs' waits summed: start − submit, or to_ts − submit for those still waiting
--   wait_p50_hours, wait_p90_hours  of the jobs that started (all sizes; whatif_waits.sql by size class)
--   capex, capex_per_allocated_gpu_h  capacity GPU-hours × capex_per_gpu_hour (cost_model, as cost.sql),
--                               and that ÷ allocated GPU-hours: capex only (the report's cost per allocated
--                               GPU-hour, cost.sql, adds the energy; a replay has no telemetry)
--   added_nodes, wait_hours_saved, wait_hours_saved_per_added_node, added_capex, cost_per_wait_hour_saved
--                               the scenario against the unchanged replay: the marginal value of the change
--   allocated_of_capacity_error_pts  (this scenario's allocated_of_capacity − the observed one's) × 100: for
--                               'replay', how far the replay is from what happened, the error to read every
--                               figure with
--- [mart]
--- grain = "one row per scenario"
--- kind = "whatif"
--- scope = "cluster"
WITH
nodes AS (
    SELECT n.scenario AS scenario,
           countIf(overlap_s({from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}, n.in_service_ts,
                             coalesce(n.retired_ts, {to_ts:DateTime('UTC')})) > 0) AS n_nodes,
           sum(n.gpus * overlap_s({from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')}, n.in_service_ts,
                                  coalesce(n.retired_ts, {to_ts:DateTime('UTC')}))) / 3600 AS cap_h,
           -- each node's capex taken to fixed point (Decimal, 1e-12 of the currency) and summed as Decimal: a
           -- Float64 sum depends on the order the engine's threads hand in their parts, and the unchanged
           -- replay's capex less itself (added_capex) came out 8e-11 in one run, 0 in another
           toFloat64(sum(toDecimal128(n.gpus * overlap_s({from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')},
                                                         n.in_service_ts, coalesce(n.retired_ts, {to_ts:DateTime('UTC')}))
                                      / 3600 * ifNull(capex_per_gpu_hour(m.node_price, n.gpus, m.amortization_years), 0),
                                      12))) AS capex_total
    FROM whatif_node AS n
    LEFT JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(m.gpu_model) = lower(n.gpu_model)
    GROUP BY scenario
),
runs AS (
    SELECT scenario,
           sum(gpus * if(start_ts IS NULL, 0, overlap_s({from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')},
                                                        assumeNotNull(start_ts), assumeNotNull(end_ts)))) / 3600 AS alloc_h,
           countIf(submit_ts >= {from_ts:DateTime('UTC')}) AS n_jobs,
           countIf(submit_ts >= {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}) AS n_started,
           -- (a job cancelled in the queue before the end, start NULL and end_ts its cancel time, waits no longer)
           countIf((start_ts IS NULL OR start_ts >= {to_ts:DateTime('UTC')})
                   AND NOT (start_ts IS NULL AND ifNull(end_ts < {to_ts:DateTime('UTC')}, 0))) AS n_not_started,
           sumIf(toInt64(least(coalesce(start_ts, end_ts, {to_ts:DateTime('UTC')}), {to_ts:DateTime('UTC')}))
                 - toInt64(submit_ts), submit_ts >= {from_ts:DateTime('UTC')}) / 3600 AS wait_h,
           quantileExactIf(0.5)(toInt64(start_ts) - toInt64(submit_ts),
                                submit_ts >= {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}) / 3600 AS p50_h,
           quantileExactIf(0.9)(toInt64(start_ts) - toInt64(submit_ts),
                                submit_ts >= {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}) / 3600 AS p90_h
    FROM whatif_run
    WHERE submit_ts < {to_ts:DateTime('UTC')}
    GROUP BY scenario
),
s AS (
    SELECT n.scenario AS scenario, n.n_nodes AS nodes, n.cap_h AS capacity_gpu_h, ifNull(r.alloc_h, 0) AS allocated_gpu_h,
           allocated_gpu_h / nullIf(capacity_gpu_h, 0) AS allocated_of_capacity,
           capacity_gpu_h - allocated_gpu_h AS unallocated_gpu_h,
           ifNull(r.n_jobs, 0) AS jobs, ifNull(r.n_started, 0) AS jobs_started,
           ifNull(r.n_not_started, 0) AS jobs_not_started,
           ifNull(r.wait_h, 0) AS wait_hours, r.p50_h AS wait_p50_hours, r.p90_h AS wait_p90_hours,
           n.capex_total AS capex, capex / nullIf(allocated_gpu_h, 0) AS capex_per_allocated_gpu_h
    FROM nodes AS n LEFT JOIN runs AS r ON r.scenario = n.scenario
)
SELECT s.*,
       toInt64(s.nodes) - toInt64(b.b_nodes) AS added_nodes,
       b.b_wait_hours - s.wait_hours AS wait_hours_saved,
       wait_hours_saved / nullIf(added_nodes, 0) AS wait_hours_saved_per_added_node,
       s.capex - b.b_capex AS added_capex,
       added_capex / nullIf(wait_hours_saved, 0) AS cost_per_wait_hour_saved,
       (s.allocated_of_capacity - o.o_allocated_of_capacity) * 100 AS allocated_of_capacity_error_pts
FROM s
LEFT JOIN (SELECT nodes AS b_nodes, wait_hours AS b_wait_hours, capex AS b_capex FROM s WHERE scenario = 'replay') AS b
    ON 1 = 1
LEFT JOIN (SELECT allocated_of_capacity AS o_allocated_of_capacity FROM s WHERE scenario = 'observed') AS o ON 1 = 1
ORDER BY s.scenario = 'observed' DESC, s.scenario = 'replay' DESC, s.scenario
SETTINGS join_use_nulls = 1;
