-- A node as its capacity source saw it at the snapshot (issue 31): its state (scontrol's State, slurmrestd's
-- state list joined by '+': IDLE+DRAIN, DOWN*, MIXED+MAINT) and every partition it is in (Partitions=a,b).
-- `partition` stays the first of them, the one its capacity is counted under (docs/sources.md). A site
-- inventory CSV may give them (`state`, `partitions` as a;b); rows loaded before this migration have '' and [].
ALTER TABLE node_inventory {{on_cluster}}
    ADD COLUMN IF NOT EXISTS state LowCardinality(String) DEFAULT '',
    ADD COLUMN IF NOT EXISTS partitions Array(LowCardinality(String)) DEFAULT [];
