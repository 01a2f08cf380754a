-- Hung jobs in [from_ts, to_ts) (by end time) of {project} ('' for the whole cluster): the NCCL-hang
-- signature, a run whose GPUs were busy and then all fell idle, with no network traffic, until it was
-- killed. Read from the per-sample telemetry (gpu_sample, node_sample), not the hourly grain, for the
-- candidate runs only:
--   candidates  runs of fct_job_run that held GPUs on nodes, ended in the window in TIMEOUT, CANCELLED,
--               FAILED or NODE_FAIL, and ran at least {hang_minutes} minutes
--   busy        a GPU sample time ts in [start_ts, end_ts) at which any GPU of the run's nodes reached
--               {idle_util_pct} percent utilization (the config's idle threshold); and a node_sample time
--               at which any of its nodes moved at least {hang_nic_bytes_per_s} bytes a second over its
--               NICs (received + transmitted over every NIC: node_sample's amount in the step ending at
--               ts ÷ step_s). Every GPU of each node counts: sacct does not say which GPUs of a shared node
--               a run held, so a busy neighbour on a shared node keeps a run from counting as hung (never
--               the other way round). A node without samples at a time (a failed node) is not looked at.
--   hung        the run was busy at some time (last_busy_ts: the latest), its GPUs have samples after it
--               and up to its end (the last within one step of end_ts), and from the first GPU sample
--               after it (hang_start_ts) to end_ts is at least {hang_minutes} minutes.
-- Columns:
--   job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus, start_ts, end_ts  the run
--   last_busy_ts     the last busy time
--   hang_start_ts    the first GPU sample after it: the hang began in (last_busy_ts, hang_start_ts]
--   hang_minutes     end_ts − hang_start_ts, in minutes (a lower bound, within one sampling step: a hang
--                    killed by a 30-minute watchdog measures 30 minutes only when it began on a sample)
--   gpu_hours_lost   gpus × hang_minutes ÷ 60: the allocation held while nothing ran
--   idle_samples     the GPU sample times from hang_start_ts to the end
--   suspect_nodes    the run's nodes that were in two or more of the window's hangs (a NIC, cable or GPU
--                    that stalls NCCL: hang_suspect_nodes.sql ranks them)
-- How it reads: node_sample first (one row a node and time), over every candidate: its last NIC-busy time.
-- A run with one in its last {hang_minutes} minutes did not hang that long and is left out; the GPU samples
-- of the others are read from that time on (the whole run where its NICs were never busy), since any busy
-- GPU sample before it is older than it. Each sample table is read once and matched to the runs by a hash
-- join on (node, hour): a tuple IN filter in PREWHERE would not prune the sorting key and would evaluate
-- the subquery again (docs/benchmarks.md, "Hung and idle-GPU jobs").
-- hang_suspect_nodes.sql counts the hangs per node.
WITH
candidates AS (
    SELECT job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus,
           assumeNotNull(start_ts) AS start_ts, assumeNotNull(end_ts) AS end_ts
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND state IN ('TIMEOUT', 'CANCELLED', 'FAILED', 'NODE_FAIL')
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0 AND start_ts IS NOT NULL AND end_ts IS NOT NULL
      AND end_ts >= {from_ts:DateTime('UTC')} AND end_ts < {to_ts:DateTime('UTC')}
      AND toInt64(end_ts) - toInt64(start_ts) >= {hang_minutes:Float64} * 60
),
-- the hours each candidate held each of its nodes: samples are matched to runs by node and hour
candidate_hours AS (
    SELECT job_id, submit_ts, start_ts, end_ts, node, hour
    FROM candidates
    ARRAY JOIN nodes AS node
    ARRAY JOIN hours_touched(start_ts, end_ts) AS hour
),
-- the last time a candidate's nodes moved {hang_nic_bytes_per_s} over their NICs
nic_busy AS (
    SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, max(n.ts) AS last_nic_busy_ts
    FROM (SELECT node, toStartOfHour(ts) AS hour, ts
          FROM node_sample FINAL
          PREWHERE cluster = {cluster:String}
               AND ts >= (SELECT min(start_ts) FROM candidates) AND ts < (SELECT max(end_ts) FROM candidates)
          WHERE arraySum(nic_rx_bytes) + arraySum(nic_tx_bytes) >= {hang_nic_bytes_per_s:Float64} * step_s) AS n
    INNER JOIN candidate_hours AS r ON r.node = n.node AND r.hour = n.hour
    WHERE n.ts >= r.start_ts AND n.ts < r.end_ts
    GROUP BY job_id, submit_ts
),
-- the candidates whose NICs were quiet over their last {hang_minutes} minutes, from their last NIC-busy
-- time (or their start) to their end, by node and hour
run_hours AS (
    SELECT job_id, submit_ts, from_ts, end_ts, last_nic_busy_ts, node, hour
    FROM (SELECT c.job_id AS job_id, c.submit_ts AS submit_ts, c.end_ts AS end_ts, c.nodes AS nodes,
                 b.last_nic_busy_ts AS last_nic_busy_ts,
                 greatest(c.start_ts, ifNull(b.last_nic_busy_ts, c.start_ts)) AS from_ts
          FROM candidates AS c
          LEFT JOIN nic_busy AS b ON b.job_id = c.job_id AND b.submit_ts = c.submit_ts
          WHERE b.last_nic_busy_ts IS NULL
             OR toInt64(b.last_nic_busy_ts) < toInt64(c.end_ts) - {hang_minutes:Float64} * 60)
    ARRAY JOIN nodes AS node
    ARRAY JOIN hours_touched(from_ts, end_ts) AS hour
),
-- their GPU samples from then on: at each time, the most active GPU of the run's nodes
samples AS (
    SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, g.ts AS ts, max(g.gpu_util_pct) AS util_pct,
           max(g.step_s) AS step_s, any(r.last_nic_busy_ts) AS last_nic_busy_ts
    FROM (SELECT node, toStartOfHour(ts) AS hour, ts, gpu_util_pct, step_s
          FROM gpu_sample FINAL
          PREWHERE cluster = {cluster:String}
               AND ts >= (SELECT min(start_ts) FROM candidates) AND ts < (SELECT max(end_ts) FROM candidates)
          WHERE gpu_util_pct IS NOT NULL) AS g
    INNER JOIN run_hours AS r ON r.node = g.node AND r.hour = g.hour
    WHERE g.ts >= r.from_ts AND g.ts < r.end_ts
    GROUP BY job_id, submit_ts, ts
),
-- the last busy time (a busy GPU sample, or the last NIC-busy time), the GPU sample times after it
per_run AS (
    SELECT job_id, submit_ts,
           maxIf(toNullable(ts), util_pct >= {idle_util_pct:Float64}) AS last_gpu_busy_ts,
           any(last_nic_busy_ts) AS nic_busy_ts,
           -- the later of the two, either where the other is NULL (whatever the server's greatest() does with NULL)
           greatest(coalesce(last_gpu_busy_ts, nic_busy_ts), coalesce(nic_busy_ts, last_gpu_busy_ts)) AS last_busy_ts,
           max(ts) AS last_ts,
           max(step_s) AS step_s,
           arraySort(arrayFilter(t -> t > last_busy_ts, groupArray(ts))) AS after
    FROM samples
    GROUP BY job_id, submit_ts
    HAVING last_busy_ts IS NOT NULL AND length(after) > 0
),
hung AS (
    SELECT c.job_id AS job_id, c.submit_ts AS submit_ts, c.user AS user, c.account AS account, c.project AS project,
           c.state AS state, c.nodes AS nodes, c.nnodes AS nnodes, c.gpus AS gpus, c.start_ts AS start_ts,
           c.end_ts AS end_ts, p.last_busy_ts AS last_busy_ts,
           p.after[1] AS hang_start_ts,
           (toInt64(c.end_ts) - toInt64(hang_start_ts)) / 60 AS hang_minutes,
           c.gpus * hang_minutes / 60 AS gpu_hours_lost,
           length(p.after) AS idle_samples
    FROM per_run AS p
    INNER JOIN candidates AS c ON c.job_id = p.job_id AND c.submit_ts = p.submit_ts
    WHERE toInt64(p.last_ts) + p.step_s >= toInt64(c.end_ts)
      AND hang_minutes >= {hang_minutes:Float64}
)
-- suspect_nodes: the run's nodes that were in two or more of the hangs listed (hang_suspect_nodes.sql's
-- suspect), counted over the hangs by node and gathered back per run, so the hangs are formed once
SELECT job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus, start_ts, end_ts, last_busy_ts,
       hang_start_ts, hang_minutes, gpu_hours_lost, idle_samples,
       arraySort(groupArrayIf(node, node_hangs >= 2)) AS suspect_nodes
FROM (SELECT *, node, count() OVER (PARTITION BY node) AS node_hangs FROM hung ARRAY JOIN nodes AS node)
GROUP BY job_id, submit_ts, user, account, project, state, nodes, nnodes, gpus, start_ts, end_ts, last_busy_ts,
         hang_start_ts, hang_minutes, gpu_hours_lost, idle_samples
ORDER BY gpu_hours_lost DESC, end_ts, job_id
SETTINGS join_use_nulls = 1;
