"""Grafana provisioning for the warehouse (docs/grafana.md): a ClickHouse data source and the operators'
dashboards, built as code with Grafana's own grafana-foundation-sdk.

Every panel reads one mart through its parameterized view (``grafana_<mart>``, ops_warehouse.grafana_views):
the report's own SQL, so a panel and the report give one number. Its time range is the plugin's macros
(``$__fromTime``, ``$__toTime``) passed to the mart's window parameters, which the mart applies to its grain's
time key (capacity_node_hour.hour, gpu_hour.hour, ...), so the engine prunes parts for any range. Plain
data in, files out: no engine here (the CLI hands over each mart's parameters).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import barchart, common, dashboard, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.variants import Dataquery
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models.dashboard import DataSourceRef, GridPos, VariableRefresh
from ops_warehouse.files import write_file

PLUGIN = "grafana-clickhouse-datasource"
DATASOURCE_UID = "ops-warehouse"
# the plugin's format numbers (grafana/sqlds): what the panel gets the rows as
_TIME_SERIES, _TABLE = 0, 1
# Grafana version the dashboards' JSON is written for (the SDK's schema: grafana-foundation-sdk 10.1)
GRAFANA_VERSION = "10.1"


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # timeseries | table | stat | barchart
    mart: str
    select: str  # the query with {view} for the mart's view call: SELECT … FROM {view} …
    description: str
    unit: str = ""
    stacked: bool = False  # a bar chart's series stacked (parts of one whole)


@dataclass(frozen=True)
class Board:
    uid: str
    title: str
    panels: tuple[Panel, ...]


_MODEL = "('${gpu_model}' = '' OR key = '${gpu_model}')"
_PART = "('${partition}' = '' OR key = '${partition}')"

BOARDS = (
    Board("ops-capacity", "ops-warehouse: capacity and utilization", (
        Panel("Utilization", "stat", "utilization",
              "SELECT utilization FROM {view} WHERE level = 'cluster'",
              "Allocated ÷ available GPU-hours of the cluster over the range (utilization.sql).", "percentunit"),
        Panel("Capacity and its use, by day", "timeseries", "utilization_daily",
              "SELECT toDateTime(day) AS time, allocated_gpu_h - allocated_idle_gpu_h AS allocated_busy_gpu_h, "
              "allocated_idle_gpu_h, reserved_idle_gpu_h, free_gpu_h, down_gpu_h, drained_gpu_h FROM {view} "
              "ORDER BY time",
              "Each day's GPU-hours: allocated (busy and idle), reserved but unused, free, down, drained "
              "(utilization_daily.sql); they add up to the day's capacity.", "h"),
        Panel("Capacity and its use, by month", "barchart", "utilization_daily",
              "SELECT formatDateTime(toStartOfMonth(day), '%Y-%m') AS month, "
              "sum(allocated_gpu_h - allocated_idle_gpu_h) AS `allocated busy`, "
              "sum(allocated_idle_gpu_h) AS `allocated idle`, sum(reserved_idle_gpu_h) AS `reserved idle`, "
              "sum(free_gpu_h) AS free, sum(down_gpu_h) AS down, sum(drained_gpu_h) AS drained "
              "FROM {view} GROUP BY month ORDER BY month",
              "Each month's GPU-hours, stacked to the month's capacity: allocated (busy and idle), reserved but "
              "unused, free, down, drained (utilization_daily.sql's days added up; GPU-hours add, ratios are "
              "the Utilization panel's).", "h", stacked=True),
        Panel("By GPU model", "table", "utilization",
              "SELECT key AS gpu_model, capacity_gpu_h, available_gpu_h, allocated_gpu_h, busy_gpu_h, utilization "
              f"FROM {{view}} WHERE level = 'gpu_model' AND {_MODEL} ORDER BY capacity_gpu_h DESC",
              "Capacity and use per GPU model (utilization.sql, level gpu_model).", "h"),
        Panel("By partition (each node in every partition it is in)", "table", "utilization",
              "SELECT key AS partition, capacity_gpu_h, available_gpu_h, allocated_gpu_h, free_gpu_h, utilization "
              f"FROM {{view}} WHERE level = 'partition_member' AND {_PART} ORDER BY capacity_gpu_h DESC",
              "A partition's own view of its nodes (utilization.sql, level partition_member): rows overlap "
              "where nodes are shared, so never add them up.", "h"),
        Panel("Idle capacity", "table", "idle_capacity",
              "SELECT level, key, free_gpu_h, reserved_idle_gpu_h, allocated_idle_gpu_h, down_gpu_h, drained_gpu_h, "
              "free_share, allocated_idle_share FROM {view} WHERE level IN ('cluster', 'gpu_model') ORDER BY level, key",
              "Where the unused GPU-hours were (idle_capacity.sql).", "h"),
        Panel("Chargeback by project", "table", "chargeback_totals",
              "SELECT project, allocated_gpu_h, share_of_available, cost, currency FROM {view} ORDER BY cost DESC",
              "Each project's allocated GPU-hours and cost (chargeback_totals.sql).", ""),
        Panel("Cost by GPU model", "table", "cost",
              "SELECT * FROM {view} ORDER BY model", "Capital and energy cost, idle cost (cost.sql).", ""),
    )),
    Board("ops-jobs", "ops-warehouse: jobs", (
        Panel("Jobs and GPU-hours by size", "barchart", "job_sizes",
              "SELECT size_class, job_share, gpu_h_share FROM {view} ORDER BY min_gpus",
              "Share of jobs and of GPU-hours per GPU-count class (job_sizes.sql).", "percentunit"),
        Panel("Run times and waits by size", "table", "run_times",
              "SELECT size_class, jobs_ended, run_p50_s, run_p90_s, run_p99_s, jobs_started, wait_p50_s, wait_p90_s "
              "FROM {view} ORDER BY min_gpus",
              "Run-time and wait percentiles per size class (run_times.sql; its cdf_s column is the CDF).", "s"),
        Panel("Run-time distribution by size (CDF)", "barchart", "run_times",
              "SELECT concat(toString(q), '%') AS share_of_jobs, "
              + ", ".join(f"anyIfOrNull(cdf_s[q], size_class = '{c}' AND jobs_ended > 0) / 3600 "
                          f"AS `{c} GPU{'' if c == '1' else 's'}`"
                          for c in ("1", "2-8", "9-64", "65-256", "257-1024", ">1024"))
              + " FROM {view} ARRAY JOIN range(5, 101, 5) AS q GROUP BY q ORDER BY q",
              "The run-time CDF of each size class read across: the run time (hours) within which 5%, 10%, … "
              "100% of the jobs that ended in the range had ended (run_times.sql's cdf_s, its exact "
              "quantiles). A class with no job in the range is empty.", "h"),
        Panel("Largest jobs", "table", "largest_jobs",
              "SELECT job_id, user, project, partition, gpus, start_ts, end_ts, gpu_h, gpu_model FROM {view} "
              "ORDER BY gpu_h DESC",
              "The runs with the most GPU-hours, start and end (largest_jobs.sql): a Gantt's rows.", ""),
        Panel("Hung jobs", "table", "hung_jobs",
              "SELECT job_id, user, project, nodes, gpus, hang_start_ts, hang_minutes, hung_gpu_h FROM {view} "
              "ORDER BY hung_gpu_h DESC", "Runs whose GPUs went idle and stayed so until the end (hung_jobs.sql).", ""),
        Panel("Idle-GPU runs by user and project", "table", "idle_gpu_users",
              "SELECT level, project, user, runs, gpu_h, capex, currency, rank_in_project FROM {view} "
              "ORDER BY level, gpu_h DESC", "Allocated GPUs left idle, summed per user and project "
              "(idle_gpu_users.sql).", ""),
    )),
    Board("ops-gpus", "ops-warehouse: GPUs and nodes", (
        Panel("GPU grid: utilization, power, temperature, throttling", "table", "gpu_heatmap",
              "SELECT rack, node, gpu, gpu_util_pct, power_w, temp_c_max, throttled_share FROM {view} "
              "ORDER BY rack, node, gpu",
              "Every GPU over the range, rack → node → GPU: mean utilization and power, hottest sample, share "
              "of its time throttled (gpu_heatmap.sql).", ""),
        Panel("Node scorecard and swap list", "table", "node_health",
              "SELECT * FROM {view}", "Faults, downtime and the score that orders the swap list "
              "(node_health.sql; its rule in the report).", ""),
        Panel("Goodput", "table", "goodput",
              "SELECT project_key, campaigns, ettr, gpu_h, lost_gpu_h FROM {view} ORDER BY project_key",
              "Effective training time ratio and the GPU-hours lost per cause (goodput.sql).", ""),
        Panel("Energy and carbon", "table", "energy",
              "SELECT project_key, runs, gpu_h, it_kwh, facility_kwh, kg_co2e, kwh_per_gpu_h FROM {view} "
              "ORDER BY project_key", "Measured energy and its carbon per project (energy.sql).", ""),
    )),
)


def marts() -> list[str]:
    """The marts the dashboards read, each once."""
    return sorted({p.mart for b in BOARDS for p in b.panels})


def _literal(value, kind: str) -> str:
    if kind.startswith("String"):
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(float(value)) if kind.startswith("Float") else str(int(value))


def view_call(mart: str, params: dict[str, str], values: dict) -> str:
    """``grafana_<mart>(name = value, …)``: the window from the panel's range, cluster and project from the
    dashboard's variables, every other parameter the site's value at provisioning."""
    args = []
    for name, kind in params.items():
        if name == "from_ts":
            v = "$__fromTime"
        elif name == "to_ts":
            v = "$__toTime"
        elif name in ("cluster", "project"):
            v = "'${" + name + "}'"
        elif name in values:
            v = _literal(values[name], kind)
        else:
            raise ValueError(f"mart {mart}: no value for its parameter {name}")
        args.append(f"{name} = {v}")
    return f"grafana_{mart}({', '.join(args)})"


def panel_sql(p: Panel, params: dict[str, dict[str, str]], values: dict) -> str:
    return p.select.replace("{view}", view_call(p.mart, params[p.mart], values))


class _Query(Dataquery):
    """The ClickHouse data source's query (the plugin's CHSqlQuery: editorType sql, rawSql, format)."""

    def __init__(self, sql: str, fmt: int):
        self.sql, self.fmt = sql, fmt

    def build(self) -> "_Query":  # the SDK's builders take a builder: this query is its own
        return self

    def to_json(self) -> dict:
        return {"refId": "A", "datasource": {"type": PLUGIN, "uid": DATASOURCE_UID}, "editorType": "sql",
                "rawSql": self.sql, "format": self.fmt, "pluginVersion": "4.20.0"}


def _variable(name: str, label: str, sql: str):
    return (dashboard.QueryVariable(name).label(label).query(sql)
            .datasource(DataSourceRef(type_val=PLUGIN, uid=DATASOURCE_UID)).refresh(VariableRefresh.ON_DASHBOARD_LOAD))


_VARIABLES = (
    ("cluster", "Cluster", "SELECT DISTINCT cluster FROM node_inventory ORDER BY cluster"),
    ("project", "Project", "SELECT '' UNION ALL SELECT DISTINCT project FROM dim_account ORDER BY 1"),
    ("partition", "Partition", "SELECT '' UNION ALL SELECT DISTINCT arrayJoin(if(empty(partitions), [partition], "
                               "partitions)) FROM node_inventory WHERE cluster = '${cluster}' ORDER BY 1"),
    ("gpu_model", "GPU model", "SELECT '' UNION ALL SELECT DISTINCT gpu_model FROM node_inventory "
                               "WHERE cluster = '${cluster}' ORDER BY 1"),
)

def _legend():
    return common.VizLegendOptions().display_mode(cm.LegendDisplayMode.TABLE).placement(
        cm.LegendPlacement.BOTTOM).show_legend(True).calcs(["sum", "mean"])


def _tooltip():
    return common.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.NONE)


# each panel type with the options its schema requires set (an unset block is written as null, which the
# schema of the Grafana version refuses): a stat shows the one value it reads, not a reduction of several
_BUILDERS = {
    "timeseries": lambda: timeseries.Panel().legend(_legend()).tooltip(_tooltip()),
    "table": lambda: table.Panel().show_header(True),
    "stat": lambda: stat.Panel().reduce_options(common.ReduceDataOptions().values(True).calcs([])),
    "barchart": lambda: barchart.Panel().legend(_legend().calcs([])).tooltip(_tooltip()),
}


def build(board: Board, params: dict[str, dict[str, str]], values: dict) -> dict:
    """One dashboard's JSON model."""
    d = (dashboard.Dashboard(board.title).uid(board.uid).tags(["ops-warehouse"]).time("now-1y", "now")
         .timezone("utc").refresh("1h"))
    for name, label, sql in _VARIABLES:
        d = d.with_variable(_variable(name, label, sql))
    for i, p in enumerate(board.panels):
        fmt = _TIME_SERIES if p.kind == "timeseries" else _TABLE
        panel = (_BUILDERS[p.kind]().title(p.title).description(p.description)
                 .datasource(DataSourceRef(type_val=PLUGIN, uid=DATASOURCE_UID))
                 .with_target(_Query(panel_sql(p, params, values), fmt))
                 .grid_pos(_grid(i, p.kind)))
        if p.unit:
            panel = panel.unit(p.unit)
        if p.stacked:
            panel = panel.stacking(cm.StackingMode.NORMAL)
        d = d.with_panel(panel)
    return json.loads(JSONEncoder(sort_keys=True, indent=2).encode(d.build()))


