-- Allocated but idle: the allocated GPU time of a node-hour (capacity_node_hour) that the GPU samples saw
-- (allocated_observed_gpu_s) and not busy (busy_gpu_s: the samples inside the runs' allocations at or above the
-- idle threshold, sql/intermediate/run_sample_hour.sql). Both are per sample and busy ≤ observed, so this is
-- never negative; allocated time no sample saw is unknown, not idle (0 here). The utilization and daily
-- timeline marts sum it.
CREATE OR REPLACE FUNCTION allocated_idle_gpu_s {{on_cluster}} AS (allocated_observed_gpu_s, busy_gpu_s) ->
    greatest(0, allocated_observed_gpu_s - busy_gpu_s);
