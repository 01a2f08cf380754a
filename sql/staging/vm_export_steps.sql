-- VictoriaMetrics' raw samples (/api/v1/export, JSON lines staged by etl/vm_export_steps.py) -> one value per
-- series and step, by the rules the query_range path asks the server for (etl/prometheus_source.py _expr):
-- a step's row is stamped with its end t and holds the samples of (t - step, t] (the server's look-behind
-- window [step] evaluated at t); a gauge's value is their mean (avg_over_time), a counter's the last sample
-- (last_over_time: the loader turns raw counters into per-step amounts itself), the Xid gauge's the largest
-- (max_over_time). A step without a sample has no row, as query_range gives no point. {{input}} is the staged
-- file read as JSON lines (metric Map, values, timestamps in ms). Only samples in (lo_ms, hi_ms] are read:
-- the caller asks for the window's steps and the one before (the seed of counters); lo_ms is a step's end,
-- so the steps fall on query_range's grid whatever the step.
SELECT name, mapKeys(labels) AS label_names, mapValues(labels) AS label_values,
       arrayMap(p -> p.1, points) AS ts_s, arrayMap(p -> p.2, points) AS vals
FROM (
    SELECT name, mapFilter((k, v) -> k != '__name__', metric) AS labels,
           arraySort(groupArray((t_s, value))) AS points
    FROM (
        SELECT metric, metric['__name__'] AS name,
               intDiv({lo_ms:Int64} + intDiv(ts_ms - {lo_ms:Int64} + {step_ms:Int64} - 1, {step_ms:Int64})
                      * {step_ms:Int64}, 1000) AS t_s,
               multiIf(has({last_names:Array(String)}, name), argMax(v, ts_ms),
                       has({max_names:Array(String)}, name), max(v),
                       avg(v)) AS value
        FROM {{input}}
        ARRAY JOIN `values` AS v, timestamps AS ts_ms
        WHERE ts_ms > {lo_ms:Int64} AND ts_ms <= {hi_ms:Int64}
        GROUP BY metric, t_s
    )
    GROUP BY name, metric
)
ORDER BY name, toString(labels)
