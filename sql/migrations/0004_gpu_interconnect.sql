-- NVLink and PCIe traffic per GPU: dcgm-exporter reports the profiling fields as rates (bytes per second,
-- averaged over the step) and NVLINK_BANDWIDTH_TOTAL as a counter (bytes in the step).
ALTER TABLE gpu_sample{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS pcie_tx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS pcie_rx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS nvlink_tx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS nvlink_rx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS nvlink_bytes Nullable(Float64);

-- the Distributed table in front of it on a cluster (on one server this is the same table: a no-op)
ALTER TABLE gpu_sample {{on_cluster}}
    ADD COLUMN IF NOT EXISTS pcie_tx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS pcie_rx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS nvlink_tx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS nvlink_rx_bytes_per_s Nullable(Float64),
    ADD COLUMN IF NOT EXISTS nvlink_bytes Nullable(Float64);
