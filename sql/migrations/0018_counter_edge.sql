-- Counters continue across loads (issue 31). The sample tables hold each counter as the amount in its step,
-- so a load cannot step its first sample of a series against the last one an earlier load saw: that raw,
-- cumulative value is gone. counter_edge keeps it: every telemetry load writes, per counter series, the last
-- sample it loaded (sql/staging/counter_edge.sql), and the next load's first sample of the series steps against
-- the latest edge before it (sql/staging/counter_edge_seed.sql). A day of scrapes loaded as one load or as 288
-- gives the same rows.
--
-- kind: the staging relation it seeds (gpu, node, job); key: the series within the node (gpu: [GPU index];
-- node: [family and labels, device]; job: [jobid, target, component, operation, metric]); value: the raw values
-- of the series' counters (and the Xid gauge, whose change is an event) at ts.
-- One row per series per load (a reload writes the same row); sorted by time first, so a load reads only the
-- last days' edges.
CREATE TABLE IF NOT EXISTS counter_edge {{on_cluster}}
(
    cluster LowCardinality(String),
    kind LowCardinality(String),
    node LowCardinality(String),
    key Array(String),
    ts DateTime('UTC'),
    value Map(LowCardinality(String), Float64)
)
ENGINE = {{mergetree_all ReplacingMergeTree}}
PARTITION BY toYYYYMM(ts)
ORDER BY (cluster, kind, ts, node, key);
