"""Telemetry into the warehouse: exporter samples -> gpu_sample / node_sample / xid_event rows.

Sources hand over frames with a ``timestamp`` column, the exporter's label columns and one column per metric
named as the exporter names it (the generator's Parquet files are this shape). The catalog
(etl/metric_catalog.py) maps names to warehouse columns; node names are normalized to what Slurm uses
(``Hostname``, else ``instance`` without its port, without the DNS domain); counters become the amount in
each step with resets handled (a drop means the counter restarted from zero); each change of the Xid gauge
to a non-zero value is an event.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from ops_warehouse import OpsError
from ops_warehouse.etl.metric_catalog import GPU_COLUMNS, NODE_MAP_COLUMNS, NODE_SCALAR_COLUMNS, Metric, catalog

TS = pl.Datetime("ms", "UTC")


def node_name(df: pl.DataFrame) -> pl.Expr:
    src = pl.col("Hostname") if "Hostname" in df.columns else pl.col("instance")
    return src.str.replace(r":\d+$", "").str.split(".").list.first()


def _steps(value: pl.Expr, keys: list[str]) -> pl.Expr:
    """Counter -> amount in the step ending at this sample; a drop is a restart from zero."""
    prev = value.shift(1).over(keys)
    d = value - prev
    return pl.when(prev.is_null()).then(None).when(d < 0).then(value).otherwise(d)


def _infer_step_s(df: pl.DataFrame, keys: list[str]) -> int:
    d = df.sort([*keys, "timestamp"]).select(
        (pl.col("timestamp").diff().over(keys).dt.total_seconds()).alias("d")).get_column("d").drop_nulls()
    return int(d.median()) if d.len() else 60


def gpu_frames(df: pl.DataFrame, cat: dict[str, Metric], cluster: str, source: str, window: tuple[datetime, datetime]
               ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(gpu_sample rows, xid_event rows) from a wide dcgm frame; rows before the window only seed counters."""
    present = {name: m for name, m in cat.items() if m.grain == "gpu" and name in df.columns}
    keys = ["node", "gpu"]
    base = df.with_columns(node=node_name(df), gpu=pl.col("gpu").cast(pl.UInt16),
                           timestamp=pl.col("timestamp").cast(TS)).sort([*keys, "timestamp"])
    step_s = _infer_step_s(base, keys)
    cols = {}
    for name, m in present.items():
        v = pl.col(name).cast(pl.Float64) * m.scale
        cols[m.column] = _steps(v, keys) if m.kind == "counter" else v
    out = base.select(
        pl.lit(cluster).alias("cluster"), "node", "gpu", pl.col("timestamp").alias("ts"), pl.lit(step_s).alias("step_s"),
        (pl.col("modelName") if "modelName" in base.columns else pl.lit("")).alias("model_name"),
        (pl.col("UUID") if "UUID" in base.columns else pl.lit("")).alias("uuid"),
        *[cols.get(c, pl.lit(None, dtype=pl.Float64)).alias(c) for c in GPU_COLUMNS],
        pl.lit(source).alias("source"),
    )
    xid_prev = pl.col("xid_last").shift(1).over(keys)
    xids = out.filter((pl.col("xid_last") > 0) & ((xid_prev != pl.col("xid_last")) | xid_prev.is_null())).select(
        "cluster", "node", "gpu", "ts", pl.col("xid_last").cast(pl.UInt32).alias("xid"), "source")
    w0, w1 = window
    inside = (pl.col("ts") >= w0) & (pl.col("ts") < w1)
    # an Xid already showing at the first sample of the window started before it: seen from the earlier rows
    return out.filter(inside), xids.filter(inside)


