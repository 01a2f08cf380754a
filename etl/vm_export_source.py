"""Telemetry from VictoriaMetrics' ``/api/v1/export`` (JSON lines of raw samples) for bulk backfill.

Each line is one series: ``{"metric": {"__name__": …, labels…}, "values": […], "timestamps": [ms…]}``. Read
with polars (``read_ndjson``, then explode: no loop per sample) into the long sample frame the OpenMetrics
source uses, then the same catalog, node names, counter steps and Xid events. Samples stay at the
resolution they were stored at.
"""

from __future__ import annotations

import io
import tempfile
import urllib.parse
import urllib.request
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from ops_warehouse import OpsError
from ops_warehouse.etl.metric_catalog import catalog
from ops_warehouse.etl.openmetrics_source import LABELS, load_samples


def read_export(data: bytes | Path) -> pl.DataFrame:
    """Long frame (metric, label columns, timestamp, value) from export JSON lines."""
    src = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    raw = pl.read_ndjson(src, infer_schema_length=None)
    if not raw.height:
        return pl.DataFrame(schema={"metric": pl.String, **{k: pl.String for k in LABELS},
                                    "timestamp": pl.Datetime("ms", "UTC"), "value": pl.Float64})
    m = raw.get_column("metric").struct
    fields = [f.name for f in raw.schema["metric"].fields]
    df = raw.select(
        m.field("__name__").alias("metric"),
        *[(m.field(k) if k in fields else pl.lit(None, dtype=pl.String)).alias(k) for k in LABELS],
        pl.col("values").cast(pl.List(pl.Float64)), pl.col("timestamps").cast(pl.List(pl.Int64)),
    ).explode("values", "timestamps")
    return df.select(
        "metric", *LABELS,
        pl.from_epoch("timestamps", "ms").dt.replace_time_zone("UTC").alias("timestamp"),
        pl.col("values").alias("value"),
    )


def fetch_export(url: str, match: str, start: datetime, end: datetime, timeout_s: float = 600) -> Path:
    """Stream /api/v1/export for the window to a temporary file (it can be large)."""
    from ops_warehouse.etl.prometheus_source import PromClient

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


def load_vm_export(wh, source: str | Path, date_from: date, date_to: date, *, cluster: str | None = None) -> dict:
    """Load an export: a URL (fetched for the window plus the day before, to seed counters) or a file."""
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster or wh.cfg.default_cluster
    w0 = datetime.combine(date_from, datetime.min.time(), timezone.utc)
    window = (w0, datetime.combine(date_to, datetime.min.time(), timezone.utc) + timedelta(days=1))
    tmp = None
    if str(source).startswith(("http://", "https://")):
        match = "{__name__=~\"" + "|".join(sorted(cat)) + "\"}"
        tmp = path = fetch_export(str(source), match, w0 - timedelta(days=1), window[1] - timedelta(milliseconds=1))
    else:
        path = Path(source)
        if not path.is_file():
            raise OpsError(f"cannot read {path}: no such file")
    try:
        samples = read_export(path)
    finally:
        if tmp:
            tmp.unlink(missing_ok=True)
    return load_samples(wh, samples, cat, cluster, f"vm-export:{source}", window)
