-- The kernel log's Xid lines that no GPU of the warehouse is known by (see xid_event_kernel.sql): the node's
-- dcgm telemetry with its pci_bus_id label was not loaded, or has no GPU of that bus id. The loader
-- quarantines them with this reason; reloading the log after the telemetry places them.
SELECT k.source, k.line_no, k.node, k.pci
FROM (SELECT source, line_no, slurm_node(host) AS node, pci_bus_key(pci_bus_id) AS pci FROM {{input}}
      WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}) AS k
LEFT ANTI JOIN (SELECT DISTINCT node, pci_bus_id AS pci FROM gpu_pci WHERE cluster = {cluster:String}) AS m
    ON m.node = k.node AND m.pci = k.pci
ORDER BY k.source, k.line_no;
