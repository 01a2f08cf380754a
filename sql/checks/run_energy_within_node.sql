-- law: a node-hour's GPU energy is the runs' and the rest's, once: (1) the GPU energy run_sample_hour gives the
--   runs labelled on the node (their own readings' counter steps, migration 0025) and the steps of readings
--   another job's label names in their time ≤ capacity_node_hour's GPU energy, the rest being the unlabelled
--   readings' (idle GPUs, runs no label names); (2) where runs held the node, their GPU energy as the marts
--   read it (run_node_hour: gpu_s × energy_j_per_allocated, each labelled run's own and the rest shared) =
--   the node-hour's GPU energy, each in the hour the counter's steps end in (gpu_hour's: the grain's rows hold
--   a step read at the next hour's sample in the hour it was drawn in, next_hour_energy_j says how much).
-- why: the energy counter's steps are counted once per node-hour by capacity_node_hour (gpu_hour) and split
--   among the runs by the one attribution rule (sql/functions/reading_is_runs.sql); more than the node drew is
--   a step counted for two runs or twice, and a run-level sum off the node's is a grain written by another
--   version of the SQL, or a hand-made row. In kWh, to law_breaks' 1e-6 kWh (3.6 J: under 1e-6 of a busy
--   node-hour's energy; capacity_node_hour rounds it to the mJ).
-- Rows: section, key (node and hour), figure, value, bound, off_by (kWh). Node-hours capacity_node_hour has
--   telemetry for (the hours that ended by the cut).
WITH
    toDateTime({from_ts:DateTime('UTC')}, 'UTC') AS w0,
    toDateTime({to_ts:DateTime('UTC')}, 'UTC') AS w1,
node AS (
    SELECT node, hour, sum(gpu_energy_j) AS energy_j, sum(allocated_gpu_s) AS allocated_gpu_s
    FROM capacity_node_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= w0 AND hour < w1 AND covered_gpu_s > 0
    GROUP BY node, hour
),
-- the labelled runs' rows, by the hour each step is read in; own_piece_j: the runs' own as the rows hold it
grain AS (
    SELECT node, hour, sum(own_j) AS own_j, sum(other_j) AS other_j, sum(own_piece_j) AS own_piece_j
    FROM (SELECT node, hour, ifNull(gpu_energy_j, 0) - next_hour_energy_j AS own_j,
                 other_job_energy_j - other_next_hour_j AS other_j, ifNull(gpu_energy_j, 0) AS own_piece_j
          FROM run_sample_hour FINAL
          WHERE cluster = {cluster:String} AND hour >= w0 AND hour < w1 AND attribution = 'gpu'
          UNION ALL
          -- (the shifted hour under another name inside: the engine reads a SELECT's alias in its WHERE)
          SELECT node, read_hour AS hour, own_j, other_j, 0.
          FROM (SELECT node, hour + toIntervalHour(1) AS read_hour, next_hour_energy_j AS own_j,
                       other_next_hour_j AS other_j
                FROM run_sample_hour FINAL
                WHERE cluster = {cluster:String} AND hour >= w0 - toIntervalHour(1)
                  AND hour < w1 - toIntervalHour(1) AND attribution = 'gpu'))
    GROUP BY node, hour
),
runs AS (
    SELECT node, hour, sum(gpu_s * energy_j_per_allocated) AS energy_j
    FROM run_node_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= w0 AND hour < w1
    GROUP BY node, hour
),
within AS (
    SELECT 'run_sample_hour vs capacity_node_hour' AS section,
           concat(n.node, ' ', formatDateTime(n.hour, '%F %H:00')) AS key,
           'Σ labelled runs'' own + other jobs'' GPU energy ≤ node-hour GPU energy' AS figure,
           (ifNull(g.own_j, 0) + ifNull(g.other_j, 0)) / 3.6e6 AS value, n.energy_j / 3.6e6 AS bound
    FROM node AS n LEFT JOIN grain AS g ON g.node = n.node AND g.hour = n.hour
),
agrees AS (
    SELECT 'run_node_hour vs capacity_node_hour' AS section,
           concat(n.node, ' ', formatDateTime(n.hour, '%F %H:00')) AS key,
           'Σ runs'' GPU energy (own, read in the hour its steps end in, + the rest) = node-hour GPU energy' AS figure,
           (r.energy_j - ifNull(g.own_piece_j, 0) + ifNull(g.own_j, 0)) / 3.6e6 AS value, n.energy_j / 3.6e6 AS bound
    FROM node AS n
    INNER JOIN runs AS r ON r.node = n.node AND r.hour = n.hour
    LEFT JOIN grain AS g ON g.node = n.node AND g.hour = n.hour
    WHERE n.allocated_gpu_s > 0
)
SELECT * FROM (
    SELECT section, key, figure, value, bound, value - bound AS off_by FROM within
    WHERE law_breaks_le(value, bound)
    UNION ALL
    SELECT section, key, figure, value, bound, value - bound AS off_by FROM agrees
    WHERE law_breaks_eq(value, bound))
ORDER BY section, abs(off_by) DESC, key, figure
SETTINGS join_use_nulls = 1;
