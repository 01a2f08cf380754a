-- Xids that mean the hardware failed (../shared/notes/domain.md): 79 fallen off the bus, 48 double-bit
-- ECC, 63/64 page retirement / row remapping, 92 high single-bit ECC rate, 94/95 contained/uncontained
-- ECC, 74 NVLink. 31/43/45 are usually the application's own faults and do not count.
CREATE OR REPLACE FUNCTION xid_is_hardware {{on_cluster}} AS (xid) ->
    xid IN (48, 63, 64, 74, 79, 92, 94, 95);
