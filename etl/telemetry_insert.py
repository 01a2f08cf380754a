"""Exporter-shaped Parquet -> gpu_sample, xid_event, node_sample and lustre_job_io, by the engine
(sql/staging/*.sql).

Every telemetry source ends here. A source hands over exporter-shaped files: a ``timestamp`` column, the
exporter's label columns and one column per metric named as the exporter names it (the generator's and a
site's day files are this shape already; the Prometheus, VictoriaMetrics and text sources stage their frames
as such files). This module only renders the ``{{input}}`` relation of the SQL templates from the metric
catalog (which exporter name becomes which warehouse column, at what scale); the rules (counter steps, node
names, Xid events, how a node's series are put together) are SQL: sql/staging/ and sql/functions/.

Each kind's files are read once a load, into a temporary table in the engine's memory (``_Stage``): the values
no exporter should send are NULLed as they are read and the row flagged, and every statement (each target table,
the counts, the counter edges, the energy-step check) reads that table; a file is read again only for the line
of a rejected value or of a GPU and time given twice (docs/benchmarks.md, issue 50).

Counters are seeded by the series' last sample before the load's first: ``seed`` files (earlier days' files)
are read for that sample only (the engine reads a handful of their columns), and every load keeps each
counter series' last raw value in counter_edge, which seeds the next load (a day of scrapes loaded one file
at a time gives the rows of one load: sql/migrations/0018_counter_edge.sql). A seed file is left unread where
counter_edge already has a value as recent as the file's last sample for every series of its family (the day
before loaded first: sql/staging/seed_file_unneeded.sql).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from ops_warehouse.errors import OpsError
from ops_warehouse.etl import sample_quarantine
from ops_warehouse.etl.lustre_jobs import JOB_METRICS
from ops_warehouse.etl.metric_catalog import GPU_COLUMNS, NODE_MAP_COLUMNS, NODE_SCALAR_COLUMNS, Metric
from ops_warehouse.etl.staging import staged
from ops_warehouse.sqlfiles import split_statements, sql_text
from ops_warehouse.warehouse import INSERT_SETTINGS, INTERPRETED

NODE_COLUMNS = NODE_MAP_COLUMNS + NODE_SCALAR_COLUMNS
# warehouse columns whose table definition is "amount in the step": their exporter metric must be a counter
COUNTER_COLUMNS = {"energy_j", "nvlink_bytes", "nic_rx_bytes", "nic_tx_bytes", "lustre_read_bytes",
                   "lustre_write_bytes"}
# the GPU columns a seed row carries (the rest are NULL there: only counters and the Xid gauge look back)
_SEEDED = {"energy_j", "nvlink_bytes", "xid_last"}
_NODE_LABELS = ("Hostname", "instance")


@dataclass
class ExporterFiles:
    """One window's exporter files by family kind, and the earlier files that seed their counters."""

    gpu: list[Path] = field(default_factory=list)  # dcgm-exporter rows: one per GPU per scrape
    node: list[Path] = field(default_factory=list)  # node-level families (NIC ports per device, Lustre, IPMI)
    job: list[Path] = field(default_factory=list)  # Lustre job_stats (jobid, target, ...: etl/lustre_jobs.py)
    mig: list[Path] = field(default_factory=list)  # MIG GPU instances' rows (GPU_I_ID, GPU_I_PROFILE)
    gpu_seed: list[Path] = field(default_factory=list)
    node_seed: list[Path] = field(default_factory=list)
    job_seed: list[Path] = field(default_factory=list)
    # what the quarantine names a file's bad values by: (the input file, the line of its first row); a file
    # not listed is itself with rows from line 1, unless ``staged`` (a source's frames: the load's source)
    origin: dict[Path, tuple[str, int]] = field(default_factory=dict)
    staged: bool = False


def check_catalog(cat: dict[str, Metric]) -> None:
    for name, m in cat.items():
        if (m.column in COUNTER_COLUMNS) != (m.kind == "counter"):
            want = "counter" if m.column in COUNTER_COLUMNS else "gauge"
            raise OpsError(f"metric catalog: {name} -> {m.column} must be a {want} "
                           f"({m.column} {'holds the amount in each step' if want == 'counter' else 'is sampled'})")
        if m.column not in GPU_COLUMNS + NODE_COLUMNS:
            raise OpsError(f"metric catalog: {name} maps to {m.column}, which is not a warehouse column; "
                           f"GPU columns: {', '.join(GPU_COLUMNS)}; node columns: {', '.join(NODE_COLUMNS)}")


