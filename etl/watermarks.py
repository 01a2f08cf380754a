"""Where each incremental source got to (etl_watermark): Prometheus per URL, slurmdbd per database and
cluster, each nightly source. A watermark only moves forward."""

from __future__ import annotations

from datetime import datetime, timezone


def watermark(wh, source: str) -> datetime | None:
    """Where the last successful load of ``source`` got to (end of its last whole day)."""
    r = wh.query_rows("SELECT max(watermark_ts) FROM etl_watermark FINAL WHERE source = {s:String}", {"s": source})
    v = r[0][0] if r else None
    return None if v is None or v.year < 2000 else v.replace(tzinfo=timezone.utc)


def set_watermark(wh, source: str, ts: datetime) -> None:
    wh.command("INSERT INTO etl_watermark (source, watermark_ts, updated_at) SELECT {s:String}, "
               "greatest({t:DateTime('UTC')}, (SELECT max(watermark_ts) FROM etl_watermark FINAL WHERE source = {s:String})), "
               "now64(3)", {"s": source, "t": ts})
