-- summary: job-accounting statistics per group and period, with Open XDMoD's Jobs-realm definitions.
--
-- Parameters: from_date, to_date (Date, whole days, to_date inclusive), tz (period boundaries),
-- period ('none' | 'day' | 'month'). {{by}} is the validated list of grouping columns of fct_job_run
-- (ops_warehouse.summary.BY_KEYS), each followed by a comma, or nothing.
--
--   cpu/gpu/node_hours  resource count x overlap of the run's [start, end] with the period; a run that spans
--                       periods is split between them; running jobs count up to the time of their last load;
--                       earlier runs of requeued jobs count too (they held the resources)
--   wall_hours          overlap alone
--   jobs_started        jobs (last runs) whose start falls in the period; wait_hours = start - submit of those
--   jobs_ended          jobs (last runs) that ran and whose end falls in the period
--   jobs_cancelled_before_start  jobs that ended without ever being allocated nodes
--- [mart]
--- grain = "one row per group (the grouping columns asked for) and period"
--- kind = "dates"
--- scope = "cluster"
--- takes = ["from_date", "to_date"]  # whole days, to_date inclusive
--- parameters = { period = "none", tz = "UTC" }
WITH
    toDateTime({from_date:Date}, {tz:String}) AS w_start,
    toDateTime({to_date:Date} + 1, {tz:String}) AS w_end,

usage_runs AS (
    SELECT
        *,
        greatest(usage_start_ts, w_start) AS s,
        least(usage_end_ts, w_end) AS e
    FROM fct_job_run
    WHERE usage_start_ts < w_end AND usage_end_ts > w_start
),

usage_days AS (
    SELECT
        *,
        arrayJoin(arrayDistinct(arrayMap(
            i -> multiIf({period:String} = 'day', addDays(toDate(s, {tz:String}), i),
                         {period:String} = 'month', toStartOfMonth(addDays(toDate(s, {tz:String}), i)),
                         {from_date:Date}),
            range(toUInt32(dateDiff('day', toDate(s, {tz:String}), toDate(e - 1, {tz:String})) + 1))
        ))) AS period_start
    FROM usage_runs
    WHERE s < e
),

usage_split AS (
    SELECT
        {{by}} period_start,
        greatest(
            toInt64(least(e, toDateTime(multiIf({period:String} = 'day', period_start + 1,
                                                {period:String} = 'month', addMonths(period_start, 1),
                                                {to_date:Date} + 1), {tz:String})))
            - toInt64(greatest(s, toDateTime(period_start, {tz:String}))),
            0) AS overlap_s,
        ncpus, gpus, nnodes
    FROM usage_days
),

-- the period an instant falls in
jobs AS (
    SELECT
        *,
        multiIf({period:String} = 'day', toDate(start_ts, {tz:String}),
                {period:String} = 'month', toStartOfMonth(toDate(start_ts, {tz:String})),
                {from_date:Date}) AS start_period,
        multiIf({period:String} = 'day', toDate(ended_ts, {tz:String}),
                {period:String} = 'month', toStartOfMonth(toDate(ended_ts, {tz:String})),
                {from_date:Date}) AS end_period
    -- a final run whose End sacct printed as Unknown ended at its as-of time (Start + Elapsed)
    FROM (SELECT *, coalesce(end_ts, as_of_ts) AS ended_ts FROM fct_job_run)
    WHERE is_superseded = 0
),

events AS (
    SELECT {{by}} period_start,
           0 AS cpu_s, 0 AS gpu_s, 0 AS node_s, 0 AS wall_s_sum,
           1 AS started, 0 AS ended, 0 AS cancelled_before_start,
           toInt64(start_ts) - toInt64(submit_ts) AS wait_s
    FROM (SELECT *, start_period AS period_start FROM jobs)
    WHERE never_ran = 0 AND start_ts >= w_start AND start_ts < w_end

    UNION ALL

    SELECT {{by}} period_start, 0, 0, 0, 0, 0, 1, 0, 0
    FROM (SELECT *, end_period AS period_start FROM jobs)
    WHERE never_ran = 0 AND is_final = 1 AND ended_ts >= w_start AND ended_ts < w_end

    UNION ALL

    SELECT {{by}} period_start, 0, 0, 0, 0, 0, 0, 1, 0
    FROM (SELECT *, end_period AS period_start FROM jobs)
    WHERE never_ran = 1 AND is_final = 1 AND ended_ts >= w_start AND ended_ts < w_end

    UNION ALL

    SELECT {{by}} period_start,
           overlap_s * ncpus, overlap_s * gpus, overlap_s * nnodes, overlap_s,
           0, 0, 0, 0
    FROM usage_split
)

SELECT
    {{by}} period_start,
    sum(ended) AS jobs_ended,
    sum(started) AS jobs_started,
    sum(cancelled_before_start) AS jobs_cancelled_before_start,
    sum(cpu_s) / 3600 AS cpu_hours,
    sum(gpu_s) / 3600 AS gpu_h,
    sum(node_s) / 3600 AS node_hours,
    sum(wall_s_sum) / 3600 AS wall_hours,
    sum(wait_s) / 3600 AS wait_hours,
    if(sum(started) = 0, NULL, sum(wait_s) / 3600 / sum(started)) AS avg_wait_hours
FROM events
GROUP BY {{by}} period_start
ORDER BY {{by}} period_start
