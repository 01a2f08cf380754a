-- Whether a load can leave a seed file unread (etl/telemetry_insert.py): the series of the load's own rows
-- ({{series}}: node, key as counter_edge keys them; of the file's family: {{family}}) that no seed row from
-- counter_edge (sql/staging/counter_edge_seed.sql: the stage's rows of file {edge_file}) covers at or after the
-- file's last sample ({file_last_ts}). None left: every series already has a previous value at least as recent
-- as any the file holds (the load of the file's own day kept it), so the file's last samples would seed
-- nothing; one left (a first load, a day loaded in part, a series whose counters stopped before the file's
-- end): the file is read. {{stage}} is the stage table, {{key}} a stage row's counter_edge key.
SELECT count()
FROM (SELECT node, key FROM {{series}} WHERE node != '' AND {{family}}) AS m
LEFT ANTI JOIN (
    SELECT node, {{key}} AS key FROM {{stage}}
    WHERE _seed = 1 AND _file = {edge_file:UInt16} AND ts >= {file_last_ts:DateTime('UTC')}
) AS s USING (node, key);
