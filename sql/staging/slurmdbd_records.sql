-- slurmdbd's tables -> the records sacct would print for the same jobs and steps (the field names of
-- etl/sacct_text.py SACCT_FORMAT, all text), which then take the sacct path's normalization: the same
-- warehouse facts from either source. {{mysql NAME}} is the engine's mysql() table function on the slurmdbd
-- database (etl/slurmdbd_source.py fills in address, user and password as query parameters).
-- Selected: runs of {cluster} whose [submit, end] meets [from_ts, to_ts) (a running job's end is now), or
-- changed since {modified_since} (epoch seconds of slurmdbd's mod_time: incremental loads; the largest
-- UInt64 for none), and of them those whose job_db_inx lies in (after_inx, upto_inx]: a load reads the database a
-- page of job_db_inx at a time (etl/slurmdbd_source.py), so its memory does not grow with the years it reads; the
-- range is a plain comparison the engine passes to MariaDB, for the job and the step table alike (the step table
-- joined whole would be read whole by every page).
WITH
    (SELECT CAST((groupArray(toUInt64(id)), groupArray(if(name = '', type, concat(type, '/', name)))),
                 'Map(UInt64, String)') FROM {{mysql tres_table}}) AS tres_names,
    toUInt64(toUnixTimestamp({from_ts:DateTime('UTC')})) AS w0,
    toUInt64(toUnixTimestamp({to_ts:DateTime('UTC')})) AS w1,
    toUInt64(toUnixTimestamp({now_ts:DateTime('UTC')})) AS now_s,
jobs AS (
    SELECT j.*,
        multiIf(j.id_array_task != 4294967294, concat(toString(j.id_array_job), '_', toString(j.id_array_task)),
                j.id_array_job != 0 AND ifNull(j.array_task_str, '') != '',
                    concat(toString(j.id_array_job), '_[', j.array_task_str, ']'),
                j.het_job_offset != 4294967294, concat(toString(j.het_job_id), '+', toString(j.het_job_offset)),
                toString(j.id_job)) AS display_id
    FROM {{mysql job_table}} AS j
    WHERE j.deleted = 0
      AND j.job_db_inx > {after_inx:UInt64} AND j.job_db_inx <= {upto_inx:UInt64}
      AND ((j.time_submit < w1 AND (j.time_end = 0 OR j.time_end >= w0)) OR j.mod_time >= {modified_since:UInt64})
),
resv AS (
    SELECT id_resv, time_start, resv_name FROM {{mysql resv_table}} WHERE deleted = 0
)
SELECT
    toString(j.id_job) AS jobidraw,
    j.display_id AS jobid,
    {cluster:String} AS cluster,
    ifNull(j.`partition`, '') AS `partition`,
    ifNull(q.name, '') AS qos,
    ifNull(j.account, '') AS account,
    toString(j.id_group) AS gid,
    ifNull(nullIf(a.user, ''), toString(j.id_user)) AS user,
    toString(j.id_user) AS uid,
    slurm_time_text(j.time_submit) AS submit,
    slurm_time_text(j.time_eligible) AS eligible,
    slurm_time_text(j.time_start) AS start,
    slurm_time_text(j.time_end) AS `end`,
    toString(if(j.time_start = 0, 0, if(j.time_end = 0, now_s, j.time_end) - j.time_start)) AS elapsedraw,
    multiIf(j.timelimit = 4294967295, 'UNLIMITED', j.timelimit = 4294967294, 'Partition_Limit',
            toString(j.timelimit)) AS timelimitraw,
    slurm_exit_text(j.exit_code) AS exitcode,
    slurm_state_text(j.state, j.kill_requid) AS state,
    toString(j.nodes_alloc) AS nnodes,
    toString(if(j.tres_alloc = '', j.cpus_req,
                toUInt64OrZero(extract(concat(',', j.tres_alloc), ',1=([0-9]+)')))) AS ncpus,
    toString(j.cpus_req) AS reqcpus,
    -- sacct (22.05) prints the memory request of the TRES request; mem_req (flag bit 63: per CPU) is older
    if(match(concat(',', j.tres_req), ',2=[0-9]'),
       slurm_mem_text(toUInt64OrZero(extract(concat(',', j.tres_req), ',2=([0-9]+)'))),
       slurm_mem_text(bitAnd(j.mem_req, 9223372036854775807))) AS reqmem,
    slurm_tres_text(j.tres_req, tres_names) AS reqtres,
    slurm_tres_text(j.tres_alloc, tres_names) AS alloctres,
    ifNull(j.nodelist, '') AS nodelist,
    -- sacct names the reservation only when it began before the job did (1-second resolution)
    ifNull((SELECT argMax(r.resv_name, r.time_start) FROM resv AS r
            WHERE r.id_resv = j.id_resv AND r.time_start < j.time_start), '') AS reservation,
    j.job_name AS jobname,
    -- a job's own line: the warehouse keeps TotalCPU and MaxRSS per step only (slurm_job_step)
    '' AS totalcpu, '' AS maxrss,
    j.job_db_inx AS db_inx,
    -1 AS step_order
FROM jobs AS j
LEFT JOIN {{mysql assoc_table}} AS a ON a.id_assoc = j.id_assoc
LEFT JOIN {{mysql qos_table}} AS q ON q.id = j.id_qos

UNION ALL

SELECT
    concat(toString(j.id_job), '.', slurm_step_text(s.id_step)) AS jobidraw,
    concat(j.display_id, '.', slurm_step_text(s.id_step)) AS jobid,
    {cluster:String} AS cluster,
    '' AS `partition`, '' AS qos,
    ifNull(j.account, '') AS account,
    '' AS gid, '' AS user, '' AS uid,
    slurm_time_text(s.time_start) AS submit,
    slurm_time_text(s.time_start) AS eligible,
    slurm_time_text(s.time_start) AS start,
    slurm_time_text(s.time_end) AS `end`,
    toString(if(s.time_start = 0, 0, if(s.time_end = 0, now_s, s.time_end) - s.time_start)) AS elapsedraw,
    '' AS timelimitraw,
    slurm_exit_text(toUInt32(s.exit_code)) AS exitcode,
    slurm_state_text(s.state, s.kill_requid) AS state,
    toString(s.nodes_alloc) AS nnodes,
    toString(toUInt64OrZero(extract(concat(',', s.tres_alloc), ',1=([0-9]+)'))) AS ncpus,
    '' AS reqcpus, '' AS reqmem, '' AS reqtres,
    slurm_tres_text(s.tres_alloc, tres_names) AS alloctres,
    s.nodelist AS nodelist,
    '' AS reservation,
    s.step_name AS jobname,
    -- sacct's TotalCPU is the step's user + system time; MaxRSS the mem TRES (bytes) of tres_usage_in_max,
    -- empty where that holds none
    slurm_cpu_text(toUInt64(ifNull(s.user_sec, 0)) + toUInt64(ifNull(s.sys_sec, 0)),
                   toUInt64(ifNull(s.user_usec, 0)) + toUInt64(ifNull(s.sys_usec, 0))) AS totalcpu,
    if(match(concat(',', ifNull(s.tres_usage_in_max, '')), ',2=[0-9]'),
       slurm_bytes_text(toUInt64OrZero(extract(concat(',', s.tres_usage_in_max), ',2=([0-9]+)'))), '') AS maxrss,
    j.job_db_inx AS db_inx,
    s.id_step AS step_order
FROM {{mysql step_table}} AS s
INNER JOIN jobs AS j ON s.job_db_inx = j.job_db_inx
WHERE s.deleted = 0
  AND s.job_db_inx > {after_inx:UInt64} AND s.job_db_inx <= {upto_inx:UInt64}
ORDER BY db_inx, step_order
