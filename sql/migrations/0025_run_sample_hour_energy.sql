-- run_sample_hour's GPU energy by the one attribution rule (issue 52, round 6): a run's GPU energy was the
-- node-hour's shared by allocated GPU time, so where two runs shared a node each carried part of the other's
-- power. Now, on a 'gpu' row (the GPUs the run's hpc_job label names), the energy counter's steps of the
-- readings the rule gives the run (sql/functions/reading_is_runs.sql): each reading's step [ts - step_s, ts)
-- (the counter's step ends at the reading, as run_gpus reads it), cut at the hours and at the run's part of
-- each hour, spread evenly over the step; for a GPU-hour without a counter, its mean power × the step, as
-- capacity_node_hour's gpu_energy_j counts it.
--   gpu_energy_j          the run's own; NULL on 'node share' rows (their energy is the node-hour's rest,
--                         shared in run_node_hour) and where none of its readings had a counter or a power
--   gpu_counter_energy_j  of it, from counters
--   other_job_energy_j    the steps of readings another job's label names, in the run's time: not the run's;
--                         with the unlabelled readings' energy, the node-hour's rest, shared by the runs there
--   next_hour_energy_j, next_hour_counter_j, other_next_hour_j   of gpu_energy_j, gpu_counter_energy_j and
--                         other_job_energy_j, the part read at a sample of the next hour: gpu_hour, hence
--                         capacity_node_hour, counts a counter's step in the hour it ends in, so the law
--                         run_energy_within_node (sql/checks) and run_node_hour's rest move it there
-- 0 / NULL on rows written before this migration: the grain is rebuilt on upgrade (core/grain_versions.py).
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS gpu_energy_j Nullable(Float64) AFTER other_job_busy_gpu_s;
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS gpu_counter_energy_j Float64 DEFAULT 0 AFTER gpu_energy_j;
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS other_job_energy_j Float64 DEFAULT 0 AFTER gpu_counter_energy_j;
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS next_hour_energy_j Float64 DEFAULT 0 AFTER other_job_energy_j;
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS next_hour_counter_j Float64 DEFAULT 0 AFTER next_hour_energy_j;
ALTER TABLE run_sample_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS other_next_hour_j Float64 DEFAULT 0 AFTER next_hour_counter_j;
