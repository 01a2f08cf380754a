-- The newest change in slurmdbd's job table: the watermark an incremental load starts from next time.
SELECT toDateTime(max(mod_time), 'UTC') AS newest FROM {{mysql job_table}};
