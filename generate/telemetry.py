"""Synthetic exporter telemetry for the generated cluster: what dcgm-exporter, node exporter, a Lustre
client exporter and an IPMI exporter would have let Prometheus scrape, coherent with the scheduler's frames.

:func:`write_telemetry` turns the inventory, GPU allocations, node events, Xids and throttle intervals (the
shapes in :mod:`ops_warehouse.generate.model`) into one sample per series per ``step_s`` over
``[start, end)``. It is deterministic for a seed (same arguments give byte-identical files), streams one
UTC day at a time in constant memory, and builds every day with numpy/polars column operations: the only
Python loops are per day, per 2-hour window, per metric family and over the few steps one checkpoint
burst spans.

Families, metric names and labels (the real exporters' spelling)
-------------------------------------------------------------------
``dcgm`` (dcgm-exporter, one series per GPU; labels ``Hostname`` = node, ``gpu`` "0".., ``UUID`` (from
``inventory.gpu_uuids``), ``pci_bus_id`` "00000000:1B:00.0" (the slot's bus: model.py PCI_BUSES, as the
kernel log names the GPU), ``device`` "nvidia0".., ``modelName``; in the Parquet form also ``hpc_job``, the
Slurm job id holding the GPU, "" when free, as dcgm-exporter labels a GPU from its HPC job-mapping directory
(``--hpc-job-mapping-dir``, written by the site's prolog); the OpenMetrics form leaves it out, as a site
without the mapping has it):

* ``DCGM_FI_DEV_GPU_UTIL`` (int %), ``DCGM_FI_PROF_SM_ACTIVE``, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``,
  ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``, ``DCGM_FI_PROF_DRAM_ACTIVE`` (ratios 0..1, 6 decimals),
  ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` (int MiB; used + free + reserved = the model's memory,
  reserved = 0.65 %), ``DCGM_FI_DEV_POWER_USAGE`` (W, 3 decimals), ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``
  (int mJ counter: each sample adds its power x step_s x 1000), ``DCGM_FI_DEV_GPU_TEMP`` (int degC),
  ``DCGM_FI_DEV_SM_CLOCK`` (int MHz, multiples of 15), ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` (int
  bitmask), ``DCGM_FI_DEV_XID_ERRORS`` (int gauge: the last Xid, 0 before any).

``nic`` (node exporter's infiniband collector; labels ``instance`` "<node>:9100", ``device`` mlx5_0..,
``port`` "1"): ``node_infiniband_port_data_received_bytes_total`` and
``node_infiniband_port_data_transmitted_bytes_total`` (byte counters). mlx5_0 .. mlx5_{compute_nics-1}
are the compute rails (GPU i talks on rail i % compute_nics), the next ``storage_nics`` carry Lustre.

``lustre`` (HPE/GSI lustre_exporter's client llite stats; labels ``instance`` "<node>:9169", ``component``
"client", ``target`` "lustre01-ffff..." (the file system and the client's superblock, as llite names a
mount)): ``lustre_read_bytes_total`` and ``lustre_write_bytes_total`` (byte counters), the exporter's own
names (tests/data/metrics/lustre_exporter-hpe/).

``ipmi`` (ipmi_exporter; label ``instance`` "<node>:9290"): ``ipmi_dcmi_power_consumption_watts``.

The instance ports are each exporter's default (node_exporter 9100, lustre_exporter 9169, ipmi_exporter
9290): strip ``:port`` to get the node.

Physics
-------
A GPU inside a ``gpu_alloc`` row's ``[start_ts, end_ts)`` runs at the row's gpu_util / sm_active /
tensor_active / dram_active, scaled by ``slowdown`` (stragglers), with small deterministic noise; power is
``idle_w + power_frac * slowdown * (tdp_w - idle_w)``; temperature rises linearly with power from the
model's idle temperature (about +38 degC at TDP); the SM clock boosts near the model's maximum when a job
holds the GPU and sits at 345 MHz otherwise. From ``hang_from_ts`` to ``end_ts`` (NCCL hang) the GPUs show
0 % util, near-idle power and no network traffic, with the frame buffer still used. Every
``ckpt_period_s`` after a job starts it writes ``ckpt_bytes`` per node within 60-120 s (``ckpt_bytes``
at 0.5 GB/s, clamped): Lustre writes and storage-NIC transmits by exactly those bytes, while the job's
GPUs dip to 15 % of their activity (30 % of their power). Compute-rail traffic follows each GPU's
activity: about 11 GB/s per rail for multi-node jobs, 40 MB/s for single-node ones. Lustre reads are a
steady 25 MB/s per running GPU.

During a throttle interval the GPU reads 85-92 degC; below 88 degC the bits are SW_THERMAL_SLOWDOWN (0x20)
and the SM clock drops 30-34 %, from 88 degC HW_SLOWDOWN | SW_THERMAL | HW_THERMAL_SLOWDOWN (0x68) and
35-40 %; a busy throttled GPU draws 15 % less power. Outside throttling the mask is 0 (real idle GPUs
report 0x1, GPU_IDLE; this generator leaves it out).

A node inside a ``node_events`` interval whose state has a DOWN token (``down``, ``DOWN*``,
``DOWN+DRAIN``...) has no samples from any family for that interval (a null end means down until
``end``); its first sample afterwards is a reboot: every counter (energy, NIC, Lustre) restarts from one
step's worth and the Xid gauge from 0. A node is also silent before its ``in_service_ts`` and its counters
start from 0 there. Other states (``drain``) change nothing: the node keeps reporting, idle unless
``gpu_alloc`` places work on it (Slurm lets running jobs finish on a draining node). Counters of nodes
already in service at ``start`` begin at an uptime-like random value.

Formats
-------
``"parquet"``: ``out_dir/telemetry/<family>/<YYYY-MM-DD>.parquet`` (lz4), one wide row per series per
step, rows in time order then inventory order: ``timestamp`` (Datetime ms UTC), the label columns
(String), then one column per metric named exactly as the metric. Types: dcgm integer metrics Int32
(energy Int64), ratios and power Float64; nic/lustre/ipmi Float64 (integral values).

``"openmetrics"``: promtool-ready text (``promtool tsdb create-blocks-from openmetrics FILE DIR``), one
file per 2-hour window aligned on the epoch, ``out_dir/telemetry/openmetrics/<window start epoch s>.om``.
Each file has every metric family once (``# HELP``, ``# TYPE``, then all its samples,
``name{labels} value timestamp_seconds``) and ends with ``# EOF``. Counter families are declared without
``_total`` and their samples carry it (``# TYPE node_infiniband_port_data_received_bytes counter`` over
``node_infiniband_port_data_received_bytes_total{...}``), as OpenMetrics 1.0 requires. dcgm-exporter's
energy counter has no ``_total`` suffix, which OpenMetrics forbids for a counter's samples (promtool 2.42's
parser lets it through, stricter parsers do not), so it is declared ``gauge`` there: the series keeps
dcgm-exporter's exact name (queries written for a live Prometheus work unchanged) and TSDB blocks store no
type anyway, so ``rate()`` and ``increase()`` treat it as the counter it is. Within a family each series'
samples are together and in time order; timestamps are whole seconds.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl
from ops_warehouse.generate.model import GPU_MODELS, ClusterSpec, dcgm_pci_bus_id

WINDOW_S = 7200  # promtool builds 2-hour blocks
IDLE_SM_CLOCK_MHZ = 345
FB_RESERVED_FRAC = 0.0065
TEMP_RISE_AT_TDP_C = 38.0
CKPT_DIP_ACTIVITY = 0.15  # share of a job's activity left while it writes a checkpoint
CKPT_DIP_POWER = 0.30
CKPT_WRITE_BPS = 0.5e9
CKPT_MIN_S, CKPT_MAX_S = 60.0, 120.0
HANG_POWER_FRAC = 0.04
MULTI_NODE_RAIL_BPS = 11e9
SINGLE_NODE_RAIL_BPS = 4e7
NIC_BACKGROUND_BPS = 1.5e3
LUSTRE_READ_BPS_PER_GPU = 25e6
LUSTRE_LOG_WRITE_BPS = 2e4
NODE_BASE_W = 1500.0
NODE_BUSY_EXTRA_W = 150.0  # CPUs and fans of a node whose GPUs all run
LUSTRE_FS = "lustre01"
PORTS = {"nic": 9100, "lustre": 9169, "ipmi": 9290}

SW_THERMAL = 0x20
HW_SLOWDOWN_THERMAL = 0x08 | 0x20 | 0x40

# (family, metric, OpenMetrics type, help); the order is the column order and the order in .om files.
METRICS = (
    ("dcgm", "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("dcgm", "DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("dcgm", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("dcgm", "DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("dcgm", "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("dcgm", "DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("dcgm", "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("dcgm", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gauge",
     "Total energy consumption since boot (in mJ). A counter, declared gauge: no _total suffix."),
    ("dcgm", "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("dcgm", "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("dcgm", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    ("dcgm", "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("nic", "node_infiniband_port_data_received_bytes_total", "counter",
     "Number of data octets received on all links"),
    ("nic", "node_infiniband_port_data_transmitted_bytes_total", "counter",
     "Number of data octets transmitted on all links"),
    ("lustre", "lustre_read_bytes_total", "counter", "The total number of bytes that have been read."),
    ("lustre", "lustre_write_bytes_total", "counter", "The total number of bytes that have been written."),
    ("ipmi", "ipmi_dcmi_power_consumption_watts", "gauge", "Current power consumption in Watts."),
)
FAMILIES = ("dcgm", "nic", "lustre", "ipmi")
LABELS = {
    "dcgm": ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"),
    "nic": ("instance", "device", "port"),
    "lustre": ("instance", "component", "target"),
    "ipmi": ("instance",),
}
DTYPES = {
    "DCGM_FI_DEV_GPU_UTIL": pl.Int32, "DCGM_FI_DEV_FB_USED": pl.Int32, "DCGM_FI_DEV_FB_FREE": pl.Int32,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": pl.Int64, "DCGM_FI_DEV_GPU_TEMP": pl.Int32,
    "DCGM_FI_DEV_SM_CLOCK": pl.Int32, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": pl.Int32,
    "DCGM_FI_DEV_XID_ERRORS": pl.Int32,
}  # every other metric: Float64


def family_schema(family: str) -> dict[str, pl.DataType]:
    """The Parquet schema of one family's files."""
    out: dict[str, pl.DataType] = {"timestamp": pl.Datetime("ms", "UTC")}
    out.update({c: pl.String for c in LABELS[family]})
    if family == "dcgm":
        out["hpc_job"] = pl.String  # dcgm-exporter's job label: its own column, it changes with the job
    out.update({m: DTYPES.get(m, pl.Float64) for f, m, _, _ in METRICS if f == family})
    return out


