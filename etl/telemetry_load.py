"""Telemetry day files into the warehouse: ``<root>/<family>/<YYYY-MM-DD>.parquet`` (or ``.csv``).

The families are the exporters' (``dcgm`` for dcgm-exporter, ``nic``, ``lustre``, ``ipmi`` and any other
folder of node-level metrics the catalog knows; a folder whose files have a ``jobid`` column holds Lustre
job_stats, loaded into ``lustre_job_io``: etl/lustre_jobs.py), each file exporter-shaped: a ``timestamp`` column, the
exporter's labels and one column per metric under the exporter's name (the generator writes this; so does a
VictoriaMetrics or Prometheus export turned wide). The engine reads the files itself
(etl/telemetry_insert.py, sql/staging/): a day at a time, the day before seeding its counters, then the hourly
rollups of the whole load once.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.etl.metric_catalog import catalog
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, telemetry_counts, window_text
from ops_warehouse.etl.staging import staged
from ops_warehouse.etl.telemetry_insert import ExporterFiles, insert_window

GPU_FAMILY = "dcgm"
# the most days of samples loaded before their grains are refreshed (what one refresh holds in memory)
REFRESH_DAYS = 7
_LABELS_AS_TEXT = ("gpu", "UUID", "hpc_job", "device", "modelName", "Hostname", "instance", "port", "fs", "target", "component",
                   "jobid", "operation")


def _day_file(root: Path, family: str, d: date) -> Path | None:
    for ext in ("parquet", "csv"):
        p = root / family / f"{d:%Y-%m-%d}.{ext}"
        if p.is_file():
            return p
    return None


def _as_parquet(p: Path, stage: Path) -> Path:
    """CSV day files are converted once (labels stay text); Parquet is read where it lies."""
    if p.suffix != ".csv":
        return p
    df = pl.read_csv(p, infer_schema_length=10000, schema_overrides={c: pl.String for c in _LABELS_AS_TEXT})
    out = stage / f"{p.parent.name}-{p.stem}.parquet"
    df.with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC", time_unit="ms")).write_parquet(
        out, compression="uncompressed", statistics=False)
    return out


def _check_whole(p: Path) -> None:
    """A Parquet day file cut short (a copy in progress, a full disk) has no footer: say which file, in one
    line, before anything of the day is loaded."""
    if p.suffix != ".parquet":
        return
    try:
        pq.read_metadata(p)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OpsError(f"cannot read {p}: not a whole Parquet file ({first})") from None


@logged_load("telemetry", lambda a: f"file:{a['root']} {window_text(a)}", telemetry_counts)
def load_parquet_dir(wh, root: str | Path, date_from: date, date_to: date, *, cluster: str | None = None,
                     progress=None, refresh_days: int = REFRESH_DAYS) -> dict:
    """Load the exporter day files of whole days ``date_from`` .. ``date_to``, refreshing the grains after at
    most ``refresh_days`` days (1: after each day, as before 2026-12; bench/bench_telemetry_refresh.py)."""

    root = Path(root)
    if (root / "telemetry").is_dir():
        root = root / "telemetry"
    if not root.is_dir():
        raise OpsError(f"no telemetry folder at {root}")
    families = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "openmetrics")
    if not families:  # e.g. the dcgm/ folder itself given: nothing would load, and nothing would say so
        raise OpsError(f"{root}: no telemetry family folders in it (dcgm/, nic/, ipmi/, lustre/ with one "
                       "<YYYY-MM-DD>.parquet or .csv a day): give the folder above them")
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster_for_rows(wh, cluster)
    source = f"file:{root}"
    counts = {"gpu_rows": 0, "node_rows": 0, "xid_events": 0, "days": 0}
    days = (date_to - date_from).days + 1
    unrefreshed: datetime | None = None  # the first day whose samples are in but not yet in the grains
    with staged(wh) as stage:
        for k in range(days):
            d = date_from + timedelta(days=k)
            w0 = datetime.combine(d, datetime.min.time(), timezone.utc)
            files = ExporterFiles()
            for fam in families:
                for day, seed in ((d, False), (d - timedelta(days=1), True)):
                    p = _day_file(root, fam, day)
                    if p is None:
                        continue
                    _check_whole(p)
                    csv, p = p, _as_parquet(p, stage)
                    if p != csv:  # its bad values are quarantined by the CSV's own path and line (a header first)
                        files.origin[p] = (str(csv), 2)
                    kind = "gpu" if fam == GPU_FAMILY else "job" if "jobid" in pq.read_schema(p).names else "node"
                    getattr(files, f"{kind}_seed" if seed else kind).append(p)
            c = insert_window(wh, files, cat, cluster, source, (w0, w0 + timedelta(days=1)))
            for key, n in c.items():
                counts[key] = counts.get(key, 0) + n
            counts["days"] += 1
            for p in stage.iterdir():  # converted CSV of this day and the day before
                p.unlink()
            unrefreshed = unrefreshed or w0
            # the hourly rollups and the grains of the days loaded so far, in one refresh: at the end, when a
            # report or notebook waits for the warehouse (it gets it whole, grains and samples agreeing), and
            # every REFRESH_DAYS days (a refresh of several days costs little more than one of a day: most of
            # it reads the runs' samples whatever the window; measured in docs/benchmarks.md)
            end = w0 + timedelta(days=1)
            if k == days - 1 or wh.others_waiting() or (end - unrefreshed).days >= refresh_days:
                refresh_hourly(wh, unrefreshed, end)
                unrefreshed = None
                wh.between_steps()
            if progress:
                progress(k + 1, days)
    return counts
