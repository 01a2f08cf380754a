-- Refresh as_of_by_cluster (migration 0012): how far each cluster's loaded job history reaches, as
-- cluster_as_of_model (sql/intermediate/cluster_as_of.sql) computes it, for every cluster. Run by the job
-- loads (etl/grains.py) first, before the grains that stop there.
--- [model]
--- kind = "full"
--- grain = "job_run"
--- writes = ["as_of_by_cluster"]
--- reads = ["cluster_as_of_model"]
INSERT INTO as_of_by_cluster SELECT cluster, as_of_ts, first_ts, now64(3) FROM cluster_as_of_model;
