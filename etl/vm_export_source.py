"""Telemetry from VictoriaMetrics' ``/api/v1/export`` (JSON lines of raw samples) for bulk backfill.

Each line is one series: ``{"metric": {"__name__": …, labels…}, "values": […], "timestamps": [ms…]}``. Read
with polars (``read_ndjson``, then explode: no loop per sample) into the long sample frame the OpenMetrics
source uses, then the same catalog, node names, counter steps and Xid events. Samples stay at the
resolution they were stored at.

A line that is not a series (not JSON, no ``__name__``, values and timestamps that are not numbers or do
not pair up, times outside 1970-2105) goes to ``etl_quarantine`` with its line number and a reason, and the
other lines load; polars reads the file in one pass while every line is well-formed, line by line otherwise.
(Before, one such line failed the whole load with a polars error; found by tests/test_fuzz_telemetry.py.)
"""

from __future__ import annotations

import io
import json
import tempfile
import urllib.parse
import urllib.request
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.lustre_jobs import JOB_METRICS
from ops_warehouse.etl.metric_catalog import POD_LABELS, catalog
from ops_warehouse.etl.openmetrics_source import (
    LABELS,
    QUARANTINE_SCHEMA,
    TS_MS_MAX,
    clip_raw,
    load_samples,
    quarantine,
    split_bad_samples,
)
from ops_warehouse.etl.prometheus_source import PromClient
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, telemetry_counts, window_text
from ops_warehouse.input_files import check_readable
from ops_warehouse.warehouse import redact

_SERIES_SCHEMA = {"metric": pl.String, **{k: pl.String for k in LABELS}, "values": pl.List(pl.Float64),
                  "timestamps": pl.List(pl.Int64), "_pods": pl.UInt32, "line_no": pl.UInt64}


def read_export(data: bytes | Path) -> pl.DataFrame:
    """Long frame (metric, label columns, timestamp, value) from export JSON lines (bad lines left out: see
    parse_export)."""
    return parse_export(data)[0].drop("line_no")


