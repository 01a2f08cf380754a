-- Training campaigns of {project} ('' for the whole cluster) and their effective training time ratio (ETTR,
-- Kokolis et al., HPCA 2025): the runs that ran in [from_ts, to_ts), grouped into campaigns, one row each.
--   campaign     a run and what carried its work on after an interruption: its requeued runs (one job id:
--                Slurm's requeue) and the resubmissions of the same user and account with the same job name
--                and GPU count, each submitted at most {campaign_gap_hours} after the end of an interrupted run
--                (not before it: a job submitted while the other still ran is a job of its own). A job carries
--                on the job of its key whose last end is the latest at or before its submission (of jobs that ended
--                in the same second, an interrupted one, then the highest job id), when that one
--                was interrupted and it came within the gap; a campaign is such a chain. A COMPLETED job closes
--                its campaign (the next run of the name is new work); the tasks of a job
--                array are jobs of their own (each its own campaign, with its requeues). Slurm's dependency
--                chains (afternotok) are not in sacct's output and join only when they fall in the gap. A
--                campaign that crosses the window's edges is cut there.
--   interrupted  a run that did not end COMPLETED (FAILED, NODE_FAIL, TIMEOUT, CANCELLED, OUT_OF_MEMORY,
--                PREEMPTED, ...; every run here started): its work since its last checkpoint is lost
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
--                checkpoint, the data, compiling), looked for in the run's first hour; a run not busy by then
--                counts the hour (or its whole length when shorter), one without GPU samples counts 0
--                (restarts_without_startup). A restarted run that is itself interrupted before its first
--                checkpoint loses its start-up with the rest of its work: counted once, as lost work
-- Columns: user, account, project, job_name, gpus, first_submit_ts, first_start_ts, last_end_ts, runs,
--   interrupted_runs, job_ids (the distinct job ids, in order: requeues share one),
--   wall_s           last end − first start: ETTR's clock starts when the campaign first runs (the paper's
--                    wall-clock time: the initial wait in the queue is the scheduler's, not a failure's cost)
--   initial_wait_s   first start − that run's submission: reported apart, in no ETTR
--   running_s        the runs' time, start to end
--   restart_wait_s   after each interrupted run the campaign went on from: the next run's start − its end (the
--                    wait to resubmit and in the queue: unproductive wall time, as the paper counts it);
--                    wall_s = running_s + restart_wait_s
--   restart_startup_s  the restarted runs' start-ups summed (those not lost); restarts (runs that continued an
--                    interrupted one), restarts_without_startup (of them, those without GPU samples)
--   lost_s           the interrupted runs' lost work summed; NULL when one of them is unknown
--   productive_s     running_s − lost_s − restart_startup_s
--   ettr             productive_s ÷ wall_s (NULL when lost_s is)
--   gpu_h        the runs' GPU-hours; lost_gpu_h: GPUs × lost_s of each interrupted run, and by cause:
--                    lost_hang_gpu_h, lost_node_fail_gpu_h, lost_failed_gpu_h (FAILED,
--                    OUT_OF_MEMORY), lost_timeout_gpu_h, lost_other_gpu_h (CANCELLED, PREEMPTED, ...);
--                    restart_startup_gpu_h: GPUs × start-up (GPU-hours held while starting up)
--   last_state       how the campaign's last run ended
-- Why campaign_gap_hours = 6: what carries a training run on after a crash resubmits within minutes (Slurm's
-- --requeue, an afternotok dependency or a watcher script) and an engineer on call within hours, while users
-- reuse a few names ("train", "finetune") for unrelated work a day apart; a site whose teams resubmit by hand
-- the next morning sets 16.
--- [mart]
--- grain = "one row per training campaign (a run, its requeues and resubmissions)"
--- scope = "project"
--- report = 27
--- parameters = { campaign_gap_hours = 6.0 }
--- columns = ["user", "account", "project", "job_name", "gpus", "first_submit_ts", "first_start_ts", "last_end_ts", "runs", "interrupted_runs", "max_gpus", "job_ids", "wall_s", "initial_wait_s", "running_s", "restart_wait_s", "restart_startup_s", "restart_startup_gpu_h", "restarts", "restarts_without_startup", "lost_s", "productive_s", "ettr", "gpu_h", "lost_gpu_h", "lost_hang_gpu_h", "lost_node_fail_gpu_h", "lost_failed_gpu_h", "lost_timeout_gpu_h", "lost_other_gpu_h", "last_state"]
--- user_columns = ["user"]
--- export = 27
WITH
runs AS (
    SELECT job_id, submit_ts, user, account, project, job_name, state, gpus, array_job_id,
           assumeNotNull(start_ts) AS start_ts, assumeNotNull(end_ts) AS end_ts,
           -- the key a campaign's jobs share (user, account, job name, GPU count) as one number, which the
           -- joins, windows and groups below compare instead of four columns (64 bits: the chance that two of
           -- a site's keys share one is about n² / 2^65, 7e-12 for a year's 16,000 keys)
           sipHash64(user, account, job_name, gpus) AS key_h
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0 AND start_ts IS NOT NULL AND end_ts IS NOT NULL
      AND end_ts > {from_ts:DateTime('UTC')} AND start_ts < {to_ts:DateTime('UTC')}
),
-- a job: its runs (requeues share the job id), its first submission and start, its last end and state
jobs AS (
    SELECT key_h, job_id, min(submit_ts) AS j_submit_ts, min(start_ts) AS j_start_ts,
           max(end_ts) AS j_end_ts, argMax(state, end_ts) AS j_state, any(array_job_id) AS j_array_job_id,
           groupArray((submit_ts, start_ts, end_ts, state, project)) AS j_runs,
           any(user) AS j_user, any(account) AS j_account, any(job_name) AS j_job_name, any(gpus) AS j_gpus
    FROM runs
    GROUP BY key_h, job_id
),
-- the job a job carries on, and each job's campaign, per key (user, account, name, GPU count), in arrays:
-- its jobs in order of start (a job's place: its number in that order), and their ends and submissions in
-- order of time. An end sorts before a submission of the same second (a job carries on one that ended at or
-- before its submission), and of the ends of one second the one carried on sorts last: an interrupted one,
-- then the highest job id (so the same history always gives the same answer). Filling each submission with
-- the latest end before it (arrayFill) gives the job it would carry on: taken when that one was interrupted, it
-- came within the gap, neither is an array task, and it started earlier (a predecessor ended before the
-- submission, so it did; one not placed before it, possible only for runs of no length, roots its own chain).
-- Each job points at its predecessor's place, a root at its own; pointing at the pointer's pointer,
-- ceil(log2(n + 1)) times, reaches every root (pointer jumping: n log n steps for a key's n jobs), and a key
-- without a link skips it. All of it is sorts and linear passes over one key's arrays: a join of the jobs
-- with themselves (ASOF) and a search of each predecessor in its key's list cost 0.6 s of a year's 320,000
-- jobs, most keys holding no link at all
-- (in steps, each reading the step before's columns: the analyzer resolves an alias again at each use, and in one
-- SELECT events, pointers and root_pos named js, events and pointers twice each, so js's arrays were analyzed
-- over and over; the same functions of the same arrays, so the same rows. With the sums below: the query's
-- analysis 0.166 -> 0.115 CPU-s on bench_monthly's month, docs/benchmarks.md, issue 51 round 11)
key_jobs AS (
    SELECT key_h,
           arraySort(groupArray((j_start_ts, job_id, j_submit_ts, j_end_ts, j_state != 'COMPLETED',
                                 j_array_job_id = 0, j_runs))) AS js,
           any(j_user) AS user, any(j_account) AS account, any(j_job_name) AS job_name, any(j_gpus) AS gpus
    FROM jobs
    GROUP BY key_h
),
key_events AS (
    SELECT *, arrayEnumerate(js) AS places,
           -- (time, 0 for an end and 1 for a submission, interrupted, job id, place, not an array task)
           arraySort(arrayConcat(arrayMap((j, i) -> (toInt64(j.4), 0, j.5, j.2, i, j.6), js, places),
                                 arrayMap((j, i) -> (toInt64(j.3), 1, j.5, j.2, i, j.6), js, places))) AS events
    FROM key_jobs
),
key_pointers AS (
    SELECT *,
           arrayMap(x -> x.2, arraySort(x -> x.1, arrayFilter(x -> x.1 > 0, arrayMap(
               (e, f) -> if(e.2 = 1,
                            (e.5, if(f.2 = 0 AND f.3 AND f.5 < e.5 AND e.6 AND f.6
                                     AND e.1 <= f.1 + {campaign_gap_hours:Float64} * 3600, f.5, e.5)),
                            (0, 0)),
               events, arrayFill(e -> e.2 = 0, events))))) AS pointers
    FROM key_events
),
keyed AS (
    SELECT key_h, user, account, job_name, gpus,
           arrayFold((acc, step) -> arrayMap(k -> acc[k], acc),
                     range(if(arrayExists((p, i) -> p != i, pointers, places),
                              toUInt32(ceil(log2(length(js) + 1))), 0)),
                     pointers) AS root_pos,
           -- each run with its job and campaign (a campaign is named by its root's place among its key's jobs),
           -- carried through the arrays: joining the runs back to their campaigns cost 0.2 s of the same year
           arrayFlatten(arrayMap((j, c) -> arrayMap(r -> (j.2, c, r.1, r.2, r.3, r.4, r.5), j.7), js, root_pos))
               AS key_runs
    FROM key_pointers
),
numbered AS (
    SELECT key_h, user, account, job_name, gpus, r.1 AS job_id, r.2 AS campaign_id, r.3 AS submit_ts,
           r.4 AS start_ts, r.5 AS end_ts, r.6 AS state, r.7 AS project,
           row_number() OVER w AS rn,
           max(end_ts) OVER w AS prev_max_end,
           toUInt8(rn > 1) AS continues,
           state != 'COMPLETED' AS interrupted
    FROM keyed ARRAY JOIN key_runs AS r
    -- (one window for both: row_number takes no frame, the latest end before a run is the frame's)
    WINDOW w AS (PARTITION BY key_h, campaign_id
                 ORDER BY start_ts, job_id, submit_ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
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
           -- from the latest end of the campaign's runs before it (two resubmissions of one interrupted job may
           -- run side by side): the runs' time is the union of their intervals, never more than the wall
           greatest(toInt64(n.end_ts) - greatest(toInt64(n.start_ts), if(n.continues = 1, toInt64(n.prev_max_end), 0)), 0)
               AS run_s,
           if(n.interrupted,
              -- since its last checkpoint inside the run (one before its start is an earlier run's), never
              -- more than it ran
              if(ifNull(t.node_samples, 0) = 0, NULL,
                 least(toInt64(n.end_ts) - toInt64(greatest(coalesce(t.last_ckpt_ts, n.start_ts), n.start_ts)),
                       run_s)),
              0) AS run_lost_s,
           n.continues = 1 AS restart,
           if(restart, greatest(toInt64(n.start_ts) - toInt64(n.prev_max_end), 0), 0) AS run_restart_wait_s,
           restart AND ifNull(t.first_hour_gpu_samples, 0) = 0 AS startup_unknown,
           -- the part of the start-up not already in the run's lost work (a run lost whole loses it too)
           if(restart AND NOT startup_unknown,
              least(toInt64(coalesce(t.first_busy_ts, least(n.end_ts, n.start_ts + toIntervalHour(1))))
                        - toInt64(n.start_ts),
                    run_s - ifNull(run_lost_s, 0)),
              0) AS run_startup_s,
           multiIf(NOT n.interrupted, '', h.hung = 1, 'hang', n.state = 'NODE_FAIL', 'node_fail',
                   n.state IN ('FAILED', 'OUT_OF_MEMORY'), 'failed', n.state = 'TIMEOUT', 'timeout', 'other') AS cause
    FROM numbered AS n
    LEFT JOIN telemetry AS t ON t.t_job_id = n.job_id AND t.t_submit_ts = n.submit_ts AND t.t_end_ts = n.end_ts
    LEFT JOIN hung_runs AS h ON h.h_job_id = n.job_id AND h.h_submit_ts = n.submit_ts
),
-- (a key is one user, account, name and GPU count: grouping by its number instead of the four, 0.25 s of a
-- year's 300,000 campaigns)
sums AS (
    SELECT any(user) AS user, any(account) AS account, any(project) AS project, any(job_name) AS job_name, gpus,
           argMin(submit_ts, (start_ts, job_id)) AS first_submit_ts, min(start_ts) AS first_start_ts,
           max(end_ts) AS last_end_ts,
           count() AS runs, countIf(interrupted) AS interrupted_runs, max(gpus) AS max_gpus,
           arrayDistinct(arrayMap(x -> x.2, arraySort(groupArray((start_ts, job_id))))) AS job_ids,
           toInt64(max(end_ts)) - toInt64(min(start_ts)) AS wall_s,
           toInt64(min(start_ts)) - toInt64(first_submit_ts) AS initial_wait_s,
           sum(run_s) AS running_s,
           sum(run_restart_wait_s) AS restart_wait_s,
           sum(run_startup_s) AS restart_startup_s,
           sum(gpus * run_startup_s) / 3600 AS restart_startup_gpu_h,
           countIf(restart) AS restarts,
           countIf(startup_unknown) AS restarts_without_startup,
           if(countIf(interrupted AND run_lost_s IS NULL) > 0, NULL, sum(ifNull(run_lost_s, 0))) AS lost_s,
           sum(gpus * run_s) / 3600 AS gpu_h,
           -- the GPU-hours lost, whether or not every interrupted run's loss is known (the SELECT below keeps
           -- them where it is)
           sum(gpus * ifNull(run_lost_s, 0)) / 3600 AS lost_sum_gpu_h,
           sumIf(gpus * ifNull(run_lost_s, 0), cause = 'hang') / 3600 AS lost_hang_sum_gpu_h,
           sumIf(gpus * ifNull(run_lost_s, 0), cause = 'node_fail') / 3600 AS lost_node_fail_sum_gpu_h,
           sumIf(gpus * ifNull(run_lost_s, 0), cause = 'failed') / 3600 AS lost_failed_sum_gpu_h,
           sumIf(gpus * ifNull(run_lost_s, 0), cause = 'timeout') / 3600 AS lost_timeout_sum_gpu_h,
           sumIf(gpus * ifNull(run_lost_s, 0), cause = 'other') / 3600 AS lost_other_sum_gpu_h,
           argMax(state, end_ts) AS last_state
    FROM per_run
    GROUP BY key_h, campaign_id, gpus
)
-- (what is formed from lost_s, from the sums' columns: in the GROUP BY's own SELECT each of the eight uses of the
-- alias resolved its aggregates again, and the report analyzes this query twice, keeping it as a table for
-- goodput; the same functions of the same sums)
SELECT user, account, project, job_name, gpus, first_submit_ts, first_start_ts, last_end_ts, runs, interrupted_runs,
       max_gpus, job_ids, wall_s, initial_wait_s, running_s, restart_wait_s, restart_startup_s,
       restart_startup_gpu_h, restarts, restarts_without_startup, lost_s,
       running_s - lost_s - restart_startup_s AS productive_s,
       productive_s / nullIf(wall_s, 0) AS ettr,
       gpu_h,
       if(lost_s IS NULL, NULL, lost_sum_gpu_h) AS lost_gpu_h,
       -- by cause: NULL where the campaign's loss is unknown, as lost_gpu_h, so the causes sum to it
       if(lost_s IS NULL, NULL, lost_hang_sum_gpu_h) AS lost_hang_gpu_h,
       if(lost_s IS NULL, NULL, lost_node_fail_sum_gpu_h) AS lost_node_fail_gpu_h,
       if(lost_s IS NULL, NULL, lost_failed_sum_gpu_h) AS lost_failed_gpu_h,
       if(lost_s IS NULL, NULL, lost_timeout_sum_gpu_h) AS lost_timeout_gpu_h,
       if(lost_s IS NULL, NULL, lost_other_sum_gpu_h) AS lost_other_gpu_h,
       last_state
FROM sums
ORDER BY gpu_h DESC, first_start_ts, user, job_name
-- one thread: on two, each thread's arrays of a key (groupArray in jobs and key_jobs) are merged by copying
-- them, and a month's arrays pass the engine's two-level threshold, so the array functions after it run once a bucket
-- (27,790 function calls against 373 on bench_monthly's month): the query took 0.55 CPU-s there against 0.40
-- on one thread, the same rows (docs/benchmarks.md, issue 51 round 4)
SETTINGS join_use_nulls = 1, max_threads = 1;
