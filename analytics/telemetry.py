"""Telemetry quick look (`ops-report telemetry`); the SQL is sql/marts/telemetry.sql."""

from __future__ import annotations

from datetime import date

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.sqlfiles import sql_text

# --by key -> (expression over gpu_sample rows, expression over a node's rows, the key of a node without GPU
# samples over its node_sample rows). Only these reach the SQL.
BY_KEYS = {
    "cluster": ("cluster", "cluster", "n.cluster"),
    "node": ("node", "node", "n.node"),
    "gpu": ("concat(node, ':', toString(gpu))", None, None),
    "gpu_model": ("model_name", "model_name", "'(no GPUs)'"),
}
NODE_METRICS = ("nic_rx_bytes", "nic_tx_bytes", "storage_read_bytes", "storage_write_bytes")


def telemetry(wh, date_from: date, date_to: date, by: str = "cluster") -> pl.DataFrame:
    if by not in BY_KEYS:
        raise OpsError(f"--by must be one of {', '.join(BY_KEYS)}")
    if date_to < date_from:
        raise OpsError(f"--to {date_to} is before --from {date_from}")
    gpu_key, node_key, node_only_key = BY_KEYS[by]
    # node-level metrics have no meaning per GPU: null there
    node_metrics = "".join(
        (f"n.{m} AS {m},\n    " if node_key else f"CAST(NULL AS Nullable(Float64)) AS {m},\n    ") for m in NODE_METRICS)
    sql = (sql_text("marts/telemetry.sql").replace("{{gpu_key}}", gpu_key)
           .replace("{{node_key}}", node_key or "''").replace("{{node_metrics}}", node_metrics)
           .replace("{{node_only_key}}", node_only_key or "''")
           # by GPU, node metrics are null and a node without GPUs has no row
           .replace("{{nodes_join}}", "FULL OUTER JOIN" if node_key else "LEFT JOIN"))
    df = pl.from_arrow(wh.query_arrow(sql, {"from_date": date_from, "to_date": date_to}))
    return df.rename({"key": by})
