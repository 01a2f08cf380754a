"""Job-accounting summary (Open XDMoD Jobs-realm statistics); the SQL is sql/marts/summary.sql."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

from ops_warehouse.errors import OpsError
from ops_warehouse.sqlfiles import sql_text

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

# Grouping keys: columns of the fct_job_run model. Only these names ever reach the SQL text.
BY_KEYS = ("cluster", "account", "project", "partition", "qos", "user", "gpu_type", "gpu_count_bin",
           "job_size_bin", "wall_time_bin")
PERIODS = ("none", "day", "month")
STATISTICS = ("jobs_ended", "jobs_started", "jobs_cancelled_before_start", "cpu_hours", "gpu_h",
              "node_hours", "wall_hours", "wait_hours", "avg_wait_hours")


def parse_by(values: list[str] | None) -> list[str]:
    keys: list[str] = []
    for v in values or []:
        for k in v.split(","):
            k = k.strip()
            if not k:
                continue
            if k not in BY_KEYS:
                raise OpsError(f"unknown --by key {k!r}; choose from {', '.join(BY_KEYS)}")
            if k not in keys:
                keys.append(k)
    return keys


def summary(wh, date_from: date, date_to: date, by: list[str] | None = None, period: str = "none",
            tz: str | None = None) -> pl.DataFrame:
    """Statistics per ``by`` group (and period start when ``period`` is day or month), for the API."""
    import polars as pl

    return pl.from_arrow(summary_table(wh, date_from, date_to, by, period, tz))


def summary_table(wh, date_from: date, date_to: date, by: list[str] | None = None, period: str = "none",
                  tz: str | None = None) -> pa.Table:
    """The same statistics as the engine's Arrow table: what `ops-report summary` prints, without polars
    (its import is 0.36 CPU-s of a one-day summary's 0.79 over the engine, issue 51)."""
    by = parse_by(by)
    if period not in PERIODS:
        raise OpsError(f"--period must be one of {', '.join(PERIODS)}")
    if date_to < date_from:
        raise OpsError(f"--to {date_to} is before --from {date_from}")
    sql = sql_text("marts/summary.sql").replace("{{by}}", "".join(f"{k}, " for k in by))
    table = wh.query_arrow(sql, {"from_date": date_from, "to_date": date_to, "tz": tz or wh.cfg.timezone,
                                 "period": period})
    if period == "none":
        table = table.drop_columns(["period_start"])
    return table
