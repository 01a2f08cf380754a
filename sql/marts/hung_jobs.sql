-- Hung jobs in [from_ts, to_ts) (by end time) of {project} ('' for the whole cluster): the NCCL-hang
-- signature, a run whose GPUs were busy and then all fell idle, with no network traffic, until it was
-- killed. Read from run_telemetry, the per-run grain the loads form from the per-sample telemetry
-- (sql/intermediate/run_telemetry.sql: each candidate's last busy time, the GPU sample times after it), for:
--   candidates  runs of fct_job_run that held GPUs on nodes, ended in the window in TIMEOUT, CANCELLED,
--               FAILED or NODE_FAIL, and ran at least {hang_minutes} minutes
--   busy        a GPU sample time in [start_ts, end_ts) at which any GPU of the run's nodes reached the
--               config's idle threshold ([reports] idle_util_pct), or a node_sample time at which any of its
--               nodes moved [waste] hang_nic_bytes_per_s or more over its NICs: the grain's thresholds (its
--               row keeps them). Every GPU of each node counts: sacct does not say which GPUs of a shared node
--               a run held, so a busy neighbour keeps a run from counting as hung (never the other way round).
--               A node without samples at a time (a failed node) is not looked at.
--   hung        the run was busy at some time (last_busy_ts: the latest), its GPUs have samples after it
--               and up to its end (the last within one step of end_ts), and from the first GPU sample
--               after it (hang_start_ts) to end_ts is at least {hang_minutes} minutes.
-- Columns:
--   job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus, start_ts, end_ts  the run
--   last_busy_ts     the last busy time
--   hang_start_ts    the first GPU sample after it: the hang began in (last_busy_ts, hang_start_ts]
--   hang_minutes     end_ts − hang_start_ts, in minutes (a lower bound, within one sampling step: a hang
--                    killed by a 30-minute watchdog measures 30 minutes only when it began on a sample)
--   hung_gpu_h   gpus × hang_minutes ÷ 60: the allocation held while nothing ran (not the work lost: that
--                    is goodput's, since the run's last checkpoint, sql/marts/campaigns.sql)
--   idle_samples     the GPU sample times from hang_start_ts to the end
--   suspect_nodes    the run's nodes that were in two or more of the window's hangs of the whole cluster (a
--                    NIC, cable or GPU that stalls NCCL: hang_suspect_nodes.sql ranks them), whatever
--                    {project} selects: the project picks which runs are listed, never a run's figures (so a
--                    run's suspects are the same in its project's report and the cluster's; node names only)
-- hang_suspect_nodes.sql counts the hangs per node.
-- Why hang_minutes = 20, not 30: a hang's length is measured from the first idle sample, so a hang killed by a
-- 30-minute NCCL watchdog measures between 30 minutes less one sampling step and 30; a site whose watchdog is
-- shorter (PyTorch's NCCL default is 10 minutes) sets it lower. The NIC and checkpoint thresholds are the
-- config's, applied by the loads (run_telemetry).
--- [mart]
--- grain = "one row per hung run"
--- scope = "project"
--- report = 21
--- parameters = { hang_minutes = 20 }
--- columns = ["job_id", "submit_ts", "user", "account", "project", "state", "nodes", "nnodes", "gpus", "start_ts", "end_ts", "last_busy_ts", "hang_start_ts", "hang_minutes", "hung_gpu_h", "idle_samples", "suspect_nodes"]
--- user_columns = ["user"]
--- export = 21
WITH
candidates AS (
    SELECT job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus,
           assumeNotNull(start_ts) AS start_ts, assumeNotNull(end_ts) AS end_ts
    FROM fct_job_run
    WHERE cluster = {cluster:String}
      AND state IN ('TIMEOUT', 'CANCELLED', 'FAILED', 'NODE_FAIL')
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0 AND start_ts IS NOT NULL AND end_ts IS NOT NULL
      AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
      AND toInt64(end_ts) - toInt64(start_ts) >= {hang_minutes:Float64} * 60
),
hung AS (
    SELECT c.job_id AS job_id, c.submit_ts AS submit_ts, c.user AS user, c.account AS account, c.project AS project,
           c.state AS state, c.nodes AS nodes, c.nnodes AS nnodes, c.gpus AS gpus, c.start_ts AS start_ts,
           c.end_ts AS end_ts, t.last_busy_ts AS last_busy_ts,
           assumeNotNull(t.hang_start_ts) AS hang_start_ts,
           (toInt64(c.end_ts) - toInt64(hang_start_ts)) / 60 AS hang_minutes,
           c.gpus * hang_minutes / 60 AS hung_gpu_h,
           t.idle_samples AS idle_samples
    FROM candidates AS c
    INNER JOIN (SELECT job_id, submit_ts, end_ts, last_busy_ts, hang_start_ts, idle_samples, last_gpu_ts, gpu_step_s
                FROM run_telemetry FINAL
                WHERE cluster = {cluster:String} AND end_ts >= {from_ts:DateTime('UTC')}
                  AND end_ts < {to_ts:DateTime('UTC')} AND last_busy_ts IS NOT NULL AND idle_samples > 0) AS t
        ON t.job_id = c.job_id AND t.submit_ts = c.submit_ts AND t.end_ts = c.end_ts
    WHERE toInt64(t.last_gpu_ts) + t.gpu_step_s >= toInt64(c.end_ts)
      AND hang_minutes >= {hang_minutes:Float64}
)
-- suspect_nodes: the run's nodes that were in two or more of the cluster's hangs (hang_suspect_nodes.sql's
-- suspect), counted over the hangs by node and gathered back per run, so the hangs are formed once; then
-- {project}'s runs kept
SELECT job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus, start_ts, end_ts, last_busy_ts,
       hang_start_ts, hang_minutes, hung_gpu_h, idle_samples,
       arraySort(groupArrayIf(node, node_hangs >= 2)) AS suspect_nodes
FROM (SELECT *, node, count() OVER (PARTITION BY node) AS node_hangs FROM hung ARRAY JOIN nodes AS node)
GROUP BY job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus, start_ts, end_ts, last_busy_ts,
         hang_start_ts, hang_minutes, hung_gpu_h, idle_samples
HAVING {project:String} = '' OR project = {project:String}
ORDER BY hung_gpu_h DESC, end_ts, job_id
SETTINGS join_use_nulls = 1;
