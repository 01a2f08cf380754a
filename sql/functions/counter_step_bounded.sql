-- A cumulative counter of something with a most it can accrue per second (a GPU's energy: gpu_max_power_w)
-- -> the amount in the step ending at this sample, or NULL where the step says nothing true. `prev` is the
-- series' previous value, `dt_s` the seconds since it, `max_per_s` the bound. As counter_step, a drop is a
-- reset from zero (the whole value accrued in the step), but only when the value is one a reset in the step
-- could reach (≤ max_per_s × dt_s): dcgm-exporter's DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION is mJ since the
-- driver loaded, and a counter that steps back 36 kJ without a reset (its 2.6 GJ taken as accrued in one
-- step) was 722 kWh in 11 minutes on a GPU drawing 300 W. A step that implies more than the bound (such a
-- drop, or a jump forward) is not counted; the load quarantines it (sql/staging/gpu_energy_steps_rejected.sql)
-- and the next step counts from the value it left.
CREATE OR REPLACE FUNCTION counter_step_bounded {{on_cluster}} AS (v, prev, dt_s, max_per_s) ->
    if(prev IS NULL OR v IS NULL, NULL,
       if(if(v < prev, v, v - prev) > max_per_s * greatest(dt_s, 1), NULL, if(v < prev, v, v - prev)));
