"""One job for `ops-report job JOBID` and ``wh.job(...)``: every run of the id (requeues included) with its
figures, its GPUs, the expert's notes and each GPU's time series, read from the marts job_detail, run_gpus,
job_notes and run_gpu_series (sql/marts/; docs/efficiency.md). This module finds the job's window and moves
the marts' rows; it computes no figure.

The window is the whole calendar months from the first run's submission to the last run's end: the runs'
figures are clipped to it (so whole), and the notes that compare a run with its peers (its size class's
waits) compare it with the jobs of those months.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ops_warehouse.analytics import marts
from ops_warehouse.analytics.periods import resolve_cluster
from ops_warehouse.errors import OpsError

if TYPE_CHECKING:
    import polars as pl


@dataclass
class JobReport:
    cluster: str
    job_id: str
    window: tuple[datetime, datetime]
    runs: pl.DataFrame      # job_detail: one row per run
    gpus: pl.DataFrame      # run_gpus: one row per run, node and GPU
    notes: pl.DataFrame     # job_notes: one row per note
    series: pl.DataFrame    # run_gpu_series: one row per GPU and sample (or hour)

    def as_dict(self) -> dict:
        """Plain data for JSON and the renderers (times as ISO text)."""
        def rows(df):
            return [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in r.items()}
                    for r in df.iter_rows(named=True)]
        return {"cluster": self.cluster, "job_id": self.job_id,
                "window": [self.window[0].isoformat(), self.window[1].isoformat()],
                "runs": rows(self.runs), "gpus": rows(self.gpus), "notes": rows(self.notes),
                "series": rows(self.series)}


def _month_start(t: datetime) -> datetime:
    return datetime(t.year, t.month, 1, tzinfo=timezone.utc)


def _next_month(t: datetime) -> datetime:
    return datetime(t.year + (t.month == 12), t.month % 12 + 1, 1, tzinfo=timezone.utc)


def job_window(wh, job_id: str, cluster: str) -> tuple[datetime, datetime]:
    """The calendar months holding every run of ``job_id``; one line naming the job when it has none."""
    found = wh.query_rows(
        "SELECT min(submit_ts), max(usage_end_ts), count() FROM fct_job_run"
        " WHERE cluster = {c:String} AND job_id = {j:String}", {"c": cluster, "j": job_id})
    first, last, n = found[0] if found else (None, None, 0)
    if not n:
        raise OpsError(f"no job {job_id} on cluster {cluster} in the warehouse (a job id as sacct prints it: "
                       f"123, 123_4 for an array task, 123+1 for a het component)")
    first = first.replace(tzinfo=timezone.utc)
    last = max(last.replace(tzinfo=timezone.utc), first)
    return _month_start(first), _next_month(last)


def job_report(wh, job_id: str, cluster: str | None = None) -> JobReport:
    """Every run of ``job_id`` on ``cluster`` (None: the warehouse's one cluster or the configured default)."""
    job_id = str(job_id).strip()
    cluster = resolve_cluster(wh, cluster)
    window = job_window(wh, job_id, cluster)
    kw = dict(cluster=cluster, window=window, job_id=job_id)
    with marts.each_mart_once(wh):  # run_gpus is read by all four: evaluated once
        runs = marts.run_mart(wh, "job_detail", **kw)
        gpus = marts.run_mart(wh, "run_gpus", **kw)
        notes = marts.run_mart(wh, "job_notes", **kw)
        series = marts.run_mart(wh, "run_gpu_series", **kw)
    return JobReport(cluster, job_id, window, runs, gpus, notes, series)
