-- slurmdbd's reservations -> reservation rows. A reservation's accounts and users are association ids
-- (assoclist) in the database: named through the association table.
SELECT
    {cluster:String} AS cluster,
    r.resv_name AS name,
    toDateTime(r.time_start, 'UTC') AS start_ts,
    toDateTime(r.time_end, 'UTC') AS end_ts,
    ifNull(r.nodelist, '') AS nodelist,
    '' AS `partition`,
    arraySort(arrayDistinct(arrayFilter(x -> x != '', arrayMap(id -> lower(a.acct_of[id]),
        arrayMap(x -> toUInt64OrZero(x), splitByChar(',', ifNull(r.assoclist, ''))))))) AS accounts,
    arraySort(arrayDistinct(arrayFilter(x -> x != '', arrayMap(id -> a.user_of[id],
        arrayMap(x -> toUInt64OrZero(x), splitByChar(',', ifNull(r.assoclist, ''))))))) AS users,
    toString(r.flags) AS flags
FROM {{mysql resv_table}} AS r
CROSS JOIN (SELECT CAST((groupArray(toUInt64(id_assoc)), groupArray(acct)), 'Map(UInt64, String)') AS acct_of,
                   CAST((groupArray(toUInt64(id_assoc)), groupArray(user)), 'Map(UInt64, String)') AS user_of
            FROM {{mysql assoc_table}}) AS a
WHERE r.deleted = 0 AND r.time_start < toUnixTimestamp({to_ts:DateTime('UTC')})
  AND r.time_end > toUnixTimestamp({from_ts:DateTime('UTC')});
