-- The job history a what-if replay starts from (analytics/whatif.py replays it with planning/backfill.py):
-- every run of {cluster} that asked for GPUs and was in the system during [from_ts, to_ts): submitted
-- before to_ts and not ended by from_ts (running at from_ts, waiting at it, or submitted in the window), in
-- submission order (ties: by job id, Slurm's order of submission). Runs of a requeued job are jobs of their own, each submitted when it was.
--   start_ts, end_ts   as observed (end_ts of a run still running: its as-of time, usage_end_ts); a job still
--                      pending when last seen has neither (NULL end: it was still waiting, not cancelled)
--   never_ran          1 for a run that never started: cancelled in the queue (end_ts: when) or still pending
--   gpus               the GPUs it held; for a run that never started (still pending or cancelled in the
--                      queue), the GPUs it asked for (sacct prints no AllocTRES for it: ReqTRES's gres/gpu)
--   timelimit_s        its time limit (0: none recorded)
--- [mart]
--- grain = "one row per scenario and month of the history"
--- kind = "whatif"
--- scope = "cluster"
WITH jobs AS (
    SELECT *,
           NOT is_final AND start_ts IS NULL AS pending,
           -- a run that never started (pending, or cancelled in the queue) has no AllocTRES: what it asked for
           if(pending OR never_ran, asked_gpus(gpus, req_tres), gpus) AS job_gpus
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND submit_ts < {to_ts:DateTime('UTC')}
      AND (end_ts IS NULL OR end_ts > {from_ts:DateTime('UTC')})
)
SELECT job_id, job_id_raw, submit_ts, usage_start_ts AS start_ts,
       multiIf(never_ran, end_ts, pending, NULL, usage_end_ts) AS end_ts,
       toUInt8(never_ran OR pending) AS never_ran, state, job_gpus AS gpus, nodes, partition,
       ifNull(timelimit_s, 0) AS timelimit_s, account, project, as_of_ts
FROM jobs
WHERE job_gpus > 0 AND NOT (NOT never_ran AND NOT pending AND length(nodes) = 0)
ORDER BY submit_ts, job_id_raw, job_id;
