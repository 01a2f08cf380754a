-- Exporter samples of the node-level families (NIC ports per device, Lustre, IPMI, ...) -> one
-- node_sample row per node and step in [from_ts, to_ts).
-- {{input}} is every family's rows renamed by the metric catalog (etl/telemetry_insert.py): node, series
-- (the family and its other labels: device, port, filesystem), device (the NIC, '' for node-level
-- families), ts, and the node columns, counters still cumulative. Counters become the amount in the step per
-- series (counter_step, sql/functions/); then a node's series at one time are put together: NICs as arrays
-- sorted by device (an unknown first step is 0 there: arrays hold no NULL), the node-level columns summed
-- over their series (several Lustre filesystems add up; IPMI DCMI gives one power reading per node).
INSERT INTO node_sample (cluster, node, ts, step_s, nic_device, nic_rx_bytes, nic_tx_bytes, lustre_read_bytes,
    lustre_write_bytes, node_power_w, source)
SELECT {cluster:String}, node, ts, {step_s:UInt32},
    arrayMap(x -> x.1, nic), arrayMap(x -> x.2, nic), arrayMap(x -> x.3, nic),
    lustre_read_bytes, lustre_write_bytes, node_power_w, {source:String}
FROM (
    SELECT node, ts,
        arraySort(groupArrayIf((device, ifNull(nic_rx_bytes, 0), ifNull(nic_tx_bytes, 0)), device != '')) AS nic,
        sum(lustre_read_bytes) AS lustre_read_bytes,
        sum(lustre_write_bytes) AS lustre_write_bytes,
        sum(node_power_w) AS node_power_w
    FROM (
        SELECT node, device, ts,
            counter_step(nic_rx_bytes, nic_rx_prev) AS nic_rx_bytes,
            counter_step(nic_tx_bytes, nic_tx_prev) AS nic_tx_bytes,
            counter_step(lustre_read_bytes, lustre_read_prev) AS lustre_read_bytes,
            counter_step(lustre_write_bytes, lustre_write_prev) AS lustre_write_bytes,
            node_power_w
        FROM (
            -- the previous values as plain columns, stepped a level up (as sql/staging/gpu_sample.sql: inside
            -- the window's select the statement cost a fifth more CPU for the same rows)
            SELECT *,
                lagInFrame(nic_rx_bytes) OVER series AS nic_rx_prev,
                lagInFrame(nic_tx_bytes) OVER series AS nic_tx_prev,
                lagInFrame(lustre_read_bytes) OVER series AS lustre_read_prev,
                lagInFrame(lustre_write_bytes) OVER series AS lustre_write_prev
            FROM ({{input}})
            WINDOW series AS (PARTITION BY node, series ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
        )
    )
    WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != ''
    GROUP BY node, ts
);