# ---------------------------------------------------------------------------------------------- helpers

def _ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(round(dt.timestamp() * 1000))


def _col_ms(s: pl.Series, null: int) -> np.ndarray:
    """Epoch milliseconds of a datetime column (naive means UTC), nulls as ``null``."""
    if s.dtype == pl.Null:
        s = s.cast(pl.Datetime("ms", "UTC"))
    if getattr(s.dtype, "time_zone", None) is None:
        s = s.dt.replace_time_zone("UTC")
    return s.dt.epoch("ms").fill_null(null).to_numpy().astype(np.int64)


def _k_ceil(ms: np.ndarray, start_ms: int, step_ms: int, K: int) -> np.ndarray:
    """Index of the first step at or after ``ms``, clipped to [0, K]."""
    return np.clip(-((start_ms - ms) // step_ms), 0, K)


def _ranges(lo: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The integers lo[i] .. lo[i] + n[i] - 1 for every i, concatenated, and the i each one comes from."""
    n = np.maximum(np.asarray(n, np.int64), 0)
    owner = np.repeat(np.arange(len(n)), n)
    return owner, np.asarray(lo, np.int64)[owner] + (np.arange(int(n.sum())) - (np.cumsum(n) - n)[owner])


def _paint(out: np.ndarray, lo, hi, col, val) -> None:
    """out[t, col] = val for t in [lo, hi), for every interval at once (later intervals win)."""
    i, t = _ranges(lo, hi - lo)
    out[t, np.asarray(col)[i]] = np.asarray(val)[i]


def _group_sum(a: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Sums of the column groups [bounds[i], bounds[i+1]) of a (T, C) array; empty groups give 0."""
    cs = np.zeros((a.shape[0], a.shape[1] + 1))
    np.cumsum(a, axis=1, out=cs[:, 1:])
    return cs[:, bounds[1:]] - cs[:, bounds[:-1]]


def _counter(inc: np.ndarray, reset: np.ndarray, carry: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running counters (T, S): carry + cumulative increments, restarting from 0 before a reset step."""
    c = carry[None, :] + np.cumsum(inc, axis=0)
    if reset.any():
        off = np.maximum.accumulate(np.where(reset, c - inc, 0.0), axis=0)
        c = c - off
    return c, c[-1].copy()


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *key]))


def _round_to(a: np.ndarray, q: float) -> np.ndarray:
    return np.rint(a / q) * q


def _escape(s: pl.Expr) -> pl.Expr:
    return s.str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True) \
        .str.replace_all("\n", "\\n", literal=True)


def _is_down(state: pl.Expr) -> pl.Expr:
    tokens = state.str.to_lowercase().str.replace_all(r"[*~#$@%!^-]", "").str.split("+")
    return tokens.list.contains("down")


# ------------------------------------------------------------------------------------------- the writer

def write_telemetry(out_dir: Path, *, spec: ClusterSpec, inventory: pl.DataFrame, gpu_alloc: pl.DataFrame,
                    node_events: pl.DataFrame, xids: pl.DataFrame, throttle: pl.DataFrame,
                    start: datetime, end: datetime, step_s: int = 60, seed: int = 0,
                    formats: tuple[str, ...] = ("parquet",), progress=None) -> dict:
    """Write the exporters' samples at ``start + k * step_s`` in ``[start, end)`` (start truncated to the
    second; naive datetimes are UTC). ``progress(days_done, days_total)`` is called after each day.

    Returns ``{family: {"files", "rows", "samples", "bytes"}}`` for each Parquet family written (samples =
    rows x metrics) and ``{"openmetrics": {"files", "samples", "bytes"}}`` when that format is asked for.
    """
    unknown = set(formats) - {"parquet", "openmetrics"}
    if unknown:
        raise ValueError(f"unknown telemetry formats: {sorted(unknown)}")
    if step_s <= 0 or int(step_s) != step_s:
        raise ValueError("step_s must be a positive whole number of seconds")
    out_dir = Path(out_dir) / "telemetry"
    start_ms = _ms(start) // 1000 * 1000
    end_ms = _ms(end)
    step_ms = int(step_s) * 1000
    K = max(0, -((start_ms - end_ms) // step_ms))
    w = _World(spec, inventory, gpu_alloc, node_events, xids, throttle, start_ms, step_ms, K, seed)

    counts: dict = {f: {"files": 0, "rows": 0, "samples": 0, "bytes": 0} for f in FAMILIES} \
        if "parquet" in formats else {}
    if "openmetrics" in formats:
        counts["openmetrics"] = {"files": 0, "samples": 0, "bytes": 0}
    days = []
    day_ms = 86_400_000
    d = start_ms // day_ms * day_ms
    while d < end_ms:
        k0 = int(_k_ceil(np.int64(max(d, start_ms)), start_ms, step_ms, K))
        k1 = int(_k_ceil(np.int64(min(d + day_ms, end_ms)), start_ms, step_ms, K))
        if k1 > k0:
            days.append((d, k0, k1))
        d += day_ms

    def write_day(d: int, fams: dict) -> None:
        date = datetime.fromtimestamp(d / 1000, timezone.utc).strftime("%Y-%m-%d")
        if "parquet" in formats:
            for fam, data in fams.items():
                n = _write_parquet(out_dir / fam / f"{date}.parquet", w.labels[fam], fam, data, w.a_job_series)
                c = counts[fam]
                rows = len(data["ts"])
                c["files"] += 1
                c["rows"] += rows
                c["samples"] += rows * (len(data) - 2 - ("hpc_job" in data))
                c["bytes"] += n
        if "openmetrics" in formats:
            files, samples, nbytes = _write_openmetrics(out_dir / "openmetrics", w.om_labels, fams)
            c = counts["openmetrics"]
            c["files"] += files
            c["samples"] += samples
            c["bytes"] += nbytes

    # a day's files are written (polars, out of the GIL) while numpy computes the next day: on 2 cores the
    # two halves of a day overlap instead of taking turns. One writer: files and counts stay in day order,
    # and at most two days are in memory.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry-writer") as writer:
        pending = None
        for i, (d, k0, k1) in enumerate(days):
            fams = w.day(k0, k1, d // day_ms)
            if pending is not None:
                pending.result()
                if progress is not None:
                    progress(i, len(days))
            pending = writer.submit(write_day, d, fams)
        if pending is not None:
            pending.result()
            if progress is not None:
                progress(len(days), len(days))
    return counts


class _World:
    """Everything fixed over the period (series, intervals as step indices, per-series constants) and the
    running state carried from one day to the next (counter values)."""

    def __init__(self, spec, inventory, gpu_alloc, node_events, xids, throttle, start_ms, step_ms, K, seed):
        self.start_ms, self.step_ms, self.K, self.seed = start_ms, step_ms, K, seed
        self.step_s = step_ms / 1000
        C, S = spec.compute_nics, spec.storage_nics
        self.C, self.S = C, S
        inv = inventory.with_row_index("node_idx").with_columns(pl.col("node_idx").cast(pl.Int64))
        N = inv.height
        self.N = N
        # one GPU per UUID in inventory.gpu_uuids, numbered 0.. in list order
        gpus = (inv.select("node_idx", "node", "gpu_model", "model_name", "gpu_uuids")
                .explode("gpu_uuids").filter(pl.col("gpu_uuids").is_not_null())
                .with_columns(pl.int_range(pl.len()).over("node_idx").cast(pl.Int32).alias("gpu"))
                .with_row_index("gcol").with_columns(pl.col("gcol").cast(pl.Int64)))
        G = gpus.height
        self.G = G
        missing = set(gpus["gpu_model"].unique().to_list()) - set(GPU_MODELS)
        if missing:
            raise ValueError(f"inventory has GPU models without facts in GPU_MODELS: {sorted(missing)}")
        self.node_of_gpu = gpus["node_idx"].to_numpy()
        self.gpu_in_node = gpus["gpu"].to_numpy().astype(np.int64)
        self.node_bounds = np.searchsorted(self.node_of_gpu, np.arange(N + 1))
        models = gpus["gpu_model"].to_list()
        fact = {k: np.array([getattr(GPU_MODELS[m], k) for m in sorted(set(models))], dtype=np.float64)
                for k in ("tdp_w", "idle_w", "memory_mib", "max_sm_clock_mhz", "idle_temp_c")}
        mi = np.searchsorted(np.array(sorted(set(models))), np.array(models)) if G else np.zeros(0, int)
        self.tdp, self.idle = fact["tdp_w"][mi], fact["idle_w"][mi]
        self.mem, self.max_clock = fact["memory_mib"][mi], fact["max_sm_clock_mhz"][mi]
        self.idle_temp = fact["idle_temp_c"][mi]
        self.fb_reserved = np.rint(self.mem * FB_RESERVED_FRAC)
        self.gpus_per_node = np.diff(self.node_bounds)
        # GPU i of a node talks on compute rail i % C: columns sorted by rail for group sums
        rail = self.node_of_gpu * C + self.gpu_in_node % C
        self.rail_order = np.argsort(rail, kind="stable")
        self.rail_bounds = np.searchsorted(rail[self.rail_order], np.arange(N * C + 1))

        # series labels: Parquet label tables and OpenMetrics "{...} " strings, both indexed by series
        nodes = inv["node"]
        dcgm = gpus.select(
            gpu=pl.col("gpu").cast(pl.String), UUID=pl.col("gpu_uuids"),
            # the slot's bus, as the kernel log names the GPU (model.py PCI_BUSES)
            pci_bus_id=pl.col("gpu").replace_strict(
                {g: dcgm_pci_bus_id(g) for g in range((gpus["gpu"].max() or 0) + 1)}, return_dtype=pl.String),
            device=pl.lit("nvidia") + pl.col("gpu").cast(pl.String), modelName=pl.col("model_name"),
            Hostname=pl.col("node"))
        dev = [f"mlx5_{i}" for i in range(C + S)]
        nic = pl.DataFrame({"instance": nodes + f":{PORTS['nic']}"}).join(
            pl.DataFrame({"device": dev, "port": ["1"] * len(dev)}), how="cross", maintain_order="left_right")
        lustre = pl.DataFrame({"instance": nodes + f":{PORTS['lustre']}", "component": ["client"] * N,
                               "target": [f"{LUSTRE_FS}-ffff{0x9c4e00000000 + i * 0x1000:012x}" for i in range(N)]})
        ipmi = pl.DataFrame({"instance": nodes + f":{PORTS['ipmi']}"})
        self.labels = {"dcgm": dcgm, "nic": nic, "lustre": lustre, "ipmi": ipmi}
        self.om_labels = {}
        for fam, df in self.labels.items():
            parts = []
            for i, c in enumerate(df.columns):
                parts += [pl.lit(("," if i else "{") + c + '="'), _escape(pl.col(c)), pl.lit('"')]
            self.om_labels[fam] = df.select(pl.concat_str(parts + [pl.lit("} ")]).alias("l"))["l"]

        node_key = inv.select("node", "node_idx")
        gpu_key = gpus.select("node", "gpu", "gcol")
        big = np.iinfo(np.int64).max // 4

        # allocations: one row per (job run, node, GPU), earliest first so later starts win overlaps
        a = (gpu_alloc.with_columns(pl.col("gpu").cast(pl.Int32))
             .join(gpu_key, on=["node", "gpu"], how="inner")
             .sort(["start_ts", "gcol", "job_id"]))
        # dcgm-exporter's hpc_job label: the job id the site's prolog wrote for the GPU (SLURM_JOB_ID, the run's
        # job_id_raw; gpu_alloc rows without it carry the sacct JobID), '' (the last entry) on a free GPU
        raw = a["job_id_raw"].cast(pl.String) if "job_id_raw" in a.columns else a["job_id"]
        self.a_job_names = np.append(raw.to_numpy().astype(object), "")
        # as the column the Parquet files take, made once: a day's column is a gather of it (from the object
        # array a day, its 262,656 Python strings were converted again every day: 14 ms against 2)
        self.a_job_series = pl.Series("hpc_job", self.a_job_names, pl.String)
        job_nodes = gpu_alloc.group_by("job_id").agg(pl.col("node").n_unique().alias("n_nodes"))
        a = a.join(job_nodes, on="job_id", how="left", maintain_order="left")
        a_start, a_end = _col_ms(a["start_ts"], big), _col_ms(a["end_ts"], big)
        a_hang = _col_ms(a["hang_from_ts"], big)
        self.a_g = a["gcol"].to_numpy()
        self.a_klo = _k_ceil(a_start, start_ms, step_ms, K)
        self.a_khi = _k_ceil(a_end, start_ms, step_ms, K)
        self.a_khang = np.minimum(_k_ceil(a_hang, start_ms, step_ms, K), self.a_khi)
        # a restart's start-up: quiet as in a hang (loading the checkpoint, joining NCCL) until busy_from_ts
        a_busy = _col_ms(a["busy_from_ts"], -big) if "busy_from_ts" in a.columns else np.full(len(a), -big)
        self.a_kbusy = _k_ceil(a_busy, start_ms, step_ms, K)
        f64 = lambda c, d: a[c].fill_null(d).to_numpy().astype(np.float64)  # noqa: E731
        self.a_util, self.a_sm = f64("gpu_util", 0.0), f64("sm_active", 0.0)
        self.a_tensor, self.a_dram = f64("tensor_active", 0.0), f64("dram_active", 0.0)
        self.a_fb, self.a_pf, self.a_slow = f64("fb_used_frac", 0.0), f64("power_frac", 0.0), f64("slowdown", 1.0)
        self.a_multi = a["n_nodes"].fill_null(1).to_numpy() > 1

        # checkpoints: one writer per (job run, node); its GPUs dip while it writes
        a_idx = a.with_row_index("row").with_columns(
            pl.col("ckpt_period_s").fill_null(0), pl.col("ckpt_bytes").fill_null(0.0))
        units = (a_idx.filter((pl.col("ckpt_period_s") > 0) & (pl.col("ckpt_bytes") > 0))
                 .group_by(["job_id", "node", "start_ts"], maintain_order=True)
                 .agg(pl.col("row").first(), pl.col("gcol")))
        urow = units["row"].to_numpy().astype(np.int64)
        self.u_start = a_start[urow]
        self.u_stop = np.minimum(a_end[urow], a_hang[urow])
        self.u_period = a_idx["ckpt_period_s"].to_numpy()[urow].astype(np.int64) * 1000
        self.u_bytes = a_idx["ckpt_bytes"].to_numpy()[urow].astype(np.float64)
        self.u_dur = np.rint(np.clip(self.u_bytes / CKPT_WRITE_BPS, CKPT_MIN_S, CKPT_MAX_S) * 1000).astype(np.int64)
        self.u_node = self.node_of_gpu[a_idx["gcol"].to_numpy()[urow]] if len(urow) else np.zeros(0, np.int64)
        self.unit_gpus = units.select(pl.int_range(pl.len()).alias("unit"), "gcol").explode("gcol")

        # down intervals: silence, then a reboot at the first step after them
        down = (node_events.filter(_is_down(pl.col("state")))
                .join(node_key, on="node", how="inner").sort(["node_idx", "start_ts"]))
        self.d_node = down["node_idx"].to_numpy()
        self.d_klo = _k_ceil(_col_ms(down["start_ts"], big), start_ms, step_ms, K)
        self.d_khi = _k_ceil(_col_ms(down["end_ts"], big), start_ms, step_ms, K)
        reboot = (self.d_khi < K) & (self.d_khi > self.d_klo)
        self.r_node, self.r_k = self.d_node[reboot], self.d_khi[reboot]
        in_service = _col_ms(inv["in_service_ts"], -big) if "in_service_ts" in inv.columns \
            else np.full(N, -big)
        self.k_in = _k_ceil(in_service, start_ms, step_ms, K)

        # throttle intervals, each with its own temperature, clock drop and reason bits
        th = (throttle.with_columns(pl.col("gpu").cast(pl.Int32)).join(gpu_key, on=["node", "gpu"], how="inner")
              .sort(["start_ts", "gcol"]))
        self.t_g = th["gcol"].to_numpy()
        self.t_klo = _k_ceil(_col_ms(th["start_ts"], big), start_ms, step_ms, K)
        self.t_khi = _k_ceil(_col_ms(th["end_ts"], big), start_ms, step_ms, K)
        r = _rng(seed, 2)
        self.t_temp = r.uniform(85.0, 92.0, th.height)
        hw = self.t_temp >= 88.0
        self.t_bits = np.where(hw, HW_SLOWDOWN_THERMAL, SW_THERMAL).astype(np.int32)
        self.t_drop = np.where(hw, r.uniform(0.35, 0.40, th.height), r.uniform(0.30, 0.34, th.height))
        if not th.height:  # the day's lookups index these with 0 where nothing throttles
            self.t_temp, self.t_bits, self.t_drop = np.zeros(1), np.zeros(1, np.int32), np.zeros(1)

        # Xid gauge: the last Xid holds until the next one or a reboot (value 0) of its node
        x = xids.with_columns(pl.col("gpu").cast(pl.Int32)).join(gpu_key, on=["node", "gpu"], how="inner")
        x_ms = _col_ms(x["ts"], big)
        cnt = self.gpus_per_node[self.r_node]
        rb, off = _ranges(np.zeros(len(cnt), np.int64), cnt)
        g = np.concatenate([x["gcol"].to_numpy(), self.node_bounds[self.r_node][rb] + off])
        k = np.concatenate([_k_ceil(x_ms, start_ms, step_ms, K), self.r_k[rb]])
        kind = np.concatenate([np.ones(x.height, np.int64), np.zeros(len(rb), np.int64)])
        ts = np.concatenate([x_ms, np.zeros(len(rb), np.int64)])
        val = np.concatenate([x["xid"].to_numpy().astype(np.int32), np.zeros(len(rb), np.int32)])
        o = np.lexsort((ts, kind, k, g))
        self.x_g, self.x_klo, self.x_val = g[o], k[o], val[o]
        same = np.append(self.x_g[1:] == self.x_g[:-1], False)
        self.x_khi = np.where(same, np.append(self.x_klo[1:], K), K)

        # per-series constants and counters' starting values (uptime-like unless new in the period)
        r = _rng(seed, 3)
        self.temp_off = r.normal(0.0, 1.5, G)
        self.node_base_w = NODE_BASE_W + r.normal(0.0, 40.0, N)
        new = self.k_in > 0
        self.energy = np.where(new[self.node_of_gpu], 0.0, np.rint(r.uniform(1e9, 5e11, G)))
        nics = C + S
        self.nic_rx = np.where(np.repeat(new, nics), 0.0, np.rint(r.uniform(1e11, 1e14, N * nics)))
        self.nic_tx = np.where(np.repeat(new, nics), 0.0, np.rint(r.uniform(1e11, 1e14, N * nics)))
        self.lu_read = np.where(new, 0.0, np.rint(r.uniform(1e11, 1e13, N)))
        self.lu_write = np.where(new, 0.0, np.rint(r.uniform(1e11, 1e13, N)))

    def day(self, k0: int, k1: int, day_no: int) -> dict[str, dict[str, np.ndarray]]:
        """The samples of steps [k0, k1): per family {"ts": ms, "series": index, metric: values}."""
        T, G, N, C, S = k1 - k0, self.G, self.N, self.C, self.S
        step_s = self.step_s
        rng = _rng(self.seed, 1, day_no)
        t_ms = self.start_ms + np.arange(k0, k1, dtype=np.int64) * self.step_ms
        clip = lambda k: np.clip(k - k0, 0, T)  # noqa: E731

        down = np.zeros((T, N), bool)
        _paint(down, clip(self.d_klo), clip(self.d_khi), self.d_node, np.ones(len(self.d_node), bool))
        present_n = ~down & (np.arange(k0, k1)[:, None] >= self.k_in[None, :])
        reset_n = np.zeros((T, N), bool)
        rk = self.r_k - k0
        inside = (rk >= 0) & (rk < T)
        reset_n[rk[inside], self.r_node[inside]] = True
        present_g, reset_g = present_n[:, self.node_of_gpu], reset_n[:, self.node_of_gpu]

        ar = np.full((T, G), -1, np.int64)
        _paint(ar, clip(self.a_klo), clip(self.a_khi), self.a_g, np.arange(len(self.a_g)))
        busy = ar >= 0
        job_code = np.where(busy, ar, len(self.a_job_names) - 1)
        r = np.where(busy, ar, 0)
        if len(self.a_g):
            k_now = np.arange(k0, k1)[:, None]
            hang = busy & ((k_now >= self.a_khang[r]) | (k_now < self.a_kbusy[r]))
            util0, sm0, ten0, dram0 = self.a_util[r], self.a_sm[r], self.a_tensor[r], self.a_dram[r]
            fb0, pf0, slow, multi = self.a_fb[r], self.a_pf[r], self.a_slow[r], self.a_multi[r]
        else:
            hang = np.zeros((T, G), bool)
            util0 = sm0 = ten0 = dram0 = fb0 = pf0 = np.zeros((T, G))
            slow, multi = np.ones((T, G)), np.zeros((T, G), bool)
        running = busy & ~hang

        # checkpoint bursts of the day (and those started just before it that spill into it)
        dip = np.zeros((T, G), bool)
        write_b = np.zeros((T, N))
        if len(self.u_start):
            lo_ms = t_ms[0] - self.step_ms - CKPT_MAX_S * 1000
            hi_ms = t_ms[-1] + 1
            m_lo = np.maximum(1, -((self.u_start - lo_ms) // self.u_period))
            m_hi = (np.minimum(self.u_stop - self.u_dur, hi_ms) - self.u_start) // self.u_period
            unit, m = _ranges(m_lo, m_hi - m_lo + 1)
            c = self.u_start[unit] + m * self.u_period[unit]
            dur, nbytes, node = self.u_dur[unit], self.u_bytes[unit], self.u_node[unit]
            kf = (c - self.start_ms) // self.step_ms + 1  # first sample after the burst starts
            for j in range(int(np.ceil(CKPT_MAX_S * 1000 / self.step_ms)) + 1):
                k = kf + j
                tk = self.start_ms + k * self.step_ms
                ov = np.minimum(tk, c + dur) - np.maximum(tk - self.step_ms, c)
                ok = (ov > 0) & (k >= k0) & (k < k1)
                np.add.at(write_b, (k[ok] - k0, node[ok]), nbytes[ok] * ov[ok] / dur[ok])
            ev = pl.DataFrame({"unit": unit, "klo": clip(_k_ceil(c, self.start_ms, self.step_ms, self.K)),
                               "khi": clip(_k_ceil(c + dur, self.start_ms, self.step_ms, self.K))})
            ev = ev.filter(pl.col("khi") > pl.col("klo")).join(self.unit_gpus, on="unit", how="inner")
            _paint(dip, ev["klo"].to_numpy(), ev["khi"].to_numpy(), ev["gcol"].to_numpy(),
                   np.ones(ev.height, bool))
        dip &= running

        thr = np.full((T, G), -1, np.int64)
        _paint(thr, clip(self.t_klo), clip(self.t_khi), self.t_g, np.arange(len(self.t_g)))
        throttled = thr >= 0
        ti = np.where(throttled, thr, 0)

        # GPU gauges
        act = np.where(running, slow * np.where(dip, CKPT_DIP_ACTIVITY, 1.0), 0.0)
        noise = lambda sd: rng.standard_normal((T, G)) * sd  # noqa: E731
        util = np.clip(np.rint(util0 * act + noise(1.0) * running), 0, 100)
        sm = np.clip(sm0 * act + noise(0.005) * running, 0, 1)
        sm = np.where(hang, np.abs(noise(0.002)), sm)
        gr = np.clip(np.maximum(sm, util0 / 100 * act * 0.97 + noise(0.005) * running), 0, 1)
        ten = np.clip(ten0 * act + noise(0.005) * running, 0, 1)
        dram = np.clip(dram0 * act + noise(0.005) * running, 0, 1)
        fb_used = np.where(busy, np.minimum(np.rint(fb0 * self.mem * (1 + noise(0.001))),
                                            self.mem - self.fb_reserved), 0.0)
        fb_free = self.mem - self.fb_reserved - fb_used
        pf = np.where(running, pf0 * slow * np.where(dip, CKPT_DIP_POWER, 1.0), 0.0)
        pf = np.where(hang, HANG_POWER_FRAC, pf) * np.where(throttled & busy, 0.85, 1.0)
        span = self.tdp - self.idle
        power = self.idle + pf * span + noise(1.0) * np.where(running, 0.008 * span, 0.3)
        power = np.round(np.maximum(power, 0.0), 3)
        temp = self.idle_temp + TEMP_RISE_AT_TDP_C * (power - self.idle) / span + self.temp_off + noise(0.3)
        temp = np.rint(np.where(throttled, self.t_temp[ti] + noise(0.5), temp))
        clock = np.where(busy, self.max_clock * (1 - 0.06 * pf), IDLE_SM_CLOCK_MHZ)
        clock = _round_to(clock * np.where(throttled, 1 - self.t_drop[ti], 1.0), 15)
        bits = np.where(throttled, self.t_bits[ti], 0)
        xid = np.zeros((T, G), np.int32)
        _paint(xid, clip(self.x_klo), clip(self.x_khi), self.x_g, self.x_val)
        energy, self.energy = _counter(np.where(present_g, power * step_s * 1000, 0.0), reset_g, self.energy)

        # node level: rails follow their GPU, storage NICs carry Lustre, IPMI adds the node's base power
        rate = np.where(running, np.where(multi, MULTI_NODE_RAIL_BPS, SINGLE_NODE_RAIL_BPS) * act, 0.0)
        rate *= 1 + noise(0.05) * running
        tx_rail = _group_sum((rate * step_s)[:, self.rail_order], self.rail_bounds).reshape(T, N, C)
        rx_rail = tx_rail * (1 + rng.standard_normal((T, N, C)) * 0.01 * (tx_rail > 0))
        n_run = _group_sum(running.astype(np.float64), self.node_bounds)
        read_b = n_run * LUSTRE_READ_BPS_PER_GPU * step_s * rng.uniform(0.8, 1.2, (T, N))
        write_b += (n_run > 0) * LUSTRE_LOG_WRITE_BPS * step_s
        bg = NIC_BACKGROUND_BPS * step_s
        tx = np.concatenate([tx_rail, np.repeat((write_b / S)[:, :, None], S, axis=2)], axis=2) + bg
        rx = np.concatenate([rx_rail, np.repeat((read_b / S)[:, :, None], S, axis=2)], axis=2) + bg
        present_nic = np.repeat(present_n, C + S, axis=1)
        reset_nic = np.repeat(reset_n, C + S, axis=1)
        rx_c, self.nic_rx = _counter(np.where(present_nic, np.rint(rx.reshape(T, -1)), 0.0), reset_nic, self.nic_rx)
        tx_c, self.nic_tx = _counter(np.where(present_nic, np.rint(tx.reshape(T, -1)), 0.0), reset_nic, self.nic_tx)
        rd_c, self.lu_read = _counter(np.where(present_n, np.rint(read_b), 0.0), reset_n, self.lu_read)
        wr_c, self.lu_write = _counter(np.where(present_n, np.rint(write_b), 0.0), reset_n, self.lu_write)
        node_w = (self.node_base_w + NODE_BUSY_EXTRA_W * n_run / np.maximum(self.gpus_per_node, 1)
                  + _group_sum(power, self.node_bounds) + rng.standard_normal((T, N)) * 6.0)
        node_w = np.rint(node_w)

        def fam(present, metrics):
            s = present.shape[1]
            # the present rows' indices, found once: a boolean mask would be scanned again for every metric
            keep = None if present.all() else np.flatnonzero(present.ravel())
            sel = (lambda a: a) if keep is None else (lambda a: a.take(keep))  # noqa: E731
            out = {"ts": sel(np.repeat(t_ms, s)), "series": sel(np.tile(np.arange(s), T))}
            for name, arr in metrics.items():
                out[name] = sel(arr.ravel())
            return out

        i32 = lambda a: a.astype(np.int32)  # noqa: E731
        return {
            "dcgm": fam(present_g, {
                "DCGM_FI_DEV_GPU_UTIL": i32(util), "DCGM_FI_PROF_SM_ACTIVE": np.round(sm, 6),
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": np.round(gr, 6),
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.round(ten, 6),
                "DCGM_FI_PROF_DRAM_ACTIVE": np.round(dram, 6),
                "DCGM_FI_DEV_FB_USED": i32(fb_used), "DCGM_FI_DEV_FB_FREE": i32(fb_free),
                "DCGM_FI_DEV_POWER_USAGE": power,
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": np.rint(energy).astype(np.int64),
                "DCGM_FI_DEV_GPU_TEMP": i32(temp), "DCGM_FI_DEV_SM_CLOCK": i32(clock),
                "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": i32(bits), "DCGM_FI_DEV_XID_ERRORS": xid,
                "hpc_job": job_code}),
            "nic": fam(present_nic, {"node_infiniband_port_data_received_bytes_total": rx_c,
                                     "node_infiniband_port_data_transmitted_bytes_total": tx_c}),
            "lustre": fam(present_n, {"lustre_read_bytes_total": rd_c, "lustre_write_bytes_total": wr_c}),
            "ipmi": fam(present_n, {"ipmi_dcmi_power_consumption_watts": node_w}),
        }


def _write_parquet(path: Path, labels: pl.DataFrame, family: str, data: dict, job_names: pl.Series) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = family_schema(family)
    cols = [pl.Series("timestamp", data["ts"], pl.Int64).cast(pl.Datetime("ms")).dt.replace_time_zone("UTC")]
    cols += labels[pl.Series(data["series"], dtype=pl.Int64)].get_columns()
    if "hpc_job" in data:  # a label that changes with the job holding the GPU: a column of its own
        cols.append(job_names.gather(data["hpc_job"]))
    cols += [pl.Series(m, data[m]).cast(schema[m]) for m in schema if m in data and m != "hpc_job"]
    # lz4: a day's files in two thirds of zstd's CPU, 1.4 x its bytes (docs/benchmarks.md, Generator, Round 3)
    pl.DataFrame(cols).write_parquet(path, compression="lz4")
    return path.stat().st_size


def _write_openmetrics(folder: Path, om_labels: dict[str, pl.Series], fams: dict) -> tuple[int, int, int]:
    """One .om file per 2-hour window the day's samples fall in; rows are in time order."""
    folder.mkdir(parents=True, exist_ok=True)
    w_ms = WINDOW_S * 1000
    first = min(int(d["ts"][0]) for d in fams.values() if len(d["ts"])) if any(
        len(d["ts"]) for d in fams.values()) else None
    if first is None:
        return 0, 0, 0
    last = max(int(d["ts"][-1]) for d in fams.values() if len(d["ts"]))
    files = samples = nbytes = 0
    for w0 in range(first // w_ms * w_ms, last + 1, w_ms):
        path = folder / f"{w0 // 1000}.om"
        with open(path, "wb") as f:
            for fam in FAMILIES:
                d = fams[fam]
                i0, i1 = (int(i) for i in np.searchsorted(d["ts"], [w0, w0 + w_ms]))
                # each series' samples together, in time order (rows are time-major: a stable sort)
                o = i0 + np.argsort(d["series"][i0:i1], kind="stable")
                part = pl.DataFrame({
                    "l": om_labels[fam][pl.Series(d["series"][o], dtype=pl.Int64)],
                    "ts": pl.Series(d["ts"][o] // 1000, dtype=pl.Int64)})
                part = part.select("l", ts=pl.lit(" ") + pl.col("ts").cast(pl.String))
                for f_, name, typ, help_ in METRICS:
                    if f_ != fam:
                        continue
                    family = name[: -len("_total")] if typ == "counter" else name
                    f.write(f"# HELP {family} {help_}\n# TYPE {family} {typ}\n".encode())
                    if i1 == i0:
                        continue
                    v = pl.Series(d[name][o])
                    if v.dtype == pl.Float64 and typ == "counter":
                        v = v.cast(pl.Int64)  # integral byte counts: print without ".0"
                    lines = part.select(pl.concat_str([pl.lit(name), pl.col("l"), v.cast(pl.String),
                                                       pl.col("ts")]).alias("x"))
                    lines.write_csv(f, include_header=False, quote_style="never")
                    samples += i1 - i0
            f.write(b"# EOF\n")
        files += 1
        nbytes += path.stat().st_size
    return files, samples, nbytes

