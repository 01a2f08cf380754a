"""The commands print the engine's Arrow table without polars (issue 51: polars' import was 0.36 CPU-s of a
one-day summary's 0.79 over the engine): the text must be byte for byte what polars printed before, in every
format. Each frame is printed both ways (reports/tabular.py's polars path is the code that printed it before)
and the cells whose rules are easy to get wrong are also written out by hand."""

from __future__ import annotations

import math
from datetime import date, datetime

import polars as pl
import pyarrow as pa
import pytest

from ops_warehouse.reports.arrow_text import printable
from ops_warehouse.reports.tabular import render

FMTS = ("table", "csv", "json")

SUMMARY_LIKE = pa.table({
    "user": pa.array(["alpsw", "chaff", "honbu", None], pa.string()),
    "period_start": pa.array([date(2016, 12, 30), date(2016, 12, 31), None, date(2017, 1, 1)], pa.date32()),
    "jobs_ended": pa.array([4, 0, 1048, 2**64 - 1], pa.uint64()),
    "cpu_hours": pa.array([26.07111111111111, 1536.0, None, -0.0], pa.float64()),
    "avg_wait_hours": pa.array([0.00020833333333333335, None, float("nan"), float("inf")], pa.float64()),
})
TEXT = pa.table({
    "s": pa.array(["a" * 70, "é" * 65, "日本語テキスト", "x" * 60, "y" * 61, None, "a,b", 'q"t', " lead", "emoji😀",
                   "", "Ünïcödé"], pa.string()),
    "n": pa.array([None] * 12, pa.null()),
    "i": pa.array(range(-6, 6), pa.int8()),
})
# polars rounds to 4 places as round(x * 1e4) / 1e4, ties to even (1.23445 * 1e4 is 12344.5 exactly), not
# at the exact decimal value; past 19 characters it writes 1.0000e14; its CSV is fixed from 1e-5 up, then 1e-6
FLOATS = pa.table({"x": pa.array([1.23445, 0.00005, 0.00015, 3.34925, 1e13, -1e13, 1e14, 1.5e-5, 1e-6, 1.5e-7,
                                  1e16, 1.7976931348623157e308, 5e-324, 123456789.123, 1 / 3], pa.float64())})
EMPTY = pa.table({"s": pa.array([], pa.string()), "x": pa.array([], pa.float64())})


@pytest.mark.parametrize("name", ["SUMMARY_LIKE", "TEXT", "FLOATS", "EMPTY"])
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("max_str", [60, 5])
def test_an_arrow_table_prints_as_polars_printed_it(name, fmt, max_str):
    table = globals()[name]
    assert printable(table)  # the Arrow path, not the fallback
    assert render(table, fmt, max_str) == render(pl.from_arrow(table), fmt, max_str)


def test_the_cells_by_hand():
    table = render(FLOATS, "table").splitlines()[2:]
    assert [c.strip("| ") for c in table[:7]] == ["1.2344", "0.0000", "0.0001", "3.3492", "10000000000000.0000",
                                                  "-1.0000e13", "1.0000e14"]
    csv = render(FLOATS, "csv").splitlines()[1:]
    assert csv[7:11] == ["0.000015", "1e-6", "1.5e-7", "1e+16"]
    text = render(TEXT, "table", 60).splitlines()
    assert text[2] == "| " + "a" * 60 + "... | null | -6 |"
    # the CJK text is 7 characters, 14 columns wide: padded to the column's 63 with 49 spaces
    assert text[4] == "| 日本語テキスト" + " " * 49 + " | null | -4 |"
    assert render(TEXT, "csv").splitlines()[7:12] == ['"a,b",,0', '"q""t",,1', " lead,,2", "emoji😀,,3", '"",,4']
    rows = render(SUMMARY_LIKE, "table").splitlines()
    assert rows[0] == "| user  | period_start | jobs_ended           | cpu_hours | avg_wait_hours |"
    assert rows[2] == "| alpsw | 2016-12-30   | 4                    | 26.0711   | 0.0002         |"
    assert rows[4] == "| honbu | null         | 1048                 | null      | NaN            |"
    assert rows[5] == "| null  | 2017-01-01   | 18446744073709551615 | -0.0000   | inf            |"
    assert render(EMPTY, "table") == "(no rows)\n" and render(EMPTY, "csv") == "s,x\n"
    assert render(EMPTY, "json") == "[]\n"


def test_what_the_arrow_path_does_not_write_is_left_to_polars():
    """A timestamp column, a text with a line break or a combining mark: printed by polars, as before."""
    for table in (pa.table({"t": pa.array([datetime(2026, 10, 1, 12)], pa.timestamp("ms"))}),
                  pa.table({"s": ["two\nlines"]}), pa.table({"s": ["e\u0301"]})):
        assert not printable(table)
        for fmt in FMTS:
            assert render(table, fmt) == render(pl.from_arrow(table), fmt)


def test_json_keeps_the_values():
    import json

    [r0, r1, r2, r3] = json.loads(render(SUMMARY_LIKE, "json"))
    assert r0 == {"user": "alpsw", "period_start": "2016-12-30", "jobs_ended": 4, "cpu_hours": 26.07111111111111,
                  "avg_wait_hours": 0.00020833333333333335}
    assert r2["avg_wait_hours"] is None and r3["avg_wait_hours"] is None and r3["jobs_ended"] == 2**64 - 1
    assert math.copysign(1, r3["cpu_hours"]) == -1
