-- Seconds two intervals [a0, a1) and [b0, b1) share (0 when they do not meet).
CREATE OR REPLACE FUNCTION overlap_s {{on_cluster}} AS (a0, a1, b0, b1) ->
    greatest(toInt64(0), toInt64(least(a1, b1)) - toInt64(greatest(a0, b0)));
