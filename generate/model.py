"""The shapes the cluster generator's parts exchange: the cluster spec, GPU model facts, frame schemas.

The scheduler (schedule.py) produces the inventory, GPU allocations, node events and GPU faults below; the
sacct writer and the telemetry writer (telemetry.py) turn them into the files a real site has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class GpuModel:
    name: str  # as Slurm's gres type: h100
    model_name: str  # as dcgm-exporter's modelName label
    tdp_w: float
    idle_w: float
    memory_mib: int
    max_sm_clock_mhz: int
    idle_temp_c: float
    peak_bf16_tflops: float  # dense


GPU_MODELS = {
    "h100": GpuModel("h100", "NVIDIA H100 80GB HBM3", 700.0, 70.0, 81559, 1980, 32.0, 989.0),
    "h200": GpuModel("h200", "NVIDIA H200", 700.0, 75.0, 143771, 1980, 31.0, 989.0),
    "b200": GpuModel("b200", "NVIDIA B200", 1000.0, 120.0, 183359, 1965, 33.0, 2250.0),
}


@dataclass(frozen=True)
class Partition:
    name: str
    gpu_model: str
    nodes: int
    node_prefix: str
    rack_size: int = 4  # nodes per rack


@dataclass(frozen=True)
class ClusterSpec:
    name: str = "ai1"
    partitions: tuple[Partition, ...] = (
        Partition("h100", "h100", 90, "h100-"),
        Partition("h200", "h200", 16, "h200-"),
        Partition("b200", "b200", 8, "b200-"),
    )
    gpus_per_node: int = 8
    cpus_per_node: int = 112
    mem_per_node_mib: int = 2_000_000
    compute_nics: int = 8  # mlx5_0 .. mlx5_7, rail-optimized RoCE
    storage_nics: int = 2  # mlx5_8, mlx5_9
    accounts: tuple[str, ...] = tuple(f"proj{c}" for c in "abcdef")
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def n_nodes(self) -> int:
        return sum(p.nodes for p in self.partitions)


TS = pl.Datetime("ms", "UTC")

# One row per node.
INVENTORY_SCHEMA = {
    "node": pl.String, "partition": pl.String, "gpu_model": pl.String, "model_name": pl.String,
    "gpus": pl.Int32, "rack": pl.String, "in_service_ts": TS, "gpu_uuids": pl.List(pl.String),
}
# One row per (job run, node, GPU) while the GPU is allocated; the load profile of the job on it.
GPU_ALLOC_SCHEMA = {
    "job_id": pl.String, "node": pl.String, "gpu": pl.Int32, "start_ts": TS, "end_ts": TS,
    "gpu_util": pl.Float64,        # DCGM_FI_DEV_GPU_UTIL while busy, percent
    "sm_active": pl.Float64,       # 0..1
    "tensor_active": pl.Float64,   # 0..1
    "dram_active": pl.Float64,     # 0..1
    "fb_used_frac": pl.Float64,    # of the GPU's memory
    "power_frac": pl.Float64,      # 0..1 of the way from idle to TDP
    "hang_from_ts": TS,            # NCCL-hang-like stall from here to end_ts (null: none)
    "busy_from_ts": TS,            # quiet GPUs from start_ts to here: a restart's start-up (null: none)
    "ckpt_period_s": pl.Int64,     # checkpoint every N s: storage write burst, GPU dip (0: none)
    "ckpt_bytes": pl.Float64,      # bytes each checkpoint writes from this node
    "slowdown": pl.Float64,        # 1.0 normal; < 1 on a straggler node (its GPUs run slower)
}
# Node state changes, as slurmdbd's event table / sacctmgr show event report them.
NODE_EVENT_SCHEMA = {
    "node": pl.String, "start_ts": TS, "end_ts": TS, "state": pl.String, "reason": pl.String,
}
# GPU faults (Xid) and thermal throttling intervals.
XID_SCHEMA = {"node": pl.String, "gpu": pl.Int32, "ts": TS, "xid": pl.Int32}
THROTTLE_SCHEMA = {"node": pl.String, "gpu": pl.Int32, "start_ts": TS, "end_ts": TS}

# The PCI bus of each GPU slot of a node (the bus numbers of an 8-GPU HGX H100 board's GPUs, 18 to db; more
# slots continue past them): dcgm-exporter labels a GPU with it (pci_bus_id "00000000:1B:00.0", as NVML
# writes it) and the driver's kernel-log lines name the GPU by it ("PCI:0000:1b:00"), so the warehouse can
# tell which GPU a kernel-log Xid was on (etl/kernel_log_xid.py).
PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


def pci_bus(gpu: int) -> int:
    return PCI_BUSES[gpu] if gpu < len(PCI_BUSES) else 0xDC + gpu - len(PCI_BUSES)


def dcgm_pci_bus_id(gpu: int) -> str:
    """dcgm-exporter's pci_bus_id label of GPU ``gpu`` of a node (NVML's form)."""
    return f"00000000:{pci_bus(gpu):02X}:00.0"


def kernel_pci_bus_id(gpu: int) -> str:
    """The bus id the driver's NVRM lines print for GPU ``gpu`` of a node."""
    return f"0000:{pci_bus(gpu):02x}:00"
