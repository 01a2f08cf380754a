-- A quarantined record is identified by where it came from and its own text, not by its line number:
-- the nightly sacct source reads overlapping windows (and backfills re-read whole months), so the same bad
-- line arrives again at another line number. Keyed by (source, raw, reason, occurrence) it is stored once
-- however often it is read; occurrence numbers identical bad lines within one read (0, 1, ...: two copies
-- in one file stay two records, etl/quarantine.py); line_no keeps where it was last seen. The table is rebuilt with the new key and the
-- rows already quarantined are kept. The first DROP makes a rerun after an interrupted migration start
-- over (at any point the original table, or the rebuilt one after the exchange, holds every row).
--
-- On a cluster every shard's rows are kept: the copy reads the Distributed table etl_quarantine (FINAL is
-- applied on each shard, right because a source's rows are all on one shard, cityHash64(source)) and
-- {{sharded T KEY}} sends each row to the new table on the shard KEY picks, the key etl_quarantine is
-- sharded by, so every row goes back to its shard; the insert returns once every shard has its rows
-- (insert_distributed_sync), before the exchange. {{cluster_only}} statements are not rendered on one
-- server: there the Distributed table in front is the table itself, and it has the new column already.

DROP TABLE IF EXISTS etl_quarantine_v2{{local}} {{on_cluster}};

CREATE TABLE IF NOT EXISTS etl_quarantine_v2{{local}} {{on_cluster}}
(
    source String,
    line_no UInt64,
    reason String,
    raw String,
    occurrence UInt32 DEFAULT 0,
    loaded_at DateTime('UTC')
)
ENGINE = {{mergetree ReplacingMergeTree(loaded_at)}}
ORDER BY (source, cityHash64(raw), reason, occurrence);

-- the rows already there keep their line numbers apart
INSERT INTO {{sharded etl_quarantine_v2 cityHash64(source)}} (source, line_no, reason, raw, occurrence, loaded_at)
SELECT source, line_no, reason, raw,
       toUInt32(row_number() OVER (PARTITION BY source, raw, reason ORDER BY line_no) - 1), loaded_at
FROM etl_quarantine FINAL;

EXCHANGE TABLES etl_quarantine{{local}} AND etl_quarantine_v2{{local}} {{on_cluster}};

-- the Distributed table in front keeps the columns it was created with: it gets the new one
{{cluster_only}} ALTER TABLE etl_quarantine {{on_cluster}}
    ADD COLUMN IF NOT EXISTS occurrence UInt32 DEFAULT 0 AFTER raw;

DROP TABLE etl_quarantine_v2{{local}} {{on_cluster}};
