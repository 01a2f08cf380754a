-- law: a GPU's energy in an hour (gpu_hour: its energy counter's steps that end in the hour) ≤ its peak power
--   (gpu_max_power_w) × the time those steps cover, from the start of the GPU's previous hour with samples
--   (at most 7 days back, as far as a counter's last value is looked back for) to the end of the hour.
-- why: a GPU draws no more than its board power allows, and a step ending in the hour began at the GPU's
--   previous sample; more is a counter that stepped back and was taken for a reset, a unit error (J for mJ)
--   or a sample counted twice.
-- Rows: section, key (node, GPU and hour), figure, value ≤ bound broken by off_by (kWh).
WITH hours AS (
    SELECT node, gpu, hour, model_name, energy_j,
        lagInFrame(toNullable(hour)) OVER (PARTITION BY node, gpu ORDER BY hour
                                           ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS prev_hour
    FROM gpu_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} - toIntervalDay(7)
        AND hour < {to_ts:DateTime('UTC')}
),
compared AS (
    SELECT 'gpu_hour' AS section, concat(node, ' gpu ', toString(gpu), ' ', formatDateTime(hour, '%F %H:00')) AS key,
        'energy_kwh ≤ gpu_max_power_w × covered hours' AS figure, energy_j / 3.6e6 AS value,
        gpu_max_power_w(model_name)
            * dateDiff('second', coalesce(prev_hour, hour - toIntervalDay(7)), hour + toIntervalHour(1)) / 3.6e6 AS bound
    FROM hours
    WHERE hour >= {from_ts:DateTime('UTC')}
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
