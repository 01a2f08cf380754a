-- Each reservation overlapping [from_ts, to_ts): the usable GPU-hours it held inside the window, the part
-- used by jobs that ran in a reservation on its nodes, the idle rest, and whom it was for. With {project}
-- (a project report), only the reservations held for one of the project's accounts.
SELECT r.name AS reservation, any(r.accounts) AS accounts, any(r.partition) AS partition,
       min(r.start_ts) AS start_ts, max(r.end_ts) AS end_ts,
       sum(c.reserved_gpu_s) / 3600 AS reserved_gpu_h,
       sum(least(c.allocated_resv_gpu_s, c.reserved_gpu_s)) / 3600 AS used_gpu_h,
       reserved_gpu_h - used_gpu_h AS idle_gpu_h,
       used_gpu_h / nullIf(reserved_gpu_h, 0) AS use_ratio
FROM (SELECT * FROM reservation FINAL WHERE cluster = {cluster:String}
      AND start_ts < {to_ts:DateTime('UTC')} AND end_ts > {from_ts:DateTime('UTC')}
      AND ({project:String} = '' OR hasAny(accounts, (SELECT groupUniqArray(lower(account)) FROM fct_job_run
                                                     WHERE project = {project:String})))) AS r
INNER JOIN (SELECT * FROM capacity_node_hour FINAL WHERE cluster = {cluster:String}
            AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')} AND reservation != '') AS c
    ON has(splitByChar(',', c.reservation), r.name) AND has(r.nodes, c.node)
GROUP BY r.name
ORDER BY reserved_gpu_h DESC;
