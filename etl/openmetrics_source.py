"""Telemetry from Prometheus text exposition / OpenMetrics files: a dcgm-exporter scrape, the files promtool
backfills from. Parsed with polars (no loop per sample) into the exporter-shaped frames of the file source.

Timestamps: OpenMetrics (a file ending ``# EOF``) gives seconds, the Prometheus text format milliseconds;
samples without one (a single scrape) take ``at``. Metrics the catalog does not know are skipped.

Bad input lines (not a sample, invalid UTF-8, a value or timestamp that is not a number, a GPU metric whose
``gpu`` label is not a GPU index, a value its integer column cannot hold) go to ``etl_quarantine`` with the
file's path, the line number and a reason; the rest of the file loads. (Before, a huge timestamp failed the
whole load, and a bad gpu label loaded as GPU 0; found by tests/test_fuzz_telemetry.py.)
"""

from __future__ import annotations

import hashlib
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.etl.frames import fmt, on_rows
from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.etl.lustre_jobs import job_frame
from ops_warehouse.etl.metric_catalog import POD_LABELS, catalog
from ops_warehouse.etl.quarantine import CopyCounter
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, telemetry_counts, window_text
from ops_warehouse.etl.sacct_text import decode_lines
from ops_warehouse.etl.staging import load_frames
from ops_warehouse.etl.telemetry_insert import insert_frames
from ops_warehouse.input_files import check_readable

# labels kept: node and GPU identity, the NIC (device, port), Lustre's target/component (client llite stats,
# job_stats with jobid and operation); "fs" is what files of older generator versions carry
LABELS = ("Hostname", "instance", "gpu", "UUID", "modelName", "hpc_job", "device", "port", "fs", "target",
          "component", "jobid", "operation", "pci_bus_id",
          # other spellings and places of the node and the GPU (node_labels), and a MIG instance's labels
          "hostname", "uuid", "node", "GPU_I_ID", "GPU_I_PROFILE")
# the labels that set apart the series of one node-level metric (summed per node: several file systems)
NODE_SERIES_LABELS = ("target", "fs", "component")
# how many Kubernetes workload labels a series carries, non-empty (POD_LABELS): the GPU row takes the fewest
_POD_COUNT = r'[{,](?:' + "|".join(POD_LABELS) + r')="(?:[^"\\]|\\.)'
# label values are quoted and may hold any character, '}' and escaped quotes included
_VALUE = r'"(?:[^"\\]+|\\.)*"'
_SAMPLE = rf"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{{(?:[^}}\"]+|{_VALUE})*\}})?\s+(\S+)(?:\s+(\S+))?\s*$"
QUARANTINE_SCHEMA = {"line_no": pl.UInt64, "reason": pl.String, "raw": pl.String}
# sample times a warehouse row can hold (DateTime: 1970 to February 2106), in ms: to the end of 2105
TS_MS_MAX = 4_291_747_199_999


