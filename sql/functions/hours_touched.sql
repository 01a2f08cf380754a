-- The hour starts of the hours [t0, t1) touches (empty when t1 <= t0): the fan-out from intervals to the
-- hourly grain every capacity model uses.
CREATE OR REPLACE FUNCTION hours_touched {{on_cluster}} AS (t0, t1) ->
    if(t1 <= t0, [], arrayMap(i -> toStartOfHour(t0) + toIntervalHour(i),
                              range(toUInt32(dateDiff('hour', toStartOfHour(t0), toStartOfHour(t1 - 1)) + 1))));
