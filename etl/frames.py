"""Small polars helpers shared by the parsers."""

from __future__ import annotations

import polars as pl


def fmt(template: str, *exprs: pl.Expr) -> pl.Expr:
    """pl.format without pl.format (it panics on filtered string views in polars 2.1)."""
    pieces = template.split("{}")
    parts: list[pl.Expr] = []
    for i, lit in enumerate(pieces):
        if lit:
            parts.append(pl.lit(lit))
        if i < len(exprs):
            parts.append(exprs[i].cast(pl.String).fill_null("null"))
    return pl.concat_str(parts)


def on_rows(df: pl.DataFrame, mask: pl.Expr, fix) -> pl.DataFrame:
    """Apply the costly ``fix`` (frame -> frame, same schema) only to rows where ``mask`` holds.

    Most inputs need the slow path (regex fallbacks, list work) on no row at all; computing it for every row
    is what made this module slow."""
    mask = mask.fill_null(False)
    sub = df.filter(mask)
    if sub.height == 0:
        return df
    return pl.concat([df.filter(~mask), fix(sub).select(df.columns)], how="vertical_relaxed")