def clip_raw(text: str, limit: int = 4000) -> str:
    """A bad line as kept in the quarantine: cut to ``limit`` characters, with its length and a digest so two
    long lines that start alike stay two records (the quarantine keeps one row per source, text, reason)."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:limit]}… [{len(text)} characters, sha1 {digest}]"


def read_samples(path: Path, at: datetime | None = None) -> pl.DataFrame:
    """Long frame: metric, label columns, timestamp (UTC), value (bad lines left out: see parse_text)."""
    return parse_text(path, at)[0].drop("line_no", "_series")


def _labels(g: pl.DataFrame) -> pl.DataFrame:
    """The LABELS columns from the label blocks; escaped characters (``\"``, ``\\``, ``\n``) on the rows that
    have any (a value cut at an escaped quote before)."""
    g = g.with_columns(pl.col("labels").str.extract(rf'[{{,]{name}="([^"]*)"', 1).alias(name) for name in LABELS)

    def unescape(s: pl.DataFrame) -> pl.DataFrame:
        return s.with_columns(
            pl.col("labels").str.extract(rf'[{{,]{name}="((?:[^"\\]|\\.)*)"', 1)
            .str.replace_all(r"\\n", "\n").str.replace_all(r'\\(["\\])', "$1").alias(name) for name in LABELS)

    return on_rows(g, pl.col("labels").str.contains("\\", literal=True), unescape)


def parse_text(path: Path, at: datetime | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(samples: metric, label columns, timestamp (UTC), value, line_no; quarantine: line_no, reason, raw)."""

    data = path.read_bytes()
    good, bad_utf8 = decode_lines(data, 1)  # lines of invalid UTF-8 are quarantined, as in sacct text
    openmetrics = next((ln.strip() for ln in reversed(good) if ln.strip()), "") == "# EOF"
    lines = pl.DataFrame({"l": good}, schema={"l": pl.String}).with_row_index("line_no", offset=1)
    if b"\r" in data:
        lines = lines.with_columns(pl.col("l").str.strip_suffix("\r"))
    lines = lines.with_columns(pl.col("line_no").cast(pl.UInt64)).filter(
        ~pl.col("l").str.starts_with("#") & (pl.col("l").str.strip_chars() != ""))
    g = lines.with_columns(pl.col("l").str.extract_groups(_SAMPLE).alias("g")).unnest("g")
    g = g.rename({"1": "metric", "2": "labels", "3": "value", "4": "ts"})
    fallback = int((at or datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)).timestamp() * 1000)
    ts_ms = pl.col("ts").cast(pl.Float64, strict=False) * (1000 if openmetrics else 1)
    g = g.with_columns(_ts_ms=ts_ms, _value=pl.col("value").cast(pl.Float64, strict=False))
    reason = (
        pl.when(pl.col("metric").is_null()).then(pl.lit("not a sample line"))
        .when(pl.col("_value").is_null()).then(pl.lit("bad value"))
        .when(pl.col("ts").is_not_null() & ~pl.col("_ts_ms").is_between(0, TS_MS_MAX).fill_null(False))
        .then(pl.lit("bad timestamp"))
    )
    g = g.with_columns(_reason=reason)
    bad = g.filter(pl.col("_reason").is_not_null())
    quarantine = pl.DataFrame(
        [(n, r, clip_raw(raw)) for n, r, raw in bad.select("line_no", "_reason", "l").iter_rows()] +
        [(n, r, clip_raw(raw)) for n, r, raw in bad_utf8], schema=QUARANTINE_SCHEMA, orient="row")
    samples = _labels(g.filter(pl.col("_reason").is_null())).select(
        "metric",
        *LABELS,
        pl.from_epoch(pl.col("_ts_ms").fill_null(fallback).cast(pl.Int64), "ms").dt.replace_time_zone("UTC")
        .alias("timestamp"),
        pl.col("_value").alias("value"),
        pl.col("labels").fill_null("").str.count_matches(_POD_COUNT).cast(pl.UInt32).alias("_pods"),
        "line_no",
        pl.col("labels").fill_null("").alias("_series"),  # the whole label set: what tells two series apart
    )
    return samples, quarantine


