-- Lustre job_stats samples -> lustre_job_io rows of the window [from_ts, to_ts) (etl/lustre_jobs.py).
-- {{input}} is the servers' job_stats as long rows (etl/telemetry_insert.py renders it): ts, jobid, target,
-- component (ost/mdt), operation (the label; '' where the exporter has none), metric, v (cumulative), with
-- the last sample before the window of each series to seed it.
-- Per series (metric, target, jobid, component, operation) a step's amount is v - prev; a drop is a restart
-- from zero (Lustre purges an idle entry and starts it again at zero); a series' first sample counts whole,
-- because a job_stats entry starts at zero when Lustre creates it for the job. Then the targets of one file
-- system are summed: one row per job, file system, component, operation, jobid string and step, steps
-- without I/O left out. The file system is the target without its -OSTxxxx/-MDTxxxx suffix; the job id, uid
-- and client host come from the jobid string (JOBID_PATTERN in etl/lustre_jobs.py: 23, SLURM_JOB23,
-- 23:1000:node01); a jobid that is no Slurm job's (bash.0) has job_id 0.
INSERT INTO lustre_job_io (cluster, job_id, fs, component, operation, jobid, uid, host, ts, step_s, bytes, ops,
    source)
SELECT {cluster:String}, toUInt64OrZero(g[1]), fs, component, operation, jobid,
    if(g[2] = '', NULL, toUInt32OrNull(g[2])), g[3], ts, {step_s:UInt32}, bytes, ops, {source:String}
FROM (
    SELECT jobid, fs, comp AS component, op AS operation, ts,
        extractGroups(jobid, '^(?i:(?:slurm_?)?job(?:_?id)?[_=]?)?([0-9]+)(?::([0-9]+)(?::([^:]+))?)?$') AS m,
        if(empty(m), ['', '', ''], m) AS g,
        sumIf(amount, is_bytes) AS bytes,
        sumIf(amount, NOT is_bytes) AS ops
    FROM (
        SELECT jobid, comp, op, ts, is_bytes,
            replaceRegexpOne(target, '-(OST|MDT)[0-9a-fA-F]{4}$', '') AS fs,
            if(prev IS NULL, v, if(v < prev, v, v - prev)) AS amount
        FROM (
            SELECT ts, jobid, target, metric, v, comp, op, is_bytes,
                lagInFrame(toNullable(v)) OVER series AS prev
            FROM (
                SELECT ts, jobid, target, metric, v,
                    if(component != '', component, lower(extract(target, '-(OST|MDT)[0-9a-fA-F]{4}$'))) AS comp,
                    multiIf(metric IN ('lustre_job_read_bytes_total', 'lustre_job_read_samples_total'), 'read_bytes',
                            metric IN ('lustre_job_write_bytes_total', 'lustre_job_write_samples_total'), 'write_bytes',
                            operation) AS op,
                    metric IN ('lustre_job_read_bytes_total', 'lustre_job_write_bytes_total') AS is_bytes
                FROM ({{input}})
            )
            WINDOW series AS (PARTITION BY metric, target, jobid, comp, op ORDER BY ts
                              ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
        )
        WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}
    )
    GROUP BY jobid, fs, comp, op, ts
)
WHERE bytes != 0 OR ops != 0;