def parse_export(data: bytes | Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(samples: metric, label columns, timestamp, value, line_no; quarantine: line_no, reason, raw)."""
    data = bytes(data) if isinstance(data, (bytes, bytearray)) else Path(data).read_bytes()
    series = _series_fast(data)
    bad = pl.DataFrame(schema=QUARANTINE_SCHEMA)
    if series is None:
        series, bad = _series_by_line(data)
    samples = series.explode("values", "timestamps").select(
        "metric", *LABELS,
        pl.from_epoch("timestamps", "ms").dt.replace_time_zone("UTC").alias("timestamp"),
        pl.col("values").alias("value"),
        "_pods",
        "line_no",
    )
    return samples, bad


def _series_fast(data: bytes) -> pl.DataFrame | None:
    """One frame per series line when every line is a well-formed series (else None: take the line path)."""
    if not data.strip():
        return pl.DataFrame(schema=_SERIES_SCHEMA)
    if data.startswith(b"\n") or b"\n\n" in data or b"\r" in data:
        return None  # blank lines would shift the line numbers
    try:
        raw = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
    except Exception:  # polars raises several kinds here; the line path names the bad line
        return None
    schema = raw.schema
    if not (isinstance(schema.get("metric"), pl.Struct) and isinstance(schema.get("values"), pl.List)
            and isinstance(schema.get("timestamps"), pl.List)):
        return None
    fields = {f.name: f.dtype for f in schema["metric"].fields}
    if fields.get("__name__") != pl.String or any(fields.get(k, pl.String) != pl.String for k in LABELS):
        return None
    if not (schema["values"].inner.is_numeric() and schema["timestamps"].inner.is_integer()):
        return None
    m = pl.col("metric").struct
    df = raw.select(
        m.field("__name__").alias("metric"),
        *[(m.field(k) if k in fields else pl.lit(None, dtype=pl.String)).alias(k) for k in LABELS],
        pl.col("values").cast(pl.List(pl.Float64)), pl.col("timestamps").cast(pl.List(pl.Int64)),
        # Kubernetes workload labels the series carries (etl/openmetrics_source.py families())
        pl.sum_horizontal([(m.field(k).fill_null("") != "").cast(pl.UInt32) for k in POD_LABELS if k in fields]
                          or [pl.lit(0, dtype=pl.UInt32)]).cast(pl.UInt32).alias("_pods"),
    ).with_row_index("line_no", offset=1).with_columns(pl.col("line_no").cast(pl.UInt64))
    ok = df.select(
        pl.col("metric").is_not_null().all()
        & (pl.col("values").list.len() == pl.col("timestamps").list.len()).all()
        & (pl.col("values").list.eval(pl.element().is_null()).list.any().not_()).all()
        & pl.col("timestamps").list.eval(pl.element().is_between(0, TS_MS_MAX)).list.all().all()
    ).item()
    return df.select(list(_SERIES_SCHEMA)) if ok else None


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _series_by_line(data: bytes) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows, bad = [], []
    for n, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        text = line.decode("utf-8", "replace")
        try:
            rows.append({**_one_series(line), "line_no": n})
        except RecursionError:
            bad.append((n, "nested too deeply to be a series", clip_raw(text)))
        except (ValueError, TypeError) as e:
            bad.append((n, str(e)[:200] or type(e).__name__, clip_raw(text)))
    return (pl.DataFrame(rows, schema=_SERIES_SCHEMA),
            pl.DataFrame(bad, schema=QUARANTINE_SCHEMA, orient="row"))


def _one_series(line: bytes) -> dict:
    try:
        doc = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("invalid UTF-8") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metric"), dict):
        raise ValueError("not a series (no metric object)")
    labels, values, stamps = doc["metric"], doc.get("values"), doc.get("timestamps")
    if not isinstance(labels.get("__name__"), str):
        raise ValueError("series without __name__")
    if not isinstance(values, list) or not isinstance(stamps, list) or len(values) != len(stamps):
        raise ValueError("values and timestamps are not lists of the same length")
    if not all(_number(v) for v in values):
        raise ValueError("a value is not a number")
    if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= TS_MS_MAX for t in stamps):
        raise ValueError("a timestamp is not milliseconds between 1970 and 2105")
    try:
        floats = [float(v) for v in values]
    except OverflowError:
        raise ValueError("a value is beyond a float") from None
    out = {"metric": labels["__name__"], "values": floats, "timestamps": stamps,
           "_pods": sum(1 for k in POD_LABELS if labels.get(k) not in (None, ""))}
    for k in LABELS:
        v = labels.get(k)
        if v is not None and not isinstance(v, (str, int)):
            raise ValueError(f"label {k} is not text")
        out[k] = None if v is None else str(v)
    return out


def fetch_export(url: str, match: str, start: datetime, end: datetime, timeout_s: float = 600) -> Path:
    """Stream /api/v1/export for the window to a temporary file (it can be large)."""

    q = urllib.parse.urlencode({"match[]": match, "start": int(start.timestamp()), "end": int(end.timestamp())})
    client = PromClient(url, timeout_s=timeout_s)

    fd, tmp = tempfile.mkstemp(prefix="vm-export-", suffix=".jsonl")
    try:
        with urllib.request.urlopen(f"{client.url}/api/v1/export?{q}", timeout=timeout_s) as r, open(fd, "wb") as f:
            while chunk := r.read(1 << 20):
                f.write(chunk)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise OpsError(f"victoriametrics export from {client.url} failed: {getattr(e, 'reason', e)}") from None
    return Path(tmp)


@logged_load("telemetry", lambda a: f"vm-export:{redact(str(a['source']))} {window_text(a)}", telemetry_counts)
def load_vm_export(wh, source: str | Path, date_from: date, date_to: date, *, cluster: str | None = None) -> dict:
    """Load an export: a URL (fetched for the window plus the day before, to seed counters) or a file."""
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster_for_rows(wh, cluster)
    w0 = datetime.combine(date_from, datetime.min.time(), timezone.utc)
    window = (w0, datetime.combine(date_to, datetime.min.time(), timezone.utc) + timedelta(days=1))
    tmp = None
    if str(source).startswith(("http://", "https://")):
        match = "{__name__=~\"" + "|".join(sorted([*cat, *JOB_METRICS])) + "\"}"
        tmp = path = fetch_export(str(source), match, w0 - timedelta(days=1), window[1] - timedelta(milliseconds=1))
    else:
        path = Path(source)
        check_readable(path)
    try:
        samples, bad = parse_export(path)
        samples, bad_gpu = split_bad_samples(samples, cat)
        if bad_gpu.height:
            nos = set(bad_gpu.get_column("line_no").to_list())
            lines = {n: clip_raw(ln.decode("utf-8", "replace"))
                     for n, ln in enumerate(Path(path).read_bytes().split(b"\n"), start=1) if n in nos}
            bad_gpu = bad_gpu.unique("line_no", keep="first").with_columns(
                raw=pl.col("line_no").replace_strict(lines, default=None, return_dtype=pl.String))
            bad = pl.concat([bad, bad_gpu.select("line_no", "reason", "raw").cast(QUARANTINE_SCHEMA)])
    finally:
        if tmp:
            tmp.unlink(missing_ok=True)

    quarantine(wh, redact(str(source)) if tmp else str(Path(source).resolve()), bad)
    counts = load_samples(wh, samples.drop("line_no"), cat, cluster, f"vm-export:{source}", window)
    return {**counts, "quarantined": bad.height + counts.get("quarantined", 0)}
