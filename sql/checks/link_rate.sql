-- law: the bytes a node moved over its NICs, and read from and wrote to storage, in an hour ≤ its link
--   rate × the hour, in every node-hour where the inventory knows the node's rates.
-- why: a link cannot carry more than its line rate; bytes beyond it are a counter that wrapped or reset, a
--   double-counted sample or a unit error (bits for bytes).
-- Rows: section, key (node and hour), figure, value ≤ bound broken by off_by (bytes); or, where the
--   inventory records no link rate, one row saying so (not_checked): node_inventory holds no NIC or storage
--   link rate today (its columns are the inventory CSV's: node, gpu_model, gpus, partition, rack, dates,
--   cpus), so the law cannot be checked until it does.
SELECT '' AS section, '' AS key, '' AS figure, toFloat64(0) AS value, toFloat64(0) AS bound, toFloat64(0) AS off_by,
       'node_inventory records no NIC or storage link rate (nic_bytes_per_s, storage_bytes_per_s)' AS not_checked
FROM system.one
WHERE (SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = 'node_inventory'
       AND name IN ('nic_bytes_per_s', 'storage_bytes_per_s')) < 2;
