"""A long telemetry load (a backfill of months or years) that can be stopped and started again: the window is
loaded in chunks of whole days, and each chunk, once in (samples and the grains of its days), is recorded, so
that the same command run again after Ctrl-C, SIGTERM or a failure goes on at the first day not yet in
instead of loading the first days again.

The record is a row of etl_watermark per backfill, under ``backfill:<source> <first day>..<last day>``: the
end of the last day whose samples are in, written as each day is in; and one under the same name with
`` grains`` after it, written as each chunk's grains are (a chunk is refreshed when it ends). A run resumed
after a stop refreshes the grains of the days between the two first (one refresh), then goes on. Only the
same source and window resume (another window is another backfill). A window loaded to its end sets its rows
back to nothing (epoch 0, which ``loaded_through()`` reads as none): the same command run later loads the
whole window again, as any reload does (idempotent), rather than finding it done. ``restart=True`` ignores
the record (the files of the first days were replaced).

A day stopped half-way is loaded again whole (its samples replace themselves: ReplacingMergeTree). The chunk
is the load's unit of refresh: a file load refreshes a week at a time anyway, a server load a day.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone

from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.warehouse import redact

# a week: what load_parquet_dir refreshes at a time anyway (telemetry_load.REFRESH_DAYS), so a file backfill
# in weeks costs no more refreshes than one call over the whole window
FILE_CHUNK_DAYS = 7
# a day: a server load fetches a day at a time, and an export holds its window in memory until it is inserted
SERVER_CHUNK_DAYS = 1
_NONE = datetime(1970, 1, 1, tzinfo=timezone.utc)


def backfill_key(source: str, date_from: date, date_to: date) -> str:
    """The record's name: the source as the run log names it (passwords redacted) and the window."""
    return f"backfill:{redact(source)} {date_from}..{date_to}"


def loaded_through(wh, key: str) -> date | None:
    """The last day an unfinished backfill ``key`` has in (``key`` + " grains": has in its grains too), or
    None (never started, or finished)."""
    r = wh.query_rows("SELECT argMax(watermark_ts, updated_at) FROM etl_watermark WHERE source = {s:String}",
                      {"s": key})
    v = r[0][0] if r else None
    if v is None or v.year < 2000:
        return None
    return v.date() - timedelta(days=1)


def _record(wh, key: str, ts: datetime) -> None:
    # not set_watermark(): that one only moves forward, and a finished backfill must go back to none
    wh.command("INSERT INTO etl_watermark (source, watermark_ts, updated_at) VALUES "
               "({s:String}, {t:DateTime('UTC')}, now64(3))", {"s": key, "t": ts})


def load_resumably(wh, source: str, date_from: date, date_to: date,
                   load: Callable[[date, date, Callable[[int, int], None]], dict], *,
                   chunk_days: int, progress: Callable[[int, int], None] | None = None,
                   restart: bool = False) -> dict:
    """Run ``load(first, last, progress)`` over ``date_from`` .. ``date_to`` in chunks of ``chunk_days``,
    skipping the days an earlier, stopped run of the same ``source`` and window has in. ``load`` calls its
    ``progress(done, n)`` when the first ``done`` days of its chunk have their samples in (as every telemetry
    load does); its grains are in when it returns. Returns the chunks' counts summed, with ``days`` the days
    of the whole window and, when days were skipped, ``resumed_from`` (the first day this run loaded) and
    ``skipped_days``. ``progress(done, total)`` counts days of the whole window, the skipped ones done from
    its first call on (the rate's starting point)."""
    if chunk_days < 1:
        raise ValueError("chunk_days must be at least 1")
    key = backfill_key(source, date_from, date_to)
    total = (date_to - date_from).days + 1
    through = None if restart else loaded_through(wh, key)
    if through is None or not date_from <= through < date_to:
        first = date_from
    else:
        first = through + timedelta(days=1)
        # days whose samples the stopped run put in after its last refresh: their grains, before going on
        grains = loaded_through(wh, key + " grains")
        since = date_from if grains is None or grains < date_from else grains + timedelta(days=1)
        if since <= through:
            refresh_hourly(wh, _start(since), _start(first))
    skipped = (first - date_from).days
    counts: dict = {}
    if progress:
        progress(skipped, total)
    shown = [skipped]
    d = first
    while d <= date_to:
        last = min(d + timedelta(days=chunk_days - 1), date_to)
        before = (d - date_from).days

        def day_in(done: int, _n: int, d: date = d, before: int = before) -> None:
            _record(wh, key, _start(d + timedelta(days=done)))
            shown[0] = before + done
            if progress:
                progress(shown[0], total)

        c = load(d, last, day_in)
        for k, n in c.items():
            if isinstance(n, (int, float)) and not isinstance(n, bool):
                counts[k] = counts.get(k, 0) + n
        done_all = last == date_to
        _record(wh, key, _NONE if done_all else _start(last + timedelta(days=1)))
        _record(wh, key + " grains", _NONE if done_all else _start(last + timedelta(days=1)))
        if progress and shown[0] != before + (last - d).days + 1:  # a load that reports no days (an export)
            progress(before + (last - d).days + 1, total)
        d = last + timedelta(days=1)
    counts["days"] = total
    if skipped:
        counts["resumed_from"] = first
        counts["skipped_days"] = skipped
    return counts


def _start(d: date) -> datetime:
    return datetime.combine(d, datetime.min.time(), timezone.utc)
