-- telemetry: a quick look at what is loaded, per cluster | node | gpu | gpu_model, over [from_date, to_date + 1 day).
-- {{key}} is the validated grouping expression (ops_warehouse.telemetry.BY_KEYS). Ratios are means over
-- samples; energy and bytes are sums of the per-step amounts; "throttled" counts samples whose clock-event
-- reasons carry a power or thermal slowdown bit (sql/functions/gpu_is_throttled.sql). A metric with no
-- samples is null. A node with node samples and no GPU samples (a CPU, login or storage node) counts in its
-- cluster's row and has a row of its own by node (by GPU model its row is "(no GPUs)"), its GPU metrics
-- null: the cluster's NIC and storage bytes are every node's.
--- [mart]
--- grain = "one row per key (cluster, node, GPU or GPU model)"
--- kind = "dates"
--- scope = "cluster"
--- takes = ["from_date", "to_date"]  # whole days, to_date inclusive
WITH
    toDateTime({from_date:Date}, 'UTC') AS w_start,
    toDateTime({to_date:Date} + 1, 'UTC') AS w_end,

gpu AS (
    SELECT *, {{gpu_key}} AS k
    FROM gpu_sample FINAL
    WHERE ts >= w_start AND ts < w_end
),

gpu_stats AS (
    SELECT
        k,
        -- means rounded, sums in integers: parallel float sums differ in the last bits from run to run
        round(avg(gpu_util_pct), 6) AS gpu_util_mean,
        round(avg(sm_active), 9) AS sm_active_mean,
        round(avg(tensor_active), 9) AS tensor_active_mean,
        round(avg(dram_active), 9) AS dram_active_mean,
        round(avg(power_w), 6) AS power_w_mean,
        max(power_w) AS power_w_max,
        sum(toInt64(round(energy_j * 1000))) / 3.6e9 AS energy_kwh,
        max(temp_c) AS temp_c_max,
        if(count(throttle_reasons) = 0, NULL,
           sum(if(gpu_is_throttled(throttle_reasons), step_s, 0)) / 3600) AS throttled_hours
    FROM gpu
    GROUP BY k
),

-- which group a node's samples count in (node-level metrics have no GPU index)
node_key AS (
    SELECT DISTINCT node, {{node_key}} AS k FROM gpu
),

nodes AS (
    SELECT
        coalesce(nk.k, {{node_only_key}}) AS k,
        if(count() = 0, NULL, sum(toUInt64(arraySum(n.nic_rx_bytes)))) AS nic_rx_bytes,
        if(count() = 0, NULL, sum(toUInt64(arraySum(n.nic_tx_bytes)))) AS nic_tx_bytes,
        sum(toUInt64(n.lustre_read_bytes)) AS storage_read_bytes,
        sum(toUInt64(n.lustre_write_bytes)) AS storage_write_bytes
    FROM node_sample AS n FINAL
    LEFT JOIN node_key AS nk ON n.node = nk.node
    WHERE n.ts >= w_start AND n.ts < w_end
    GROUP BY k
),

xids AS (
    SELECT {{gpu_key}} AS k, count() AS xid_events
    FROM xid_event AS x FINAL
    LEFT JOIN (SELECT DISTINCT cluster, node, gpu, model_name FROM gpu) AS g
        ON x.cluster = g.cluster AND x.node = g.node AND x.gpu = g.gpu
    WHERE x.ts >= w_start AND x.ts < w_end
    GROUP BY k
)

SELECT
    coalesce(g.k, n.k) AS key,
    g.gpu_util_mean, g.sm_active_mean, g.tensor_active_mean, g.dram_active_mean,
    g.power_w_mean, g.power_w_max, g.energy_kwh, g.temp_c_max, g.throttled_hours,
    {{node_metrics}}
    coalesce(x.xid_events, 0) AS xid_events
FROM gpu_stats AS g
{{nodes_join}} nodes AS n ON g.k = n.k
LEFT JOIN xids AS x ON coalesce(g.k, n.k) = x.k
ORDER BY key
SETTINGS join_use_nulls = 1
