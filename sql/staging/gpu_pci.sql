-- dcgm-exporter's pci_bus_id label -> gpu_pci: which GPU index each bus id of a node is (the kernel log names
-- GPUs by bus id only: xid_event_kernel.sql). {{input}} is the GPU rows of the window's exporter files
-- (etl/telemetry_insert.py; pci_bus_id '' where the exporter has no such label, dcgm-exporter before 3.x);
-- rows before the window (seeds) are left out. Per node and bus id, the latest sample's GPU and UUID.
INSERT INTO gpu_pci (cluster, node, pci_bus_id, gpu, uuid, last_ts)
SELECT {cluster:String}, node, pci, argMax(gpu, ts), argMax(uuid, ts), max(ts)
FROM (SELECT node, gpu, ts, uuid, pci_bus_key(pci_bus_id) AS pci FROM ({{input}})
      WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != '')
WHERE pci != ''
GROUP BY node, pci;
