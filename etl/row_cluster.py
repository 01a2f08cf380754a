"""Which Slurm cluster rows without a cluster of their own are filed under (telemetry, capacity, carbon).

Exporters' samples, inventories and grid files do not name the Slurm cluster; the jobs do (sacct's Cluster
field). Filing the samples under the config's fallback name while the jobs sit under their own makes every
join between them empty: a report with no Xids, no throttling and no heatmap that looks complete. So a load
given no cluster takes, in order: the one the caller names; the config's [sacct] cluster if the site set one;
the warehouse's one cluster of jobs; and refuses when it holds several. With no jobs loaded yet it keeps the
fallback name ("cluster"), as sacct does for input without a Cluster field.
"""

from __future__ import annotations

from ops_warehouse.errors import OpsError


def cluster_for_rows(wh, cluster: str | None) -> str:
    if cluster:
        return cluster
    if wh.cfg.default_cluster_configured:
        return wh.cfg.default_cluster
    have = [r[0] for r in wh.query_rows("SELECT DISTINCT cluster FROM slurm_job_run ORDER BY cluster")]
    if len(have) == 1:
        return have[0]
    if have:
        raise OpsError(f"the warehouse holds the jobs of several clusters ({', '.join(have)}): say which one "
                       "these rows describe with --cluster (or [sacct] cluster in the config)")
    return wh.cfg.default_cluster
