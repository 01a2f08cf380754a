"""ops-warehouse: an offline analytics warehouse for GPU supercomputers.

Slurm accounting (and, later, telemetry) goes through sources -> normalize -> stage (Parquet) -> load into
ClickHouse; every statistic is a SQL model under ``ops_warehouse.sql``. This package is the Python API the
``ops-report`` CLI and notebooks share.
"""

from __future__ import annotations

__version__ = "0.1.0"


class OpsError(Exception):
    """An error meant for the operator: printed as one line, no traceback."""


def connect(dsn: str | None = None, *, config=None):
    """The warehouse for analysis (ops_warehouse.api.Connection): ``ops_warehouse.connect("chdb:///path")``."""
    from ops_warehouse.api import connect as _connect

    return _connect(dsn, config=config)
