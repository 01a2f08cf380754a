"""Where each incremental source got to (etl_watermark): Prometheus per URL, slurmdbd per database and
cluster, each nightly source. A watermark only moves forward."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from ops_warehouse.clock import utc_today


def watermark(wh, source: str) -> datetime | None:
    """Where the last successful load of ``source`` got to (end of its last whole day)."""
    r = wh.query_rows("SELECT max(watermark_ts) FROM etl_watermark FINAL WHERE source = {s:String}", {"s": source})
    v = r[0][0] if r else None
    return None if v is None or v.year < 2000 else v.replace(tzinfo=timezone.utc)


def set_watermark(wh, source: str, ts: datetime) -> None:
    wh.command("INSERT INTO etl_watermark (source, watermark_ts, updated_at) SELECT {s:String}, "
               "greatest({t:DateTime('UTC')}, (SELECT max(watermark_ts) FROM etl_watermark FINAL WHERE source = {s:String})), "
               "now64(3)", {"s": source, "t": ts})


def days_since(wh, source: str, overlap_days: int, first_days: int | None = None) -> tuple[date, date]:
    """The window of whole days (UTC, inclusive) an incremental load of ``source`` reads: from its watermark
    less ``overlap_days`` (late samples, jobs still running re-read until they end) to yesterday (the day
    before ``OPS_TODAY`` where set: core/clock.py); without a watermark, the ``first_days`` (default
    ``overlap_days``) before yesterday, and yesterday. The one policy the nightly run and ``ops-report etl
    metrics`` without --from/--to share."""
    yesterday = utc_today() - timedelta(days=1)  # OPS_TODAY fixes the run's day (core/clock.py)
    mark = watermark(wh, source)
    first = overlap_days if first_days is None else first_days
    start = (mark.date() - timedelta(days=overlap_days)) if mark else yesterday - timedelta(days=first)
    return min(start, yesterday), yesterday


def set_extracted_through(wh, cluster: str, source: str, ts: datetime) -> None:
    """Record that ``source``'s job records of ``cluster`` were read complete through ``ts`` (a sacct window
    run by the product, a slurmdbd query): the history's as-of time (sql/intermediate/cluster_as_of.sql)."""
    wh.command("INSERT INTO etl_source_extract (cluster, source, extracted_through) "
               "VALUES ({c:String}, {s:String}, {t:DateTime('UTC')})", {"c": cluster, "s": source, "t": ts})


def extract_end(last_day: date) -> datetime:
    """How far a sacct window ending with ``last_day`` (inclusive) is complete when sacct runs now: the
    window's end, or now if earlier (taken before sacct runs: what it prints is at least that recent)."""
    end = datetime.combine(last_day + timedelta(days=1), datetime.min.time(), timezone.utc)
    return min(end, datetime.now(timezone.utc).replace(microsecond=0))
