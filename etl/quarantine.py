"""Numbering identical quarantined records within one read.

A quarantined record is keyed by (source, text, reason, occurrence) (sql/migrations/0009): the same bad
line read again by a later, overlapping read of the same source replaces itself, while two identical bad
lines inside one read stay two records. ``occurrence`` is that copy's number within the read, counted
across the read's chunks."""

from __future__ import annotations

import polars as pl


class CopyCounter:
    """Give each quarantine row its occurrence: 0 for the first copy of (raw, reason) in this read, 1 for
    the second, ... Vectorized per chunk; the counts carry over to the next chunk, kept by a 64-bit hash of
    (raw, reason) rather than the text: a file of bad lines (a binary file, a dump in the wrong format) kept
    every line it had read in memory, so the load's RSS grew with the file (issue 50). Two different lines
    with one hash (odds about 1e-19 a pair) would only be numbered as copies: their texts still differ."""

    def __init__(self):
        self.seen = pl.DataFrame(schema={"_k": pl.UInt64, "seen": pl.UInt32})

    def number(self, q: pl.DataFrame) -> pl.DataFrame:
        if not q.height:
            return q.with_columns(occurrence=pl.lit(0, pl.UInt32))
        q = q.with_columns(pl.col("raw").fill_null(""))
        q = q.with_columns(occurrence=pl.int_range(pl.len(), dtype=pl.UInt32).over("raw", "reason"),
                           _k=pl.concat_str(pl.col("reason").fill_null(""), pl.lit("\x00"), "raw").hash(seed=0))
        q = (q.join(self.seen, on="_k", how="left")
             .with_columns(occurrence=pl.col("occurrence") + pl.col("seen").fill_null(0)).drop("seen"))
        new = q.group_by("_k").agg(seen=pl.len().cast(pl.UInt32))
        self.seen = pl.concat([self.seen, new]).group_by("_k").agg(pl.col("seen").sum())
        return q.drop("_k")
