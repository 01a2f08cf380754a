-- Rules the loads and models apply, as SQL functions, so every load path (files, Prometheus,
-- VictoriaMetrics, text), every model and any analyst's query use the same definition.

-- A cumulative counter -> the amount in the step ending at this sample. `prev` is the series' previous
-- sample (NULL for the first one seen: the amount is unknown). A drop means the exporter restarted and the
-- counter began again from zero, so the whole current value accrued in this step (Prometheus' increase()
-- makes the same assumption).
CREATE FUNCTION IF NOT EXISTS counter_step {{on_cluster}} AS (v, prev) ->
    if(prev IS NULL, NULL, if(v < prev, v, v - prev));

-- An exporter's node label -> the node name Slurm uses: `instance` carries a port, some sites label with
-- the FQDN; Slurm names nodes by the short host name.
CREATE FUNCTION IF NOT EXISTS slurm_node {{on_cluster}} AS (label) ->
    splitByChar('.', replaceRegexpOne(label, ':[0-9]+$', ''))[1];

-- Seconds two intervals [a0, a1) and [b0, b1) share (0 when they do not meet).
CREATE FUNCTION IF NOT EXISTS overlap_s {{on_cluster}} AS (a0, a1, b0, b1) ->
    greatest(toInt64(0), toInt64(least(a1, b1)) - toInt64(greatest(a0, b0)));

-- The hour starts of the hours [t0, t1) touches (empty when t1 <= t0): the fan-out from intervals to the
-- hourly grain every capacity model uses.
CREATE FUNCTION IF NOT EXISTS hours_touched {{on_cluster}} AS (t0, t1) ->
    if(t1 <= t0, [], arrayMap(i -> toStartOfHour(t0) + toIntervalHour(i),
                              range(toUInt32(dateDiff('hour', toStartOfHour(t0), toStartOfHour(t1 - 1)) + 1))));

-- The job-size classes of the operators' reports (GPUs per job).
CREATE FUNCTION IF NOT EXISTS gpu_size_class {{on_cluster}} AS (gpus) ->
    multiIf(gpus = 0, '0', gpus = 1, '1', gpus <= 8, '2-8', gpus <= 64, '9-64', gpus <= 256, '65-256',
            gpus <= 1024, '257-1024', '>1024');

-- Xids that mean the hardware failed (../shared/notes/domain.md): 79 fallen off the bus, 48 double-bit
-- ECC, 63/64 page retirement / row remapping, 92 high single-bit ECC rate, 94/95 contained/uncontained
-- ECC, 74 NVLink. 31/43/45 are usually the application's own faults and do not count.
CREATE FUNCTION IF NOT EXISTS xid_is_hardware {{on_cluster}} AS (xid) ->
    xid IN (48, 63, 64, 74, 79, 92, 94, 95);

-- What one GPU-hour of a node costs in write-off: its price shared by its GPUs over the amortization
-- period (8,766 h a year: 365.25 days).
CREATE FUNCTION IF NOT EXISTS capex_per_gpu_hour {{on_cluster}} AS (node_price, gpus, amortization_years) ->
    node_price / gpus / (amortization_years * 8766);

-- Electricity bought for energy used by IT equipment: × PUE for cooling and distribution.
CREATE FUNCTION IF NOT EXISTS energy_cost {{on_cluster}} AS (it_kwh, pue, price_per_kwh) ->
    it_kwh * pue * price_per_kwh;
