-- law: a partition's own view of its nodes (utilization's 'partition_member' rows: every partition a node is
--   in) is at most the cluster's, figure by figure; it holds at least what is counted under the partition
--   (its 'partition' row); and the members together hold at least the cluster's capacity, with exactly the
--   cluster's where no node is in two partitions.
-- why: a partition's nodes are some of the cluster's nodes, so any sum over them is at most the sum over all;
--   the nodes counted under a partition (their first) are among its members; every node is in at least one
--   partition (the one it is counted under), so the members cover the cluster, and count a node-hour more
--   than once only for a node in several.
-- Rows: section, key (the partition), figure, value ≤ bound broken by off_by, in GPU-hours.
WITH
u AS (SELECT * FROM ({{mart utilization}})),
cl AS (SELECT * FROM u WHERE level = 'cluster'),
compared AS (
    SELECT 'utilization' AS section, concat('partition_member ', m.key) AS key, x.1 AS figure, x.2 AS value,
           x.3 AS bound
    FROM (SELECT * FROM u WHERE level = 'partition_member') AS m CROSS JOIN cl AS t
    ARRAY JOIN [('capacity_gpu_h ≤ the cluster''s', m.capacity_gpu_h, t.capacity_gpu_h),
                ('available_gpu_h ≤ the cluster''s', m.available_gpu_h, t.available_gpu_h),
                ('allocated_gpu_h ≤ the cluster''s', m.allocated_gpu_h, t.allocated_gpu_h),
                ('free_gpu_h ≤ the cluster''s', m.free_gpu_h, t.free_gpu_h),
                ('busy_gpu_h ≤ the cluster''s', m.busy_gpu_h, t.busy_gpu_h)] AS x
    UNION ALL
    SELECT 'utilization', concat('partition ', p.key), x.1, x.2, x.3
    FROM (SELECT * FROM u WHERE level = 'partition') AS p
    LEFT JOIN (SELECT * FROM u WHERE level = 'partition_member') AS m ON m.key = p.key
    ARRAY JOIN [('capacity_gpu_h ≤ its partition_member row''s', p.capacity_gpu_h, m.capacity_gpu_h),
                ('allocated_gpu_h ≤ its partition_member row''s', p.allocated_gpu_h, m.allocated_gpu_h)] AS x
    UNION ALL
    SELECT 'utilization', 'cluster', 'capacity_gpu_h ≤ Σ partition_member rows', t.capacity_gpu_h,
           (SELECT sum(capacity_gpu_h) FROM u WHERE level = 'partition_member')
    FROM cl AS t
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_le(value, bound)
ORDER BY section, off_by DESC, key, figure;
