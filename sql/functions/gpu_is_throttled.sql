-- Whether a GPU sample's clock-event (throttle) reasons (dcgm-exporter's DCGM_FI_DEV_CLOCK_THROTTLE_REASONS,
-- DCGM_FI_DEV_CLOCKS_EVENT_REASONS) carry a power or thermal slowdown bit: SW power cap 0x04, HW slowdown
-- 0x08, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80 (mask 0xEC); idle 0x01, application clocks
-- 0x02 and sync boost 0x10 are not throttling. A sample without the metric (NULL) is not throttled. The
-- hourly rollups (gpu_hour.throttled_s) and the telemetry mart's throttled hours both count with it.
CREATE OR REPLACE FUNCTION gpu_is_throttled {{on_cluster}} AS (throttle_reasons) ->
    bitAnd(ifNull(throttle_reasons, 0), 0xEC) != 0;
