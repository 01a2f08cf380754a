"""`ops-report monthly`: one month of one cluster, for a project or the whole machine.

Every figure comes from a mart (sql/marts/, run through the API); this module picks the month, runs the
marts each declares itself in the report (``report = N``, its place) for it, and for the month before those
declaring ``previous = true`` (analytics/declarations.py), and hands one dict (the JSON schema in docs/monthly.md,
``schema_version``) to the renderers in ops_warehouse.reports. It computes no statistic: each key is a
mart's rows under the mart's name, and the marts' parameters (straggler ratio, number of largest jobs) are
recorded beside them. It only reads: the marts read grains the loads keep (docs/sql.md, "Grains"), so the
per-run efficiency is formed once, for the largest jobs (the efficiency totals sum the run_node_hour grain
directly), and no grain is refreshed here.

Project isolation: a project report runs the job, user, efficiency, chargeback and reservation marts with
the project as a query parameter, so nothing of another project's jobs or users is ever read into it; the
cluster-level sections (capacity, utilization, cost by GPU model, node reliability) are aggregates without
users or job ids.
"""

from __future__ import annotations

import inspect
from datetime import date, datetime, timedelta, timezone

import polars as pl
from ops_warehouse.analytics import declarations
from ops_warehouse.analytics.marts import PARAMETERS, asked_for, each_mart_once, evaluate_ahead
from ops_warehouse.analytics.periods import Period, history_span, last_complete_month, month_window, resolve_cluster
from ops_warehouse.analytics.pseudonyms import pseudonym_key, pseudonymize
from ops_warehouse.analytics.whatif import whatif_report
from ops_warehouse.errors import OpsError
from ops_warehouse.migrations import warehouse_cost_model
from ops_warehouse.planning.changes import parse_change

SCHEMA_VERSION = "5.1"
SIZE_CLASSES = ("1", "2-8", "9-64", "65-256", "257-1024", ">1024")


def _rows(df: pl.DataFrame | None) -> list[dict]:
    return [] if df is None else df.to_dicts()


def _keywords(fn, params: dict) -> dict:
    """``params`` as ``fn`` takes them: a mart's method names its parameters as keywords; a mart served by
    Connection.__getattr__ (declared, no method) takes them in ``params`` (its other keywords are filters)."""
    named = inspect.signature(fn).parameters
    kw = {k: v for k, v in params.items() if k in named}
    rest = {k: v for k, v in params.items() if k not in named}
    return {**kw, "params": rest} if rest else kw


# how the report lists a mart's rows: each row under the mart's name, and the month before's under
# <name>_previous where the mart declares `previous = true`; the marts below are listed otherwise
def _listed(name: str, now: pl.DataFrame, before: pl.DataFrame | None, **_) -> dict:
    listed = {name: _rows(now)}
    if declarations.mart(name).previous:
        listed[f"{name}_previous"] = _rows(before)
    return listed


def _efficiency(name: str, now: pl.DataFrame, before: pl.DataFrame | None, *, project: str, **_) -> dict:
    """The scope's row (project_key: the project, '' the cluster) of the month and the month before, and in
    a cluster report the projects' rows."""
    def scope(df):
        return None if df is None else df.filter(pl.col("project_key") == project)

    listed = _listed(name, scope(now), scope(before))
    listed[f"{name}_by_project"] = _rows(now.filter(pl.col("project_key") != "")) if not project else []
    return listed


def _one_row(name: str, now: pl.DataFrame, before, **_) -> dict:
    """A one-row mart (whether telemetry covers the month) as an object."""
    return {name: now.row(0, named=True)}


def _largest(name: str, now: pl.DataFrame, before, *, top_jobs: int, **_) -> dict:
    """The largest (the mart lists them largest first), as many as the largest jobs."""
    return {name: _rows(now.head(top_jobs))}


_SHAPES = {"efficiency": _efficiency, "fine_telemetry": _one_row, "campaigns": _largest}


def monthly_report(api, *, month: date | None = None, project: str | None = None, cluster: str | None = None,
                   anonymize_users: bool = False, progress=None, behind_ratio: float = PARAMETERS["behind_ratio"],
                   top_jobs: int = PARAMETERS["top_jobs"]) -> dict:
    """The report of ``month`` (default: the last complete month with data) for ``project`` or, with
    ``project=None``, the whole cluster. ``behind_ratio`` and ``top_jobs`` are the straggler and
    largest-jobs marts' parameters; the report records them."""
    # one engine opening and one turn for the whole report, each mart evaluated once
    with api.session() as w, each_mart_once(w):
        return _monthly_report(api, month=month, project=project, cluster=cluster,
                               anonymize_users=anonymize_users, progress=progress, behind_ratio=behind_ratio,
                               top_jobs=top_jobs)