def node_frames(nic: pl.DataFrame | None, scalars: list[pl.DataFrame], cat: dict[str, Metric], cluster: str,
                source: str, window: tuple[datetime, datetime]) -> pl.DataFrame:
    """node_sample rows from the nic family (per device) and node-level families (lustre, ipmi)."""
    parts = []
    keys = ["node"]
    if nic is not None and nic.height:
        n = nic.with_columns(node=node_name(nic), timestamp=pl.col("timestamp").cast(TS)).sort(
            "node", "device", "timestamp")
        step_s = _infer_step_s(n, ["node", "device"])
        per = []
        for name, m in cat.items():
            if m.grain == "node" and m.per_device and name in n.columns:
                per.append(_steps(pl.col(name).cast(pl.Float64) * m.scale, ["node", "device"]).alias(m.column))
        n = n.select("node", "device", "timestamp", *per)
        agg = n.group_by("node", "timestamp").agg(
            pl.col("device").alias("nic_device"), *[pl.col(c) for c in NODE_MAP_COLUMNS if c in n.columns])
        parts.append(agg.with_columns(step_s=pl.lit(step_s)))
    for fam in scalars:
        if fam is None or not fam.height:
            continue
        f = fam.with_columns(node=node_name(fam), timestamp=pl.col("timestamp").cast(TS)).sort("node", "timestamp")
        sel = []
        for name, m in cat.items():
            if m.grain == "node" and not m.per_device and name in f.columns:
                v = pl.col(name).cast(pl.Float64) * m.scale
                sel.append((_steps(v, keys) if m.kind == "counter" else v).alias(m.column))
        if sel:
            parts.append(f.select("node", "timestamp", *sel))
    if not parts:
        return pl.DataFrame()
    out = parts[0]
    for p in parts[1:]:
        out = out.join(p, on=["node", "timestamp"], how="full", coalesce=True)
    lists = {"nic_device": pl.List(pl.String), **{c: pl.List(pl.Float64) for c in NODE_MAP_COLUMNS}}
    w0, w1 = window
    out = out.select(
        pl.lit(cluster).alias("cluster"), "node", pl.col("timestamp").alias("ts"),
        (pl.col("step_s") if "step_s" in out.columns else pl.lit(None)).cast(pl.UInt32).alias("step_s"),
        *[(pl.col(c) if c in out.columns else pl.lit([], dtype=t)).cast(t).fill_null(pl.lit([], dtype=t)).alias(c)
          for c, t in lists.items()],
        *[(pl.col(c) if c in out.columns else pl.lit(None, dtype=pl.Float64)).alias(c) for c in NODE_SCALAR_COLUMNS],
        pl.lit(source).alias("source"),
    )
    return out.filter((pl.col("ts") >= w0) & (pl.col("ts") < w1))


def _day_files(root: Path, family: str, d0: date, d1: date) -> list[Path]:
    """The family's files for days d0..d1: Parquet, or CSV with the same columns."""
    files = []
    d = d0
    while d <= d1:
        for ext in ("parquet", "csv"):
            p = root / family / f"{d:%Y-%m-%d}.{ext}"
            if p.is_file():
                files.append(p)
                break
        d += timedelta(days=1)
    return files


def _read(p: Path) -> pl.DataFrame:
    if p.suffix == ".csv":
        df = pl.read_csv(p, infer_schema_length=10000, schema_overrides={
            c: pl.String for c in ("gpu", "UUID", "device", "modelName", "Hostname", "instance", "port", "fs")})
        return df.with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC", time_unit="ms"))
    return pl.read_parquet(p)


def load_parquet_dir(wh, root: str | Path, date_from: date, date_to: date, *, cluster: str | None = None,
                     progress=None) -> dict:
    """Load exporter files (``<root>/<family>/<YYYY-MM-DD>.parquet`` or ``.csv``: dcgm, nic, lustre, ipmi) for
    whole days ``date_from`` .. ``date_to``, a day at a time. The day before seeds the counters."""
    from ops_warehouse.etl.staging import load_frames, refresh_hourly

    root = Path(root)
    if (root / "telemetry").is_dir():
        root = root / "telemetry"
    if not root.is_dir():
        raise OpsError(f"no telemetry folder at {root}")
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster or wh.cfg.default_cluster
    counts = {"gpu_rows": 0, "node_rows": 0, "xid_events": 0, "days": 0}
    days = (date_to - date_from).days + 1
    for k in range(days):
        d = date_from + timedelta(days=k)
        w0 = datetime.combine(d, datetime.min.time(), timezone.utc)
        window = (w0, w0 + timedelta(days=1))
        read = lambda fam: [_read(p) for p in _day_files(root, fam, d - timedelta(days=1), d)]  # noqa: E731
        dcgm = read("dcgm")
        source = f"file:{root}"
        frames = {}
        if dcgm:
            g, x = gpu_frames(pl.concat(dcgm, how="diagonal_relaxed"), cat, cluster, source, window)
            frames["gpu_sample"], frames["xid_event"] = g, x
        nic = read("nic")
        scal = [pl.concat(f, how="diagonal_relaxed") for f in (read("lustre"), read("ipmi")) if f]
        nf = node_frames(pl.concat(nic, how="diagonal_relaxed") if nic else None, scal, cat, cluster, source, window)
        if nf.height:
            frames["node_sample"] = nf
        load_frames(wh, frames)
        refresh_hourly(wh, *window)
        counts["gpu_rows"] += frames.get("gpu_sample", pl.DataFrame()).height
        counts["node_rows"] += frames.get("node_sample", pl.DataFrame()).height
        counts["xid_events"] += frames.get("xid_event", pl.DataFrame()).height
        counts["days"] += 1
        if progress:
            progress(k + 1, days)
    return counts
