-- A cumulative counter -> the amount in the step ending at this sample. `prev` is the series' previous
-- sample (NULL for the first one seen: the amount is unknown). A drop means the exporter restarted and the
-- counter began again from zero, so the whole current value accrued in this step (Prometheus' increase()
-- makes the same assumption). Used by every telemetry load path (sql/staging/).
CREATE OR REPLACE FUNCTION counter_step {{on_cluster}} AS (v, prev) ->
    if(prev IS NULL, NULL, if(v < prev, v, v - prev));
