-- The kernel log's Xids -> xid_event. {{input}} is one row per Xid line the loader read
-- (etl/kernel_log_xid.py: the host as the log names it, the PCI bus id as the driver printed it, the time, the
-- code, the line's number); the GPU index is gpu_pci's for that node and bus id (dcgm-exporter's pci_bus_id
-- label). Lines of one GPU, code and second are one event (a graphics exception is logged as several lines;
-- the table's key keeps one). Lines whose bus id no GPU of the node has are not here: the loader quarantines
-- them (xid_event_kernel_unplaced.sql). The source (each row's: its file or VictoriaLogs URL) starts with
-- 'kernel:', what the gauge's load looks for.
INSERT INTO xid_event (cluster, node, gpu, ts, xid, source, step_s, pci_bus_id)
SELECT {cluster:String}, k.node, m.gpu, k.ts, k.xid, k.source, 0, k.pci
FROM (SELECT source, slurm_node(host) AS node, pci_bus_key(pci_bus_id) AS pci, toDateTime(ts, 'UTC') AS ts,
             toUInt32(xid) AS xid
      FROM {{input}}
      WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}) AS k
INNER JOIN (SELECT node, pci_bus_id AS pci, argMax(gpu, last_ts) AS gpu FROM gpu_pci FINAL
            WHERE cluster = {cluster:String} GROUP BY node, pci) AS m
    ON m.node = k.node AND m.pci = k.pci;
