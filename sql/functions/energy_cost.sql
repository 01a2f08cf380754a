-- Electricity bought for energy used by IT equipment: × PUE for cooling and distribution.
CREATE OR REPLACE FUNCTION energy_cost {{on_cluster}} AS (it_kwh, pue, price_per_kwh) ->
    it_kwh * pue * price_per_kwh;
