-- cluster_as_of: how far the loaded job history of each Slurm cluster reaches (grain: cluster). Nothing is
-- known of a cluster's use after as_of_ts, so the capacity grain and the marts stop there: a month still in
-- progress is reported through this time, not to its end (docs/monthly.md, "A month in progress").
--   as_of_ts  the latest time any loaded job record describes: the end of an ended run, the time sacct (or
--             slurmdbd) last saw a running run (its start + elapsed as printed), the submit time of a
--             pending one. Every loaded version of a run counts: each was true when it was read.
--   first_ts  the earliest start (submit, for a run that never started) of the loaded history
-- Taken from the job records rather than from etl_watermark or etl_run_log: every load path writes job
-- records (files, sacct windows, slurmdbd), only some write a watermark, and neither log names the cluster.
CREATE OR REPLACE VIEW cluster_as_of {{on_cluster}} AS
SELECT cluster,
       max(greatest(as_of_ts, coalesce(end_ts, as_of_ts))) AS as_of_ts,
       min(coalesce(start_ts, submit_ts)) AS first_ts
FROM slurm_job_run
GROUP BY cluster;
