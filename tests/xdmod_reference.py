"""An independent implementation of Open XDMoD's Jobs-realm statistics in DuckDB, straight from the raw
sacct dumps (no code shared with ops_warehouse), to cross-check sql/marts/summary.sql.

Definitions (Open XDMoD, Jobs realm): usage hours = resources x overlap of [Start, End] with the period;
a job that spans periods is split; wait = Start - Submit in the period the job started; jobs with node list
"None assigned" never ran; GPUs = gres/gpu=N of AllocTRES (else the typed gres/gpu:T=N entries).
"""

from __future__ import annotations

from datetime import date

import duckdb

XDMOD_COLUMNS = [
    "jobid", "jobidraw", "cluster", "partition", "qos", "account", "grp", "gid", "usr", "uid", "submit",
    "eligible", "start", "end_", "elapsed", "exitcode", "state", "nnodes", "ncpus", "reqcpus", "reqmem",
    "reqtres", "alloctres", "timelimit", "nodelist", "jobname",
]


def reference_summary(paths: list[str], date_from: date, date_to: date, period: str) -> list[dict]:
    """Rows per (cluster, period_start) with jobs_started/ended/cancelled and usage/wait hours."""
    con = duckdb.connect()
    cols = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in XDMOD_COLUMNS) + "}"
    files = "[" + ", ".join(f"'{p}'" for p in paths) + "]"
    con.execute(f"""
        CREATE TABLE j AS
        SELECT
            cluster,
            strptime(submit, '%Y-%m-%dT%H:%M:%S') AS submit_t,
            TRY_STRPTIME(start, '%Y-%m-%dT%H:%M:%S') AS start_t,
            TRY_STRPTIME(end_, '%Y-%m-%dT%H:%M:%S') AS end_t,
            CAST(nnodes AS BIGINT) AS nodes,
            CAST(ncpus AS BIGINT) AS cpus,
            coalesce(
                CAST(NULLIF(regexp_extract(alloctres, '(^|,)gres/gpu=([0-9]+)', 2), '') AS BIGINT),
                (SELECT sum(CAST(regexp_extract(x, '=([0-9]+)$', 1) AS BIGINT))
                 FROM unnest(regexp_extract_all(alloctres, 'gres/gpu:[^=,]+=[0-9]+')) AS t(x)),
                0) AS gpus,
            nodelist = 'None assigned' AS never_ran,
            state
        FROM read_csv({files}, delim='|', header=false, quote='', escape='', columns={cols})
    """)
    step = {"day": "1 day", "month": "1 month"}.get(period)
    if step:
        unit = "day" if period == "day" else "month"
        con.execute(f"""
            CREATE TABLE periods AS
            SELECT p AS p_start, p + INTERVAL {step} AS p_end
            FROM generate_series(date_trunc('{unit}', DATE '{date_from}'), DATE '{date_to}', INTERVAL {step}) t(p)
        """)
        # clip the periods to the window
        con.execute(f"""
            UPDATE periods SET p_start = greatest(p_start, DATE '{date_from}'),
                               p_end = least(p_end, DATE '{date_to}' + 1)
        """)
    else:
        con.execute(f"CREATE TABLE periods AS SELECT DATE '{date_from}'::TIMESTAMP AS p_start, "
                    f"(DATE '{date_to}' + 1)::TIMESTAMP AS p_end")
    key = "date_trunc('{u}', p.p_start)".format(u="day" if period == "day" else "month") if step else "p.p_start"
    res = con.execute(f"""
        WITH ran AS (SELECT * FROM j WHERE NOT never_ran AND start_t IS NOT NULL AND end_t IS NOT NULL
                                        AND state NOT IN ('RUNNING', 'PENDING')),
        usage AS (
            SELECT j.cluster, {key} AS period_start,
                   greatest(epoch(least(j.end_t, p.p_end)) - epoch(greatest(j.start_t, p.p_start)), 0) AS ov,
                   j.cpus, j.gpus, j.nodes
            FROM ran j JOIN periods p ON j.start_t < p.p_end AND j.end_t > p.p_start
        ),
        u AS (SELECT cluster, period_start, sum(ov * cpus) / 3600 AS cpu_hours, sum(ov * gpus) / 3600 AS gpu_h,
                     sum(ov * nodes) / 3600 AS node_hours, sum(ov) / 3600 AS wall_hours
              FROM usage GROUP BY ALL),
        s AS (SELECT j.cluster, {key} AS period_start, count(*) AS jobs_started,
                     sum(epoch(j.start_t) - epoch(j.submit_t)) / 3600 AS wait_hours
              FROM ran j JOIN periods p ON j.start_t >= p.p_start AND j.start_t < p.p_end GROUP BY ALL),
        e AS (SELECT j.cluster, {key} AS period_start, count(*) AS jobs_ended
              FROM ran j JOIN periods p ON j.end_t >= p.p_start AND j.end_t < p.p_end GROUP BY ALL),
        c AS (SELECT j.cluster, {key} AS period_start, count(*) AS jobs_cancelled_before_start
              FROM j JOIN periods p ON j.end_t >= p.p_start AND j.end_t < p.p_end WHERE never_ran GROUP BY ALL),
        keys AS (SELECT cluster, period_start FROM u UNION SELECT cluster, period_start FROM s
                 UNION SELECT cluster, period_start FROM e UNION SELECT cluster, period_start FROM c)
        SELECT k.cluster, CAST(k.period_start AS DATE) AS period_start,
               coalesce(jobs_ended, 0) AS jobs_ended, coalesce(jobs_started, 0) AS jobs_started,
               coalesce(jobs_cancelled_before_start, 0) AS jobs_cancelled_before_start,
               coalesce(cpu_hours, 0) AS cpu_hours, coalesce(gpu_h, 0) AS gpu_h,
               coalesce(node_hours, 0) AS node_hours, coalesce(wall_hours, 0) AS wall_hours,
               coalesce(wait_hours, 0) AS wait_hours
        FROM keys k LEFT JOIN u USING (cluster, period_start) LEFT JOIN s USING (cluster, period_start)
             LEFT JOIN e USING (cluster, period_start) LEFT JOIN c USING (cluster, period_start)
        ORDER BY 1, 2
    """)
    names = [d[0] for d in res.description]
    return [dict(zip(names, r)) for r in res.fetchall()]
