"""Numbering identical quarantined records within one read.

A quarantined record is keyed by (source, text, reason, occurrence) (sql/migrations/0009): the same bad
line read again by a later, overlapping read of the same source replaces itself, while two identical bad
lines inside one read stay two records. ``occurrence`` is that copy's number within the read, counted
across the read's chunks."""

from __future__ import annotations

import polars as pl


class CopyCounter:
    """Give each quarantine row its occurrence: 0 for the first copy of (raw, reason) in this read, 1 for
    the second, ... Vectorized per chunk; the counts carry over to the next chunk."""

    def __init__(self):
        self.seen = pl.DataFrame(schema={"raw": pl.String, "reason": pl.String, "seen": pl.UInt32})

    def number(self, q: pl.DataFrame) -> pl.DataFrame:
        if not q.height:
            return q.with_columns(occurrence=pl.lit(0, pl.UInt32))
        q = q.with_columns(pl.col("raw").fill_null(""),
                           occurrence=pl.int_range(pl.len(), dtype=pl.UInt32).over("raw", "reason"))
        q = (q.join(self.seen, on=["raw", "reason"], how="left", nulls_equal=True)
             .with_columns(occurrence=pl.col("occurrence") + pl.col("seen").fill_null(0)).drop("seen"))
        new = q.group_by("raw", "reason").agg(seen=pl.len().cast(pl.UInt32))
        self.seen = pl.concat([self.seen, new]).group_by("raw", "reason").agg(pl.col("seen").sum())
        return q
