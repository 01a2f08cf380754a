-- Each reservation overlapping [from_ts, to_ts): the usable GPU-hours it held inside the window, the part
-- used by jobs that ran in a reservation on its nodes, the idle rest, and whom it was for. With {project}
-- (a project report), only the reservations held for one of the project's accounts.
--   used_gpu_h      the GPU time of jobs that ran in a reservation on its nodes, within its time (capped, per
--                   node-hour, at the reservation's GPUs × the part of the hour it covers, to the through time:
--                   data_through.sql). A job on a drained node counts: a draining node runs its jobs to the end
--   reserved_gpu_h  the reserved time that was available: the usable reserved time (capacity_node_hour's
--                   reserved_gpu_s: not down or drained), and the reserved time of a drained node its jobs
--                   still held (the utilization counts those GPUs as allocated, not drained). Per node-hour the
--                   larger of the usable reserved time and the used time, so used ≤ reserved
--   idle_gpu_h      reserved − used: the utilization's reserved unused time (reserved_idle_gpu_s)
--- [mart]
--- grain = "one row per reservation"
--- scope = "project"
--- report = 13
--- columns = ["reservation", "accounts", "partition", "start_ts", "end_ts", "reserved_gpu_h", "used_gpu_h", "idle_gpu_h", "use_ratio"]
--- export = 19
WITH through AS (SELECT through_ts FROM ({{mart data_through}})),
hours AS (
    SELECT r.name AS name, any(r.accounts) AS accounts, any(r.partition) AS partition,
           min(r.start_ts) AS start_ts, max(r.end_ts) AS end_ts,
           c.node AS node, c.hour AS hour,
           any(c.reserved_gpu_s) AS usable_gpu_s,
           least(any(c.allocated_resv_gpu_s),
                 toFloat64(any(c.gpus) * least(sum(overlap_s(c.hour, c.hour + 3600, r.start_ts,
                                                             least(r.end_ts, (SELECT through_ts FROM through)))), 3600)))
               AS used_gpu_s
    FROM (SELECT * FROM reservation FINAL WHERE cluster = {cluster:String}
          AND start_ts < {to_ts:DateTime('UTC')} AND end_ts > {from_ts:DateTime('UTC')}
          AND ({project:String} = '' OR hasAny(accounts, (SELECT groupUniqArray(lower(account)) FROM fct_job_run
                                                         WHERE project = {project:String})))) AS r
    -- the node-hour whole (a node with GPUs of several models has a row per model, migration 0021)
    INNER JOIN (SELECT node, hour, any(reservation) AS reservations, sum(reserved_gpu_s) AS reserved_gpu_s,
                       sum(allocated_resv_gpu_s) AS allocated_resv_gpu_s, sum(gpus) AS gpus
                FROM capacity_node_hour FINAL WHERE cluster = {cluster:String}
                AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')} AND reservation != ''
                GROUP BY node, hour) AS c
        ON has(splitByChar(',', c.reservations), r.name) AND has(r.nodes, c.node)
    GROUP BY r.name, c.node, c.hour
)
SELECT name AS reservation, any(accounts) AS accounts, any(partition) AS partition,
       min(start_ts) AS start_ts, max(end_ts) AS end_ts,
       sum(greatest(usable_gpu_s, used_gpu_s)) / 3600 AS reserved_gpu_h,
       sum(used_gpu_s) / 3600 AS used_gpu_h,
       reserved_gpu_h - used_gpu_h AS idle_gpu_h,
       used_gpu_h / nullIf(reserved_gpu_h, 0) AS use_ratio
FROM hours
GROUP BY name
ORDER BY reserved_gpu_h DESC;
