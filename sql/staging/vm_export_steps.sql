-- VictoriaMetrics' raw samples (/api/v1/export, JSON lines staged by etl/vm_export_steps.py) -> one value per
-- series and step, by the rules the query_range path asks the server for (etl/prometheus_source.py _expr):
-- a step's row is stamped with its end t and holds the samples of (t - step, t] (the server's look-behind
-- window [step] evaluated at t); a gauge's value is their mean (avg_over_time), a counter's the last sample
-- (last_over_time: the loader turns raw counters into per-step amounts itself), the Xid gauge's the largest
-- (max_over_time). A step without a sample has no row, as query_range gives no point. {{input}} is the staged
-- file read as JSON lines (metric Map, values, timestamps in ms). Only samples in (lo_ms, hi_ms] are read:
-- the caller asks for the window's steps and the one before (the seed of counters); lo_ms is a step's end,
-- so the steps fall on query_range's grid whatever the step.
--
-- A line is a whole series (the export's default: one line per series unless reduce_mem_usage=1 is asked),
-- so each line is downsampled on its own, within its arrays: its samples in time order, each step a range
-- of them (arrayReduceInRanges), no GROUP BY over the batch's samples (that held every step of every series
-- at once: 1.6 GB for 16 nodes).
SELECT metric['__name__'] AS name,
       mapKeys(mapFilter((k, v) -> k != '__name__', metric)) AS label_names,
       mapValues(mapFilter((k, v) -> k != '__name__', metric)) AS label_values,
       arraySort(i -> timestamps[i], arrayFilter(i -> timestamps[i] > {lo_ms:Int64} AND timestamps[i] <= {hi_ms:Int64},
                                                 arrayEnumerate(timestamps))) AS in_order,
       arrayMap(i -> `values`[i], in_order) AS v,
       -- each sample's step: the end of the step it falls in, in whole seconds
       arrayMap(i -> intDiv({lo_ms:Int64} + intDiv(timestamps[i] - {lo_ms:Int64} + {step_ms:Int64} - 1,
                                                   {step_ms:Int64}) * {step_ms:Int64}, 1000), in_order) AS step_of,
       -- the last sample of each step (1-based), and the ranges (first, count) of the steps' samples
       arrayFilter(i -> i = length(step_of) OR step_of[i] != step_of[i + 1], arrayEnumerate(step_of)) AS ends,
       arrayMap((e, s) -> (s + 1, toUInt64(e - s)), ends, arrayPopBack(arrayPushFront(ends, 0))) AS ranges,
       arrayMap(e -> step_of[e], ends) AS ts_s,
       multiIf(has({last_names:Array(String)}, name), arrayMap(e -> v[e], ends),
               has({max_names:Array(String)}, name), arrayReduceInRanges('max', ranges, v),
               arrayReduceInRanges('avg', ranges, v)) AS vals
FROM {{input}}
WHERE notEmpty(ts_s)
ORDER BY name, toString(metric)
