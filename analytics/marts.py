"""The mart layer: parameterized SQL under sql/marts/ over the facts and the intermediate grains.

Every statistic of the monthly report, and of an analyst's notebook, is one of these files run for a
window ``[from_ts, to_ts)`` of one Slurm cluster (and a project, where the file takes one):

    from ops_warehouse.analytics.marts import run_mart
    sizes = run_mart(wh, "job_sizes", cluster="ai1", window=(w0, w1), project="A")

Reads only: the grains the marts read (capacity_node_hour, run_node_hour, gpu_day, and job_run and
as_of_by_cluster behind the views fct_job_run and cluster_as_of) are kept up to date by the loads
(ops_warehouse.etl.grains; docs/sql.md, "Grains").
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.sqlfiles import sql_query

# parameters some marts take beyond the window and the project, with the report's values: a node is a
# straggler under behind_ratio of its run's median node (stragglers.sql); the report's largest jobs are the
# top_jobs runs by GPU-hours (largest_jobs.sql). The report records the values it ran with.
# runs_limit: job_efficiency for only the runs holding the most GPU-hours (0: every run; the largest-jobs
# mart sets it to top_jobs, so that it forms the efficiency of those runs alone).
# A hung run's GPUs all idled, with its NICs quiet, for at least hang_minutes before it ended (hung_jobs.sql;
# the NIC and checkpoint thresholds are the config's, applied by the loads: run_telemetry). 20, not 30: the hang's length is measured from the first idle sample, so a hang killed
# by a 30-minute NCCL watchdog measures between 30 minutes less one sampling step and 30; a site whose
# watchdog is shorter (PyTorch's NCCL default is 10 minutes) sets it lower. An idle-GPU run held its GPUs
# under the idle threshold (the config's idle_util_pct) for at least idle_min_minutes (idle_gpu_jobs.sql).
# A node is on the swap list at swap_min_score points (node_health.sql: 3 a hardware Xid or a DOWN event, 1 a
# DRAIN or a day throttled, 2 a run behind its peers beyond the second, 2 a standard deviation of failed runs
# or hangs beyond 2 above its share): two DOWNs, or two hardware Xids, or five runs behind its peers;
# reservation '' scores every node, a name only that reservation's.
# A run submitted within campaign_gap_hours of the end of a run with the same user, account and job name
# continues its campaign (campaigns.sql).
# A run failed on hardware when it ended NODE_FAIL, or FAILED within xid_failure_minutes after a hardware Xid
# on one of its nodes (failures_by_size.sql): 10, because after a fatal Xid the process on that GPU fails
# within seconds and its peers on the other nodes when their collective times out (PyTorch's NCCL watchdog
# default is 10 minutes); an Xid earlier in a run that went on working did not end it.
PARAMETERS = {"behind_ratio": 0.8, "top_jobs": 15, "runs_limit": 0,
              "hang_minutes": 20, "idle_min_minutes": 60,
              "swap_min_score": 6.0, "reservation": "",
              "campaign_gap_hours": 24.0, "xid_failure_minutes": 10.0}


def mart_sql(name: str) -> str:
    """The text of sql/marts/<name>.sql, comments dropped, the marts and intermediate models it includes
    (``{{mart name}}``, ``{{intermediate name}}``) inlined (ops_warehouse.sqlfiles.sql_query)."""
    if not re.fullmatch(r"\w+", name):
        raise OpsError(f"no mart named {name!r}")
    return sql_query(f"marts/{name}.sql")


def run_mart(wh, name: str, *, cluster: str, window: tuple[datetime, datetime], project: str = "",
             **params) -> pl.DataFrame:
    return run_query(wh, mart_sql(name), cluster=cluster, window=window, project=project, **params)


def run_query(wh, sql: str, *, cluster: str, window: tuple[datetime, datetime], project: str = "",
              **params) -> pl.DataFrame:
    """A query of the mart layer's kind (a mart's text, or a law of sql/checks/ that includes marts) with the
    marts' parameters: the window, the cluster, the project, PARAMETERS and the site's settings."""
    # the idle threshold and the carbon intensity are the site's (config [reports] idle_util_pct, [energy]
    # carbon_g_per_kwh: -1 when not set, and the marts then give no carbon) unless the caller passes others
    carbon = wh.cfg.carbon_g_per_kwh
    table = wh.query_arrow(sql, {**PARAMETERS, "idle_util_pct": wh.cfg.idle_util_pct,
                                 "carbon_g_per_kwh": -1.0 if carbon is None else carbon, "cluster": cluster,
                                 "from_ts": window[0], "to_ts": window[1], "project": project, **params})
    df = pl.from_arrow(table)
    # ClickHouse hands DateTime to Arrow as epoch seconds: columns named *_ts are times (UTC)
    return df.with_columns(pl.from_epoch(pl.col(c).cast(pl.Int64), "s").dt.replace_time_zone("UTC")
                           for c in df.columns if c.endswith("_ts") and df.schema[c].is_integer())
