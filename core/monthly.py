"""`ops-report monthly`: one month of one cluster, for a project or the whole machine.

Every figure comes from a mart (sql/marts/, run by ops_warehouse.marts); this module picks the month,
refreshes the hourly capacity grain for it and the month before, runs the marts, and hands one dict (the
JSON schema in docs/monthly.md, ``schema_version``) to the renderers in ops_warehouse.reports.

Project isolation: a project report runs the job, user and efficiency marts with the project as a query
parameter, so nothing of another project's jobs or users is ever read into it; the cluster-level sections
(capacity, utilization, cost by GPU model, node reliability) are aggregates without users or job ids.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import polars as pl

from ops_warehouse import OpsError
from ops_warehouse.migrations import warehouse_cost_model
from ops_warehouse.pseudonyms import pseudonym, pseudonym_key

SCHEMA_VERSION = "1.1"
SIZE_CLASSES = ("1", "2-8", "9-64", "65-256", "257-1024", ">1024")
GANTT_JOBS = 15


def month_window(month: date) -> tuple[datetime, datetime]:
    m0 = datetime(month.year, month.month, 1, tzinfo=timezone.utc)
    m1 = datetime(month.year + (month.month == 12), month.month % 12 + 1, 1, tzinfo=timezone.utc)
    return m0, m1


def parse_month(text: str) -> date:
    try:
        d = datetime.strptime(text, "%Y-%m")
    except ValueError:
        raise OpsError(f"--month must be YYYY-MM (e.g. 2026-10), not {text!r}") from None
    return date(d.year, d.month, 1)


def resolve_cluster(wh, cluster: str | None) -> str:
    have = [r[0] for r in wh.query_rows("SELECT DISTINCT cluster FROM slurm_job_run ORDER BY cluster")]
    if cluster:
        if have and cluster not in have:
            raise OpsError(f"no jobs of cluster {cluster!r} in the warehouse; it has: {', '.join(have)}")
        return cluster
    if not have:
        raise OpsError("the warehouse holds no jobs yet: load them first (ops-report etl sacct ...)")
    if len(have) == 1:
        return have[0]
    if wh.cfg.default_cluster in have:
        return wh.cfg.default_cluster
    raise OpsError(f"the warehouse holds several clusters ({', '.join(have)}): choose one with --slurm-cluster")


def history_span(wh, cluster: str) -> tuple[datetime, datetime]:
    """(as-of time of the loaded job history, earliest start or submit) of a cluster, UTC: the model
    sql/models/cluster_as_of.sql, where the capacity grain and the marts stop."""
    found = wh.query_rows("SELECT as_of_ts, first_ts FROM cluster_as_of WHERE cluster = {c:String}", {"c": cluster})
    latest, first = found[0] if found else (None, None)
    if latest is None or latest.year < 2000:
        raise OpsError(f"no job history for cluster {cluster!r}")
    return latest.replace(tzinfo=timezone.utc), first.replace(tzinfo=timezone.utc)


def last_complete_month(latest: datetime, first: datetime) -> date:
    """The last month whose end the loaded history reaches and that has jobs; when no month is complete yet,
    the month of the latest record."""
    m = date(latest.year, latest.month, 1)
    prev = (m - timedelta(days=1)).replace(day=1)
    if latest < month_window(m)[1] and first < month_window(prev)[1]:
        return prev
    return m




def _rows(df: pl.DataFrame) -> list[dict]:
    return df.to_dicts()


def monthly_report(wh, *, month: date | None = None, project: str | None = None, cluster: str | None = None,
                   anonymize_users: bool = False, progress=None) -> dict:
    """The report of ``month`` (default: the last complete month with data) for ``project`` or, with
    ``project=None``, the whole cluster."""
    cluster = resolve_cluster(wh, cluster)
    latest, first = history_span(wh, cluster)
    month = month or last_complete_month(latest, first)
    if project is not None:
        known = [r[0] for r in wh.query_rows("SELECT DISTINCT project FROM fct_job_run WHERE cluster = {c:String}",
                                             {"c": cluster})]
        if project not in known:
            raise OpsError(f"no jobs of project {project!r} on {cluster}; projects: {', '.join(sorted(known))} "
                           "(accounts map to projects in the config's [projects])")
    w = month_window(month)
    prev_month = (month - timedelta(days=1)).replace(day=1)
    # the analysts' API (ops_warehouse.api): the report runs the very functions a notebook calls
    from ops_warehouse.api import Connection, Period

    step = progress or (lambda label: None)
    api = Connection(wh)
    per = Period(cluster, w[0], w[1], f"{month:%Y-%m}")
    prev = per.previous()
    pw = (prev.start, prev.end)
    p = project or ""
    proj = project  # the job, user and efficiency marts take the project as a query parameter

    def run(label: str, fn, *args, **kw) -> pl.DataFrame:
        step(label)
        return fn(*args, **kw)

    def previous(label: str, fn, key: str | None = None, **kw) -> pl.DataFrame:
        """The mart for the month before; empty (with the column filtered on below) when it has no jobs."""
        if has_prev:
            return run(label, fn, prev, **kw)
        return pl.DataFrame(schema={key: pl.String}) if key else pl.DataFrame()

    # a month before the loaded history has capacity but no jobs: no comparison rather than a fall to zero
    has_prev = wh.query_rows("SELECT count() > 0 FROM slurm_job_run WHERE cluster = {c:String} AND "
                             "coalesce(start_ts, submit_ts) < {t1:DateTime('UTC')} AND "
                             "coalesce(end_ts, as_of_ts) >= {t0:DateTime('UTC')}",
                             {"c": cluster, "t0": pw[0], "t1": pw[1]})[0][0]
    # where the month's figures stop (sql/marts/data_through.sql): its end, or the as-of time of the data
    through = run("data_through", api.mart, "data_through", per).row(0, named=True)
    complete = not through["partial"]
    util = run("utilization", api.utilization, per)
    util_prev = previous("utilization", api.utilization)
    cost = run("cost", api.cost, per)
    cost_prev = previous("cost", api.cost)
    sizes = run("job_sizes", api.job_sizes, per, project=proj)
    runtimes = run("run_times", api.run_times, per, project=proj)
    states = run("end_states", api.end_states, per, project=proj)
    failures = run("failures_by_size", api.reliability, per, project=proj)
    failures_prev = previous("failures_by_size", api.reliability, project=proj)
    eff = run("efficiency_summary", api.efficiency, per, project=proj)
    eff_prev = previous("efficiency_summary", api.efficiency, "project_key", project=proj)
    jobs = run("job_efficiency", api.efficiency, per, project=proj, per_job=True)
    projects = run("projects", api.chargeback, per)
    projects_prev = previous("projects", api.chargeback, "project")
    daily = run("utilization_daily", api.utilization_daily, per, project=proj)
    heat = run("gpu_heatmap", api.mart, "gpu_heatmap", per)
    xids = run("xid_events", api.xid_events, per)
    nodes = run("node_failures", api.node_failures, per)
    throttle = run("throttling", api.throttling, per)
    resv = run("reservations", api.reservations, per)
    stragglers = run("stragglers", api.stragglers, per, project=proj).filter(pl.col("runs_behind") > 0)

    if project is not None:
        projects = projects.filter(pl.col("project") == project)
        projects_prev = projects_prev.filter(pl.col("project") == project)
        resv = resv.filter(pl.col("accounts").list.eval(pl.element().is_in(_accounts_of(wh, project))).list.any())
        users = run("users", api.users, per, project=proj)
    else:
        users = pl.DataFrame()
    if anonymize_users:
        key = pseudonym_key(wh)
        if users.height:
            users = users.with_columns(pl.col("user").map_elements(lambda u: pseudonym(u, key), pl.String))
        jobs = jobs.with_columns(pl.col("user").map_elements(lambda u: pseudonym(u, key), pl.String))

    total = eff.filter(pl.col("project_key") == "")
    own = eff.filter(pl.col("project_key") == p) if project is not None else total
    gantt = jobs.sort("gpu_hours", descending=True).head(GANTT_JOBS)
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cluster": cluster,
        "scope": "project" if project is not None else "cluster",
        "project": project,
        "month": f"{month:%Y-%m}",
        "month_complete": complete,
        "window": {"from": w[0].isoformat(), "to": w[1].isoformat()},
        # the as-of time of the loaded job history; a month in progress is reported through it (1.1)
        "period": {"as_of": latest.isoformat(),
                   "partial_through": None if complete else through["through_ts"].isoformat()},
        "previous_month": f"{prev_month:%Y-%m}",
        "previous_month_has_data": bool(has_prev),
        "idle_util_pct": wh.cfg.idle_util_pct,
        "users_anonymized": anonymize_users,
        "utilization": _rows(util),
        "utilization_previous": _rows(util_prev),
        "daily": _rows(daily),
        "job_sizes": _rows(sizes),
        "run_times": _rows(runtimes),
        "end_states": _rows(states),
        "failures_by_size": _rows(failures),
        "failures_by_size_previous": _rows(failures_prev),
        "efficiency": _rows(own),
        "efficiency_previous": _rows(eff_prev.filter(pl.col("project_key") == p)),
        "efficiency_by_project": _rows(eff.filter(pl.col("project_key") != "")) if project is None else [],
        "largest_jobs": _rows(gantt.drop("submit_ts")),
        "projects": _rows(projects),
        "projects_previous": _rows(projects_prev),
        "users": _rows(users),
        "cost": _rows(cost),
        "cost_previous": _rows(cost_prev),
        "reservations": _rows(resv),
        "xid_events": _rows(xids),
        "node_failures": _rows(nodes),
        "throttling": _rows(throttle),
        "stragglers": _rows(stragglers),
        "gpu_heatmap": _rows(heat),
        "cost_model": warehouse_cost_model(wh),  # the one the cost marts used
    }


def _accounts_of(wh, project: str) -> list[str]:
    rows = wh.query_rows("SELECT DISTINCT lower(account) FROM fct_job_run WHERE project = {p:String}", {"p": project})
    return [r[0] for r in rows]
