"""`ops-report monthly`: one month of one cluster, for a project or the whole machine.

Every figure comes from a mart (sql/marts/, run through the API's functions); this module picks the month,
runs the marts for it and the month before, and hands one dict (the JSON schema in docs/monthly.md,
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

from datetime import date, datetime, timedelta, timezone

import polars as pl
from ops_warehouse.analytics import declarations
from ops_warehouse.analytics.marts import PARAMETERS, each_mart_once
from ops_warehouse.analytics.periods import Period, history_span, last_complete_month, month_window, resolve_cluster
from ops_warehouse.analytics.pseudonyms import pseudonym_key, pseudonymize
from ops_warehouse.analytics.whatif import whatif_report
from ops_warehouse.errors import OpsError
from ops_warehouse.migrations import warehouse_cost_model
from ops_warehouse.planning.changes import parse_change

SCHEMA_VERSION = "5.1"
SIZE_CLASSES = ("1", "2-8", "9-64", "65-256", "257-1024", ">1024")


def _rows(df: pl.DataFrame) -> list[dict]:
    return df.to_dicts()


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
    # the analysts' API (ops_warehouse.analytics.api): the report runs the very functions a notebook calls

    step = progress or (lambda label: None)
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
    failures = run("failures_by_size", api.failures_by_size, per, project=proj)
    failures_prev = previous("failures_by_size", api.failures_by_size, project=proj)
    eff = run("efficiency", api.efficiency, per, project=proj)
    eff_prev = previous("efficiency", api.efficiency, "project_key", project=proj)
    jobs = run("largest_jobs", api.largest_jobs, per, project=proj, top_jobs=top_jobs)
    # chargeback: only the project's own rows in a project report (the mart takes the project)
    charges = run("chargeback", api.chargeback, per, project=proj)
    charges_prev = previous("chargeback", api.chargeback, "project", project=proj)
    totals = run("chargeback_totals", api.chargeback_totals, per, project=proj)
    totals_prev = previous("chargeback_totals", api.chargeback_totals, "project", project=proj)
    daily = run("utilization_daily", api.utilization_daily, per, project=proj)
    heat = run("gpu_heatmap", api.gpu_heatmap, per)
    xids = run("xid_events", api.xid_events, per)
    xid_codes = run("xid_codes", api.xid_codes, per)
    nodes = run("node_failures", api.node_failures, per)
    throttle = run("throttling", api.throttling, per)
    resv = run("reservations", api.reservations, per, project=proj)  # a project's: its accounts' reservations
    stragglers = run("stragglers", api.stragglers, per, project=proj, behind_ratio=behind_ratio)
    # waste (2.1): hangs need the per-sample telemetry, which fine_ttl_days may have dropped ("unknown");
    # hung_jobs marks the suspect nodes itself (hang_suspect_nodes would read the samples a second time)
    fine = run("fine_telemetry", api.fine_telemetry, per).row(0, named=True)
    hung = run("hung_jobs", api.hung_jobs, per, project=proj)
    idle_jobs = run("idle_gpu_jobs", api.idle_gpu_jobs, per, project=proj)
    idle_users = run("idle_gpu_users", api.idle_gpu_users, per, project=proj)
    # node health (2.1): cluster-level, nodes only, in a project's report too (the nodes its jobs run on)
    health = run("node_health", api.node_health, per)
    energy = run("energy", api.energy, per, project=proj)  # the scope's row and its projects'
    goodput = run("goodput", api.goodput, per, project=proj)
    campaigns = run("campaigns", api.campaigns, per, project=proj).head(top_jobs)  # the largest, as listed
    # what the next purchase buys (2.2): the config's [[whatif]] scenarios replayed on the month, when it has any
    whatif = None
    if wh.cfg.whatif:
        step("what-if replays")
        changes = [parse_change(e.get("add", ()), e.get("remove", ()), e.get("reservation", ()),
                                float(e.get("scale_load", 1.0)), str(e.get("name", ""))) for e in wh.cfg.whatif]
        whatif = whatif_report(wh, cluster=cluster, window=w, changes=changes, project=proj)

    if project is not None:
        users = run("users", api.users, per, project=proj)
    else:
        users = pl.DataFrame()
    if anonymize_users:
        key = pseudonym_key(wh)
        # each frame's user columns as its mart declares them (sql/marts/*.sql user_columns)
        users, jobs, hung, idle_jobs, idle_users, campaigns = (
            pseudonymize(df, key, declarations.mart(name).user_columns) for name, df in (
                ("users", users), ("largest_jobs", jobs), ("hung_jobs", hung), ("idle_gpu_jobs", idle_jobs),
                ("idle_gpu_users", idle_users), ("campaigns", campaigns)))

    total = eff.filter(pl.col("project_key") == "")
    own = eff.filter(pl.col("project_key") == p) if project is not None else total
    cl = util.filter(pl.col("level") == "cluster")
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
        "utilization": _rows(util),
        "utilization_previous": _rows(util_prev),
        "utilization_daily": _rows(daily),
        "job_sizes": _rows(sizes),
        "run_times": _rows(runtimes),
        "end_states": _rows(states),
        "failures_by_size": _rows(failures),
        "failures_by_size_previous": _rows(failures_prev),
        "efficiency": _rows(own),
        "efficiency_previous": _rows(eff_prev.filter(pl.col("project_key") == p)),
        "efficiency_by_project": _rows(eff.filter(pl.col("project_key") != "")) if project is None else [],
        "largest_jobs": _rows(jobs),
        "chargeback": _rows(charges),
        "chargeback_previous": _rows(charges_prev),
        "chargeback_totals": _rows(totals),
        "chargeback_totals_previous": _rows(totals_prev),
        "users": _rows(users),
        "cost": _rows(cost),
        "cost_previous": _rows(cost_prev),
        "reservations": _rows(resv),
        "xid_events": _rows(xids),
        "xid_codes": _rows(xid_codes),
        "node_failures": _rows(nodes),
        "throttling": _rows(throttle),
        "stragglers": _rows(stragglers),
        "gpu_heatmap": _rows(heat),
        "fine_telemetry": fine,
        "hung_jobs": _rows(hung),
        "idle_gpu_jobs": _rows(idle_jobs),
        "idle_gpu_users": _rows(idle_users),
        "node_health": _rows(health),
        "energy": _rows(energy),
        "goodput": _rows(goodput),
        "campaigns": _rows(campaigns),
        "whatif": whatif,
        "campaign_gap_hours": PARAMETERS["campaign_gap_hours"],
        "campaign_min_gpus": PARAMETERS["campaign_min_gpus"],
        "ckpt_write_bytes_per_s": wh.cfg.ckpt_write_bytes_per_s,
        "carbon_g_per_kwh": wh.cfg.carbon_g_per_kwh,
        "cost_model": warehouse_cost_model(wh),  # the one the cost marts used
    }
    # a mart declared `report = true` that the report does not shape itself above (a new statistic): its rows
    # as the mart gives them, for the report's scope (run_mart keeps a cluster-scoped mart the cluster's), its
    # declared user columns pseudonymized with the others; a renderer shows it once it has a section
    for name in declarations.reported():
        if name in doc:
            continue
        m = declarations.mart(name)
        df = pl.DataFrame() if m.project_only and project is None else run(name, api.mart, name, per, project=proj)
        if anonymize_users and m.user_columns:
            df = pseudonymize(df, key, m.user_columns)
        doc[name] = _rows(df)
    return doc

