-- A node-hour's IT energy in joules, from what was measured: where the node reported IPMI power
-- (node_hour.node_power_w_avg), that power × the time its GPUs' samples cover, never less than the GPUs'
-- own energy; where it did not, the GPUs' energy alone (the rest of the node unknown). The energy cost
-- (cost.sql) charges it; job_energy.sql's rest of the node is it less the GPUs' energy.
CREATE OR REPLACE FUNCTION it_energy_j {{on_cluster}} AS (node_power_w, covered_s, gpu_j) ->
    if(node_power_w IS NULL, gpu_j, greatest(node_power_w * covered_s, gpu_j));
