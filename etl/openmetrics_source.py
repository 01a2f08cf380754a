"""Telemetry from Prometheus text exposition / OpenMetrics files: a dcgm-exporter scrape, the files promtool
backfills from, into the exporter-shaped frames of the file source. On the embedded warehouse the engine reads
and pivots the files itself (etl/openmetrics_engine.py: bounded memory, ~10x faster); on a server, polars
parses them here (no loop per sample) with the same rules (etl/openmetrics_lines.py).

Timestamps: OpenMetrics (a file ending ``# EOF``) gives seconds, the Prometheus text format milliseconds;
samples without one (a single scrape) take ``at``. Metrics the catalog does not know are skipped.

Bad input lines (not a sample, invalid UTF-8, a value or timestamp that is not a number, a GPU metric whose
``gpu`` label is not a GPU index, a value its integer column cannot hold) go to ``etl_quarantine`` with the
file's path, the line number and a reason; the rest of the file loads. (Before, a huge timestamp failed the
whole load, and a bad gpu label loaded as GPU 0; found by tests/test_fuzz_telemetry.py.)
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.etl.lustre_jobs import job_frame
from ops_warehouse.etl.metric_catalog import catalog
from ops_warehouse.etl.openmetrics_engine import load_files
from ops_warehouse.etl.openmetrics_lines import (  # noqa: F401 (QUARANTINE_SCHEMA, TS_MS_MAX, LABELS: the sources' names)
    LABELS,
    NODE_SERIES_LABELS,
    QUARANTINE_SCHEMA,
    TS_MS_MAX,
    clip_raw,
    fallback_ms,
    is_openmetrics,
    node_labels,
    parse_lines,
    split_bad_samples,
    superseded,
)
from ops_warehouse.etl.quarantine import CopyCounter
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, telemetry_counts, window_text
from ops_warehouse.etl.sacct_text import decode_lines
from ops_warehouse.etl.staging import load_frames, staged
from ops_warehouse.etl.telemetry_insert import insert_frames
from ops_warehouse.input_files import check_readable


def read_samples(path: Path, at: datetime | None = None) -> pl.DataFrame:
    """Long frame: metric, label columns, timestamp (UTC), value (bad lines left out: see parse_text)."""
    return parse_text(path, at)[0].drop("line_no", "_series")


def parse_text(path: Path, at: datetime | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(samples: metric, label columns, timestamp (UTC), value, line_no; quarantine: line_no, reason, raw)."""

    data = path.read_bytes()
    good, bad_utf8 = decode_lines(data, 1)  # lines of invalid UTF-8 are quarantined, as in sacct text
    lines = pl.DataFrame({"l": good}, schema={"l": pl.String}).with_row_index("line_no", offset=1)
    if b"\r" in data:
        lines = lines.with_columns(pl.col("l").str.strip_suffix("\r"))
    samples, quarantine = parse_lines(lines, is_openmetrics(good), fallback_ms(path, at))
    return samples, pl.concat([quarantine, pl.DataFrame(bad_utf8, schema=QUARANTINE_SCHEMA, orient="row")])


def quarantine(wh, source: str, q: pl.DataFrame) -> None:
    """Bad input records of a telemetry file into etl_quarantine (source = the file)."""

    if not q.height:
        return

    now = datetime.now(timezone.utc).replace(microsecond=0)
    q = CopyCounter().number(q)  # identical bad lines of one file stay apart
    load_frames(wh, {"etl_quarantine": q.select(
        pl.lit(source).alias("source"), "line_no", "reason", "raw", "occurrence",
        pl.lit(now).cast(pl.Datetime("ms", "UTC")).alias("loaded_at"))})


