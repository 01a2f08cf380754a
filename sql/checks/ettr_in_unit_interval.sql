-- law: 0 ≤ ETTR ≤ 1 for every campaign and every goodput row (large campaigns and all), a campaign's
--   productive time ≤ its running time ≤ its wall time, 0 ≤ its lost time, and its lost time + start-up ≤
--   its running time.
-- why: ETTR is the part of a campaign's wall time (first start to last end) in which it made progress
--   it kept: its runs run inside the wall time, the productive part is what of the running time was neither
--   lost nor spent starting up again, and work lost since a checkpoint and a start-up are parts of the time
--   the runs ran, never the same part twice. A GPU-weighted mean of ratios in [0, 1] is in [0, 1].
-- Rows: section, key (the campaign or goodput row), figure, value ≤ bound broken by off_by (a ratio, or
--   seconds for the times).
WITH
compared AS (
    SELECT 'campaigns' AS section,
           concat(user, ' ', account, ' ', job_name, ' ', toString(gpus), ' GPUs from ', formatDateTime(first_start_ts, '%F %T')) AS key,
           x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM ({{mart campaigns}})
    ARRAY JOIN [('0 ≤ ettr', 0., toFloat64(ettr)), ('ettr ≤ 1', toFloat64(ettr), 1.),
                ('productive_s ≤ running_s', toFloat64(productive_s), toFloat64(running_s)),
                ('running_s ≤ wall_s', toFloat64(running_s), toFloat64(wall_s)), ('0 ≤ lost_s', 0., toFloat64(lost_s)),
                ('lost_s + restart_startup_s ≤ running_s', toFloat64(lost_s + restart_startup_s),
                 toFloat64(running_s))] AS x
    UNION ALL
    SELECT 'goodput', if(project_key = '', 'the scope row', concat('project ', project_key)), x.1, x.2, x.3
    FROM ({{mart goodput}})
    ARRAY JOIN [('0 ≤ ettr', 0., toFloat64(ettr)), ('ettr ≤ 1', toFloat64(ettr), 1.),
                ('0 ≤ ettr_all', 0., toFloat64(ettr_all)), ('ettr_all ≤ 1', toFloat64(ettr_all), 1.)] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
ORDER BY section, off_by DESC, key, figure;
