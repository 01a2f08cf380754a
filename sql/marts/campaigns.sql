-- Training campaigns of {project} ('' for the whole cluster) and their effective training time ratio (ETTR,
-- Kokolis et al., HPCA 2025): the runs that ran in [from_ts, to_ts), grouped into campaigns, one row each.
--   campaign     the runs of one user, account and job name in which each run was submitted at most
--                {campaign_gap_hours} after the campaign's latest end so far: requeues of one job and
--                resubmissions of the same job alike (Slurm's dependency chains are not in sacct's output;
--                arrays are their tasks' own job names). A campaign that crosses the window's edges is cut there.
--   interrupted  a run that did not end COMPLETED (FAILED, NODE_FAIL, TIMEOUT, CANCELLED, OUT_OF_MEMORY,
--                PREEMPTED, ...): its work since its last checkpoint is lost
--   checkpoint   run_telemetry's last_ckpt_ts (the grain the loads form, sql/intermediate/run_telemetry.sql):
--                a node_sample on one of the run's nodes whose step (the step_s before its time) overlaps the
--                run and in which the node wrote at least [goodput] ckpt_write_bytes_per_s to Lustre
--                (lustre_write_bytes ÷ step_s), placed at the sample's time or the run's end, the earlier: the
--                generator's checkpoints write 12 GB a GPU in 60-120 s; set the rate above a site's steady
--                output writes. A checkpoint is so seen up to one step (+ its write time) after it began, and
--                a run's first step may carry its node's previous run's last write: lost work is found up to a
--                step short, never long (tests/test_generated_phenomena.py measures it against the truth)
--   lost_s       per interrupted run: end − its last checkpoint (end − start when it wrote none); NULL when
--                no node sample of its nodes covers any of the run (run_telemetry's node_samples; a sample
--                covers the step before it: no telemetry, unknown, never 0)
--   cause        of an interrupted run's loss: 'hang' when hung_jobs.sql (included below, so the rule is that
--                file's) lists the run: its GPUs and NICs fell quiet {hang_minutes}+ minutes before it ended
--                (a run ending after the window is not looked at); else by how it ended: NODE_FAIL, FAILED and
--                OUT_OF_MEMORY (the job's own error), TIMEOUT, other (CANCELLED, PREEMPTED, ...)
--   start-up     of a run that restarts an interrupted one: its start to the first GPU sample of its nodes at
--                the idle threshold or more (run_telemetry's first_busy_ts; the GPUs busy again: loading the
--                checkpoint, the data,
--                compiling), looked for in the run's first hour; a run not busy by then counts the hour (or its
--                whole length when shorter), one without GPU samples counts 0 (restarts_without_startup)
-- Columns: user, account, project, job_name, first_submit_ts, last_end_ts, runs, interrupted_runs, max_gpus,
--   wall_s           last end − first submit
--   running_s        the runs' time, start to end (each run counted from the latest end of the runs before it when
--                    they overlap: the union of the runs' intervals)
--   queued_s         wall_s − running_s: waiting, first submission and every restart
--   restart_wait_s   after each interrupted run that the campaign went on from: the next run's start − its end
--   restart_startup_s  the restarted runs' start-ups summed; restarts (runs that restarted an interrupted one),
--                    restarts_without_startup (of them, those without GPU samples)
--   lost_s           the interrupted runs' lost work summed; NULL when one of them is unknown
--   productive_s     running_s − lost_s
--   ettr             productive_s ÷ wall_s (NULL when lost_s is)
--   gpu_hours        the runs' GPU-hours; gpu_hours_lost: GPUs × lost_s of each interrupted run, and by cause:
--                    lost_hang_gpu_hours, lost_node_fail_gpu_hours, lost_failed_gpu_hours (FAILED,
--                    OUT_OF_MEMORY), lost_timeout_gpu_hours, lost_other_gpu_hours (CANCELLED, PREEMPTED, ...)
--   last_state       how the campaign's last run ended
WITH
runs AS (
    SELECT job_id, submit_ts, user, account, project, job_name, state, gpus, nodes,
           assumeNotNull(start_ts) AS start_ts, assumeNotNull(end_ts) AS end_ts
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0 AND start_ts IS NOT NULL AND end_ts IS NOT NULL
      AND end_ts > {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}
),
ordered AS (
    SELECT *,
           row_number() OVER w AS rn,
           max(end_ts) OVER (PARTITION BY user, account, job_name ORDER BY start_ts, job_id
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max_end,
           lagInFrame(end_ts) OVER w AS prev_end,
           lagInFrame(state) OVER w AS prev_state
    FROM runs
    WINDOW w AS (PARTITION BY user, account, job_name ORDER BY start_ts, job_id
                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
),
numbered AS (
    SELECT *,
           sum(toUInt32(rn = 1 OR toInt64(submit_ts) > toInt64(prev_max_end) + {campaign_gap_hours:Float64} * 3600))
               OVER (PARTITION BY user, account, job_name ORDER BY start_ts, job_id ROWS UNBOUNDED PRECEDING)
               AS campaign_no,
           toUInt8(rn > 1 AND toInt64(submit_ts) <= toInt64(prev_max_end) + {campaign_gap_hours:Float64} * 3600)
               AS continues,
           state != 'COMPLETED' AS interrupted
    FROM ordered
),
-- (the joined CTEs name their keys apart: with several joins, n.* would come back qualified where names clash)
hung_runs AS (SELECT job_id AS h_job_id, submit_ts AS h_submit_ts, 1 AS hung FROM ({{mart hung_jobs}})),
-- what the loads read from the samples of each run (one row a run with samples; a run without: unknown)
telemetry AS (
    SELECT job_id AS t_job_id, submit_ts AS t_submit_ts, end_ts AS t_end_ts, node_samples, last_ckpt_ts,
           first_hour_gpu_samples, first_busy_ts
    FROM run_telemetry FINAL
    WHERE cluster = {cluster:String} AND end_ts > {from_ts:DateTime('UTC')}
      AND start_ts < {to_ts:DateTime('UTC')}
),
per_run AS (
    SELECT n.*,
           -- from the latest end of the runs before it (not only the one just before: runs of one campaign may
           -- run side by side), so that the runs' time is the union of their intervals, never more than the wall
           toInt64(n.end_ts) - greatest(toInt64(n.start_ts), if(n.continues = 1, toInt64(n.prev_max_end), 0)) AS run_s,
           if(n.interrupted,
              -- since its last checkpoint inside the run (one before its start is an earlier run's), never
              -- more than it ran
              if(ifNull(t.node_samples, 0) = 0, NULL,
                 least(toInt64(n.end_ts) - toInt64(greatest(coalesce(t.last_ckpt_ts, n.start_ts), n.start_ts)),
                       greatest(run_s, 0))),
              0) AS run_lost_s,
           n.continues = 1 AND n.prev_state != 'COMPLETED' AS restart,
           if(restart, greatest(toInt64(n.start_ts) - toInt64(n.prev_end), 0), 0) AS run_restart_wait_s,
           restart AND ifNull(t.first_hour_gpu_samples, 0) = 0 AS startup_unknown,
           if(restart AND NOT startup_unknown,
              toInt64(coalesce(t.first_busy_ts, least(n.end_ts, n.start_ts + toIntervalHour(1)))) - toInt64(n.start_ts),
              0) AS run_startup_s,
           multiIf(NOT n.interrupted, '', h.hung = 1, 'hang', n.state = 'NODE_FAIL', 'node_fail',
                   n.state IN ('FAILED', 'OUT_OF_MEMORY'), 'failed', n.state = 'TIMEOUT', 'timeout', 'other') AS cause
    FROM numbered AS n
    LEFT JOIN telemetry AS t ON t.t_job_id = n.job_id AND t.t_submit_ts = n.submit_ts AND t.t_end_ts = n.end_ts
    LEFT JOIN hung_runs AS h ON h.h_job_id = n.job_id AND h.h_submit_ts = n.submit_ts
)
SELECT user, account, any(project) AS project, job_name,
       min(submit_ts) AS first_submit_ts, max(end_ts) AS last_end_ts,
       count() AS runs, countIf(interrupted) AS interrupted_runs, max(gpus) AS max_gpus,
       toInt64(max(end_ts)) - toInt64(min(submit_ts)) AS wall_s,
       sum(greatest(run_s, 0)) AS running_s,
       wall_s - running_s AS queued_s,
       sum(run_restart_wait_s) AS restart_wait_s,
       sum(run_startup_s) AS restart_startup_s,
       sum(gpus * run_startup_s) / 3600 AS restart_startup_gpu_hours,
       countIf(restart) AS restarts,
       countIf(startup_unknown) AS restarts_without_startup,
       if(countIf(interrupted AND run_lost_s IS NULL) > 0, NULL, sum(ifNull(run_lost_s, 0))) AS lost_s,
       running_s - lost_s AS productive_s,
       productive_s / nullIf(wall_s, 0) AS ettr,
       sum(gpus * greatest(run_s, 0)) / 3600 AS gpu_hours,
       if(lost_s IS NULL, NULL, sum(gpus * ifNull(run_lost_s, 0)) / 3600) AS gpu_hours_lost,
       -- by cause: NULL where the campaign's loss is unknown, as gpu_hours_lost, so the causes sum to it
       if(lost_s IS NULL, NULL, sumIf(gpus * ifNull(run_lost_s, 0), cause = 'hang') / 3600) AS lost_hang_gpu_hours,
       if(lost_s IS NULL, NULL, sumIf(gpus * ifNull(run_lost_s, 0), cause = 'node_fail') / 3600)
           AS lost_node_fail_gpu_hours,
       if(lost_s IS NULL, NULL, sumIf(gpus * ifNull(run_lost_s, 0), cause = 'failed') / 3600) AS lost_failed_gpu_hours,
       if(lost_s IS NULL, NULL, sumIf(gpus * ifNull(run_lost_s, 0), cause = 'timeout') / 3600) AS lost_timeout_gpu_hours,
       if(lost_s IS NULL, NULL, sumIf(gpus * ifNull(run_lost_s, 0), cause = 'other') / 3600) AS lost_other_gpu_hours,
       argMax(state, end_ts) AS last_state
FROM per_run
GROUP BY user, account, job_name, campaign_no
ORDER BY gpu_hours DESC, first_submit_ts, user, job_name
SETTINGS join_use_nulls = 1;
