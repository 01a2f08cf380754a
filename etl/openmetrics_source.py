"""Telemetry from Prometheus text exposition / OpenMetrics files: a dcgm-exporter scrape, the files promtool
backfills from. Parsed with polars (no loop per sample) into the exporter-shaped frames of the file source.

Timestamps: OpenMetrics (a file ending ``# EOF``) gives seconds, the Prometheus text format milliseconds;
samples without one (a single scrape) take ``at``. Metrics the catalog does not know are skipped.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from ops_warehouse import OpsError
from ops_warehouse.etl.metric_catalog import catalog
from ops_warehouse.etl.telemetry_insert import insert_frames

LABELS = ("Hostname", "instance", "gpu", "UUID", "modelName", "device", "port", "fs")
_SAMPLE = r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+(\S+))?\s*$"


def read_samples(path: Path, at: datetime | None = None) -> pl.DataFrame:
    """Long frame: metric, label columns, timestamp (UTC), value."""
    text = path.read_text(encoding="utf-8", errors="replace")
    openmetrics = text.rstrip().endswith("# EOF")
    lines = pl.DataFrame({"l": text.splitlines()}).filter(~pl.col("l").str.starts_with("#") & (pl.col("l") != ""))
    g = lines.select(pl.col("l").str.extract_groups(_SAMPLE).alias("g")).unnest("g")
    g = g.rename({"1": "metric", "2": "labels", "3": "value", "4": "ts"}).filter(pl.col("metric").is_not_null())
    fallback = int((at or datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)).timestamp() * 1000)
    ts_ms = pl.col("ts").cast(pl.Float64, strict=False) * (1000 if openmetrics else 1)
    return g.select(
        "metric",
        *[pl.col("labels").str.extract(rf'[{{,]{name}="([^"]*)"', 1).alias(name) for name in LABELS],
        pl.from_epoch(ts_ms.fill_null(fallback).cast(pl.Int64), "ms").dt.replace_time_zone("UTC").alias("timestamp"),
        pl.col("value").cast(pl.Float64, strict=False).alias("value"),
    )


def families(samples: pl.DataFrame, cat) -> tuple[pl.DataFrame | None, pl.DataFrame | None, list[pl.DataFrame]]:
    """(dcgm-shaped wide frame, nic-shaped wide frame, node-level frames one per metric)."""
    known = samples.filter(pl.col("metric").is_in(list(cat)))
    gpu_names = [n for n, m in cat.items() if m.grain == "gpu"]
    nic_names = [n for n, m in cat.items() if m.grain == "node" and m.per_device]

    def wide(df: pl.DataFrame, index: list[str]) -> pl.DataFrame | None:
        if not df.height:
            return None
        df = df.unique(subset=[*index, "metric"], keep="last")
        return df.pivot(on="metric", index=index, values="value")

    # a GPU sample needs its node and GPU index (the dummy block of some scrapes carries no labels)
    g = wide(known.filter(pl.col("metric").is_in(gpu_names), pl.col("Hostname").is_not_null(),
                          pl.col("gpu").is_not_null()).with_columns(
        pl.col(["UUID", "modelName"]).fill_null("")), ["timestamp", "Hostname", "gpu", "UUID", "modelName"])
    n = wide(known.filter(pl.col("metric").is_in(nic_names), pl.col("instance").is_not_null()),
             ["timestamp", "instance", "device"])
    scal = []
    for name, m in cat.items():
        if m.grain == "node" and not m.per_device:
            f = wide(known.filter(pl.col("metric") == name, pl.col("instance").is_not_null()), ["timestamp", "instance"])
            if f is not None:
                scal.append(f)
    return g, n, scal


def load_text_files(wh, paths: list[Path], date_from: date, date_to: date, *, at: datetime | None = None,
                    cluster: str | None = None) -> dict:
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster or wh.cfg.default_cluster
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise OpsError(f"cannot read {missing[0]}: no such file")
    samples = pl.concat([read_samples(Path(p), at) for p in paths], how="vertical_relaxed")
    w0 = datetime.combine(date_from, datetime.min.time(), timezone.utc)
    window = (w0, datetime.combine(date_to, datetime.min.time(), timezone.utc) + timedelta(days=1))
    source = "text:" + ",".join(Path(p).name for p in paths[:3]) + ("…" if len(paths) > 3 else "")
    return load_samples(wh, samples, cat, cluster, source, window)


def load_samples(wh, samples: pl.DataFrame, cat, cluster: str, source: str, window: tuple[datetime, datetime]
                 ) -> dict:
    """A long sample frame (read_samples' shape) into the warehouse for the window; rollups refreshed."""
    from ops_warehouse.etl.staging import refresh_hourly

    g, n, scal = families(samples, cat)
    counts = insert_frames(wh, {"gpu": [g], "node": [n, *scal]}, cat, cluster, source, window)
    refresh_hourly(wh, *window)
    return counts
