-- The part of a run's GPUs on a node that were of one GPU model (issue 49: nodes with GPUs of several models,
-- Gres=gpu:h100:2,gpu:h200:4). sacct records a run's GPUs by type only where the job asked for a type
-- (AllocTRES gres/gpu:h100=2), not which node held them:
--   one model on the node       1 (every node of a single-model site: its figures as before)
--   typed TRES                  the run's GPUs of that model ÷ its typed GPUs of the models the node has
--                               (a run of gres/gpu:h100=2,gres/gpu:h200=4 holds 1/3 h100 and 2/3 h200 there)
--   untyped (gres/gpu=N), or    the node's GPUs of that model ÷ all its GPUs: select/cons_tres gives an
--   no type the node has        untyped request whichever type is free, so each model in proportion to
--                               how many the node has (docs/statistics.md, "Nodes with several GPU models")
-- The shares of a node's models sum to 1, so a run's GPU time on the node is neither lost nor doubled.
CREATE OR REPLACE FUNCTION gpu_model_share {{on_cluster}} AS (alloc_tres, gpu_model, gpus, node_gpus, node_models) ->
    if(length(node_models) <= 1 OR node_gpus = 0, 1.,
       if(arraySum(g -> if(has(node_models, g[1]), toFloat64OrZero(g[2]), 0.),
                   extractAllGroups(alloc_tres, '(?:^|,)gres/gpu:([^=,]+)=([0-9]+)')) > 0,
          arraySum(g -> if(g[1] = gpu_model, toFloat64OrZero(g[2]), 0.),
                   extractAllGroups(alloc_tres, '(?:^|,)gres/gpu:([^=,]+)=([0-9]+)'))
          / arraySum(g -> if(has(node_models, g[1]), toFloat64OrZero(g[2]), 0.),
                     extractAllGroups(alloc_tres, '(?:^|,)gres/gpu:([^=,]+)=([0-9]+)')),
          gpus / node_gpus));
