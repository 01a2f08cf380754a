-- The job-size classes of the operators' reports (GPUs per job).
CREATE OR REPLACE FUNCTION gpu_size_class {{on_cluster}} AS (gpus) ->
    multiIf(gpus = 0, '0', gpus = 1, '1', gpus <= 8, '2-8', gpus <= 64, '9-64', gpus <= 256, '65-256',
            gpus <= 1024, '257-1024', '>1024');
