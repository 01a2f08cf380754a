"""Prometheus text / OpenMetrics lines read by polars: the label block's columns, a line's sample or the reason
it is bad, the samples a file's rules turn away (a gpu label that is not an index, a value an integer column
cannot hold, a series given two values at one time), the node and GPU names as the loader reads them.

The exact rules of the text sources: etl/openmetrics_source.py (the path for a ClickHouse server) runs them
on every line, etl/openmetrics_engine.py (the embedded engine's parse) on the distinct series and on the few
lines its own cut does not take.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.etl.frames import fmt, on_rows
from ops_warehouse.etl.metric_catalog import POD_LABELS

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
_SERIES = rf"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{{(?:[^}}\"]+|{_VALUE})*\}})?"
_SAMPLE = rf"^{_SERIES}\s+(\S+)(?:\s+(\S+))?\s*$"
# a series alone (metric and label block): how the engine's parse (etl/openmetrics_engine.py) checks its cut
SERIES_PATTERN = rf"^{_SERIES}$"
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


def label_columns(g: pl.DataFrame) -> pl.DataFrame:
    """The LABELS columns from the label blocks; escaped characters (``\"``, ``\\``, ``\n``) on the rows that
    have any (a value cut at an escaped quote before)."""
    g = g.with_columns(pl.col("labels").str.extract(rf'[{{,]{name}="([^"]*)"', 1).alias(name) for name in LABELS)

    def unescape(s: pl.DataFrame) -> pl.DataFrame:
        return s.with_columns(
            pl.col("labels").str.extract(rf'[{{,]{name}="((?:[^"\\]|\\.)*)"', 1)
            .str.replace_all(r"\\n", "\n").str.replace_all(r'\\(["\\])', "$1").alias(name) for name in LABELS)

    return on_rows(g, pl.col("labels").str.contains("\\", literal=True), unescape)


def is_openmetrics(lines: list[str]) -> bool:
    """OpenMetrics (seconds) when the last line that is not blank is ``# EOF``; else Prometheus text (ms)."""
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), "") == "# EOF"


def fallback_ms(path: Path, at: datetime | None) -> int:
    """The time of samples without a timestamp: ``at``, else the file's modification time (ms)."""
    return int((at or datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)).timestamp() * 1000)


def parse_lines(lines: pl.DataFrame, openmetrics: bool, fallback: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Lines (line_no, l: the text, a trailing CR removed) -> (samples, quarantine) as parse_text gives them.
    The engine's parse (etl/openmetrics_engine.py) hands the lines it does not take as plain samples here."""
    lines = lines.with_columns(pl.col("line_no").cast(pl.UInt64)).filter(
        ~pl.col("l").str.starts_with("#") & (pl.col("l").str.strip_chars() != ""))
    g = lines.with_columns(pl.col("l").str.extract_groups(_SAMPLE).alias("g")).unnest("g")
    g = g.rename({"1": "metric", "2": "labels", "3": "value", "4": "ts"})
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
        [(n, r, clip_raw(raw)) for n, r, raw in bad.select("line_no", "_reason", "l").iter_rows()],
        schema=QUARANTINE_SCHEMA, orient="row")
    samples = label_columns(g.filter(pl.col("_reason").is_null())).select(
        "metric",
        *LABELS,
        pl.from_epoch(pl.col("_ts_ms").fill_null(fallback).cast(pl.Int64), "ms").dt.replace_time_zone("UTC")
        .alias("timestamp"),
        pl.col("_value").alias("value"),
        pods_count(pl.col("labels")).alias("_pods"),
        "line_no",
        pl.col("labels").fill_null("").alias("_series"),  # the whole label set: what tells two series apart
    )
    return samples, quarantine


def pods_count(labels: pl.Expr) -> pl.Expr:
    """How many Kubernetes workload labels (POD_LABELS) a label block carries with a value."""
    return labels.fill_null("").str.count_matches(_POD_COUNT).cast(pl.UInt32)


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
UINT32_COLUMNS = ("throttle_reasons", "xid_last")


def split_bad_samples(samples: pl.DataFrame, cat) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(good samples, line numbers of bad ones with a reason): a GPU metric whose ``gpu`` label is not a GPU
    index (the engine read it as GPU 0, mixing it into another GPU's series), or a value its integer column
    cannot hold (2^32 was stored as 0). Found by tests/test_fuzz_telemetry.py."""
    gpu_names = [n for n, m in cat.items() if m.grain == "gpu"]
    int_names = [n for n, m in cat.items() if m.column in UINT32_COLUMNS]
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
