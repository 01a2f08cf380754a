"""Render a result frame as an aligned table, JSON (list of objects) or CSV: a polars frame, or the Arrow table
the engine returns, printed without importing polars (reports/arrow_text.py) when its columns allow."""

from __future__ import annotations

import json

from ops_warehouse.reports.arrow_text import jsonable, printable, render_arrow


def render(df, fmt: str, max_str: int = 60) -> str:
    """``df``: a polars DataFrame or a pyarrow Table. ``max_str``: the longest text a table cell shows (longer
    ones are cut, with an ellipsis)."""
    arrow = not hasattr(df, "write_csv")
    if arrow and printable(df, max_str):  # polars costs a short command 0.36 CPU-s to import
        return render_arrow(df, fmt, max_str)
    import polars as pl  # a polars frame, or an Arrow table of other types, is printed by polars

    if arrow:
        df = pl.from_arrow(df)

    if fmt == "json":
        rows = [{k: jsonable(v) for k, v in r.items()} for r in df.iter_rows(named=True)]
        return json.dumps(rows, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return df.write_csv()
    if df.height == 0:
        return "(no rows)\n"
    shown = df.with_columns(pl.col(pl.Float64).round(4))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=10_000, fmt_str_lengths=max_str,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, float_precision=4,
                   tbl_formatting="ASCII_MARKDOWN", thousands_separator=False):
        return str(shown) + "\n"
