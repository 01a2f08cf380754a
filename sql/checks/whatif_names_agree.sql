-- law: the what-if's observed scenario and the monthly report's sections give one value for each name they
--   share: capacity GPU-h and allocated GPU-h (utilization's cluster row); the what-if's capacity − allocated
--   is "unallocated GPU-h", a name of its own (the report's "idle GPU-h" are the idle-GPU runs' hours), and
--   no section calls anything else by it.
-- needs: whatif
-- why: a name that appears in two sections is one figure with one value; the observed scenario describes
--   the same window of the same cluster as the report, and a reader comparing the what-if with the report
--   reads "allocated GPU-h" or "idle GPU-h" as the same thing in both (a figure that differs needs its own
--   name, as the what-if's "allocated ÷ capacity" and "capex per allocated GPU-h" have).
-- Rows: section, key, figure (the name), value (the what-if's observed scenario), bound (the report's),
--   off_by = value − bound.
WITH
w AS (SELECT capacity_gpu_h, allocated_gpu_h
      FROM ({{mart whatif_summary}}) WHERE scenario = 'observed'),
compared AS (
    SELECT 'whatif_summary vs utilization' AS section, 'cluster' AS key, x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM w CROSS JOIN (SELECT capacity_gpu_h, allocated_gpu_h FROM ({{mart utilization project=''}})
                       WHERE level = 'cluster') AS u
    ARRAY JOIN [('capacity GPU-h (capacity_gpu_h, capacity_gpu_h)', w.capacity_gpu_h, u.capacity_gpu_h),
                ('allocated GPU-h (allocated_gpu_h, allocated_gpu_h)', w.allocated_gpu_h, u.allocated_gpu_h)] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure;