def _q(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class _Relations:
    """Staged files as relations the engine reads: in process the file itself; on a server the file is
    uploaded into a scratch table first (the server cannot see this machine's files)."""

    def __init__(self, wh):
        self.wh = wh
        self.scratch: list[str] = []
        self.uploaded: dict[Path, str] = {}
        self.read_as: dict[Path, str] = {}

    def of(self, path: Path) -> str:
        path = Path(path).resolve()
        if self.wh.embedded:
            if path not in self.read_as:
                self.read_as[path] = _labels_as_dictionaries(self.wh, path)
            return self.read_as[path]
        if path in self.uploaded:  # read again only for a bad value or a repeated sample
            return self.uploaded[path]
        from clickhouse_connect.driver.tools import insert_file

        name = f"_stage_{uuid.uuid4().hex}"
        self.wh.command(f"CREATE TABLE {name} ({_ch_structure(path)}) ENGINE = MergeTree ORDER BY tuple()")
        self.scratch.append(name)
        insert_file(self.wh.client, name, str(path), fmt="Parquet")
        self.uploaded[path] = name
        return name

    def row_number(self) -> str:
        """A row's number in its file, from 0 (the server's scratch tables keep no order: 0 there)."""
        return "_row_number" if self.wh.embedded else "0"

    def drop(self) -> None:
        for name in self.scratch:
            self.wh.command(f"DROP TABLE IF EXISTS {name}")
        self.scratch.clear()
        self.uploaded.clear()


# labels the selects read as numbers (toUInt16): a dictionary of them would be one of numbers, which the engine refuses
_NUMERIC_LABELS = {"gpu", "GPU_I_ID"}


def _labels_as_dictionaries(wh, path: Path) -> str:
    """``file()`` of a Parquet file, its text columns read as LowCardinality: an exporter's labels are
    dictionary-encoded in the file, so the engine keeps them as dictionaries rather than a string a row, and the
    node names, the model's power bound and the stage's dictionaries are worked out once per distinct label
    (a day's GPU stage: 0.24 -> 0.18 s of CPU, a NIC file's 0.14 -> 0.11 s; docs/benchmarks.md, issue 50)."""
    rel = f"file({_lit(str(path))}, Parquet)"
    cols = [(r[0], r[1]) for r in wh.query_rows(f"DESCRIBE TABLE {rel}")]
    text = {n for n, t in cols if t in ("String", "Nullable(String)") and n not in _NUMERIC_LABELS}
    if not text:
        return rel
    structure = ", ".join(f"{_q(n)} {f'LowCardinality({t})' if n in text else t}" for n, t in cols)
    return f"file({_lit(str(path))}, Parquet, {_lit(structure)})"


def _ch_structure(path: Path) -> str:
    import pyarrow as pa

    def t(a) -> str:
        if pa.types.is_timestamp(a):
            return "Nullable(DateTime64(3, 'UTC'))"
        if pa.types.is_integer(a) or pa.types.is_floating(a):
            return "Nullable(Float64)"
        return "Nullable(String)"

    return ", ".join(f"{_q(f.name)} {t(f.type)}" for f in pq.read_schema(path))


# a warehouse column a file has no metric for (its rows' value: NULL, which every check passes)
_NO_VALUE = "CAST(NULL AS Nullable(Float64))"


def _value(cols: set[str], cat: dict[str, Metric], column: str) -> str:
    """The expression for one warehouse column from a file's metric columns (NULL when it has none). A metric
    with ``match`` counts only on rows whose labels have those values (NULL where the file lacks the label)."""
    def one(n: str, m: Metric) -> str:
        v = f"CAST({_q(n)} AS Nullable(Float64))" + (f" * {m.scale!r}" if m.scale != 1 else "")
        if not m.match:
            return v
        if any(k not in cols for k, _ in m.match):
            return _NO_VALUE
        cond = " AND ".join(f"ifNull(toString({_q(k)}), '') = {_lit(val)}" for k, val in m.match)
        return f"if({cond}, {v}, NULL)"

    parts = [one(n, m) for n, m in cat.items() if m.column == column and n in cols]
    if not parts:
        return _NO_VALUE
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def _node_expr(cols: set[str]) -> str:
    present = [c for c in _NODE_LABELS if c in cols]
    if not present:
        return "''"
    if len(present) == 1:
        return f"slurm_node(ifNull(toString({_q(present[0])}), ''))"
    return "slurm_node(if(ifNull(Hostname, '') != '', Hostname, ifNull(toString(instance), '')))"


def _gpu_select(rel: str, cols: set[str], cat: dict[str, Metric], seed: bool, line: str = "") -> str:
    if "gpu" not in cols:
        raise OpsError("GPU telemetry without a `gpu` label: cannot tell the GPUs of a node apart")
    values = {c: _value(cols, cat, c) for c in GPU_COLUMNS}
    def label(name: str) -> str:
        return f"ifNull(toString({_q(name)}), '')" if name in cols else "''"

    base = (f"SELECT {_node_expr(cols)} AS node, toUInt16(gpu) AS gpu, toDateTime(timestamp, 'UTC') AS ts, "
            f"{label('modelName')} AS model_name, {label('UUID')} AS uuid, {label('hpc_job')} AS hpc_job, "
            f"{label('pci_bus_id')} AS pci_bus_id, "  # dcgm-exporter >= 3.x: the GPU as the kernel log names it
            + ", ".join(f"{v} AS {c}" for c, v in values.items()) + (f", {line} AS _line" if line else "")
            + f" FROM {rel}")
    if line:
        return base
    if not seed:
        return sample_quarantine.checked(base, GPU_COLUMNS, "model_name")
    # the series' last sample, then its values checked (a value's check is its own: the same as checking every
    # row first, for the one row kept)
    return sample_quarantine.checked(_last_sample(base, ["node", "gpu"], [
        ("model_name", "''"), ("uuid", "''"), ("hpc_job", "''"), ("pci_bus_id", "''")], GPU_COLUMNS, _SEEDED),
        [c for c in GPU_COLUMNS if c in _SEEDED])


def _last_sample(base: str, keys: list[str], head: list[tuple[str, str]], columns: list[str],
                 seeded: set[str]) -> str:
    """The series' last sample of ``base`` only (same columns in the same order: keys, ts, head, columns), and
    only what looks back, so the engine reads just those columns of the file."""
    looked = [c for c in columns if c in seeded]
    at = {c: k + 2 for k, c in enumerate(looked)}
    values = [f"last.{at[c]} AS {c}" if c in at else f"CAST(NULL AS Nullable(Float64)) AS {c}" for c in columns]
    k = ", ".join(keys)
    return (f"SELECT {k}, last.1 AS ts, " + "".join(f"{expr} AS {name}, " for name, expr in head) + ", ".join(values)
            + f" FROM (SELECT {k}, argMax(tuple(ts, {', '.join(looked)}), ts) AS last FROM ({base}) GROUP BY {k})")


def _node_select(rel: str, cols: set[str], cat: dict[str, Metric], seed: bool, line: str = "") -> str:
    metrics = sorted(c for c in cols if c in cat and cat[c].grain == "node")
    labels = sorted(c for c in cols if c not in cat and c != "timestamp" and c not in _NODE_LABELS)
    # a series: the family (its metric names) and its other labels, so a seed file of the same family
    # gives the same key
    series = "concat(" + ", ".join([_lit(",".join(metrics))] + [
        f"'|', ifNull(toString({_q(c)}), '')" for c in labels]) + ")"
    per_device = any(cat[c].per_device for c in metrics)
    device = "ifNull(toString(device), '')" if per_device and "device" in cols else "''"
    if device != "''" and "port" in cols:
        # a dual-port HCA: node_exporter's series per device and port (etl/metric_catalog.py nic_key)
        device = f"if(ifNull(toString(port), '') IN ('', '1'), {device}, concat({device}, ':', toString(port)))"
    node_cat = {n: m for n, m in cat.items() if m.grain == "node"}
    base = (f"SELECT {_node_expr(cols)} AS node, {series} AS series, {device} AS device, "
            f"toDateTime(timestamp, 'UTC') AS ts, "
            + ", ".join(f"{_value(cols, node_cat, c)} AS {c}" for c in NODE_COLUMNS)
            + (f", {line} AS _line" if line else "") + f" FROM {rel}")
    if line:
        return base
    if not seed:
        return sample_quarantine.checked(base, NODE_COLUMNS)
    last = _last_sample(base, ["node", "series", "device"], [], NODE_COLUMNS, COUNTER_COLUMNS)
    return sample_quarantine.checked(last, [c for c in NODE_COLUMNS if c in COUNTER_COLUMNS])


def _job_select(rel: str, cols: set[str], cat: dict[str, Metric], seed: bool, line: str = "") -> str:
    """A job_stats file as long rows: ts, jobid, target, component, operation, metric, v (cumulative)."""
    present = [n for n in JOB_METRICS if n in cols]
    if not present:
        return ""

    def label(name: str) -> str:
        return f"ifNull(toString({_q(name)}), '')" if name in cols else "''"

    pairs = ", ".join(f"tuple({_lit(n)}, CAST({_q(n)} AS Nullable(Float64)))" for n in present)
    base = (f"SELECT toDateTime(timestamp, 'UTC') AS ts, {label('jobid')} AS jobid, {label('target')} AS target, "
            f"{label('component')} AS component, {label('operation')} AS operation, m.1 AS metric, m.2 AS v"
            + (f", {line} AS _line" if line else "") + f" FROM {rel} ARRAY JOIN [{pairs}] AS m WHERE m.2 IS NOT NULL")
    if line:
        return base
    # a job_stats entry's rows are long (one per counter): a rejected value is no row
    base += f" AND sample_value_ok({_lit(sample_quarantine.JOB_VALUE_AS)}, m.2, '')"
    if not seed:
        return base
    k = "jobid, target, component, operation, metric"
    return (f"SELECT last.1 AS ts, jobid, target, component, operation, metric, last.2 AS v FROM "
            f"(SELECT {k}, argMax(tuple(ts, v), ts) AS last FROM ({base}) GROUP BY {k})")


# what a counter_edge row keeps of each kind's rows: its series within the node (the columns that tell it apart,
# and its key), and the raw values that look back
_EDGE_SERIES = {"gpu": ("node, gpu", "[toString(gpu)]"), "node": ("node, series, device", "[series, device]"),
                "job": ("jobid, target, component, operation, metric", "[jobid, target, component, operation, metric]")}
_EDGE_VALUES = {"gpu": [c for c in GPU_COLUMNS if c in _SEEDED], "node": [c for c in NODE_COLUMNS if c in COUNTER_COLUMNS],
                "job": ["v"]}


def _edge_rows(kind: str, rel: str) -> str:
    """A kind's series as counter_edge sees them, one row each: node, key, ``first_ts`` (its first sample's, in
    the window or not: the counter_edge seed looks before it) and ``last``, the window's last sample with a
    counter value as a tuple (ts, the raw values; ts 0 and no value where the window has none). One grouping of
    the load's rows gives both: the seed reads ``first_ts`` before the seeds are staged, counter_edge reads
    ``last`` after the rows are in (a second grouping of the stage for the edges cost a 32-node day ~0.1 s of
    CPU: docs/benchmarks.md). Grouped by the series' own columns before the key is built (per row, the key
    costs as much as the insert)."""
    node = "''" if kind == "job" else "node"
    group, key = _EDGE_SERIES[kind]
    values = _EDGE_VALUES[kind]
    has_value = " OR ".join(f"{c} IS NOT NULL" for c in values)
    last = (f"argMaxIf(tuple(ts, {', '.join(f'CAST({c} AS Nullable(Float64))' for c in values)}), ts, "
            f"({has_value}) AND ts >= {{from_ts:DateTime('UTC')}} AND ts < {{to_ts:DateTime('UTC')}})")
    counts = ""
    if kind == "gpu":
        # and the load's counts of a GPU's rows (stage_window): its rows in the window, its distinct times (a GPU
        # and time given twice where the sum is less than the rows) and its rows with a rejected value. In this
        # grouping rather than a scan and set of its own (a statement's fixed cost, ~0.03-0.07 s of CPU a day:
        # docs/benchmarks.md, issue 50 round 10)
        v = "node != '' AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}"
        counts = f", countIf({v}) AS n, uniqExactIf(ts, {v}) AS k, countIf(_bad AND {v}) AS b"
    return (f"SELECT {node} AS node, {key} AS key, min(ts) AS first_ts, {last} AS last{counts} FROM ({rel}) "
            f"GROUP BY {group}")


def _edge_values(kind: str, series: str) -> str:
    """counter_edge's input from the series table (``_edge_rows``): node, key, ts and the map of raw values
    (NULLs left out; a series without a value in the window has an empty map, which counter_edge.sql drops)."""
    pairs = ", ".join(f"{_lit(c)}, last.{k + 2}" for k, c in enumerate(_EDGE_VALUES[kind]))
    return (f"SELECT node, key, last.1 AS ts, CAST(mapFilter((k, x) -> x IS NOT NULL, map({pairs})) AS "
            f"Map(LowCardinality(String), Float64)) AS value FROM {series}")


def _edge_seed(kind: str, series: str) -> str:
    """The seed rows counter_edge holds for the load's series (``series``: node, key, first_ts, the first sample's;
    sql/staging/counter_edge_seed.sql), in the kind's column order."""
    first = f"SELECT node, key, first_ts AS first FROM {series}"
    (seed,) = split_statements(sql_text("staging/counter_edge_seed.sql"))  # its comments left out first
    seed = seed.replace("{{first}}", first)

    def v(c: str) -> str:
        if c in _EDGE_VALUES[kind]:
            return f"if(mapContains(value, {_lit(c)}), value[{_lit(c)}], CAST(NULL AS Nullable(Float64))) AS {c}"
        return f"CAST(NULL AS Nullable(Float64)) AS {c}"

    if kind == "gpu":
        # OrZero: the engine may compute it before the kind filter, on other kinds' keys (rows it then drops)
        cols = ["node", "toUInt16OrZero(key[1]) AS gpu", "ts", "'' AS model_name", "'' AS uuid", "'' AS hpc_job",
                "'' AS pci_bus_id", *map(v, GPU_COLUMNS)]
    elif kind == "node":
        cols = ["node", "key[1] AS series", "key[2] AS device", "ts", *map(v, NODE_COLUMNS)]
    else:
        cols = ["ts", "key[1] AS jobid", "key[2] AS target", "key[3] AS component", "key[4] AS operation",
                "key[5] AS metric", v("v")]
    return f"SELECT {', '.join(cols)} FROM ({seed})"


# the threads of a statement that writes a sample table from the stage. One: the engine runs a window over
# series on several threads by scattering every row to a thread by its series' hash, and the threads' sorted
# streams then reach the MergeTree writer interleaved, which sorts the whole block again; on one thread the
# rows come out in the table's order and the writer skips its sort. gpu_sample's statement costs a third less
# CPU so (a 32-node day: 0.35 -> 0.22 s), node_sample's a sixth (docs/benchmarks.md, issue 50 round 6); the
# wall time of these statements grows where cores sit idle (at most the threads' share of them).
_TABLE_THREADS = 1

# the most staged rows one statement orders at once (a node's series are never split): ~250 MB of sorting a group
GROUP_ROWS = 500_000

# the tables written in one statement whatever the stage's size: gpu_pci's groups into a few rows a GPU, and
# xid_event's window orders only the rows of the GPUs with an Xid in the window, four narrow columns (at most a
# small part of what the stage itself holds). Per group of nodes each statement read the whole stage again: a
# 128-node day's gpu_pci 0.28 s of CPU in 3 statements, xid_event 0.30 s against 0.13 s in one
# (docs/benchmarks.md, issue 50 round 7)
_ONE_STATEMENT = {"gpu_pci", "xid_event"}

# a MIG instance's columns (sql/migrations/0019_gpu_instances.sql): the gauges an instance has
_MIG_COLUMNS = ["gr_engine_active", "sm_active", "tensor_active", "dram_active", "fb_used_mib", "fb_free_mib"]


def _mig_select(rel: str, cols: set[str], cat: dict[str, Metric], seed: bool, line: str = "") -> str:
    values = ", ".join(f"{_value(cols, cat, c)} AS {c}" for c in _MIG_COLUMNS)

    def label(name: str) -> str:
        return f"ifNull(toString({_q(name)}), '')" if name in cols else "''"

    base = (f"SELECT {_node_expr(cols)} AS node, toUInt16(gpu) AS gpu, toUInt16OrZero({label('GPU_I_ID')}) AS "
            f"gpu_instance, {label('GPU_I_PROFILE')} AS profile, toDateTime(timestamp, 'UTC') AS ts, "
            f"{label('UUID')} AS uuid, {label('hpc_job')} AS hpc_job, {values}"
            + (f", {line} AS _line" if line else "") + f" FROM {rel}")
    return base if line else sample_quarantine.checked(base, _MIG_COLUMNS)


# how the quarantine names a kind's series, and its model (for the power bound)
_SERIES = {"gpu": ("concat(node, ' gpu ', toString(gpu))", "model_name"),
           "node": ("concat(node, if(device != '', concat(' ', device), ''))", "''"),
           "job": ("concat('job ', jobid, ' ', target, ' ', operation)", "''"),
           "mig": ("concat(node, ' gpu ', toString(gpu), ' instance ', toString(gpu_instance))", "''")}


def _checks(kind: str) -> list[tuple[str, str]]:
    """The kind's checked columns, each with the column whose range it is held to (sample_value_ok)."""
    if kind == "job":
        return [("v", sample_quarantine.JOB_VALUE_AS)]
    return [(c, c) for c in {"gpu": GPU_COLUMNS, "node": NODE_COLUMNS, "mig": _MIG_COLUMNS}[kind]]


def _problem_select(kind: str, make, rel: str, cols: set[str], cat: dict[str, Metric], origin: str,
                    line: str) -> str:
    """One file's rejected values (sample_quarantine.problems), its metrics named as the exporter names them."""
    if kind == "job":
        columns = [("v", "metric", sample_quarantine.JOB_VALUE_AS)]
    else:
        grain = "node" if kind == "node" else "gpu"
        columns = []
        for c, _ in _checks(kind):
            names = [n for n, m in cat.items() if m.column == c and n in cols and m.grain == grain]
            if names:
                columns.append((c, _lit("/".join(names)), c))
    if not columns:
        return ""
    series, model = _SERIES[kind]
    return sample_quarantine.problems(make(rel, cols, cat, False, line=line), columns, series, model, _lit(origin))


def infer_step_s(paths: list[Path]) -> int:
    """The scrape step: the median gap between a file's distinct timestamps (60 when it cannot tell)."""
    for p in paths:
        ts = pl.read_parquet(p, columns=["timestamp"]).get_column("timestamp").unique().sort()
        d = ts.diff().dt.total_seconds().drop_nulls()
        if d.len():
            return max(1, int(d.median()))
    return 60


# each kind's text labels (etl/telemetry_insert.py's selects)
_LABELS = {"gpu": ("node", "model_name", "uuid", "hpc_job", "pci_bus_id"), "node": ("node", "series", "device"),
           "job": ("jobid", "target", "component", "operation", "metric"),
           "mig": ("node", "profile", "uuid", "hpc_job")}


class _Stage:
    """One kind's rows of a load, read from its files once into a temporary table in the engine's memory: the
    main files' rows with every value no reading already NULL and ``_bad`` set on such a row, then the seed
    rows (earlier files' last sample of each series, the counter edges) marked ``_seed``. Every statement of
    the load reads this table: before, each target table and each check parsed every file again (7-9 reads
    of a day's Parquet: docs/benchmarks.md, issue 50). The files are read again only where the stage says a
    row needs its file's line: a bad value, or a GPU and time given twice."""

    def __init__(self, wh, kind: str, files: list[str]):
        """The stage holding ``files``' rows (each a main file's: ``_flagged``; ``_file`` its number), in one
        statement: a statement's fixed cost (its analysis and pipeline, ~0.03-0.05 s of CPU whatever the rows) is
        paid once for a day's node families, not once a file (docs/benchmarks.md, issue 50 round 10). The files
        of a kind give the same columns in the same order and types (their selects cast them)."""
        self.wh = wh
        self.name = f"_telemetry_{kind}_{uuid.uuid4().hex}"
        self.series = ""  # keep_series's table
        # the labels as dictionaries: a day of 1,024 GPUs repeats each UUID and model name 1,440 times
        labels = "".join(f", toLowCardinality({c}) AS {c}" for c in _LABELS[kind])
        wh.command(f"CREATE TEMPORARY TABLE {self.name} ENGINE = Memory AS " + " UNION ALL ".join(
            f"SELECT * REPLACE (toUInt64(_line) AS _line, toUInt8(_bad) AS _bad{labels}), toUInt16({i}) AS _file, "
            f"toUInt8(0) AS _seed FROM ({select})" for i, select in enumerate(files)), settings=INTERPRETED)
        self.columns = [r[0] for r in wh.query_rows(f"DESCRIBE TABLE {self.name}")][:-4]

    def add(self, select: str, file: int = 0, seed: bool = False, params: dict | None = None) -> None:
        """Rows of ``select``: the stage's columns in order, then ``_line`` and ``_bad`` unless ``seed``."""
        names = ", ".join(map(_q, self.columns)) + ("" if seed else ", _line, _bad")
        self.wh.command(f"INSERT INTO {self.name} ({names}, _file, _seed) SELECT *, {file}, {int(seed)} FROM ({select})",
                        params, {**INSERT_SETTINGS, **INTERPRETED})

    def rows(self, kind: str, where: str = "") -> str:
        """The stage's rows as the SQL templates read them (a job_stats value rejected: no row)."""
        cond = [w for w in (where, "v IS NOT NULL" if kind == "job" else "") if w]
        return f"SELECT {', '.join(map(_q, self.columns))} FROM {self.name}" + (
            f" WHERE {' AND '.join(cond)}" if cond else "")

    def keep_series(self, kind: str, params: dict) -> str:
        """The load's series (its own rows: node, key as counter_edge keys them, ts of the first sample, the
        window's last counter values), kept once for the counter_edge seed, the seed files' check and the load's
        counter edges (each a scan and grouping of the stage otherwise)."""
        self.series = f"{self.name}_series"
        self.wh.command(f"CREATE TEMPORARY TABLE {self.series} ENGINE = Memory AS "
                        + _edge_rows(kind, f"SELECT * FROM {self.name} WHERE _seed = 0" if kind == "gpu"
                                     else self.rows(kind, "_seed = 0")), params, INTERPRETED)
        return self.series

    def drop(self) -> None:
        self.wh.command(f"DROP TEMPORARY TABLE IF EXISTS {self.name}")
        if self.series:
            self.wh.command(f"DROP TEMPORARY TABLE IF EXISTS {self.series}")


# the stage's ``_file`` of the seed rows from counter_edge (a load's files are numbered from 0)
_EDGE_FILE = 65535


def _file_last_ts(path: Path) -> datetime | None:
    """The latest ``timestamp`` of a Parquet file from its row groups' statistics (None where it has none). Read
    from the raw integers and the column's unit: pyarrow's own boxing of a timestamp statistic imports pandas,
    0.6-0.9 s of CPU on a load's first seed file (docs/benchmarks.md, issue 50 round 11)."""
    try:
        md = pq.read_metadata(path)
        i = md.schema.names.index("timestamp")
        unit = md.schema.column(i).logical_type
        if unit.type != "TIMESTAMP":  # a number or text, or INT96 (no unit): the file is read instead
            return None
        unit = json.loads(unit.to_json())
        per_s = _TIME_UNITS.get(unit.get("timeUnit"))
        stats = [md.row_group(g).column(i).statistics for g in range(md.num_row_groups)]
        if per_s is None or not stats or any(st is None or not st.has_min_max for st in stats):
            return None
        last = _EPOCH + timedelta(microseconds=max(st.max_raw for st in stats) * 1_000_000 // per_s)
        return last if unit.get("isAdjustedToUTC") else last.replace(tzinfo=None)
    except (OSError, ValueError, TypeError, KeyError):
        return None


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# a Parquet timestamp's units a second
_TIME_UNITS = {"milliseconds": 1_000, "microseconds": 1_000_000, "nanoseconds": 1_000_000_000}


def _seed_file_needed(wh, stage: _Stage, kind: str, path: Path, cols: set[str], cat: dict[str, Metric]) -> bool:
    """Whether a seed file must be read: not where counter_edge already gave every series of the load of its
    family a previous value at least as recent as the file's last sample (sql/staging/seed_file_unneeded.sql;
    a day loaded after the day before: that day's files were read for their own day's load, and reading them
    again for their last samples cost a fifth of the load: docs/benchmarks.md, issue 50), nor where the file's
    family has no counter (its seed rows carry no value: only counters and the Xid gauge look back). Asked
    after the counter_edge seed rows are staged and before any seed file's."""
    if kind == "node":
        metrics = sorted(c for c in cols if c in cat and cat[c].grain == "node")
        if not any(cat[c].column in COUNTER_COLUMNS for c in metrics):
            return False
        # a node series is its family's metric names, then its other labels (_node_select)
        family = f"splitByChar('|', key[1])[1] = {_lit(','.join(metrics))}"
    elif kind == "gpu":
        family = "1"
    else:
        return True
    last = _file_last_ts(path)
    if last is None:
        return True
    (sql,) = split_statements(sql_text("staging/seed_file_unneeded.sql"))
    sql = (sql.replace("{{stage}}", stage.name).replace("{{series}}", stage.series).replace("{{family}}", family)
           .replace("{{key}}", _EDGE_SERIES[kind][1]))
    return _count(wh, sql.rstrip(";"), {"edge_file": _EDGE_FILE, "file_last_ts": last}) > 0


def _flagged(kind: str, raw: str, cols: set[str], cat: dict[str, Metric]) -> str:
    """A file's rows (``raw``: as sent, with ``_line``) with each value no reading NULL, and ``_bad`` on a row
    that had one (sql/functions/sample_value_problem.sql). Only the columns the file has a metric for are
    checked (``cols``: its columns): the others are NULL on every row, which passes every check, and each
    check costs the engine's analysis of the statement ~1.5-4 ms of CPU whatever the rows (a GPU stage's
    statement, 18 checked columns: 0.068 s against 0.013 s without the checks; docs/benchmarks.md, issue 50
    round 10)."""
    model = "model_name" if kind == "gpu" else "''"
    grain = {"gpu": cat, "mig": cat, "node": {n: m for n, m in cat.items() if m.grain == "node"}}.get(kind)
    checks = [c for c, _ in _checks(kind) if grain is None or _value(cols, grain, c) != _NO_VALUE]
    if not checks:  # no metric of the kind's columns: nothing to reject
        return f"SELECT *, toUInt8(0) AS _bad FROM ({raw})"
    return sample_quarantine.checked(raw, checks, model, as_=dict(_checks(kind)), flag="_bad")


def _files_of(kind: str, paths: list[Path], cat: dict[str, Metric]) -> list[tuple[Path, set[str]]]:
    """The files of ``paths`` that hold this kind's metrics, with their columns."""
    out = []
    for p in paths:
        cols = set(pq.read_schema(p).names)
        if kind == "node" and not any(c in cat and cat[c].grain == "node" for c in cols):
            continue
        if kind == "job" and not any(c in JOB_METRICS for c in cols):
            continue
        out.append((p, cols))
    return out


def insert_window(wh, files: ExporterFiles, cat: dict[str, Metric], cluster: str, source: str,
                  window: tuple[datetime, datetime], step_s: int | None = None) -> dict:
    """Insert the window's rows of every table the files feed; returns the row counts inserted."""
    return write_window(stage_window(wh, files, cat, cluster, source, window, step_s=step_s))


@dataclass
class _StagedKind:
    """One kind's part of a staged window: its stage, its files and what was read of them already."""

    kind: str
    make: object  # the kind's select (_gpu_select, ...)
    tables: tuple[str, ...]
    stage: _Stage
    lined: list  # (relation, columns, origin, the expression of a row's line) of each main file
    seeds: list  # (path, columns) of the seed files holding this kind's metrics
    step: int
    counters: bool
    n: int = 0
    keys: int = 0
    rejected: list = field(default_factory=list)  # the files' rejected values (frames), stored with the rest


@dataclass
class StagedWindow:
    """A window's files read into the engine (``stage_window``), its tables not yet written (``write_window``).
    Nothing in it reads what an earlier window's load writes (counter_edge, the sample tables), so the next
    day's window is staged while this one's tables are written (etl/telemetry_load.py); its temporary tables
    are its handle's session's, so it is written on the handle that staged it."""

    wh: object
    cat: dict
    params: dict
    rel: _Relations
    kinds: list[_StagedKind] = field(default_factory=list)

    def drop(self) -> None:
        try:
            for k in self.kinds:
                k.stage.drop()
        finally:
            self.kinds.clear()
            self.rel.drop()


def stage_window(wh, files: ExporterFiles, cat: dict[str, Metric], cluster: str, source: str,
                 window: tuple[datetime, datetime], step_s: int | None = None) -> StagedWindow:
    """The window's files read once into a stage per kind, the values no reading checked and counted: the part
    of a load that reads only its own files (the series' previous readings, counter_edge and the seed files,
    are read by ``write_window``, once the window before is in)."""

    check_catalog(cat)
    params = {"cluster": cluster, "source": source, "from_ts": window[0], "to_ts": window[1]}
    in_window = "ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}"
    out = StagedWindow(wh, cat, params, _Relations(wh))
    try:
        for kind, main, seeds, make, tables in (
                ("gpu", files.gpu, files.gpu_seed, _gpu_select, ("gpu_sample", "xid_event", "gpu_pci")),
                ("node", files.node, files.node_seed, _node_select, ("node_sample",)),
                ("job", files.job, files.job_seed, _job_select, ("lustre_job_io",)),
                ("mig", files.mig, [], _mig_select, ("gpu_instance_sample",))):
            mains = _files_of(kind, main, cat)
            if not mains:
                continue
            rel = out.rel
            lined = []  # (file, columns, origin, the expression of a row's line)
            for p, cols in mains:
                origin, first = files.origin.get(p, (source, -1) if files.staged else (str(p), 1))
                r = rel.of(p)
                line = f"{rel.row_number()} + {first}" if first >= 0 and rel.row_number() != "0" else "0"
                lined.append((r, cols, origin, line))
            raw = [_flagged(kind, make(r, cols, cat, False, line=line), cols, cat) for r, cols, _, line in lined]
            stage = _Stage(wh, kind, raw)
            k = _StagedKind(kind, make, tables, stage, lined, _files_of(kind, seeds, cat),
                            step_s or infer_step_s([p for p, _ in mains]), kind in _EDGE_SERIES)
            out.kinds.append(k)
            if k.counters:  # a MIG instance has no counters: nothing to step
                stage.keep_series(kind, params)
            # the load's counts and whether any value was rejected, in one scan of the stage's own rows; a GPU's
            # are summed from its series table (_edge_rows: each GPU's distinct times, exact; a scan of their own
            # with a set of the day's 64-bit digests cost a statement more). A node's keys are its node_sample rows,
            # exact: each node's distinct times, summed (one set of the day's (node, time) pairs cost a 128-node
            # day 0.22 s of CPU, a small set per node 0.055 s: docs/benchmarks.md, issue 50 round 7)
            key = {"node": "ts", "job": "ts", "mig": "ts"}.get(kind)
            node = "node != ''" if kind != "job" else "1"
            n, keys, bad = wh.query_rows(
                f"SELECT sum(n), sum(k), sum(b) FROM {stage.series}" if kind == "gpu" else  # the series table's
                f"SELECT sum(n), sum(k), sum(b) FROM (SELECT countIf({node} AND v) AS n, uniqExactIf({key}, "
                f"{node} AND v) AS k, countIf(_bad AND v) AS b FROM (SELECT *, {in_window} AS v FROM {stage.name} "
                f"WHERE _seed = 0){' GROUP BY node' if kind == 'node' else ''})", params, INTERPRETED)[0]
            k.n, k.keys = int(n), int(keys)
            # values no exporter should send: NULL in the rows, quarantined; where the stage flagged one, each
            # file is read again for its rows' lines and raw values
            if bad:
                problems = [_problem_select(kind, make, r, cols, cat, origin, line) for r, cols, origin, line in lined]
                k.rejected.append(sample_quarantine.rejected_values(wh, [q for q in problems if q], params))
    except BaseException:
        out.drop()
        raise
    return out


def write_window(staged: StagedWindow) -> dict:
    """Write a staged window's tables (on the handle that staged it), then drop its stage; returns the row
    counts inserted. The counter steps read the series' previous readings here (counter_edge, the seed files):
    a window is written after the window before it is in."""
    wh, cat, params = staged.wh, staged.cat, staged.params
    counts = {"gpu_rows": 0, "node_rows": 0, "xid_events": 0, "quarantined": 0}
    try:
        for k in list(staged.kinds):
            kind, make, stage, lined = k.kind, k.make, k.stage, k.lined
            if k.counters:
                stage.add(_edge_seed(kind, stage.series), file=_EDGE_FILE, seed=True,
                          params={**params, "kind": kind})
            for p, cols in k.seeds:
                if _seed_file_needed(wh, stage, kind, p, cols, cat):
                    stage.add(make(staged.rel.of(p), cols, cat, True), seed=True)
            relation = stage.rows(kind)
            # the tables are written a group of nodes at a time where the stage is large: each statement orders
            # its rows by series, and a series is one node's, so a group's rows are its series whole (the
            # memory of the sorts is a group's, whatever the window: docs/benchmarks.md, issue 50)
            staged_rows = _count(wh, f"SELECT count() FROM {stage.name}", {})
            groups = 1 if kind == "job" else max(1, -(-staged_rows // GROUP_ROWS))
            for table in k.tables:
                (sql,) = split_statements(sql_text(f"staging/{table}.sql"))
                parts = 1 if table in _ONE_STATEMENT else groups
                for g in range(parts):
                    rows = stage.rows(kind, f"cityHash64(node) % {parts} = {g}") if parts > 1 else relation
                    # the sample tables are partitioned by day (migration 0023): a window of more than 100
                    # days (an OpenMetrics file of months) is one block of as many partitions
                    wh.command(sql.replace("{{input}}", rows), {**params, "step_s": k.step, "kind": kind},
                               {**INSERT_SETTINGS, **INTERPRETED, "max_partitions_per_insert_block": 0,
                                "max_threads": _TABLE_THREADS})
            # energy steps no GPU can draw, and a GPU and time given twice: quarantined with the values
            rejected = list(k.rejected)
            if kind == "gpu":
                rejected.append(sample_quarantine.rejected_energy_steps(wh, relation, {**params, "kind": kind}))
                counts["gpu_rows"] += k.n
                if k.keys < k.n:  # a GPU and time twice: the table keeps one of the rows; where they differ, say so
                    rejected.append(sample_quarantine.repeated_samples(wh, [
                        f"SELECT {_lit(origin)} AS source, toUInt64(_line) AS line_no, node, gpu, ts, "
                        f"cityHash64(tuple({', '.join(GPU_COLUMNS)})) AS v "
                        f"FROM ({make(r, cols, cat, False, line=line)})"
                        for r, cols, origin, line in lined], params))
            if rejected:
                counts["quarantined"] += sample_quarantine.store(wh, pl.concat(rejected, how="vertical_relaxed"))
            # the load's last raw value of each counter series, for the next load (after the rows: a load that
            # failed above leaves no edge, and its rerun steps as it would have)
            if k.counters:
                (sql,) = split_statements(sql_text("staging/counter_edge.sql"))
                wh.command(sql.replace("{{input}}", _edge_values(kind, stage.series)), {**params, "kind": kind},
                           {**INSERT_SETTINGS, **INTERPRETED})
            if kind == "gpu":
                counts["xid_events"] += _count(
                    wh, "SELECT count() FROM xid_event FINAL WHERE cluster = {cluster:String} AND source = "
                        "{source:String} AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}", params)
            elif kind == "job":
                # only loads that had job_stats report them (the counts of other loads keep their keys)
                counts["job_io_rows"] = counts.get("job_io_rows", 0) + _count(
                    wh, "SELECT count() FROM lustre_job_io FINAL WHERE cluster = {cluster:String} AND source = "
                        "{source:String} AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}", params)
            elif kind == "mig":
                counts["mig_rows"] = counts.get("mig_rows", 0) + k.n
            else:
                counts["node_rows"] += k.keys
            stage.drop()
            staged.kinds.remove(k)
    finally:
        staged.drop()
    return counts


def _count(wh, sql: str, params: dict) -> int:
    return int(wh.query_rows(sql, params, INTERPRETED)[0][0])


def insert_frames(wh, frames: dict[str, list[pl.DataFrame | None]], cat: dict[str, Metric], cluster: str,
                  source: str, window: tuple[datetime, datetime], step_s: int | None = None) -> dict:
    """A source's frames (``{"gpu": [...], "node": [...]}``) staged as exporter files and inserted."""

    with staged(wh) as stage:
        return insert_window(wh, stage_frames(stage, frames), cat, cluster, source, window, step_s=step_s)


def stage_frames(stage: Path, frames: dict[str, list[pl.DataFrame]]) -> ExporterFiles:
    """Frames of a source (exporter names, seed rows before the window included) -> staged exporter files."""
    out = ExporterFiles(staged=True)
    for kind, dfs in frames.items():
        for i, df in enumerate(dfs):
            if df is None or not df.height:
                continue
            p = stage / f"{kind}-{i}.parquet"
            df.write_parquet(p, compression="uncompressed", statistics=False)
            getattr(out, kind).append(p)
    return out
