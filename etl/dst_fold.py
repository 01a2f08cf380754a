"""Local times in the autumn DST fold (the repeated hour): which of their two instants a record means.

sacct, scontrol, sacctmgr and syslog print wall-clock times without an offset. In the hour a zone repeats
(America/New_York 2026-11-01 01:00-02:00, Europe/Berlin 2026-10-25 02:00-03:00) a time names two instants an
hour apart. Taking the earlier one always (as before) made a job from 01:10 EDT to 01:20 EST 600 s long
(ElapsedRaw 4200) and sent valid records to the quarantine (``End before Start``). The record itself
usually says which reading it means:

- a job: its times are in order (Submit <= Start <= End) and End - Start is its ElapsedRaw. The readings
  that can hold are "the first k ambiguous times in the first pass, the rest in the second" (time only goes
  forward); the first of them that holds (earliest first) is taken. None holds: quarantined
  ``ambiguous local time`` naming the fields. Several hold (a run wholly inside the repeated hour: both
  passes give it the same length) -> the earliest, as before; only its place is uncertain, by the fold.
- a kernel log: lines of one host are in time order. In a host's run of ambiguous lines, the first that
  goes back in wall-clock time (or whose kernel timestamp ``[seconds since boot]`` advanced a whole fold
  more than its wall clock did) and those after it are the second pass. A run with no such line cannot be
  placed: quarantined ``ambiguous local time``.
- a capacity record (an event, a reservation): start <= end; the earliest reading that holds is taken, and
  a record that holds under none is refused by its reader.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import polars as pl
from ops_warehouse.etl.frames import fmt, on_rows

_TS = pl.Datetime("ms", "UTC")
# the chain of a job's times, in the order they happen
_CHAIN = ("submit", "start", "end")
_LABEL = {"submit": "Submit", "start": "Start", "end": "End", "eligible": "Eligible"}
# ElapsedRaw is whole seconds, so are the times
_ELAPSED_SLACK_S = 1


def _later(naive: pl.Expr, tz: str) -> pl.Expr:
    return naive.dt.replace_time_zone(tz, ambiguous="latest", non_existent="null").dt.convert_time_zone("UTC")


def sacct_readings(t: pl.DataFrame, tz: str, pending_states: list[str]) -> pl.DataFrame:
    """The normalize frame with submit_ts/eligible_ts/start_ts/end_ts (read with the earlier instant) set to
    the reading its record holds under, and ``_ambiguous`` (text naming the fields, or null) where none
    holds. A step's Submit is not its own and a pending job's Start and End are expectations: neither is
    held to the order."""
    t = t.with_columns(_ambiguous=pl.lit(None, dtype=pl.String))
    fields = (*_CHAIN, "eligible")
    if tz == "UTC" or t.height == 0:
        return t
    span_ = t.select(lo=pl.min_horizontal([pl.col(f"{f}_ts").min() for f in fields]),
                     hi=pl.max_horizontal([pl.col(f"{f}_ts").max() for f in fields])).row(0)
    windows = fold_windows(tz, *span_)
    if not windows:  # a zone without DST (Asia/Tokyo), or none in the file's years
        return t
    # only the rows with a time in a fold take the costly path (2 s a million rows when all did, 0.04 s now)
    in_fold = pl.any_horizontal([pl.col(f"{f}_ts").is_between(a, b, closed="left") for f in fields for a, b in windows])
    return on_rows(t, in_fold, lambda s: _resolve(s, tz, pending_states))


def fold_windows(tz: str, lo: datetime | None, hi: datetime | None) -> list[tuple[datetime, datetime]]:
    """The [from, to) UTC instants, between ``lo`` and ``hi``, that are the first pass of a repeated local
    hour of ``tz``: where its offset drops (by d at instant T), those of [T - d, T)."""
    if lo is None or hi is None:
        return []

    def offsets(a: datetime, b: datetime, every: str) -> pl.DataFrame:
        grid = pl.datetime_range(a, b, every, time_unit="ms", time_zone="UTC", eager=True).alias("t").to_frame()
        local = pl.col("t").dt.convert_time_zone(tz)
        return grid.with_columns(o=(local.dt.base_utc_offset() + local.dt.dst_offset()).dt.total_seconds()) \
            .with_columns(d=pl.col("o").shift(1) - pl.col("o"), prev=pl.col("t").shift(1))

    # a day at a time, then the days whose offset dropped a quarter hour at a time (every zone's changes fall
    # on one): 1 ms a year
    days = offsets(datetime(lo.year, 1, 1), datetime(hi.year + 1, 1, 2), "1d").filter(pl.col("d") > 0)
    out = []
    for a, b in days.select("prev", "t").iter_rows():
        for t_, d in offsets(a, b, "15m").filter(pl.col("d") > 0).select("t", "d").iter_rows():
            out.append((t_ - timedelta(seconds=d), t_))
    return out


def _resolve(t: pl.DataFrame, tz: str, pending_states: list[str]) -> pl.DataFrame:
    early = {f: pl.col(f"{f}_ts").cast(_TS) for f in (*_CHAIN, "eligible")}
    # the wall-clock time again (from the earlier instant), read as the later one
    late = {f: _later(pl.col(f"{f}_ts").dt.convert_time_zone(tz).dt.replace_time_zone(None), tz).cast(_TS)
            for f in (*_CHAIN, "eligible")}
    t = t.with_columns(**{f"_{f}_l": late[f] for f in late})
    late = {f: pl.col(f"_{f}_l") for f in late}
    pending = pl.col("state").fill_null("").is_in(pending_states)
    in_chain = {"submit": pl.col("_step").is_null(), "start": ~pending, "end": ~pending}
    amb = {f: (late[f] != early[f]).fill_null(False) for f in late}

    def reading(f: str, cut: int) -> pl.Expr:  # fields from index ``cut`` on take the second pass
        return late[f] if _CHAIN.index(f) >= cut else early[f]

    def holds(cut: int) -> pl.Expr:
        s, st, en = (reading(f, cut) for f in _CHAIN)
        ordered = ((~in_chain["submit"] | ~in_chain["start"] | s.is_null() | st.is_null() | (s <= st))
                   & (~in_chain["start"] | st.is_null() | en.is_null() | (st <= en)))
        length = ((en - st).dt.total_seconds() - pl.col("_elapsed")).abs() <= _ELAPSED_SLACK_S
        return ordered & (pending | length.fill_null(True))

    # cut 3: all first pass; cut k < 3 differs from cut k+1 only when field k is ambiguous (and checked)
    distinct = {3: pl.lit(True), **{k: amb[_CHAIN[k]] & in_chain[_CHAIN[k]] for k in (2, 1, 0)}}
    chosen = pl.lit(None, dtype=pl.Int8)
    for k in (0, 1, 2, 3):  # the earliest reading that holds wins: built last
        chosen = pl.when(distinct[k] & holds(k)).then(pl.lit(k, dtype=pl.Int8)).otherwise(chosen)
    any_amb = pl.any_horizontal([amb[f] & in_chain[f] for f in _CHAIN])
    names = pl.concat_str([pl.when(amb[f] & in_chain[f]).then(fmt(f"{_LABEL[f]}={{}}", pl.col(f"_{f}")))
                           for f in _CHAIN], separator=", ", ignore_nulls=True)
    t = t.with_columns(_cut=chosen.fill_null(3), _ambiguous=pl.when(any_amb & chosen.is_null()).then(names))
    t = t.with_columns(**{f"{f}_ts": pl.when(pl.col("_cut") <= _CHAIN.index(f)).then(late[f]).otherwise(early[f])
                          for f in _CHAIN})
    # Eligible is not before Submit: its second reading when the first is
    t = t.with_columns(eligible_ts=pl.when(amb["eligible"] & (early["eligible"] < pl.col("submit_ts")))
                       .then(late["eligible"]).otherwise(early["eligible"]))
    return t.drop("_cut", *(f"_{f}_l" for f in ("submit", "start", "end", "eligible")))


def log_readings(lines: pl.DataFrame, naive: str, tz: str, boot_s: str | None = None) -> pl.DataFrame:
    """``lines`` (in file order, with ``host``) plus ``ts`` (UTC) read from the naive local times in column
    ``naive``, and ``ambiguous`` (bool): a fold line that cannot be placed (see the module's text). ``boot_s``:
    a column of the kernel's seconds since boot, where the lines have it."""
    e = pl.col(naive).dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null").dt.convert_time_zone("UTC")
    out = lines.with_row_index("_i").with_columns(_e=e, _l=_later(pl.col(naive), tz))
    out = out.with_columns(_amb=(pl.col("_e") != pl.col("_l")).fill_null(False))
    by_host = out.sort("host", "_i", maintain_order=True)
    prev = lambda c: pl.col(c).shift(1).over("host")  # noqa: E731
    run = (pl.col("_amb") != prev("_amb")).fill_null(True).cum_sum().over("host")
    fold_s = (pl.col("_l") - pl.col("_e")).dt.total_seconds()
    step_s = (pl.col("_e") - prev("_e")).dt.total_seconds()
    back = step_s < 0
    if boot_s is not None:
        # the clock went back a whole fold between two lines whose wall-clock times look in order
        back = back | ((pl.col(boot_s) - prev(boot_s)) - step_s >= fold_s / 2).fill_null(False)
    by_host = by_host.with_columns(_run=run).with_columns(
        _back=(pl.col("_amb") & prev("_amb") & back).fill_null(False))
    by_host = by_host.with_columns(_second=pl.col("_back").cast(pl.Int32).cum_sum().over("host", "_run") > 0,
                                   _placed=pl.col("_back").any().over("host", "_run"))
    by_host = by_host.with_columns(
        ts=pl.when(pl.col("_second")).then(pl.col("_l")).otherwise(pl.col("_e")),
        ambiguous=pl.col("_amb") & ~pl.col("_placed"))
    return by_host.sort("_i").drop("_i", "_e", "_l", "_amb", "_run", "_back", "_second", "_placed")


def span(start: datetime | None, end: datetime | None, tz: ZoneInfo) -> tuple[datetime | None, datetime | None] | None:
    """(start, end) in UTC of a record's naive local ``start`` and ``end``: the earliest reading with start <=
    end (the later instant of a time in the fold only where the earlier breaks the order); None when no
    reading holds. A time with an offset is that instant."""
    def two(d: datetime | None) -> list[datetime | None]:
        if d is None:
            return [None]
        if d.tzinfo is not None:
            return [d.astimezone(timezone.utc)]
        first, second = (d.replace(tzinfo=tz, fold=f).astimezone(timezone.utc) for f in (0, 1))
        return [first] if first == second else [first, second]

    for s in two(start):
        for e in two(end):
            if s is None or e is None or s <= e:
                return s, e
    return None
