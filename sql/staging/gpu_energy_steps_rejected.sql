-- The energy counter steps of the window that a GPU cannot have drawn (counter_step_bounded returns NULL
-- though the step has both values: a drop to a value no reset within the step reaches, or a jump beyond
-- gpu_max_power_w × the step), as etl_quarantine rows of the load's source: not counted, and counted in the
-- load's summary. {{input}} is the relation sql/staging/gpu_sample.sql reads (seed rows included), and the
-- step is taken as there; run after that statement, whose unknown steps say which GPUs to look at.
SELECT {source:String} AS source, toUInt64(0) AS line_no,
    if(v < prev,
       concat('energy counter stepped back ', toString(round(prev - v)), ' J: not a reset (',
              toString(round(v)), ' J > ', toString(max_w), ' W × ', toString(dt_s), ' s)'),
       concat('energy counter step of ', toString(round(v - prev)), ' J in ', toString(dt_s), ' s: more than ',
              toString(max_w), ' W')) AS reason,
    concat(node, ' gpu ', toString(gpu), ' at ', formatDateTime(ts, '%F %T'), ' energy ', toString(v), ' J after ',
           toString(prev), ' J') AS raw
FROM (
    SELECT node, gpu, ts, energy_j AS v, anyLast(energy_j) OVER before AS prev,
        dateDiff('second', anyLast(if(energy_j IS NULL, NULL, ts)) OVER before, ts) AS dt_s,
        gpu_max_power_w(model_name) AS max_w
    FROM ({{input}})
    -- only a GPU with an energy step stored unknown in the window can have a rejected one; of those, not the
    -- GPUs without an energy counter (every step unknown, each load), unless the load has one sample of them
    WHERE (node, gpu) IN (SELECT node, gpu FROM gpu_sample WHERE cluster = {cluster:String}
                          AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}
                          GROUP BY node, gpu
                          HAVING countIf(energy_j IS NULL) > 0 AND (countIf(energy_j IS NOT NULL) > 0 OR count() = 1))
    WINDOW before AS (PARTITION BY node, gpu ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
)
WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != ''
    AND v IS NOT NULL AND prev IS NOT NULL AND counter_step_bounded(v, prev, dt_s, max_w) IS NULL;
