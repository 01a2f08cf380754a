"""`ops-report export`: a month's marts as Parquet, for analysts who work in DuckDB, polars or pandas.

One folder per export, ``<out>/<cluster>-<project or cluster>-<YYYY-MM>/`` (each name made one file-name
component by ``ops_warehouse.files.safe_name``: ``a/b`` is ``a%2Fb``), with one Parquet file per mart
(the same functions, and so the same numbers, as the monthly report) and ``manifest.json`` naming the
period, the scope and each file's rows and columns. A project export holds what the project's report
holds: its own jobs and users, and the cluster-level aggregates (capacity, cost by GPU model, node
reliability) that carry no user or job of another project.

    duckdb -c "SELECT size_class, gpu_h FROM 'exports/ai1-A-2026-10/job_sizes.parquet'"
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.analytics import declarations
from ops_warehouse.analytics.marts import each_mart_once
from ops_warehouse.analytics.pseudonyms import pseudonym_key, pseudonymize
from ops_warehouse.errors import OpsError
from ops_warehouse.files import replacing, safe_name, write_file

EXPORT_VERSION = "2.1"


def _marts(api, per, project: str | None) -> dict[str, pl.DataFrame]:
    """The marts that declare an ``export`` place (sql/marts/*.sql), in that order, each file named after its
    mart; a project-only mart (users) in a project's export alone."""
    out = {}
    for m in (declarations.mart(n) for n in declarations.exported()):
        if m.project_only and project is None:
            continue
        out[m.name] = api.mart(m.name, per, project=project if m.scope == "project" else None)
    return out


def export_month(api, out: Path, month=None, *, project: str | None = None, cluster: str | None = None,
                 anonymize_users: bool = False, progress=None) -> dict:
    """Write the marts of ``month`` (default: the last complete month) for ``project`` or the whole cluster
    under ``out``; returns the manifest."""
    # one engine opening and one turn for the whole report, each mart evaluated once
    with api.session() as w, each_mart_once(w):
        return _export_month(api, out, month, project=project, cluster=cluster, anonymize_users=anonymize_users,
                             progress=progress)


def _export_month(api, out: Path, month=None, *, project: str | None = None, cluster: str | None = None,
                 anonymize_users: bool = False, progress=None) -> dict:

    per = api.period(month, cluster=cluster)
    if project is not None:
        known = api.projects(per.cluster)
        if project not in known:
            raise OpsError(f"no jobs of project {project!r} on {per.cluster}; projects: {', '.join(known)}")
    # the cluster and project names come from the data: each one file-name component, never a path
    # (`..`, `/`: core/files.py)
    scope = safe_name(project, "project") if project is not None else "cluster"
    folder = Path(out) / f"{safe_name(per.cluster, 'cluster')}-{scope}-{safe_name(per.month, 'month')}"
    key = pseudonym_key(api.warehouse) if anonymize_users else ""  # refused before anything is written
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    marts = _marts(api, per, project)
    for i, (name, df) in enumerate(marts.items()):
        if anonymize_users:
            df = pseudonymize(df, key, declarations.mart(name).user_columns)
        with replacing(folder / f"{name}.parquet") as tmp:  # a reader never sees half a file
            try:
                df.write_parquet(tmp)
            except pl.exceptions.ComputeError as e:  # polars' word for a failed write (a full disk): one line
                raise OSError(str(e).strip().splitlines()[0]) from None
        files[name] = {"file": f"{name}.parquet", "rows": df.height, "columns": df.columns}
        if progress:
            progress(i + 1, len(marts))
    manifest = {
        "export_version": EXPORT_VERSION,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cluster": per.cluster,
        "scope": "project" if project is not None else "cluster",
        "project": project,
        "month": per.month,
        "window": {"from": per.start.isoformat(), "to": per.end.isoformat()},
        "users_anonymized": anonymize_users,
        "files": files,
    }
    write_file(folder / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    manifest["folder"] = str(folder)
    return manifest


# FOCUS (FinOps Foundation's cost and usage specification): the chargeback as finance tools read it
FOCUS_VERSION = "1.3"


def export_focus(api, out: Path, month=None, *, project: str | None = None, cluster: str | None = None) -> dict:
    """Write the month's chargeback as a FOCUS 1.3 cost and usage dataset (the mart focus_cost: one row per
    project × GPU model × day) under ``out``/<cluster>-<project or cluster>-<YYYY-MM>-focus/: ``focus_cost.parquet``
    (FOCUS's Decimal columns as Parquet decimals, its Date/Time columns as UTC timestamps), ``focus_cost.csv``
    (the same rows, datetimes ISO 8601 in UTC with a Z, decimals as written, nulls empty) and
    ``manifest.json`` (FOCUS version, data generator, columns; docs/focus.md). Returns the manifest."""
    with api.session():
        per = api.period(month, cluster=cluster)
        if project is not None:
            known = api.projects(per.cluster)
            if project not in known:
                raise OpsError(f"no jobs of project {project!r} on {per.cluster}; projects: {', '.join(known)}")
        df = api.mart("focus_cost", per, project=project)
    scope = safe_name(project, "project") if project is not None else "cluster"
    folder = Path(out) / f"{safe_name(per.cluster, 'cluster')}-{scope}-{safe_name(per.month, 'month')}-focus"
    folder.mkdir(parents=True, exist_ok=True)
    # FOCUS's Date/Time format: ISO 8601 in UTC, 'Z' (a CSV has no type: the text is the type)
    as_text = df.with_columns(pl.col(pl.Datetime).dt.convert_time_zone("UTC").dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    for name, write in (("focus_cost.parquet", df.write_parquet), ("focus_cost.csv", as_text.write_csv)):
        with replacing(folder / name) as tmp:  # a reader never sees half a file
            try:
                write(tmp)
            except pl.exceptions.ComputeError as e:  # polars' word for a failed write (a full disk): one line
                raise OSError(str(e).strip().splitlines()[0]) from None
    manifest = {
        "focus_version": FOCUS_VERSION,
        "data_generator": "ops-warehouse",
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cluster": per.cluster,
        "project": project,
        "month": per.month,
        "billing_period": {"start": per.start.isoformat(), "end": per.end.isoformat()},
        "rows": df.height,
        "files": ["focus_cost.parquet", "focus_cost.csv"],
        "columns": [{"name": c, "type": str(t)} for c, t in df.schema.items()],
    }
    write_file(folder / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    manifest["folder"] = str(folder)
    return manifest