def _grid(i: int, kind: str) -> GridPos:
    w = 6 if kind == "stat" else 12
    return GridPos(h=8, w=w, x=(i % 2) * 12, y=(i // 2) * 8)


def datasource_yaml(host: str, port: int, protocol: str, secure: bool, database: str, user: str,
                    password_env: str) -> str:
    """Grafana's data source provisioning file: the password from the environment of Grafana's process
    (``$NAME``, which Grafana expands in provisioning files), never in the file."""
    return (
        "# ops-report grafana: the warehouse as a Grafana data source (docs/grafana.md)\n"
        "apiVersion: 1\n"
        "datasources:\n"
        "  - name: ops-warehouse\n"
        f"    uid: {DATASOURCE_UID}\n"
        f"    type: {PLUGIN}\n"
        "    access: proxy\n"
        "    jsonData:\n"
        f"      host: {json.dumps(host)}\n"
        f"      port: {int(port)}\n"
        f"      protocol: {protocol}\n"
        f"      secure: {'true' if secure else 'false'}\n"
        f"      defaultDatabase: {json.dumps(database)}\n"
        f"      username: {json.dumps(user)}\n"
        "    secureJsonData:\n"
        f"      password: ${password_env}\n")


DASHBOARDS_PROVIDER = """# ops-report grafana: load the dashboards of the folder beside this file's (docs/grafana.md)
apiVersion: 1
providers:
  - name: ops-warehouse
    folder: ops-warehouse
    type: file
    disableDeletion: false
    updateIntervalSeconds: 3600
    allowUiUpdates: false
    options:
      path: {path}
"""


def write(out: Path, params: dict[str, dict[str, str]], values: dict, *, datasource: str,
          dashboards_path: str | None = None) -> list[Path]:
    """The provisioning tree under ``out``: provisioning/datasources/ops-warehouse.yaml,
    provisioning/dashboards/ops-warehouse.yaml and dashboards/<uid>.json; the files written."""
    written = []
    ds = out / "provisioning" / "datasources" / "ops-warehouse.yaml"
    prov = out / "provisioning" / "dashboards" / "ops-warehouse.yaml"
    boards = out / "dashboards"
    for folder in (ds.parent, prov.parent, boards):
        folder.mkdir(parents=True, exist_ok=True)
    write_file(ds, datasource)
    write_file(prov, DASHBOARDS_PROVIDER.replace("{path}", dashboards_path or str(boards.resolve())))
    written += [ds, prov]
    for b in BOARDS:
        p = boards / f"{b.uid}.json"
        write_file(p, json.dumps(build(b, params, values), indent=2, sort_keys=True) + "\n")
        written.append(p)
    return written
