"""The mart layer: parameterized SQL under sql/marts/ over the facts, and the capacity refresh.

Every statistic of the monthly report, and of an analyst's notebook, is one of these files run for a
window ``[from_ts, to_ts)`` of one Slurm cluster (and a project, where the file takes one):

    from ops_warehouse.marts import refresh_capacity, run_mart
    refresh_capacity(wh, "ai1", w0, w1)
    sizes = run_mart(wh, "job_sizes", cluster="ai1", window=(w0, w1), project="A")

``refresh_capacity`` recomputes capacity_node_hour (sql/refresh/capacity_node_hour.sql) for the window:
the hourly table the capacity, idle, efficiency and cost marts read.
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from ops_warehouse import OpsError
from ops_warehouse.migrations import split_statements, sql_text

_INCLUDE = re.compile(r"\{\{mart (\w+)\}\}")


def mart_sql(name: str) -> str:
    """The text of sql/marts/<name>.sql, comments dropped, other marts it includes inlined."""
    if not re.fullmatch(r"\w+", name):
        raise OpsError(f"no mart named {name!r}")
    stmts = split_statements(sql_text(f"marts/{name}.sql"))
    if len(stmts) != 1:
        raise OpsError(f"sql/marts/{name}.sql must hold one query")
    sql = stmts[0].rstrip().rstrip(";")
    return _INCLUDE.sub(lambda m: mart_sql(m.group(1)), sql)


def run_mart(wh, name: str, *, cluster: str, window: tuple[datetime, datetime], project: str = "",
             **params) -> pl.DataFrame:
    sql = mart_sql(name)
    defaults = {"behind_ratio": 0.8}  # parameters some marts take, with the report's defaults
    table = wh.query_arrow(sql, {**defaults, "cluster": cluster, "from_ts": window[0], "to_ts": window[1],
                                 "project": project, **params})
    df = pl.from_arrow(table)
    # ClickHouse hands DateTime to Arrow as epoch seconds: columns named *_ts are times (UTC)
    return df.with_columns(pl.from_epoch(pl.col(c).cast(pl.Int64), "s").dt.replace_time_zone("UTC")
                           for c in df.columns if c.endswith("_ts") and df.schema[c].is_integer())


def refresh_capacity(wh, cluster: str, w0: datetime, w1: datetime, idle_util_pct: float | None = None) -> None:
    """Recompute capacity_node_hour for the whole hours of [w0, w1). ``cluster`` is accepted for symmetry
    with the marts: the refresh covers every cluster in the warehouse (the grid is cheap)."""
    threshold = wh.cfg.idle_util_pct if idle_util_pct is None else idle_util_pct
    for stmt in split_statements(sql_text("refresh/capacity_node_hour.sql")):
        wh.client.command(stmt, parameters={"from_ts": w0, "to_ts": w1, "idle_util_pct": float(threshold)},
                          settings={"optimize_on_insert": 0})
