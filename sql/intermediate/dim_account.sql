-- dim_account: the reporting project of every Slurm account in the job history (grain: account). The
-- config's [projects] maps accounts to projects (account_project, synced on every connection); an account
-- not listed is its own project. fct_job_run and the marts that read the run_node_hour grain (which keeps
-- the account, since the mapping may change without a load) take the project from here, so the rule is
-- written once.
--- [model]
--- kind = "view"
--- defines = ["dim_account"]
--- reads = ["slurm_job_run", "account_project"]
CREATE OR REPLACE VIEW dim_account {{on_cluster}} AS
SELECT a.account AS account, coalesce(nullIf(p.project, ''), a.account) AS project
FROM (SELECT DISTINCT account FROM slurm_job_run) AS a
LEFT JOIN account_project AS p ON lower(a.account) = p.account
SETTINGS join_use_nulls = 1;