def _monthly_report(api, *, month: date | None = None, project: str | None = None, cluster: str | None = None,
                   anonymize_users: bool = False, progress=None, behind_ratio: float = PARAMETERS["behind_ratio"],
                   top_jobs: int = PARAMETERS["top_jobs"]) -> dict:
    wh = api.warehouse
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
    # the analysts' API (ops_warehouse.analytics.api): the report runs the marts as a notebook's wh.mart does
    step = progress or (lambda label: None)
    per = Period(cluster, w[0], w[1], f"{month:%Y-%m}")
    prev = per.previous()
    pw = (prev.start, prev.end)
    p = project or ""
    proj = project  # the project-scoped marts take it as a query parameter

    def run(label: str, fn, *args, **kw) -> pl.DataFrame:
        step(label)
        return fn(*args, **kw)

    # a month before the loaded history has capacity but no jobs: no comparison rather than a fall to zero
    has_prev = wh.query_rows("SELECT count() > 0 FROM slurm_job_run WHERE cluster = {c:String} AND "
                             "coalesce(start_ts, submit_ts) < {t1:DateTime('UTC')} AND "
                             "coalesce(end_ts, as_of_ts) >= {t0:DateTime('UTC')}",
                             {"c": cluster, "t0": pw[0], "t1": pw[1]})[0][0]
    # where the month's figures stop (sql/marts/data_through.sql): its end, or the as-of time of the data
    through = run("data_through", api.mart, "data_through", per).row(0, named=True)
    complete = not through["partial"]
    # the report's marts in their declared places (sql/marts/*.sql `report = N`), each run by its API method
    # (largest_jobs' limits job_efficiency to the largest runs) for the month and, declared
    # `previous = true`, for the month before: a project-scoped mart for the report's project, and with the
    # report's own parameters where it declares them. Declared user columns are pseudonymized on request.
    given = {"behind_ratio": behind_ratio, "top_jobs": top_jobs}
    key = pseudonym_key(wh) if anonymize_users else None
    calls = []  # (mart, its API method, its keywords, whether for the month, for the month before)
    for name in declarations.reported():
        m = declarations.mart(name)
        fn = getattr(api, name)
        kw = _keywords(fn, {k: given[k] for k in m.parameters if k in given})
        if m.scope == "project":
            kw["project"] = proj
        calls.append((name, fn, kw, not (m.project_only and project is None), m.previous and has_prev))
    # every mart the report asks for, asked once to learn the evaluations (the API's own arguments), then
    # evaluated over two engine handles at once (analytics/marts.py: evaluate_ahead); the calls below read them
    step("marts evaluated")
    with asked_for(wh) as asked:
        for name, fn, kw, now, before in calls:
            for period in (per,) * now + (prev,) * before:
                fn(period, **kw)
    evaluate_ahead(wh, asked)
    frames: dict[str, tuple[pl.DataFrame, pl.DataFrame | None]] = {}
    for name, fn, kw, now, before in calls:
        m = declarations.mart(name)
        now = run(name, fn, per, **kw) if now else pl.DataFrame()
        before = run(name, fn, prev, **kw) if before else None
        if key is not None and m.user_columns:
            now, before = (None if df is None else pseudonymize(df, key, m.user_columns) for df in (now, before))
        frames[name] = (now, before)
    # what the next purchase buys (2.2): the config's [[whatif]] scenarios replayed on the month, when it has any
    whatif = None
    if wh.cfg.whatif:
        step("what-if replays")
        changes = [parse_change(e.get("add", ()), e.get("remove", ()), e.get("reservation", ()),
                                float(e.get("scale_load", 1.0)), str(e.get("name", ""))) for e in wh.cfg.whatif]
        whatif = whatif_report(wh, cluster=cluster, window=w, changes=changes, project=proj)

    cl = frames["utilization"][0].filter(pl.col("level") == "cluster")
    # the idle threshold the capacity grain was computed with (the config's when the month has no hours)
    idle_util_pct = cl["idle_util_pct"].item() if cl.height and cl["idle_util_pct"].item() is not None \
        else wh.cfg.idle_util_pct
    doc = {
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
        "idle_util_pct": idle_util_pct,
        # the parameters the marts ran with (2.0): straggler threshold, number of largest jobs
        "behind_ratio": behind_ratio,
        "top_jobs": top_jobs,
        # the hung- and idle-job marts' parameters (2.1): minutes idle before the end, NIC bytes/s under which
        # a node is quiet, minutes of telemetry an idle run must have
        "hang_minutes": PARAMETERS["hang_minutes"],
        "hang_nic_bytes_per_s": wh.cfg.hang_nic_bytes_per_s,
        "idle_min_minutes": PARAMETERS["idle_min_minutes"],
        "swap_min_score": PARAMETERS["swap_min_score"],
        "node_score_rule": declarations.mart("node_health").rule,  # the score in a sentence, as the mart declares it
        "xid_failure_minutes": PARAMETERS["xid_failure_minutes"],
        "users_anonymized": anonymize_users,
        # the marts' rows, each under its name in its declared place (and <name>_previous after it)
        **{k: v for name, (now, before) in frames.items()
           for k, v in _SHAPES.get(name, _listed)(name, now, before, project=p, top_jobs=top_jobs).items()},
        "whatif": whatif,
        "campaign_gap_hours": PARAMETERS["campaign_gap_hours"],
        "campaign_min_gpus": PARAMETERS["campaign_min_gpus"],
        "ckpt_write_bytes_per_s": wh.cfg.ckpt_write_bytes_per_s,
        "carbon_g_per_kwh": wh.cfg.carbon_g_per_kwh,
        "cost_model": warehouse_cost_model(wh),  # the one the cost marts used
    }
    return doc

