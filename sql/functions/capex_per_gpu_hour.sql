-- What one GPU-hour of a node costs in write-off: its price shared by its GPUs over the amortization
-- period (8,766 h a year: 365.25 days).
CREATE OR REPLACE FUNCTION capex_per_gpu_hour {{on_cluster}} AS (node_price, gpus, amortization_years) ->
    node_price / gpus / (amortization_years * 8766);
