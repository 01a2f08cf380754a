-- cluster_as_of: how far the loaded job history of each Slurm cluster reaches (grain: cluster). Nothing is
-- known of a cluster's use after as_of_ts, so the capacity grain and the marts stop there: a month still in
-- progress is reported through this time, not to its end (docs/monthly.md, "A month in progress").
--   as_of_ts  the later of
--             - the latest time any loaded job record describes: the end of an ended run, the time sacct (or
--               slurmdbd) last saw a running run (its start + elapsed as printed), the submit time of a
--               pending one (every loaded version of a run counts: each was true when it was read);
--             - how far a source was read when it was read (etl_source_extract: a sacct window run by the
--               product, a slurmdbd query), so a cluster that was idle when it was read is still known
--               through then (the live Slurm test's past hour is read days later).
--   first_ts  the earliest start (submit, for a run that never started) of the loaded history
-- Computed by cluster_as_of_model from every loaded version of every run, and kept in the table
-- as_of_by_cluster (migration 0012) by the job loads (sql/intermediate/as_of_by_cluster.sql, etl/grains.py):
-- the capacity grain's refresh, data_through.sql and every mart that stops there read it many times a
-- report, and it changes only with a job load. Rebuilt here whenever this file changes.
--- [model]
--- kind = "view"
--- defines = ["cluster_as_of_model", "cluster_as_of"]
--- reads = ["slurm_job_run", "etl_source_extract", "as_of_by_cluster"]
CREATE OR REPLACE VIEW cluster_as_of_model {{on_cluster}} AS
WITH

records AS (
    SELECT cluster,
           greatest(as_of_ts, coalesce(end_ts, as_of_ts)) AS as_of_ts,
           coalesce(start_ts, submit_ts) AS first_ts
    FROM slurm_job_run
),

-- a source's reading counts for a cluster with job records (a union, not a join: a view's join would
-- depend on the caller's join_use_nulls)
extracts AS (
    SELECT cluster, extracted_through AS as_of_ts, CAST(NULL, 'Nullable(DateTime(\'UTC\'))') AS first_ts
    FROM etl_source_extract
    WHERE cluster IN (SELECT DISTINCT cluster FROM slurm_job_run)
)

SELECT cluster,
       max(as_of_ts) AS as_of_ts,
       assumeNotNull(min(first_ts)) AS first_ts  -- every cluster here has a job record
FROM (SELECT * FROM records UNION ALL SELECT * FROM extracts)
GROUP BY cluster;

INSERT INTO as_of_by_cluster SELECT cluster, as_of_ts, first_ts, now64(3) FROM cluster_as_of_model;

CREATE OR REPLACE VIEW cluster_as_of {{on_cluster}} AS
SELECT cluster, as_of_ts, first_ts FROM as_of_by_cluster FINAL;
