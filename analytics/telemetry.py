"""Telemetry quick look (`ops-report telemetry`); the SQL is sql/marts/telemetry.sql."""

from __future__ import annotations

from collections.abc import Sequence
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
# between a grouping's name and its key in the one query of several groupings (no key holds a tab)
_SEP = "\t"


def _check_window(date_from: date, date_to: date) -> None:
    if date_to < date_from:
        raise OpsError(f"--to {date_to} is before --from {date_from}")


def telemetry(wh, date_from: date, date_to: date, by: str = "cluster") -> pl.DataFrame:
    if by not in BY_KEYS:
        raise OpsError(f"--by must be one of {', '.join(BY_KEYS)}")
    _check_window(date_from, date_to)
    gpu_key, node_key, node_only_key = BY_KEYS[by]
    # node-level metrics have no meaning per GPU: null there
    node_metrics = "".join(
        (f"n.{m} AS {m},\n    " if node_key else f"CAST(NULL AS Nullable(Float64)) AS {m},\n    ") for m in NODE_METRICS)
    node_only_key = node_only_key or "''"
    sql = _render(gpu_key, node_key or "''", f"coalesce(nk.k, {node_only_key})", node_metrics,
                  "FULL OUTER JOIN" if node_key else "LEFT JOIN",  # by GPU, a node without GPUs has no row
                  node_only_key)
    df = pl.from_arrow(wh.query_arrow(sql, {"from_date": date_from, "to_date": date_to}))
    return df.rename({"key": by})


def telemetry_groupings(wh, date_from: date, date_to: date, bys: Sequence[str]) -> dict[str, pl.DataFrame]:
    """The view by each of ``bys`` (cluster, node, gpu_model: the groupings with node-level metrics), from one
    query: the window's samples read once for all of them, where a call per grouping reads them again each
    time (the demo prints two). Each frame is what ``telemetry(wh, date_from, date_to, by)`` returns."""
    bad = [b for b in bys if b not in BY_KEYS or BY_KEYS[b][1] is None]
    if bad or not bys:
        raise OpsError(f"the groupings must be some of cluster, node, gpu_model (not {', '.join(bad) or 'none'})")
    _check_window(date_from, date_to)

    def tagged(i: int) -> str:  # each grouping's key, tagged with its name: one row per GPU per grouping
        return "[" + ", ".join(f"concat('{b}{_SEP}', {BY_KEYS[b][i]})" for b in bys) + "]"

    gpu_keys = f"arrayJoin({tagged(0)})"
    node_metrics = "".join(f"n.{m} AS {m},\n    " for m in NODE_METRICS)
    # the gpu CTE's rows already carry one tagged key per grouping: a node's keys are its GPUs' k
    sql = _render(gpu_keys, "k", f"arrayJoin(if(isNull(nk.k), {tagged(2)}, [nk.k]))", node_metrics,
                  "FULL OUTER JOIN")
    df = pl.from_arrow(wh.query_arrow(sql, {"from_date": date_from, "to_date": date_to}))
    out = {}
    for b in bys:
        tag = f"{b}{_SEP}"
        out[b] = (df.filter(pl.col("key").str.starts_with(tag))
                  .with_columns(pl.col("key").str.slice(len(tag))).rename({"key": b}))
    return out


def _render(gpu_key: str, node_key: str, node_row_key: str, node_metrics: str, nodes_join: str,
            node_only_key: str = "''") -> str:
    # {{node_only_key}}: the mart's text before {{node_row_key}} (bench/bench_demo_stages.py --telemetry-before)
    return (sql_text("marts/telemetry.sql").replace("{{gpu_key}}", gpu_key)
            .replace("{{node_only_key}}", node_only_key)
            .replace("{{node_key}}", node_key).replace("{{node_metrics}}", node_metrics)
            .replace("{{node_row_key}}", node_row_key).replace("{{nodes_join}}", nodes_join))
