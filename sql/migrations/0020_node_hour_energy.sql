-- Energy kept in the hourly grains (issue 32: the cost, chargeback and energy panels over a year read one
-- grain instead of joining a year of gpu_hour and node_hour at read time: 1.3-2.0 s -> see docs/benchmarks.md).
--
-- capacity_node_hour: the node-hour's measured energy, formed once by the refresh
-- (sql/intermediate/capacity_node_hour.sql) for the hours that ended by the cut, as the rest of its telemetry:
--   gpu_energy_j          the GPUs' energy: their counters, and for a GPU-hour without a counter its mean power ×
--                         the time its samples cover. Before this migration it was the counters alone, while
--                         cost and job_energy added the power samples: one name, two meanings; now one
--   gpu_counter_energy_j  of it, from the GPUs' energy counters
--   node_power_w_avg      the node's IPMI power (node_hour), NULL where it reported none
--   node_covered_s        the longest time one of its GPUs' samples covered in the hour (what IPMI power is
--                         multiplied by)
--   it_energy_j           the node-hour's IT energy (sql/functions/it_energy_j.sql): IPMI power × node_covered_s,
--                         never less than the GPUs' energy; the GPUs' energy where the node reported no power
-- Rows written before it hold 0 / NULL: the next load refreshes the whole history (etl/grains.py marks the
-- grain built), as `ops-report etl refresh` does.
ALTER TABLE capacity_node_hour{{local}} {{on_cluster}}
    ADD COLUMN IF NOT EXISTS gpu_counter_energy_j Float64 DEFAULT 0 AFTER gpu_energy_j,
    ADD COLUMN IF NOT EXISTS node_power_w_avg Nullable(Float64) AFTER gpu_counter_energy_j,
    ADD COLUMN IF NOT EXISTS node_covered_s Float64 DEFAULT 0 AFTER node_power_w_avg,
    ADD COLUMN IF NOT EXISTS it_energy_j Float64 DEFAULT 0 AFTER node_covered_s;
-- the Distributed table in front of it on a cluster (on one server this is the same table: a no-op)
ALTER TABLE capacity_node_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS gpu_counter_energy_j Float64 DEFAULT 0 AFTER gpu_energy_j,
    ADD COLUMN IF NOT EXISTS node_power_w_avg Nullable(Float64) AFTER gpu_counter_energy_j,
    ADD COLUMN IF NOT EXISTS node_covered_s Float64 DEFAULT 0 AFTER node_power_w_avg,
    ADD COLUMN IF NOT EXISTS it_energy_j Float64 DEFAULT 0 AFTER node_covered_s;

-- run_node_hour: the node-hour's energy as rates per GPU-second allocated on the node, beside
-- energy_j_per_allocated (gpu_energy_j's, so now with the power-sample fallback), so a run's energy is its
-- GPU-seconds × rates (sql/marts/job_energy.sql) without reading the node-hour again
ALTER TABLE run_node_hour {{on_cluster}}
    ADD COLUMN IF NOT EXISTS counter_j_per_allocated Nullable(Float64) AFTER energy_j_per_allocated,
    ADD COLUMN IF NOT EXISTS it_j_per_allocated Nullable(Float64) AFTER counter_j_per_allocated,
    ADD COLUMN IF NOT EXISTS node_power_measured UInt8 DEFAULT 0 AFTER it_j_per_allocated;
