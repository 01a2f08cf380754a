-- The job table's first and last job_db_inx: the range a load reads a page at a time
-- (sql/staging/slurmdbd_records.sql selects the window's jobs of each page). Pages with none of the window's
-- jobs cost one primary-key range scan in MariaDB each.
SELECT min(job_db_inx) AS first_inx, max(job_db_inx) AS last_inx FROM {{mysql job_table}} WHERE deleted = 0;
