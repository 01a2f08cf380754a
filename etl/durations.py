"""Slurm duration and time fields as polars exprs.

Durations: ``D-HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``HH:MM:SS``, ``MM:SS`` (with optional ``.mmm``), bare
numbers in the field's own unit (ElapsedRaw seconds, TimelimitRaw minutes); ``UNLIMITED``,
``Partition_Limit``, ``INVALID`` and empty are null. Times: ISO ``YYYY-MM-DDTHH:MM:SS`` in the zone sacct
printed them in; ``Unknown``/``None``/empty are null.
"""

from __future__ import annotations

import polars as pl

NO_TIME = ["", "Unknown", "None", "N/A", "(null)"]
NO_LIMIT = ["UNLIMITED", "Partition_Limit", "INVALID", "NONE"]


def _num(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Float64, strict=False)


def duration_s(text: pl.Expr, bare_unit_s: int = 1) -> pl.Expr:
    t = text.str.strip_chars()
    dhms = t.str.extract_groups(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+(?:\.\d+)?))?$")
    hms = t.str.extract_groups(r"^(\d+):(\d+):(\d+(?:\.\d+)?)$")
    ms = t.str.extract_groups(r"^(\d+):(\d+(?:\.\d+)?)$")
    bare = t.str.extract(r"^(\d+(?:\.\d+)?)$", 1)
    f = lambda g, i: _num(g.struct.field(str(i)))  # noqa: E731
    return (
        pl.when(dhms.struct.field("1").is_not_null())
        .then(f(dhms, 1) * 86400 + f(dhms, 2) * 3600 + f(dhms, 3).fill_null(0) * 60 + f(dhms, 4).fill_null(0))
        .when(hms.struct.field("1").is_not_null())
        .then(f(hms, 1) * 3600 + f(hms, 2) * 60 + f(hms, 3))
        .when(ms.struct.field("1").is_not_null())
        .then(f(ms, 1) * 60 + f(ms, 2))
        .when(bare.is_not_null())
        .then(_num(bare) * bare_unit_s)
        .otherwise(None)
    )


def parse_time(text: pl.Expr, tz: str) -> pl.Expr:
    """Local wall-clock text -> UTC datetime (null when absent or unparseable)."""
    t = text.str.strip_chars()
    parsed = t.str.to_datetime("%Y-%m-%dT%H:%M:%S", strict=False, time_unit="ms")
    if tz != "UTC":
        parsed = parsed.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    else:
        parsed = parsed.dt.replace_time_zone("UTC")
    return parsed.dt.convert_time_zone("UTC")


def time_missing(text: pl.Expr) -> pl.Expr:
    return text.is_null() | text.str.strip_chars().is_in(NO_TIME)
