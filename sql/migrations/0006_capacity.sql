-- Capacity: what was bought (the node inventory), when it could not be used (node state events), and what
-- was set aside (reservations). Raw layer; sql/intermediate/ builds the facts on top.

-- One row per node: its GPUs and where it sits. in_service_ts / retired_ts bound the time it counts as
-- capacity. A later load of the same node replaces the row (loaded_at).
CREATE TABLE IF NOT EXISTS node_inventory {{on_cluster}}
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
    loaded_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(loaded_at)}}
ORDER BY (cluster, node);

-- A node unusable for scheduling over [start_ts, end_ts): DOWN (failed, not responding) or DRAIN
-- (taken out by an operator or health check), with the reason Slurm recorded (`sacctmgr list event`,
-- slurmdbd's <cluster>_event_table). end_ts NULL: still in that state at the last load.
CREATE TABLE IF NOT EXISTS node_event {{on_cluster}}
(
    cluster LowCardinality(String),
    node String,
    start_ts DateTime('UTC'),
    end_ts Nullable(DateTime('UTC')),
    state LowCardinality(String),
    reason String,
    user String,
    source LowCardinality(String),
    loaded_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(loaded_at)}}
ORDER BY (cluster, node, start_ts, state);

-- A reservation: nodes held for accounts/users over [start_ts, end_ts) (`scontrol show reservation`,
-- slurmdbd's <cluster>_resv_table).
CREATE TABLE IF NOT EXISTS reservation {{on_cluster}}
(
    cluster LowCardinality(String),
    name String,
    start_ts DateTime('UTC'),
    end_ts DateTime('UTC'),
    nodes Array(String),
    partition LowCardinality(String),
    accounts Array(String),
    users Array(String),
    flags String,
    source LowCardinality(String),
    loaded_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(loaded_at)}}
ORDER BY (cluster, name, start_ts);

-- The cost model per GPU model (config [cost.<model>], synced like account_project): purchase price of a
-- node, years it is written off over, electricity price and the data centre's PUE.
CREATE TABLE IF NOT EXISTS cost_model {{on_cluster}}
(
    gpu_model String,
    node_price Float64,
    amortization_years Float64,
    power_price_per_kwh Float64,
    pue Float64,
    peak_bf16_tflops Float64,
    currency String,
    synced_at DateTime('UTC') DEFAULT now()
)
ENGINE = {{mergetree_all ReplacingMergeTree(synced_at)}}
ORDER BY gpu_model;