def superseded(samples: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(samples less the lines a later line of the same series and time gives another value, those lines:
    line_no, reason). The later line's value is the sample's, as before; the earlier ones were dropped without
    a word (one series has one value at a time: which is right, the file does not say)."""
    key = ["metric", "_series", "timestamp"]
    s = samples.with_columns(_kept=pl.col("line_no").max().over(key), _values=pl.col("value").n_unique().over(key))
    over = (pl.col("line_no") != pl.col("_kept")) & (pl.col("_values") > 1)
    q = s.filter(over).select("line_no", fmt("another value of the series at the same time on line {} (kept)",
                                             pl.col("_kept")).alias("reason"))
    return s.filter(~over).drop("_kept", "_values"), q


# warehouse columns of integer type (sql/migrations/0002): a value they cannot hold was stored wrapped
_UINT32_COLUMNS = ("throttle_reasons", "xid_last")


def split_bad_samples(samples: pl.DataFrame, cat) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(good samples, line numbers of bad ones with a reason): a GPU metric whose ``gpu`` label is not a GPU
    index (the engine read it as GPU 0, mixing it into another GPU's series), or a value its integer column
    cannot hold (2^32 was stored as 0). Found by tests/test_fuzz_telemetry.py."""
    gpu_names = [n for n, m in cat.items() if m.grain == "gpu"]
    int_names = [n for n, m in cat.items() if m.column in _UINT32_COLUMNS]
    index_ok = pl.col("gpu").str.contains(r"^\d{1,5}$") & (pl.col("gpu").cast(pl.Int64, strict=False) <= 65535)
    bad_gpu = (pl.col("metric").is_in(gpu_names) & pl.col("gpu").is_not_null() & ~index_ok).fill_null(False)
    v = pl.col("value")
    bad_value = (pl.col("metric").is_in(int_names)
                 & ~(v.is_finite() & (v == v.floor()) & v.is_between(0, 2**32 - 1))).fill_null(False)
    q = samples.filter(bad_gpu | bad_value).select(
        "line_no",
        pl.when(bad_gpu).then(fmt("bad gpu label '{}' of {}", pl.col("gpu").str.slice(0, 100), pl.col("metric")))
        .otherwise(fmt("value {} of {} is not a count", v, pl.col("metric"))).alias("reason"))
    return samples.filter(~(bad_gpu | bad_value)), q


def quarantine(wh, source: str, q: pl.DataFrame) -> None:
    """Bad input records of a telemetry file into etl_quarantine (source = the file)."""

    if not q.height:
        return

    now = datetime.now(timezone.utc).replace(microsecond=0)
    q = CopyCounter().number(q)  # identical bad lines of one file stay apart
    load_frames(wh, {"etl_quarantine": q.select(
        pl.lit(source).alias("source"), "line_no", "reason", "raw", "occurrence",
        pl.lit(now).cast(pl.Datetime("ms", "UTC")).alias("loaded_at"))})


def node_labels(samples: pl.DataFrame) -> pl.DataFrame:
    """The node and GPU labels as the loader reads them (``Hostname``, ``instance``, ``UUID``), from the forms
    exporters and Prometheus give them:

    - ``node``: the Kubernetes node, where Prometheus' relabelling of ``__meta_kubernetes_pod_node_name`` put
      it (dcgm-exporter in a pod names its own pod in ``Hostname``: dcgm-exporter issue #78, and node_exporter's
      ``instance`` is the pod's address), names the node of every series that has it;
    - ``hostname``: dcgm-exporter's spelling since its change #655 (May 2026), and a relabelling's target in
      some sites' ServiceMonitors (issue #529), over ``Hostname``;
    - ``uuid``: dcgm-exporter's ``--use-old-namespace`` spelling of ``UUID``.
    A label with an empty value says nothing."""
    def given(c: str) -> pl.Expr:
        return pl.when(pl.col(c) != "").then(pl.col(c))

    have = set(samples.columns)
    out = []
    if "node" in have:
        out.append(pl.coalesce(given("node"), pl.col("instance")).alias("instance"))
    if have & {"node", "hostname"}:
        out.append(pl.coalesce([given(c) for c in ("node", "hostname", "Hostname") if c in have]).alias("Hostname"))
    if "uuid" in have:
        out.append(pl.coalesce(given("UUID") if "UUID" in have else pl.lit(None, pl.String), given("uuid"))
                   .alias("UUID"))
    return samples.with_columns(out) if out else samples


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
    w0 = datetime.combine(date_from, datetime.min.time(), timezone.utc)
    window = (w0, datetime.combine(date_to, datetime.min.time(), timezone.utc) + timedelta(days=1))
    source = "text:" + ",".join(Path(p).name for p in paths[:3]) + ("…" if len(paths) > 3 else "")
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
