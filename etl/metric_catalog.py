"""The metric catalog: exporter metric names -> warehouse columns (shipped default, overridable in config).

Each entry: (grain, column, kind, scale, per_device, match). grain "gpu" rows are keyed by node + gpu index,
"node" rows by node (with the ``device`` label, and the ``port`` label when it is not 1, kept as the NIC key
of the per-NIC columns). kind "gauge" is stored as sampled (times scale); "counter" becomes the amount in
each step, resets handled (times scale). ``match``: label values a series must have to count (HPE/GSI
lustre_exporter publishes ``lustre_read_bytes_total`` for clients with ``component="client"`` and for OSTs
with ``component="ost"``; only the client's is a node's I/O). A metric a site does not export is simply absent.

Every name is one a real exporter publishes (tests/test_exporters_real.py loads their saved scrapes):
dcgm-exporter's ``DCGM_FI_*`` (DCGM field names; ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` is DCGM 3.3's name for
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``), node_exporter's infiniband and netdev collectors, HPE/GSI
lustre_exporter's client llite stats, prometheus-community ipmi_exporter's DCMI collector. Lustre job_stats
(``lustre_job_*``, published alike by HPE/GSI lustre_exporter and whamcloud lustrefs-exporter) are not
catalog columns: they load into ``lustre_job_io`` (etl/lustre_jobs.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    grain: str  # gpu | node
    column: str
    kind: str  # gauge | counter
    scale: float = 1.0
    per_device: bool = False  # node metrics kept per `device` label (Map column)
    match: tuple[tuple[str, str], ...] = ()  # (label, value) pairs a series must carry to count


DEFAULT_CATALOG: dict[str, Metric] = {
    "DCGM_FI_DEV_GPU_UTIL": Metric("gpu", "gpu_util_pct", "gauge"),
    "DCGM_FI_PROF_SM_ACTIVE": Metric("gpu", "sm_active", "gauge"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": Metric("gpu", "gr_engine_active", "gauge"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": Metric("gpu", "tensor_active", "gauge"),
    "DCGM_FI_PROF_DRAM_ACTIVE": Metric("gpu", "dram_active", "gauge"),
    "DCGM_FI_DEV_FB_USED": Metric("gpu", "fb_used_mib", "gauge"),
    "DCGM_FI_DEV_FB_FREE": Metric("gpu", "fb_free_mib", "gauge"),
    "DCGM_FI_DEV_POWER_USAGE": Metric("gpu", "power_w", "gauge"),
    # mJ counter -> joules in the step
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": Metric("gpu", "energy_j", "counter", 0.001),
    "DCGM_FI_DEV_GPU_TEMP": Metric("gpu", "temp_c", "gauge"),
    "DCGM_FI_DEV_SM_CLOCK": Metric("gpu", "sm_clock_mhz", "gauge"),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": Metric("gpu", "throttle_reasons", "gauge"),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": Metric("gpu", "throttle_reasons", "gauge"),
    "DCGM_FI_DEV_XID_ERRORS": Metric("gpu", "xid_last", "gauge"),
    # interconnect: the profiling fields are rates (bytes/s), NVLINK_BANDWIDTH_TOTAL a byte counter
    "DCGM_FI_PROF_PCIE_TX_BYTES": Metric("gpu", "pcie_tx_bytes_per_s", "gauge"),
    "DCGM_FI_PROF_PCIE_RX_BYTES": Metric("gpu", "pcie_rx_bytes_per_s", "gauge"),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": Metric("gpu", "nvlink_tx_bytes_per_s", "gauge"),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": Metric("gpu", "nvlink_rx_bytes_per_s", "gauge"),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": Metric("gpu", "nvlink_bytes", "counter"),
    "node_infiniband_port_data_received_bytes_total": Metric("node", "nic_rx_bytes", "counter", per_device=True),
    "node_infiniband_port_data_transmitted_bytes_total": Metric("node", "nic_tx_bytes", "counter", per_device=True),
    "node_network_receive_bytes_total": Metric("node", "nic_rx_bytes", "counter", per_device=True),
    "node_network_transmit_bytes_total": Metric("node", "nic_tx_bytes", "counter", per_device=True),
    # HPE/GSI lustre_exporter, client llite stats: {component="client",target="<fs>-<superblock>"}
    "lustre_read_bytes_total": Metric("node", "lustre_read_bytes", "counter", match=(("component", "client"),)),
    "lustre_write_bytes_total": Metric("node", "lustre_write_bytes", "counter", match=(("component", "client"),)),
    "ipmi_dcmi_power_consumption_watts": Metric("node", "node_power_w", "gauge"),
}

GPU_COLUMNS = ["gpu_util_pct", "sm_active", "gr_engine_active", "tensor_active", "dram_active", "fb_used_mib",
               "fb_free_mib", "power_w", "energy_j", "temp_c", "sm_clock_mhz", "throttle_reasons", "xid_last",
               "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s",
               "nvlink_bytes"]
NODE_SCALAR_COLUMNS = ["lustre_read_bytes", "lustre_write_bytes", "node_power_w"]
NODE_MAP_COLUMNS = ["nic_rx_bytes", "nic_tx_bytes"]


def catalog(overrides: dict | None = None) -> dict[str, Metric]:
    """The default catalog with config overrides: ``{"metric_name": {"grain":…, "column":…, "kind":…,
    "match": {"label": "value"}}}``."""
    out = dict(DEFAULT_CATALOG)
    for name, spec in (overrides or {}).items():
        out[name] = Metric(spec["grain"], spec["column"], spec.get("kind", "gauge"), float(spec.get("scale", 1.0)),
                           bool(spec.get("per_device", False)),
                           tuple(sorted((str(k), str(v)) for k, v in (spec.get("match") or {}).items())))
    return out


# Labels that tie a dcgm-exporter series to a Kubernetes workload (Kubernetes mode; the old names before
# dcgm-exporter 2.x; Prometheus' exported_* when its own pod/namespace labels collide). dcgm-exporter emits a
# GPU's series once per pod using it (time-slicing: copies of the device value) and, for GPU_UTIL and
# FB_USED in per-process mode, the device-level series beside per-pod shares (internal/pkg/transformation/
# kubernetes.go); a GPU row takes the series with the fewest of these labels: the device-level one.
POD_LABELS = ("pod", "namespace", "container", "pod_name", "pod_namespace", "container_name",
              "exported_pod", "exported_namespace", "exported_container")


def nic_key(device: str | None, port: str | None) -> str:
    """The NIC key of node_sample.nic_device: the device, ``device:port`` for a port other than 1 (a dual-port
    HCA has two series per device; node_exporter labels them ``device`` and ``port``)."""
    device = device or ""
    return device if port in (None, "", "1") else f"{device}:{port}"
