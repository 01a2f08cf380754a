-- How far each source of job records had been read when it was read: a sacct window run by the product
-- (the window's end, or the time sacct ran if earlier) or a slurmdbd query (its window's end, or the time
-- of the query). The history's as-of time (sql/intermediate/cluster_as_of.sql) is the later of this and
-- the newest job record: a cluster idle when it was read is still known through then. A sacct file loaded
-- by hand says nothing of when it was written, so only its records count.
CREATE TABLE IF NOT EXISTS etl_source_extract {{on_cluster}}
(
    cluster LowCardinality(String),
    source String,
    extracted_through DateTime('UTC')
)
-- the newest reading of a source wins; a reload of an older window never moves it back
ENGINE = {{mergetree_all ReplacingMergeTree(extracted_through)}}
ORDER BY (cluster, source);
