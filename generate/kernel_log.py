"""The kernel log of the generated cluster: the driver's ``NVRM: Xid`` line for every Xid the scheduler
planted, where a real site finds its Xids (the DCGM_FI_DEV_XID_ERRORS gauge misses those of a node that goes
down at once).

``logs/kernel/<node>.log``, one file per node that logged an Xid, as ``journalctl -k -o short-iso`` prints
the journal (``2026-10-03T04:05:01+0000 h100-025 kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid='<unknown>',
name=<unknown>, GPU has fallen off the bus.``), in time order. The GPU is named by its slot's PCI bus, the same
one the dcgm-exporter telemetry labels it with (model.py PCI_BUSES). The texts after the code are in the
driver's style (79 and 31 as the real lines in tests/data/kernel_log/ have them; the loader reads only the bus
id and the code); an application's fault (Xid 31) names its process, a hardware fault found outside any call
names none (``pid='<unknown>'``), as the driver does. Deterministic: the lines follow from the frame.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from ops_warehouse.generate.model import kernel_pci_bus_id

# what the driver writes after the code, by code (the process part first)
_TEXTS = {
    79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    48: "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at partition 6, subpartition 0.",
    95: "pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No",
    74: "pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, "
        "0x0)",
    92: "pid='<unknown>', name=<unknown>, High single-bit ECC error rate",
    64: "pid='<unknown>', name=<unknown>, Row Remapper: failed to remap a row",
    31: "pid={pid}, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_3 faulted "
        "@ 0x7f3a_4f200000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
}
_OTHER = "pid='<unknown>', name=<unknown>, Xid {xid}"


def write_kernel_log(out_dir: Path, xids: pl.DataFrame) -> dict[str, int]:
    """Write ``<out_dir>/logs/kernel/<node>.log`` for the Xids (node, gpu, ts, xid); returns lines per node."""
    folder = Path(out_dir) / "logs" / "kernel"
    folder.mkdir(parents=True, exist_ok=True)
    if not xids.height:
        return {}
    codes = sorted(set(xids.get_column("xid").to_list()))
    gpus = range(int(xids.get_column("gpu").max()) + 1)
    lines = xids.sort("ts", "node", "gpu", "xid").select(
        "node",
        pl.concat_str([
            pl.col("ts").dt.convert_time_zone("UTC").dt.strftime("%Y-%m-%dT%H:%M:%S+0000"), pl.lit(" "),
            pl.col("node"), pl.lit(" kernel: NVRM: Xid (PCI:"),
            pl.col("gpu").replace_strict({g: kernel_pci_bus_id(g) for g in gpus}, return_dtype=pl.String),
            pl.lit("): "), pl.col("xid").cast(pl.String), pl.lit(", "),
            pl.col("xid").replace_strict({c: _TEXTS.get(c, _OTHER.replace("{xid}", str(c))) for c in codes},
                                         return_dtype=pl.String)
            # the faulting process's id, made from the time: deterministic
            .str.replace("{pid}", (pl.col("ts").dt.epoch("s") % 4_000_000 + 1000).cast(pl.String), literal=True),
        ]).alias("line"))
    counts = {}
    for (node,), part in lines.group_by(["node"], maintain_order=True):
        (folder / f"{node}.log").write_text("\n".join(part.get_column("line")) + "\n", encoding="utf-8")
        counts[node] = part.height
    return counts
