-- law: a project's figures in its own report are the figures of its row in the cluster's report: its
--   efficiency, goodput, energy and idle-GPU rows, its chargeback per GPU model and its chargeback totals are
--   the same whether the marts run for the project or for the whole cluster.
-- scope: each project
-- why: a name that appears in two sections is one figure with one value. A project's row is a sum over its
--   own runs, which are the same runs in both reports; the shares and costs it is charged are of the whole
--   model's allocation in both (chargeback.sql), so nothing in them depends on which report asks.
-- Rows: section, key (the row), figure, value (in the project's report), bound (in the cluster's),
--   off_by = value − bound; a row that one report has and the other lacks compares with 0.
WITH
compared AS (
    SELECT 'efficiency' AS section, 'the project''s row' AS key, x.1 AS figure, x.2 AS value, x.3 AS bound
    FROM (SELECT * FROM ({{mart efficiency}}) WHERE project_key = {project:String}) AS p
    FULL OUTER JOIN (SELECT * FROM ({{mart efficiency project=''}}) WHERE project_key = {project:String}) AS c
        ON c.project_key = p.project_key
    ARRAY JOIN [('runs', toFloat64(ifNull(p.runs, 0)), toFloat64(ifNull(c.runs, 0))),
                ('gpu_h', ifNull(p.gpu_h, 0), ifNull(c.gpu_h, 0)),
                ('observed_gpu_h', ifNull(p.observed_gpu_h, 0), ifNull(c.observed_gpu_h, 0)),
                ('gpu_energy_kwh', ifNull(p.gpu_energy_kwh, 0), ifNull(c.gpu_energy_kwh, 0)),
                ('delivered_pflop', ifNull(p.delivered_pflop, 0), ifNull(c.delivered_pflop, 0))] AS x
    UNION ALL
    SELECT 'goodput', 'the project''s row', x.1, x.2, x.3
    FROM (SELECT * FROM ({{mart goodput}}) WHERE project_key = {project:String}) AS p
    FULL OUTER JOIN (SELECT * FROM ({{mart goodput project=''}}) WHERE project_key = {project:String}) AS c
        ON c.project_key = p.project_key
    ARRAY JOIN [('campaigns', toFloat64(ifNull(p.campaigns, 0)), toFloat64(ifNull(c.campaigns, 0))),
                ('gpu_h', ifNull(p.gpu_h, 0), ifNull(c.gpu_h, 0)),
                ('lost_gpu_h', ifNull(p.lost_gpu_h, 0), ifNull(c.lost_gpu_h, 0)),
                ('restart_overhead_gpu_h', ifNull(p.restart_overhead_gpu_h, 0),
                 ifNull(c.restart_overhead_gpu_h, 0)),
                ('ettr', p.ettr, c.ettr)] AS x
    UNION ALL
    SELECT 'energy', 'the project''s row', x.1, x.2, x.3
    FROM (SELECT * FROM ({{mart energy}}) WHERE project_key = {project:String}) AS p
    FULL OUTER JOIN (SELECT * FROM ({{mart energy project=''}}) WHERE project_key = {project:String}) AS c
        ON c.project_key = p.project_key
    ARRAY JOIN [('gpu_h', ifNull(p.gpu_h, 0), ifNull(c.gpu_h, 0)),
                ('it_kwh', ifNull(p.it_kwh, 0), ifNull(c.it_kwh, 0)),
                ('facility_kwh', ifNull(p.facility_kwh, 0), ifNull(c.facility_kwh, 0))] AS x
    UNION ALL
    SELECT 'idle_gpu_users', 'the project''s row', x.1, x.2, x.3
    FROM (SELECT * FROM ({{mart idle_gpu_users}}) WHERE level = 'project') AS p
    FULL OUTER JOIN (SELECT * FROM ({{mart idle_gpu_users project=''}})
                     WHERE level = 'project' AND project = {project:String}) AS c ON c.project = p.project
    ARRAY JOIN [('runs', toFloat64(ifNull(p.runs, 0)), toFloat64(ifNull(c.runs, 0))),
                ('gpu_h', ifNull(p.gpu_h, 0), ifNull(c.gpu_h, 0))] AS x
    UNION ALL
    SELECT 'chargeback', concat('model ', ifNull(p.gpu_model, c.gpu_model)), x.1, x.2, x.3
    FROM ({{mart chargeback}}) AS p
    FULL OUTER JOIN (SELECT * FROM ({{mart chargeback project=''}}) WHERE project = {project:String}) AS c
        ON c.gpu_model = p.gpu_model
    ARRAY JOIN [('allocated_gpu_h', ifNull(p.allocated_gpu_h, 0), ifNull(c.allocated_gpu_h, 0)),
                ('cost', ifNull(p.cost, 0), ifNull(c.cost, 0))] AS x
    UNION ALL
    SELECT 'chargeback_totals', 'the project''s row', x.1, x.2, x.3
    FROM ({{mart chargeback_totals}}) AS p
    FULL OUTER JOIN (SELECT * FROM ({{mart chargeback_totals project=''}}) WHERE project = {project:String}) AS c
        ON c.project = p.project
    ARRAY JOIN [('allocated_gpu_h', ifNull(p.allocated_gpu_h, 0), ifNull(c.allocated_gpu_h, 0)),
                ('share_of_available', ifNull(p.share_of_available, 0), ifNull(c.share_of_available, 0)),
                ('cost', ifNull(p.cost, 0), ifNull(c.cost, 0))] AS x
)
SELECT section, key, figure, value, bound, value - bound AS off_by
FROM compared
WHERE law_breaks_eq(value, bound)
ORDER BY section, abs(off_by) DESC, key, figure
SETTINGS join_use_nulls = 1;
