-- Nodes with GPUs of several models (issue 49: `Gres=gpu:h100:2,gpu:h200:4`, which Slurm allows on one node):
-- the inventory and the capacity grain are keyed by (node, GPU model), so such a node counts its GPUs of each
-- model under that model, in capacity, utilization, cost and the Grafana views alike. A node with one model
-- keeps one row as before, with the same figures.
--
-- node_inventory: one row per node and GPU model (a node without GPUs: one row, model '', 0 GPUs). A later
-- load of a node still replaces what an earlier one said of it: etl/capacity_sources.py deletes the node's
-- rows of models the new load no longer lists (the key alone would keep them).
-- capacity_node_hour: one row per node, GPU model and hour; node_gpus is the whole node's GPUs (every
-- model), which a node's price is shared by (sql/marts/cost.sql). Rows written before have one model a node,
-- so node_gpus = gpus there.
--
-- Both are rebuilt with the new key and keep their rows; the first DROPs make a rerun after an interrupted
-- migration start over (at any point the original table, or the rebuilt one after the exchange, holds every
-- row). node_inventory is one table replicated whole on a cluster (mergetree_all); capacity_node_hour is
-- sharded by cityHash64(cluster, node), the key its copy is sent back to the shards by.

DROP TABLE IF EXISTS node_inventory_v2 {{on_cluster}};

CREATE TABLE IF NOT EXISTS node_inventory_v2 {{on_cluster}}
(
    cluster LowCardinality(String),
    node String,
    gpu_model LowCardinality(String),
    gpus UInt16,
    cpus UInt32,
    partition LowCardinality(String),
    rack LowCardinality(String),
    in_service_ts DateTime('UTC'),
    retired_ts Nullable(DateTime('UTC')),
    source LowCardinality(String),
    loaded_at DateTime64(3, 'UTC'),
    state LowCardinality(String) DEFAULT '',
    partitions Array(LowCardinality(String)) DEFAULT []
)
ENGINE = {{mergetree_all ReplacingMergeTree(loaded_at)}}
ORDER BY (cluster, node, gpu_model);

INSERT INTO node_inventory_v2 (cluster, node, gpu_model, gpus, cpus, partition, rack, in_service_ts, retired_ts,
                               source, loaded_at, state, partitions)
SELECT cluster, node, gpu_model, gpus, cpus, partition, rack, in_service_ts, retired_ts, source, loaded_at, state,
       partitions
FROM node_inventory FINAL;

EXCHANGE TABLES node_inventory AND node_inventory_v2 {{on_cluster}};

DROP TABLE node_inventory_v2 {{on_cluster}};

DROP TABLE IF EXISTS capacity_node_hour_v2{{local}} {{on_cluster}};

CREATE TABLE IF NOT EXISTS capacity_node_hour_v2{{local}} {{on_cluster}}
(
    cluster LowCardinality(String),
    node String,
    hour DateTime('UTC'),
    partition LowCardinality(String),
    gpu_model LowCardinality(String),
    rack LowCardinality(String),
    gpus UInt16,                 -- GPUs of this model on the node
    node_gpus UInt16,            -- GPUs of every model on the node
    capacity_gpu_s Float64,
    down_gpu_s Float64,
    drained_gpu_s Float64,
    reserved_gpu_s Float64,
    reservation String,
    allocated_gpu_s Float64,
    allocated_resv_gpu_s Float64,
    reserved_idle_gpu_s Float64,
    free_gpu_s Float64,
    busy_gpu_s Float64,
    covered_gpu_s Float64,
    allocated_observed_gpu_s Float64 DEFAULT 0,
    util_gpu_s Float64,
    sm_gpu_s Float64,
    tensor_gpu_s Float64,
    dram_gpu_s Float64,
    gpu_energy_j Float64,
    gpu_counter_energy_j Float64 DEFAULT 0,
    node_power_w_avg Nullable(Float64),
    node_covered_s Float64 DEFAULT 0,
    it_energy_j Float64 DEFAULT 0,
    throttled_gpu_s Float64,
    nic_rx_bytes Float64,
    nic_tx_bytes Float64,
    storage_read_bytes Float64,
    storage_write_bytes Float64,
    idle_util_pct Float64,
    refreshed_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree ReplacingMergeTree(refreshed_at)}}
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, node, hour, gpu_model);

INSERT INTO {{sharded capacity_node_hour_v2 cityHash64(cluster, node)}}
SELECT cluster, node, hour, partition, gpu_model, rack, gpus, gpus AS node_gpus, capacity_gpu_s, down_gpu_s,
       drained_gpu_s, reserved_gpu_s, reservation, allocated_gpu_s, allocated_resv_gpu_s, reserved_idle_gpu_s,
       free_gpu_s, busy_gpu_s, covered_gpu_s, allocated_observed_gpu_s, util_gpu_s, sm_gpu_s, tensor_gpu_s,
       dram_gpu_s, gpu_energy_j, gpu_counter_energy_j, node_power_w_avg, node_covered_s, it_energy_j,
       throttled_gpu_s, nic_rx_bytes, nic_tx_bytes, storage_read_bytes, storage_write_bytes, idle_util_pct,
       refreshed_at
FROM capacity_node_hour FINAL;

EXCHANGE TABLES capacity_node_hour{{local}} AND capacity_node_hour_v2{{local}} {{on_cluster}};

-- the Distributed table in front keeps the columns it was created with: it gets the new one
{{cluster_only}} ALTER TABLE capacity_node_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS node_gpus UInt16 DEFAULT gpus AFTER gpus;

DROP TABLE capacity_node_hour_v2{{local}} {{on_cluster}};
