-- etl_watermark's rows deleted as patch parts (the engine's lightweight updates), not as a mutation: every
-- refresh inside one_refresh deletes the hours it was left pending (etl/grains.py: refresh_pending), and the
-- mutation a lightweight DELETE is otherwise run as waits for the engine's background scheduler, 0.02-1 s of
-- wall a night for a 0.03-CPU-s delete (docs/benchmarks.md, "Issue 50", round 6). A patch part is written by
-- the DELETE itself and applied to every read (FINAL included) until a merge folds it in.
ALTER TABLE etl_watermark {{on_cluster}}
    MODIFY SETTING enable_block_number_column = 1, enable_block_offset_column = 1;
