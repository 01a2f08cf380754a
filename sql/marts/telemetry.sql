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

-- The window's samples are read once, into one row per GPU and model of partial sums and extremes (the
-- means are sums over counts of non-null values, as avg is): a scalar subquery is evaluated once per query
-- wherever it is named, where a CTE over gpu_sample is inlined, and read again, at each of the three places
-- below that name it (issue 51: 8.0 M rows read three times in the demo). FINAL stays: a reload that replaces
-- a node's GPU model rewrites rows of the same key (cluster, node, gpu, ts), which only FINAL collapses.
    (SELECT groupArray((cluster, node, gpu, model_name, util_s, util_n, sm_s, sm_n, tensor_s, tensor_n,
                        dram_s, dram_n, power_s, power_n, power_w_max, energy_mj, temp_c_max, throttle_n,
                        throttled_s))
     FROM (SELECT cluster, node, gpu, model_name,
                  sum(gpu_util_pct) AS util_s, count(gpu_util_pct) AS util_n,
                  sum(sm_active) AS sm_s, count(sm_active) AS sm_n,
                  sum(tensor_active) AS tensor_s, count(tensor_active) AS tensor_n,
                  sum(dram_active) AS dram_s, count(dram_active) AS dram_n,
                  sum(power_w) AS power_s, count(power_w) AS power_n,
                  max(power_w) AS power_w_max,
                  -- sums in integers: parallel float sums differ in the last bits from run to run
                  sum(toInt64(round(energy_j * 1000))) AS energy_mj,
                  max(temp_c) AS temp_c_max,
                  count(throttle_reasons) AS throttle_n,
                  sum(if(gpu_is_throttled(throttle_reasons), step_s, 0)) AS throttled_s
           FROM gpu_sample FINAL
           WHERE ts >= w_start AND ts < w_end
           GROUP BY cluster, node, gpu, model_name)) AS per_gpu_rows,

gpu AS (
    SELECT t.1 AS cluster, t.2 AS node, t.3 AS gpu, t.4 AS model_name, t.5 AS util_s, t.6 AS util_n,
           t.7 AS sm_s, t.8 AS sm_n, t.9 AS tensor_s, t.10 AS tensor_n, t.11 AS dram_s, t.12 AS dram_n,
           t.13 AS power_s, t.14 AS power_n, t.15 AS power_w_max, t.16 AS energy_mj, t.17 AS temp_c_max,
           t.18 AS throttle_n, t.19 AS throttled_s, {{gpu_key}} AS k
    FROM (SELECT arrayJoin(per_gpu_rows) AS t)
),

gpu_stats AS (
    SELECT
        k,
        -- means rounded: parallel float sums differ in the last bits from run to run
        round(sum(util_s) / nullIf(sum(util_n), 0), 6) AS gpu_util_mean,
        round(sum(sm_s) / nullIf(sum(sm_n), 0), 9) AS sm_active_mean,
        round(sum(tensor_s) / nullIf(sum(tensor_n), 0), 9) AS tensor_active_mean,
        round(sum(dram_s) / nullIf(sum(dram_n), 0), 9) AS dram_active_mean,
        round(sum(power_s) / nullIf(sum(power_n), 0), 6) AS power_w_mean,
        max(power_w_max) AS power_w_max,
        sum(energy_mj) / 3.6e9 AS energy_kwh,
        max(temp_c_max) AS temp_c_max,
        if(sum(throttle_n) = 0, NULL, sum(throttled_s) / 3600) AS throttled_hours
    FROM gpu
    GROUP BY k
),

-- which group a node's samples count in (node-level metrics have no GPU index); with several groupings
-- (ops_warehouse.analytics.telemetry.telemetry_groupings) a node is in one group of each, and a node without
-- GPU samples gets each grouping's own key (an arrayJoin of them, where nk.k is null)
node_key AS (
    SELECT DISTINCT node, {{node_key}} AS k FROM gpu
),

nodes AS (
    SELECT
        {{node_row_key}} AS k,
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
