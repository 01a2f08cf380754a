"""Periods: which cluster and which window ``[start, end)`` (UTC) a statistic is for.

A month (``"2026-10"``), the last complete month of the loaded history, or any window; and the cluster,
checked against the warehouse's jobs. The history's span is the model sql/intermediate/cluster_as_of.sql.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from ops_warehouse.errors import OpsError


@dataclass(frozen=True)
class Period:
    """One cluster over ``[start, end)``, UTC; ``month`` names it when it is a calendar month."""

    cluster: str
    start: datetime
    end: datetime
    month: str | None = None

    def previous(self) -> "Period":
        """The period of the same length just before (the month before, for a month)."""
        if self.month:
            m = (self.start.date() - timedelta(days=1)).replace(day=1)
            w = month_window(m)
            return Period(self.cluster, w[0], w[1], f"{m:%Y-%m}")
        return Period(self.cluster, self.start - (self.end - self.start), self.start)


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
    sql/intermediate/cluster_as_of.sql, where the capacity grain and the marts stop."""
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


def utc_day(value, what: str) -> date:
    """A whole day (summary and telemetry take days): a date, a datetime's day, or its ISO text."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise OpsError(f"{what} must be a day (YYYY-MM-DD), not {value!r}") from None


def utc_time(value, what: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, date):
        return datetime.combine(value, datetime.min.time(), timezone.utc)
    try:
        text = str(value)
        d = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)  # 3.10 reads no Z
    except ValueError:
        raise OpsError(f"{what} must be a date or time (YYYY-MM-DD[THH:MM]), not {value!r}") from None
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)
