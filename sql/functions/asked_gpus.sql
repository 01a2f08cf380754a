-- The GPUs a job holds or asks for: what it was allocated (gpus, from AllocTRES), or, for a job that never
-- started, ReqTRES's gres/gpu (sacct prints no AllocTRES for a job that has not started, so its gpus is 0).
-- The what-if's history (whatif_history.sql) and the law on jobs pending at a window's end
-- (sql/checks/whatif_not_started.sql) count a waiting GPU job by it.
CREATE OR REPLACE FUNCTION asked_gpus {{on_cluster}} AS (gpus, req_tres) ->
    if(gpus = 0, toUInt32OrZero(extract(req_tres, '(?:^|,)gres/gpu=(\\d+)(?:,|$)')), gpus);