def families(samples: pl.DataFrame, cat) -> tuple[pl.DataFrame | None, pl.DataFrame | None, list[pl.DataFrame],
                                                  pl.DataFrame | None]:
    """(dcgm-shaped wide frame, nic-shaped wide frame, node-level frames one per metric, MIG instances' frame).

    A GPU's metric may come as several series that differ in their Kubernetes labels (dcgm-exporter in
    Kubernetes mode: one series per pod on the GPU, and for GPU_UTIL/FB_USED in per-process mode the
    device-level series beside per-pod shares): the row takes the series with the fewest workload labels
    (``_pods``), the device-level one, so a GPU is one row with the device's values. Otherwise, of repeated
    samples of one series at one time the last line counts. A NIC is its device and port; the node-level
    metrics keep their series labels (target, component) so several file systems add up per node. A MIG GPU
    instance's series (``GPU_I_ID``) are the instance's, not the GPU's: they make the fourth frame (one row per
    instance and time, with its profile and job label), and the GPU's row keeps the GPU's own series."""
    known = node_labels(samples.filter(pl.col("metric").is_in(list(cat))))
    if "_pods" not in known.columns:
        known = known.with_columns(_pods=pl.lit(0, dtype=pl.UInt32))
    gpu_names = [n for n, m in cat.items() if m.grain == "gpu"]
    nic_names = [n for n, m in cat.items() if m.grain == "node" and m.per_device]

    def wide(df: pl.DataFrame, index: list[str]) -> pl.DataFrame | None:
        if not df.height:
            return None
        index = [c for c in index if c in df.columns]
        df = (df.with_row_index("_row").sort(["_pods", "_row"], descending=[False, True])
              .unique(subset=[*index, "metric"], keep="first", maintain_order=True))
        return df.pivot(on="metric", index=index, values="value").sort(index, nulls_last=True)

    # a GPU sample needs its node and GPU index (the dummy block of some scrapes carries no labels)
    gpu_rows = known.filter(pl.col("metric").is_in(gpu_names), pl.col("Hostname").is_not_null(),
                            pl.col("gpu").is_not_null()).with_columns(
        pl.col(["UUID", "modelName", "pci_bus_id"]).fill_null(""))
    mig = None
    if "GPU_I_ID" in gpu_rows.columns:
        instance = pl.col("GPU_I_ID").fill_null("") != ""
        mig = wide(gpu_rows.filter(instance).with_columns(
            pl.col(c).fill_null("") if c in gpu_rows.columns else pl.lit("").alias(c) for c in ("GPU_I_PROFILE", "hpc_job")),
            ["timestamp", "Hostname", "gpu", "GPU_I_ID", "GPU_I_PROFILE", "UUID", "hpc_job"])
        gpu_rows = gpu_rows.filter(~instance)
    # pci_bus_id (dcgm-exporter >= 3.x) is one per GPU, like UUID: the kernel log names the GPU by it
    g = wide(gpu_rows, ["timestamp", "Hostname", "gpu", "UUID", "modelName", "pci_bus_id"])
    if g is not None and "hpc_job" in gpu_rows.columns:
        # dcgm-exporter's job label splits a GPU's series by job: the GPU's row keeps the job its samples carry
        job = (gpu_rows.filter(pl.col("hpc_job").is_not_null() & (pl.col("hpc_job") != ""))
               .group_by(["timestamp", "Hostname", "gpu"]).agg(pl.col("hpc_job").max()))
        g = g.join(job, on=["timestamp", "Hostname", "gpu"], how="left")
    n = wide(known.filter(pl.col("metric").is_in(nic_names), pl.col("instance").is_not_null()),
             ["timestamp", "instance", "device", "port"])
    scal = []
    for name, m in cat.items():
        if m.grain == "node" and not m.per_device:
            part = known.filter(pl.col("metric") == name, pl.col("instance").is_not_null())
            # the series labels the file has (a column of nulls says nothing and is left out)
            labels = [c for c in NODE_SERIES_LABELS
                      if c in part.columns and part.get_column(c).null_count() < part.height]
            f = wide(part, ["timestamp", "instance", *labels])
            if f is not None:
                scal.append(f)
    return g, n, scal, mig


