-- One Xid seen twice: by DCGM_FI_DEV_XID_ERRORS and in the kernel log. The gauge shows an Xid from the first
-- sample after the driver logged it: dcgm-exporter reads the field once a collect interval (30 s by default)
-- and the scrape or the query's step comes up to a step after that. So a gauge row at gauge_ts, of samples
-- step_s apart (xid_event.step_s), and a kernel-log Xid of the same node, GPU and code at kernel_ts are one
-- event when kernel_ts is in [gauge_ts - step_s - 60 s, gauge_ts + 2 s]: 60 s for the collect interval and a
-- scrape interval, 2 s for the exporter's clock and the node's apart. The kernel log's time is the one kept.
CREATE OR REPLACE FUNCTION xid_same_event {{on_cluster}} AS (gauge_ts, step_s, kernel_ts) ->
    kernel_ts >= gauge_ts - toIntervalSecond(step_s + 60) AND kernel_ts <= gauge_ts + toIntervalSecond(2);
