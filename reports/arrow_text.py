"""Print an Arrow table (what the engine returns) as the same text polars prints, without importing polars.

polars costs a short command 0.36-0.39 CPU-s to import (issue 51); pyarrow is already imported by chDB. The
text must stay byte for byte what reports/tabular.py's polars path writes (tests/test_arrow_text.py holds
the two side by side), so this copies polars' rules for the types a report's table has (integers, floats,
text, dates): anything else, and text whose printed width is not plain (control characters, combining or
zero-width marks), is left to polars (``printable`` says no).
"""

from __future__ import annotations

import json
import math
import unicodedata
from datetime import date, datetime
from decimal import Decimal

import pyarrow as pa

_ROUND_SCALE = 10_000.0  # float_precision=4 and round(4) in the polars path


def jsonable(v):
    """A cell as JSON writes it: dates in ISO 8601, NaN and infinities as null (JSON has neither)."""
    if isinstance(v, (date, datetime)):
        return v.isoformat()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def printable(table: pa.Table, max_str: int = 60) -> bool:
    """Whether every column is of a type this module writes exactly as polars does (and its text too: wide
    characters cut at ``max_str`` are wrapped by comfy-table, which is left to polars)."""
    for field in table.schema:
        t = field.type
        if not (pa.types.is_integer(t) or pa.types.is_float64(t) or pa.types.is_date32(t)
                or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)):
            return False
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            # a loop over the text, not Arrow's kernels: pyarrow.compute's import (0.046 CPU-s) costs more than
            # this check of 100,000 cells, and a printed table is short
            if any(s is not None and not _plain_width(s, max_str) for s in table.column(field.name).to_pylist()):
                return False
    return True


def _plain_width(s: str, max_str: int) -> bool:
    # a terminal's width of these is not one rule (comfy-table's and ours could differ): polars prints them
    if s.isascii():
        return s.isprintable()
    if len(s) > max_str and _width(s) != len(s):
        return False
    return all(unicodedata.category(c) not in ("Mn", "Me", "Cf", "Cc", "Zl", "Zp") for c in s)


def _width(s: str) -> int:
    """Columns a terminal gives ``s``: East Asian wide and full-width characters take two (as comfy-table's)."""
    if s.isascii():
        return len(s)
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in s)


def _round4(v: float) -> float:
    """polars' round(4): times 10^4, to the nearest (ties to even), divided back; not round(v, 4), which rounds
    the exact decimal value (1.23445 is 1.2344 here, 1.2345 there)."""
    y = v * _ROUND_SCALE
    if math.isinf(y):  # past 1.8e304: polars keeps the value
        return v
    r = round(y) / _ROUND_SCALE
    return math.copysign(r, v) if r == 0 else r


def _table_float(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    v = _round4(v)
    fixed = f"{v:.4f}"
    if len(fixed) <= 19:
        return fixed
    mantissa, exp = f"{v:.4e}".split("e")  # Rust writes 1.0000e14, Python 1.0000e+14
    return f"{mantissa}e{int(exp)}"


def _csv_float(v: float) -> str:
    """Shortest digits that read back (as repr), in polars' CSV notation: fixed from 1e-5 up to 1e16,
    else d.ddde-7 / e+16 (no zero-padded exponent)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    r = repr(v)
    if "e" not in r:
        return r
    mantissa, exp = r.split("e")
    e = int(exp)
    if e == -5:
        return format(Decimal(r), "f")
    return f"{mantissa}e{'+' if e > 0 else ''}{e}"


def _cells(col: pa.ChunkedArray, fmt: str, max_str: int) -> list[str]:
    t, values = col.type, col.to_pylist()
    if pa.types.is_float64(t):
        f = _table_float if fmt == "table" else _csv_float
        return [("null" if fmt == "table" else "") if v is None else f(v) for v in values]
    if pa.types.is_date32(t):
        return [("null" if fmt == "table" else "") if v is None else v.isoformat() for v in values]
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if fmt == "table":
            return ["null" if v is None else v for v in values]
        return ["" if v is None else _csv_text(v) for v in values]
    return [("null" if fmt == "table" else "") if v is None else str(v) for v in values]


def _cut(s: str, max_str: int) -> str:
    return s if len(s) <= max_str or s == "null" else s[:max_str] + "..."


def _csv_text(s: str) -> str:
    if s == "" or any(c in s for c in ',"\n\r'):
        return '"' + s.replace('"', '""') + '"'
    return s


def render_arrow(table: pa.Table, fmt: str, max_str: int = 60) -> str:
    """``fmt``: table (polars' ASCII Markdown), json (a list of objects) or csv; ``printable(table)`` first."""
    names = table.column_names
    if fmt == "json":
        rows = [{k: jsonable(v) for k, v in r.items()} for r in table.to_pylist()]
        return json.dumps(rows, indent=1, ensure_ascii=False) + "\n"
    columns = [_cells(table.column(i), fmt, max_str) for i in range(table.num_columns)]
    if fmt == "csv":
        lines = [",".join(_csv_text(n) for n in names)]
        lines += [",".join(row) for row in zip(*columns)]
        return "\n".join(lines) + "\n"
    if table.num_rows == 0:
        return "(no rows)\n"
    # polars cuts every cell and name longer than max_str, numbers too (fmt_str_lengths)
    names = [_cut(n, max_str) for n in names]
    columns = [[_cut(c, max_str) for c in cells] for cells in columns]
    widths = [max(_width(c) for c in (n, *cells)) for n, cells in zip(names, columns)]

    def line(cells) -> str:
        return "| " + " | ".join(c + " " * (w - _width(c)) for c, w in zip(cells, widths)) + " |"

    out = [line(names), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in zip(*columns)]
    return "\n".join(out) + "\n"
