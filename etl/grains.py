"""The intermediate grains the marts read, kept up to date by the loads that change their inputs.

capacity_node_hour (sql/intermediate/capacity_node_hour.sql) is recomputed for the whole hours a load
touched: a sacct or slurmdbd load for the span of the runs it wrote (and up to the cluster's new as-of
time), a capacity load for the spans of its events and reservations (an inventory: the loaded history), a
telemetry load for its days. Reports and the API only read it, so an analyst needs no insert rights and a
report never races a load. The refresh is idempotent (the grain is a ReplacingMergeTree keyed by node and
hour), so reloads and backfills leave it as a clean load does.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ops_warehouse.sqlfiles import sql_statements


def refresh_capacity(wh, cluster: str, w0: datetime, w1: datetime, idle_util_pct: float | None = None) -> None:
    """Recompute capacity_node_hour for the whole hours of [w0, w1). ``cluster`` is accepted for symmetry
    with the marts: the refresh covers every cluster in the warehouse (the grid is cheap)."""
    threshold = wh.cfg.idle_util_pct if idle_util_pct is None else idle_util_pct
    # the file includes the run → node → hour fan-out, sql/intermediate/run_node_hour.sql
    for stmt in sql_statements("intermediate/capacity_node_hour.sql"):
        wh.client.command(stmt, parameters={"from_ts": w0, "to_ts": w1, "idle_util_pct": float(threshold)},
                          settings={"optimize_on_insert": 0})


def history_as_of(wh) -> tuple[datetime | None, datetime | None]:
    """(start of the first month with a job, latest as-of time) of the loaded job history over every cluster
    (sql/intermediate/cluster_as_of.sql): the span the hourly grain covers, since reports are by month (the
    first month is reported whole). (None, None) when no job is loaded."""
    first, as_of = wh.query_rows("SELECT min(first_ts), max(as_of_ts) FROM cluster_as_of")[0]
    if as_of is None or as_of.year < 2000:
        return None, None
    first = first.replace(tzinfo=timezone.utc)
    return first.replace(day=1, hour=0, minute=0, second=0, microsecond=0), as_of.replace(tzinfo=timezone.utc)


def refresh_after_jobs(wh, first_ts: datetime | None, old: tuple[datetime | None, datetime | None]) -> None:
    """After a job load that wrote runs from ``first_ts`` on, given the history's span ``old`` before it: the
    hours from there (or from the previous as-of time, whichever is earlier: the hours the as-of time moved
    over were cut before; or from the new first month, when the history now starts earlier) to the new
    as-of time."""
    first, as_of = history_as_of(wh)
    if as_of is None:
        return
    w0 = min(t for t in (first_ts, old[1], as_of) if t is not None)
    if old[0] is None or first < old[0]:
        w0 = min(w0, first)
    refresh_capacity(wh, "", _hour(w0), _hour(as_of) + timedelta(hours=1))


def refresh_history(wh, w0: datetime | None = None, w1: datetime | None = None
                    ) -> tuple[datetime, datetime] | None:
    """The hours of [w0, w1) (default: the whole loaded history) that the job history reaches: after a
    capacity load (inventory, events and reservations change every hour they cover) or a telemetry load.
    Returns the hours refreshed (None: nothing)."""
    first, as_of = history_as_of(wh)
    if as_of is None:
        return None
    lo = max(w0, first) if w0 else first
    hi = min(w1, as_of + timedelta(hours=1)) if w1 else as_of + timedelta(hours=1)
    if lo >= hi:
        return None
    span = (_hour(lo), _hour(hi - timedelta(microseconds=1)) + timedelta(hours=1))
    refresh_capacity(wh, "", *span)
    return span


def _hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def refresh_hourly(wh, w0: datetime, w1: datetime) -> None:
    """After a telemetry load of [w0, w1): its hourly rollups (sql/intermediate/telemetry_hourly.sql), then
    the capacity grain's telemetry columns for the hours the job history reaches."""
    for stmt in sql_statements("intermediate/telemetry_hourly.sql"):
        wh.command(stmt, {"from_ts": w0, "to_ts": w1})
    refresh_history(wh, w0, w1)
