"""`ops-report digest`: the users over a waste threshold in the last days of the loaded history, for a site's
cron to mail (the product has no mail server). Who is over which threshold is sql/marts/wasteful_users.sql's
(its parameters are the thresholds, their declared values the defaults); this module picks the days and
passes the thresholds."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

from ops_warehouse.analytics import declarations
from ops_warehouse.analytics.periods import history_span, resolve_cluster

THRESHOLDS = ("waste_idle_gpu_h", "waste_util_pct", "waste_gpu_mem_eff", "waste_min_gpu_h")


def thresholds(**given) -> dict:
    """The thresholds: the declared ones (wasteful_users.sql) where ``given`` has None."""
    declared = declarations.mart("wasteful_users").parameters
    return {k: declared[k] if given.get(k) is None else given[k] for k in THRESHOLDS}


def digest(api, *, days: int, last_day: date | None = None, project: str | None = None,
           cluster: str | None = None, **given) -> dict:
    """The ``days`` whole days (UTC) ending with ``last_day`` (default: the last day the loaded history
    reaches), and the users over a threshold in them: {'cluster', 'start', 'end', 'thresholds', 'users'}."""
    with api.session() as wh:
        cluster = resolve_cluster(wh, cluster)
        if last_day is None:  # the day the as-of time ends (at midnight: the day before it, whole)
            last_day = (history_span(wh, cluster)[0] - timedelta(seconds=1)).date()
        end = datetime.combine(last_day + timedelta(days=1), time(), timezone.utc)
        start = end - timedelta(days=days)
        limits = thresholds(**given)
        users = api.wasteful_users(project=project, cluster=cluster, start=start, end=end, **limits)
    return {"cluster": cluster, "start": start, "end": end, "thresholds": limits, "users": users}
