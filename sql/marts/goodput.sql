-- Goodput per project in [from_ts, to_ts): campaigns.sql's campaigns (included below, so the rules are that
-- file's) summed for the scope (project_key '') and per project.
--   campaigns, unknown_campaigns   campaigns, and those whose ETTR is unknown (an interrupted run without
--                                  telemetry): left out of every ETTR, counted here
--   large_campaigns   of them, campaigns of at least {campaign_min_gpus} GPUs (ETTR is a measure of large
--                     training: a 1-GPU debug session's ETTR says nothing of checkpointing)
--   ettr           the large campaigns' productive time ÷ their wall time, each weighted by its GPU count
--                  (GPU-time weighted: a 512-GPU campaign counts 512 times a 1-GPU one), from each campaign's
--                  first start (campaigns.sql); NULL when no large campaign's is known
--   ettr_all       the same over every campaign, whatever its size
--   gpu_h, lost_gpu_h      the runs' GPU-hours, and the GPU-hours of work lost at interruptions (known ones)
--   lost_hang_gpu_h, lost_node_fail_gpu_h, lost_failed_gpu_h, lost_timeout_gpu_h,
--   lost_other_gpu_h  by cause (campaigns.sql's cause)
--   initial_wait_hours   hours the campaigns' first runs waited in the queue (in no ETTR)
--   restart_wait_hours   hours from interruptions to the next run's start (in ETTR's wall time)
--   restarts       runs that carried an interrupted one on (requeues and resubmissions)
--   restart_startup_hours   restarted runs' start-up until their GPUs were busy
--   restart_overhead_gpu_h   what restarts cost in GPU-hours held: each restarted run's GPUs × its start-up
--                                (the wait in the queue holds no GPU: it is in restart_wait_hours and in ETTR's
--                                wall time, never in a GPU-hour figure, so overhead ≤ the runs' GPU-hours)
-- Why campaign_min_gpus = 64: eight nodes, where the published model's failures start to matter; ETTR is
-- reported for those campaigns and for all.
--- [mart]
--- grain = "one row per project, and the scope ('')"
--- scope = "project"
--- report = 26
--- parameters = { campaign_min_gpus = 64 }
--- columns = ["project_key", "campaigns", "unknown_campaigns", "large_campaigns", "ettr", "ettr_all", "gpu_h", "lost_gpu_h", "lost_hang_gpu_h", "lost_node_fail_gpu_h", "lost_failed_gpu_h", "lost_timeout_gpu_h", "lost_other_gpu_h", "initial_wait_hours", "restart_wait_hours", "restarts", "restart_startup_hours", "restart_overhead_gpu_h"]
--- export = 28
WITH
sums AS (
    -- A campaign's GPU-hours are its whole GPU-seconds ÷ 3600 (campaigns.sql): summed as those integers and
    -- divided after, since a Float64 sum depends on the order the engine's threads hand in their parts and
    -- changed in the last digits from one evaluation to the next (docs/sql.md: sum exact units, then convert)
    SELECT if(grouping(project) = 1, '', project) AS project_key,
           count() AS n_campaigns,
           countIf(c.ettr IS NULL) AS n_unknown,
           countIf(c.gpus >= {campaign_min_gpus:UInt32}) AS n_large,
           sumIf(c.gpus * c.productive_s, c.ettr IS NOT NULL AND c.gpus >= {campaign_min_gpus:UInt32})
               / nullIf(sumIf(c.gpus * c.wall_s, c.ettr IS NOT NULL AND c.gpus >= {campaign_min_gpus:UInt32}), 0)
               AS t_ettr,
           sumIf(c.gpus * c.productive_s, c.ettr IS NOT NULL)
               / nullIf(sumIf(c.gpus * c.wall_s, c.ettr IS NOT NULL), 0) AS t_ettr_all,
           sum(toInt64(round(c.gpu_h * 3600))) / 3600 AS t_gpu_h,
           sum(toInt64(round(ifNull(c.lost_gpu_h, 0) * 3600))) / 3600 AS t_lost,
           -- (the campaigns whose loss is known, as t_lost: the causes add up to it)
           sum(toInt64(round(ifNull(c.lost_hang_gpu_h, 0) * 3600))) / 3600 AS t_hang,
           sum(toInt64(round(ifNull(c.lost_node_fail_gpu_h, 0) * 3600))) / 3600 AS t_node_fail,
           sum(toInt64(round(ifNull(c.lost_failed_gpu_h, 0) * 3600))) / 3600 AS t_failed,
           sum(toInt64(round(ifNull(c.lost_timeout_gpu_h, 0) * 3600))) / 3600 AS t_timeout,
           sum(toInt64(round(ifNull(c.lost_other_gpu_h, 0) * 3600))) / 3600 AS t_other,
           sum(c.initial_wait_s) / 3600 AS t_initial_wait,
           sum(c.restart_wait_s) / 3600 AS t_restart,
           sum(c.restart_startup_s) / 3600 AS t_startup,
           sum(c.restarts) AS t_restarts,
           sum(toInt64(round(c.restart_startup_gpu_h * 3600))) / 3600 AS t_overhead_gpu
    FROM ({{mart campaigns}}) AS c
    GROUP BY GROUPING SETS ((), (project))
)
SELECT project_key, n_campaigns AS campaigns, n_unknown AS unknown_campaigns, n_large AS large_campaigns,
       t_ettr AS ettr, t_ettr_all AS ettr_all,
       t_gpu_h AS gpu_h, t_lost AS lost_gpu_h, t_hang AS lost_hang_gpu_h,
       t_node_fail AS lost_node_fail_gpu_h,
       t_failed AS lost_failed_gpu_h, t_timeout AS lost_timeout_gpu_h, t_other AS lost_other_gpu_h,
       t_initial_wait AS initial_wait_hours, t_restart AS restart_wait_hours, t_restarts AS restarts,
       t_startup AS restart_startup_hours,
       t_overhead_gpu AS restart_overhead_gpu_h
FROM sums
ORDER BY project_key;
