"""Lustre job_stats: per Slurm job I/O from the servers' exporters, into ``lustre_job_io``.

Lustre counts I/O on each OST and MDT per ``jobid`` (jobstats), and both server exporters sites run publish
those counters under the same names: HPE/GSI lustre_exporter and whamcloud lustrefs-exporter
(``lustre_job_{read,write}_bytes_total``, ``lustre_job_{read,write}_samples_total``, and
``lustre_job_stats_total{operation=...}`` for the other operations), labelled ``component`` (ost/mdt),
``jobid`` and ``target`` (``<fs>-OST0001``). The ``jobid`` is what the clients' ``jobid_var`` /
``jobid_name`` make of a process: with ``jobid_var=SLURM_JOB_ID`` the plain id (``"23"``), with a
``jobid_name`` such as ``SLURM_JOB%j`` or ``%j:%u:%H`` forms like ``SLURM_JOB10`` or
``SLURM_JOB10:0:es18kxe-co-client`` (id, uid, client host). Both are read (``JOBID_PATTERN``); anything else
(``bash.0``, ``fio:0:host``: processes outside a job) is kept with job_id 0. The id is SLURM_JOB_ID: a job
run's ``slurm_job_run.job_id_raw`` (model ``fct_lustre_job_io`` joins the two).

Loading (sql/staging/lustre_job_io.sql): counters become the amount in each step per series (target, jobid,
operation); a drop is a restart from zero (Lustre drops an entry after ``job_cleanup_interval`` idle and
starts it again at zero), and a series' first sample counts whole, because a job_stats entry starts at zero
when Lustre creates it (so a single scrape gives each job's I/O so far). A load therefore needs the sample
before its window when a job's entry existed before it: the file source reads the day before, the
Prometheus source queries from one step before, a text file's earlier samples seed it. The steps of one
job, file system, component, operation and jobid string are summed over the file system's targets; steps
with no I/O are not stored.
"""

from __future__ import annotations

import polars as pl

# exporter name -> (operation when the series has no operation label, bytes or operations)
JOB_METRICS = {
    "lustre_job_read_bytes_total": ("read_bytes", "bytes"),
    "lustre_job_write_bytes_total": ("write_bytes", "bytes"),
    "lustre_job_read_samples_total": ("read_bytes", "ops"),
    "lustre_job_write_samples_total": ("write_bytes", "ops"),
    "lustre_job_stats_total": ("", "ops"),
}
JOB_LABELS = ("jobid", "target", "component", "operation")
# jobid -> (Slurm job id, uid, host): an optional SLURM_JOB / JOB_ID= style prefix, the id, then optionally
# ":uid" and ":host" (jobid_name "%j:%u:%H"). RE2 syntax: the same pattern runs in the engine.
JOBID_PATTERN = r"^(?i:(?:slurm_?)?job(?:_?id)?[_=]?)?([0-9]+)(?::([0-9]+)(?::([^:]+))?)?$"


def job_frame(samples: pl.DataFrame) -> pl.DataFrame | None:
    """The job_stats samples of a long sample frame (metric, labels, timestamp, value) as an exporter-shaped
    wide frame: timestamp, jobid, target, component, operation, one column per job_stats metric."""
    s = samples.filter(pl.col("metric").is_in(list(JOB_METRICS)), pl.col("jobid").is_not_null())
    if not s.height:
        return None
    index = ["timestamp", *JOB_LABELS]
    s = s.with_columns(pl.col(c).fill_null("") for c in JOB_LABELS)
    return s.unique(subset=[*index, "metric"], keep="last").pivot(on="metric", index=index, values="value")


def parse_jobid(jobid: str) -> tuple[int, int | None, str]:
    """(Slurm job id or 0, uid, host) of a jobid label, as the load's SQL reads it (for tests and tools)."""
    import re

    m = re.match(JOBID_PATTERN, jobid)
    if not m:
        return 0, None, ""
    return int(m.group(1)), (int(m.group(2)) if m.group(2) else None), m.group(3) or ""
