-- The grid's carbon intensity hour by hour, as the site's grid operator or a data provider publishes it
-- (etl/carbon_intensity.py: an Electricity Maps hourly export, NESO's historic generation mix, or a CSV of the
-- site's own; `ops-report etl carbon FILE`). One row per cluster and hour: the cluster whose runs' energy it
-- prices (sql/marts/job_energy.sql reads the hours of its window, and takes the config's constant
-- [energy] carbon_g_per_kwh for an hour the table does not have). A reload of the same hours replaces them
-- (loaded_at), so loading a file twice, or a corrected file, leaves one row per hour.
CREATE TABLE IF NOT EXISTS carbon_intensity {{on_cluster}}
(
    cluster LowCardinality(String),
    hour DateTime('UTC'),              -- the hour [hour, hour + 1 h) the intensity holds for
    zone LowCardinality(String),       -- the grid zone or region it was published for ('DE', 'GB', ...; '' unknown)
    g_co2e_per_kwh Float64,            -- grams of CO2-equivalent per kWh consumed in that hour
    source String,                     -- the file and the figure taken ('electricitymaps:DE_2024.csv direct')
    loaded_at DateTime64(3, 'UTC')
)
ENGINE = {{mergetree_all ReplacingMergeTree(loaded_at)}}
PARTITION BY toYear(hour)
ORDER BY (cluster, hour);