@logged_load("telemetry", lambda a: "text:" + ",".join(Path(p).name for p in a["paths"][:3])
             + ("…" if len(a["paths"]) > 3 else "") + f" {window_text(a)}", telemetry_counts)
def load_text_files(wh, paths: list[Path], date_from: date, date_to: date, *, at: datetime | None = None,
                    cluster: str | None = None, instance: str | None = None) -> dict:
    """Load Prometheus text / OpenMetrics files for whole days. ``at``: the time of samples without a
    timestamp (a single scrape); ``instance``: the scrape target (``host:port``) for samples without an
    ``instance`` label, as Prometheus labels a target's samples (a file saved from an exporter's /metrics
    has none)."""
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster_for_rows(wh, cluster)
    for p in paths:
        check_readable(p)
    w0 = datetime.combine(date_from, datetime.min.time(), timezone.utc)
    window = (w0, datetime.combine(date_to, datetime.min.time(), timezone.utc) + timedelta(days=1))
    source = "text:" + ",".join(Path(p).name for p in paths[:3]) + ("…" if len(paths) > 3 else "")
    if wh.embedded:  # the engine reads the files itself: etl/openmetrics_engine.py
        with staged(wh) as stage:
            counts, bad, n_good = load_files(wh, stage, [Path(p) for p in paths], cat, cluster, source, window,
                                             at=at, instance=instance)
        for p, q in zip(paths, bad):
            quarantine(wh, str(Path(p).resolve()), q)
        if n_good:  # no sample loaded, no rollup changed (a file of only bad lines, the wrong file)
            refresh_hourly(wh, *window)
        return {**counts, "quarantined": sum(q.height for q in bad) + counts.get("quarantined", 0)}
    parts, n_bad = [], 0
    for p in paths:
        samples, q = parse_text(Path(p), at)
        samples, q_gpu = split_bad_samples(samples, cat)
        samples, q_twice = superseded(samples)
        q_gpu = pl.concat([q_gpu, q_twice])
        if q_gpu.height:
            lines = pl.DataFrame({"raw": Path(p).read_bytes().decode("utf-8", "replace").split("\n")})
            q_gpu = q_gpu.unique("line_no", keep="first").join(
                lines.with_row_index("line_no", offset=1).with_columns(pl.col("line_no").cast(pl.UInt64)),
                on="line_no", how="left")
            q_gpu = q_gpu.with_columns(raw=pl.Series([clip_raw(r or "") for r in q_gpu.get_column("raw")],
                                                     dtype=pl.String))
        else:
            q_gpu = q_gpu.with_columns(raw=pl.lit(None, dtype=pl.String))
        q = pl.concat([q.cast(QUARANTINE_SCHEMA), q_gpu.select("line_no", "reason", "raw").cast(QUARANTINE_SCHEMA)])
        quarantine(wh, str(Path(p).resolve()), q)
        n_bad += q.height
        if instance:
            samples = samples.with_columns(pl.col("instance").fill_null(instance))
        parts.append(samples.drop("line_no", "_series"))
    samples = pl.concat(parts, how="vertical_relaxed")
    counts = load_samples(wh, samples, cat, cluster, source, window)
    return {**counts, "quarantined": n_bad + counts.get("quarantined", 0)}


def load_samples(wh, samples: pl.DataFrame, cat, cluster: str, source: str, window: tuple[datetime, datetime]
                 ) -> dict:
    """A long sample frame (read_samples' shape) into the warehouse for the window; rollups refreshed."""

    g, n, scal, mig = families(samples, cat)
    counts = insert_frames(wh, {"gpu": [g], "node": [n, *scal], "job": [job_frame(samples)], "mig": [mig]}, cat,
                           cluster, source, window)
    if samples.height:  # no sample loaded, no rollup changed (a file of only bad lines, the wrong file)
        refresh_hourly(wh, *window)
    return counts
