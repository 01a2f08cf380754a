"""The metric catalog: exporter metric names -> warehouse columns (shipped default, overridable in config).

Each entry: (grain, column, kind, scale). grain "gpu" rows are keyed by node + gpu index, "node" rows by node
(with the ``device`` label kept as a map key for per-NIC columns). kind "gauge" is stored as sampled
(times scale); "counter" becomes the amount in each step, resets handled (times scale). A metric a site
does not export is simply absent.
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
    "lustre_client_read_bytes_total": Metric("node", "lustre_read_bytes", "counter"),
    "lustre_client_write_bytes_total": Metric("node", "lustre_write_bytes", "counter"),
    "ipmi_dcmi_power_consumption_watts": Metric("node", "node_power_w", "gauge"),
}

GPU_COLUMNS = ["gpu_util_pct", "sm_active", "gr_engine_active", "tensor_active", "dram_active", "fb_used_mib",
               "fb_free_mib", "power_w", "energy_j", "temp_c", "sm_clock_mhz", "throttle_reasons", "xid_last",
               "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s",
               "nvlink_bytes"]
NODE_SCALAR_COLUMNS = ["lustre_read_bytes", "lustre_write_bytes", "node_power_w"]
NODE_MAP_COLUMNS = ["nic_rx_bytes", "nic_tx_bytes"]


def catalog(overrides: dict | None = None) -> dict[str, Metric]:
    """The default catalog with config overrides: ``{"metric_name": {"grain":…, "column":…, "kind":…}}``."""
    out = dict(DEFAULT_CATALOG)
    for name, spec in (overrides or {}).items():
        out[name] = Metric(spec["grain"], spec["column"], spec.get("kind", "gauge"), float(spec.get("scale", 1.0)),
                           bool(spec.get("per_device", False)))
    return out
