-- Whether a node-hour's whole-node (IT) energy was measured: the node reported IPMI power (node_hour's
-- node_power_w_avg) and its GPUs' samples cover some of the hour, the time it_energy_j.sql multiplies that power
-- by. A node-hour with power but no GPU sample has no measured node energy (it_energy_j gives the GPUs' alone):
-- cost.sql's ipmi_energy_share and job_energy.sql's node_power (through run_node_hour's node_power_measured)
-- read this one rule, so "measured at the node" means one thing in both.
CREATE OR REPLACE FUNCTION node_energy_measured {{on_cluster}} AS (node_power_w, covered_s) ->
    toUInt8(node_power_w IS NOT NULL AND covered_s > 0);
