"""Telemetry values no exporter should send, found by the engine where every load path meets
(etl/telemetry_insert.py), and sent to etl_quarantine.

The rule is SQL (sql/functions/sample_value_problem.sql: NaN, ±Inf, a gauge outside its range;
counter_step_bounded.sql: an energy step the GPU cannot have drawn); this module renders the relations that
apply it to a load's exporter files, fetches the few rows it rejects and writes them with their reason. A
rejected value is NULL in the sample tables (unknown, as a metric the exporter did not send), so the
sample's other metrics still load. Day files keep their own path and row (a CSV's line) in the record; the
frames a source stages (text, Prometheus, VictoriaMetrics) are named by the load's source, line 0.
"""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from ops_warehouse.etl.quarantine import CopyCounter
from ops_warehouse.etl.staging import load_frames
from ops_warehouse.sqlfiles import split_statements, sql_text
from ops_warehouse.warehouse import INTERPRETED

QUARANTINE_COLUMNS = ["source", "line_no", "reason", "raw"]
# the column a job_stats entry's counter is checked as (a count of bytes or operations: never negative)
JOB_VALUE_AS = "lustre_read_bytes"


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def checked(select: str, columns: list[str], model: str = "''", as_: dict[str, str] | None = None,
            flag: str = "") -> str:
    """``select`` with each of ``columns`` NULL where it is no reading (same columns, same order), each held to
    the range of its own name or of ``as_[column]``; with ``flag``, a last column of that name: 1 on a row
    where a value was made NULL (a load's statements then look for reasons only where there is one)."""
    ok = {c: f"sample_value_ok({_lit((as_ or {}).get(c, c))}, {c}, {model})" for c in columns}
    if not flag:
        return f"SELECT * REPLACE ({', '.join(f'if({ok[c]}, {c}, NULL) AS {c}' for c in columns)}) FROM ({select})"
    # each test worked out once, a level down (in the select that NULLs them, the names are the NULLed values)
    tests = {c: f"_ok_{k}" for k, c in enumerate(columns)}
    inner = f"SELECT *, {', '.join(f'{ok[c]} AS {t}' for c, t in tests.items())} FROM ({select})"
    return (f"SELECT * EXCEPT ({', '.join(tests.values())}) REPLACE ("
            + ", ".join(f"if({t}, {c}, NULL) AS {c}" for c, t in tests.items())
            + f"), NOT ({' AND '.join(tests.values())}) AS {flag} FROM ({inner})")


def problems(select: str, columns: list[tuple[str, str, str]], series: str, model: str, origin: str) -> str:
    """The rejected values of a load's rows: source, line_no, reason, raw, ts. ``select`` is the rows with
    ``_line`` (its line or row in its file, 0 where it has none); ``columns`` are (the column, a text expression
    naming it as the exporter does, the column whose range it is held to); ``series`` is a text expression
    naming the series, ``origin`` one naming the row's file (etl/telemetry_insert.py: the file's path or the
    load's source)."""
    pairs = ", ".join(f"tuple({name}, CAST({c} AS Nullable(Float64)), sample_value_problem({_lit(as_)}, {c}, {model}))"
                      for c, name, as_ in columns)
    # the reasons are worked out for the rows that have one only (the test is a few comparisons a value)
    good = " AND ".join(f"sample_value_ok({_lit(as_)}, {c}, {model})" for c, _, as_ in columns)
    return (f"SELECT {origin} AS source, toUInt64(_line) AS line_no, "
            "concat(p.1, ' ', toString(p.2), ': ', p.3) AS reason, "
            f"concat({series}, ' at ', formatDateTime(ts, '%F %T'), ' ', p.1, ' ', toString(p.2)) AS raw, ts "
            f"FROM (SELECT * FROM ({select}) WHERE NOT ({good})) ARRAY JOIN arrayFilter(p -> p.3 != '', [{pairs}]) AS p")


def rejected_values(wh, selects: list[str], params: dict) -> pl.DataFrame:
    """The window's rejected values of the files' ``problems`` selects."""
    if not selects:
        return pl.DataFrame(schema={c: pl.String for c in QUARANTINE_COLUMNS})
    sql = (f"SELECT source, line_no, reason, raw FROM ({' UNION ALL '.join(selects)}) "
           "WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}")
    return pl.from_arrow(wh.query_arrow(sql, params, INTERPRETED))


def rejected_energy_steps(wh, relation: str, params: dict) -> pl.DataFrame:
    """The window's energy steps the GPU cannot have drawn (sql/staging/gpu_energy_steps_rejected.sql) as
    quarantine rows of the load's source. Run after the load's gpu_sample rows are in: only the GPUs with a
    step it stored as unknown are ordered by time again (few, but every GPU on a first load without seeds)."""
    (sql,) = split_statements(sql_text("staging/gpu_energy_steps_rejected.sql"))
    return pl.from_arrow(wh.query_arrow(sql.replace("{{input}}", relation).rstrip(";"), params, INTERPRETED))


def repeated_samples(wh, selects: list[str], params: dict) -> pl.DataFrame:
    """The window's GPU and time that the files give twice with different values (``selects``: each file's rows
    with source, line_no, node, gpu, ts and v, a digest of the values): gpu_sample keeps one of the rows, which
    one is not defined, so the record says how many there were and where the first is."""
    sql = (f"SELECT any(source) AS source, min(line_no) AS line_no, concat(toString(uniqExact(v)), "
           "' different values of one GPU at one time in ', toString(count()), ' rows: one is stored') AS reason, "
           "concat(node, ' gpu ', toString(gpu), ' at ', formatDateTime(ts, '%F %T')) AS raw "
           f"FROM ({' UNION ALL '.join(selects)}) "
           "WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != '' "
           "GROUP BY node, gpu, ts HAVING uniqExact(v) > 1")
    return pl.from_arrow(wh.query_arrow(sql, params, INTERPRETED))


def store(wh, q: pl.DataFrame) -> int:
    """Write rejected samples to etl_quarantine; returns how many."""
    if not q.height:
        return 0
    now = datetime.now(timezone.utc).replace(microsecond=0)
    q = q.select(pl.col("source").cast(pl.String), pl.col("line_no").cast(pl.UInt64), pl.col("reason").cast(pl.String),
                 pl.col("raw").cast(pl.String))
    q = CopyCounter().number(q)  # the same sample twice in one load stays two records
    load_frames(wh, {"etl_quarantine": q.select(
        "source", "line_no", "reason", "raw", "occurrence",
        pl.lit(now).cast(pl.Datetime("ms", "UTC")).alias("loaded_at"))})
    return q.height
