-- Allocated but idle: the allocated GPU time of a node-hour (capacity_node_hour) the telemetry saw idle.
-- A GPU-hour is busy when its mean GPU utilization reached the idle threshold (busy_gpu_s); no work runs on
-- an unallocated GPU, so the allocated time not busy sat idle: allocated − busy, never below 0, and only
-- where telemetry covers the hour (0 without it). The utilization and daily timeline marts sum it.
CREATE OR REPLACE FUNCTION allocated_idle_gpu_s {{on_cluster}} AS (allocated_gpu_s, busy_gpu_s, covered_gpu_s) ->
    if(covered_gpu_s > 0, greatest(0, allocated_gpu_s - busy_gpu_s), 0);
