"""VictoriaMetrics' bulk read for backfills: ``/api/v1/export`` streams a node batch's raw samples to a file
on disk, and the engine downsamples them to the load's step (sql/staging/vm_export_steps.sql: the rules of
query_range's avg_over_time / last_over_time / max_over_time), giving the same answers (etl/prom_matrix.py's
Matrix, a metric at a time) the query_range path decodes, so both paths make the same frames and tables.

Why: a query_range day costs the server a rollup per metric and batch and ~550 MB of JSON for 1,000 GPUs; the
export is the raw samples, read back as stored, and the engine's JSONEachRow reader parses them without a
Python object per sample. The file is read by the engine from disk (nothing of it is held in Python), one
node batch at a time, so memory holds a batch, not the day (the first export path read the day's 414 MB of
JSON lines into polars and passed 4 GB).

Detection (``is_victoriametrics``): one GET of ``/api/v1/export`` for a metric name no server has. Only
VictoriaMetrics serves that path (200, an empty body); Prometheus answers 404. Its
``/api/v1/status/buildinfo`` is no help: Debian's build answers ``{"data":{}}`` with no version. A server
that cannot be reached, or answers anything else, is taken as not VictoriaMetrics: the query_range path then
serves it (with its retries and its one-line error).
"""

from __future__ import annotations

import http.client
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import polars as pl
from ops_warehouse.etl.lustre_jobs import JOB_METRICS
from ops_warehouse.etl.metric_catalog import Metric
from ops_warehouse.etl.prom_matrix import Matrix
from ops_warehouse.sqlfiles import split_statements, sql_text

_PROBE = '{__name__="ops_warehouse_probe_no_such_metric"}'
_STRUCTURE = "metric Map(String, String), `values` Array(Float64), timestamps Array(Int64)"


def is_victoriametrics(url: str, timeout_s: float = 10) -> bool:
    """Whether the server at ``url`` (no trailing slash) serves VictoriaMetrics' export API (see above)."""
    q = urllib.parse.urlencode({"match[]": _PROBE, "start": 0, "end": 1})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/export?{q}", timeout=timeout_s) as r:
            head = r.read(64)
            return r.status == 200 and (not head.strip() or head.startswith(b'{"metric":'))
    except (OSError, ValueError, http.client.HTTPException):  # refused, 404, dropped line, a bad URL
        return False


def export_params(selectors: list[str], lo_ms: int, hi_ms: int) -> dict:
    """The export request's parameters: the series of ``selectors``, samples in (lo_ms, hi_ms] (the engine
    cuts exactly; the server's bounds are inclusive, so asking from lo_ms + 1 ms loses nothing)."""
    return {"match[]": selectors, "start": f"{(lo_ms + 1) / 1000:.3f}", "end": f"{hi_ms / 1000:.3f}"}


def export_matrices(wh, path: Path, cat: dict[str, Metric], step_s: int, lo_ms: int, hi_ms: int) -> dict[str, Matrix]:
    """The staged export at ``path`` downsampled to ``step_s`` by the engine: a Matrix per metric, its points
    stamped with each step's end (a whole second) as query_range's are."""
    (sql,) = split_statements(sql_text("staging/vm_export_steps.sql"))
    sql = sql.replace("{{input}}", f"file({{path:String}}, JSONEachRow, '{_STRUCTURE}')").rstrip().rstrip(";")
    # small blocks: every array expression of a block is held at once (a block of 65,536 lines is a whole
    # batch: 2.2 s and +570 MB for 16 nodes' 50 MB export; 64 lines: 1.3 s, +370 MB); pread, not mmap: the
    # mapped file would count in the process's memory
    sql = (f"SELECT name, label_names, label_values, ts_s, vals FROM ({sql}) "
           "SETTINGS max_block_size = 64, storage_file_read_method = 'pread'")
    df = pl.from_arrow(wh.query_arrow(sql, {
        "path": str(Path(path).resolve()), "step_ms": step_s * 1000, "lo_ms": lo_ms, "hi_ms": hi_ms,
        "last_names": sorted({*JOB_METRICS, *(n for n, m in cat.items() if m.kind == "counter")}),
        "max_names": sorted(n for n, m in cat.items() if m.kind != "counter" and m.column == "xid_last")}))
    out: dict[str, Matrix] = {}
    if not df.height:
        return out
    # the rows come sorted by name: each metric is a run of rows and of points (views, no copies per metric)
    counts = df.get_column("ts_s").list.len().to_numpy().astype(np.int64)
    ts_s = df.get_column("ts_s").explode().to_numpy().astype(np.int64)
    vals = df.get_column("vals").explode().to_numpy().astype(np.float64)
    labels = [dict(zip(k, v)) for k, v in  # a loop per series, none per sample
              zip(df.get_column("label_names").to_list(), df.get_column("label_values").to_list())]
    first_point = np.concatenate([[0], np.cumsum(counts)])
    names = df.get_column("name")
    starts = np.flatnonzero(np.concatenate([[True], (names[1:] != names[:-1]).to_numpy()]))
    for a, b in zip(starts, [*starts[1:], df.height]):
        p0, p1 = first_point[a], first_point[b]
        out[names[int(a)]] = Matrix(labels[a:b], counts[a:b], ts_s[p0:p1], vals[p0:p1])
    return out

