-- dcgm-exporter's pci_bus_id label -> gpu_pci: which GPU index each bus id of a node is (the kernel log names
-- GPUs by bus id only: xid_event_kernel.sql). {{input}} is the GPU rows of the window's exporter files
-- (etl/telemetry_insert.py; pci_bus_id '' where the exporter has no such label, dcgm-exporter before 3.x);
-- rows before the window (seeds) are left out. Per node and bus id, the latest sample's GPU and UUID: the
-- latest of each label set's last samples (the bus id's key is worked out for those few, not for every row).
INSERT INTO gpu_pci (cluster, node, pci_bus_id, gpu, uuid, last_ts)
SELECT {cluster:String}, node, pci, argMax(gpu, last_ts), argMax(uuid, last_ts), max(last_ts)
FROM (SELECT node, gpu, uuid, last_ts, pci_bus_key(pci_bus_id) AS pci
      FROM (SELECT node, pci_bus_id, gpu, uuid, max(ts) AS last_ts FROM ({{input}})
            WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != ''
            GROUP BY node, pci_bus_id, gpu, uuid))
WHERE pci != ''
GROUP BY node, pci;
