-- Xids from the kernel log (issue 28): the driver's `NVRM: Xid (PCI:0000:3b:00): 79, ...` lines, where sites
-- see their Xids, beside the DCGM_FI_DEV_XID_ERRORS gauge, which holds only the last Xid at the scrape step
-- and is never sampled again after a fatal one took the node down (docs/telemetry.md, Kernel log).
--
-- xid_event.step_s: the step of the gauge row's samples (its Xid happened in (ts - step_s, ts]); 0 for a
-- kernel-log row, whose ts is the driver's own. The kernel-log load and the gauge load use it to keep one row
-- of an Xid both saw (functions/xid_same_event.sql). Rows loaded before this migration have 0.
-- xid_event.pci_bus_id: the GPU as the kernel names it (functions/pci_bus_key.sql); '' for gauge rows.
ALTER TABLE xid_event{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS step_s UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS pci_bus_id LowCardinality(String) DEFAULT '';
-- the Distributed table in front of it on a cluster (on one server this is the same table: a no-op)
ALTER TABLE xid_event {{on_cluster}}
    ADD COLUMN IF NOT EXISTS step_s UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS pci_bus_id LowCardinality(String) DEFAULT '';

-- Which GPU index a node's PCI bus id is, from dcgm-exporter's `pci_bus_id` label (every telemetry load
-- writes it: sql/staging/gpu_pci.sql): the kernel log names a GPU only by its bus id. One row per node and bus
-- id, the latest sample's GPU index and UUID kept (a board swapped into the slot keeps the bus id). Small (a
-- row per GPU) and read whole by every kernel-log load: a copy on every shard.
CREATE TABLE IF NOT EXISTS gpu_pci {{on_cluster}}
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    pci_bus_id String,              -- pci_bus_key(): 0000:af:00
    gpu UInt16,
    uuid String,
    last_ts DateTime('UTC')         -- the last sample that showed it
)
ENGINE = {{mergetree_all ReplacingMergeTree(last_ts)}}
ORDER BY (cluster, node, pci_bus_id);
