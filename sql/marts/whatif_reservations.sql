-- The reservations of {cluster} overlapping [from_ts, to_ts), as a what-if replay applies them
-- (analytics/whatif.py): their nodes start only their accounts' jobs while they last.
--- [mart]
--- grain = "one row per scenario and reservation"
--- kind = "whatif"
--- scope = "cluster"
SELECT name, start_ts, end_ts, nodes, arrayMap(a -> lower(a), accounts) AS accounts, partition
FROM reservation FINAL
WHERE cluster = {cluster:String} AND start_ts < {to_ts:DateTime('UTC')} AND end_ts > {from_ts:DateTime('UTC')}
ORDER BY start_ts, name;
