"""The laws (sql/checks/): run each on a period of one cluster and say which hold, with the rows that break them.

Every law is one SQL file under sql/checks/ (docs/checks.md): a parameterized SELECT, as the marts take their
parameters (and including them, ``{{mart name}}``), that returns no row when the law holds and one row per
violation otherwise (``section``, ``key``, ``figure``, ``value``, ``bound``, ``off_by``). A row whose
``not_checked`` column is set says why a law could not be checked there (an input the warehouse lacks). Its
header comment states the law (``-- law:``), why it holds on any cluster (``-- why:``), and optionally
``-- scope: each project`` (run for the given project, or for every project of the cluster when none is
given) and ``-- needs: whatif`` (run while the what-if's tables of the period exist: the observed month and
its unchanged replay, analytics/whatif.py).

Reads only: the laws run the marts; the what-if's tables are temporary tables of the session, as for
``ops-report whatif``. This module computes no figure; it runs the files and collects what they return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl
from ops_warehouse.analytics.marts import each_mart_once, run_file
from ops_warehouse.analytics.whatif import whatif
from ops_warehouse.errors import OpsError
from ops_warehouse.sqlfiles import sql_files

HOLDS, BROKEN, NOT_CHECKED, ERROR = "holds", "broken", "not checked", "error"
_HEADER = re.compile(r"^--\s*(law|why|scope|needs):\s*(.*)$")
SCOPES = ("window", "each project")
NEEDS = ("whatif",)


@dataclass(frozen=True)
class Law:
    """One file of sql/checks/: its name (the file's, without .sql) and what its header says."""
    name: str
    law: str
    why: str
    scope: str = "window"
    needs: tuple[str, ...] = ()


@dataclass
class Outcome:
    """What a law gave on one period: ``status`` holds, broken, not checked or error; ``rows`` the
    violations (with ``project`` first for a law of each project); ``reasons`` why it was not checked."""
    law: Law
    status: str
    rows: pl.DataFrame = field(default_factory=pl.DataFrame)
    reasons: list[str] = field(default_factory=list)
    error: str = ""
    projects: list[str] = field(default_factory=list)

    def as_dict(self, max_rows: int | None = None) -> dict:
        rows = self.rows if max_rows is None else self.rows.head(max_rows)
        return {"law": self.law.name, "statement": self.law.law, "status": self.status,
                "violations": self.rows.height, "rows": rows.to_dicts(), "reasons": self.reasons,
                "error": self.error or None, "scope": self.law.scope,
                "projects": self.projects if self.law.scope == "each project" else None}


def parse_header(name: str, text: str) -> Law:
    """The law a file states in its leading comment lines (``-- law:``, ``-- why:``, ``-- scope:``,
    ``-- needs:``; a following ``--`` line indented by more than one space continues the entry)."""
    found: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        m = _HEADER.match(line)
        if m:
            key = m.group(1)
            found[key] = m.group(2).strip()
        elif key and re.match(r"^--\s{2,}\S", line):
            found[key] += " " + line[2:].strip()
        else:
            key = None
    for need in ("law", "why"):
        if not found.get(need):
            raise OpsError(f"sql/checks/{name}.sql: its header has no '-- {need}:' line")
    scope = found.get("scope", "window")
    if scope not in SCOPES:
        raise OpsError(f"sql/checks/{name}.sql: scope {scope!r} is not one of {', '.join(SCOPES)}")
    needs = tuple(n.strip() for n in found.get("needs", "").split(",") if n.strip())
    if set(needs) - set(NEEDS):
        raise OpsError(f"sql/checks/{name}.sql: needs {', '.join(needs)}; known: {', '.join(NEEDS)}")
    return Law(name, found["law"], found["why"], scope, needs)


def laws(names: list[str] | None = None) -> list[Law]:
    """Every law of sql/checks/ (or those ``names``), in file order."""
    found = [parse_header(n[:-4], text) for n, text in sql_files("checks")]
    if names:
        known = {law.name for law in found}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise OpsError(f"no law named {', '.join(unknown)}; laws: {', '.join(sorted(known))}")
        found = [law for law in found if law.name in names]
    return found


def _outcome(law: Law, frames: list[pl.DataFrame], projects: list[str]) -> Outcome:
    frames = [f for f in frames if f.height]
    if not frames:
        return Outcome(law, HOLDS, projects=projects)
    rows = pl.concat(frames, how="diagonal_relaxed")
    reasons: list[str] = []
    if "not_checked" in rows.columns:
        reasons = sorted({r for r in rows["not_checked"].drop_nulls() if r})
        rows = rows.filter(pl.col("not_checked").fill_null("") == "").drop("not_checked")
    if rows.height:
        return Outcome(law, BROKEN, rows, reasons, projects=projects)
    return Outcome(law, NOT_CHECKED, reasons=reasons, projects=projects)


def _run_one(wh, law: Law, *, cluster: str, window: tuple[datetime, datetime], projects: list[str]) -> Outcome:
    try:
        frames = [run_file(wh, f"checks/{law.name}.sql", cluster=cluster, window=window, project=p) for p in projects]
    except Exception as e:  # an engine error: the law could not be evaluated, which is not holding
        return Outcome(law, ERROR, error=str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__,
                       projects=projects)
    if law.scope == "each project":  # which project's run a row came from
        frames = [f.select(pl.lit(p).alias("project"), pl.exclude("project")) for f, p in zip(frames, projects)]
    return _outcome(law, frames, projects)


def window_projects(wh, cluster: str, window: tuple[datetime, datetime]) -> list[str]:
    """The projects whose runs held resources in the window (the laws of each project run for them)."""
    return [r[0] for r in wh.query_rows(
        "SELECT DISTINCT project FROM fct_job_run WHERE cluster = {c:String} AND NOT never_ran "
        "AND usage_start_ts < {t1:DateTime('UTC')} AND usage_end_ts > {t0:DateTime('UTC')} ORDER BY project",
        {"c": cluster, "t0": window[0], "t1": window[1]})]


def run_checks(wh, *, cluster: str, window: tuple[datetime, datetime], project: str | None = None,
               names: list[str] | None = None, projects: list[str] | None = None) -> list[Outcome]:
    """Every law (or ``names``) on ``window`` of ``cluster``, for ``project`` (None: the whole cluster, and the
    laws of each project for every one of ``projects``, default those with runs in the window). In file
    order."""
    with each_mart_once(wh):  # the laws read the same marts: each is evaluated once for all of them
        return _run_checks(wh, cluster=cluster, window=window, project=project, names=names, projects=projects)


def _run_checks(wh, *, cluster, window, project, names, projects) -> list[Outcome]:
    todo = laws(names)
    if project is None and projects is None:
        projects = window_projects(wh, cluster, window)
    every = [project] if project is not None else list(projects or [])
    out: dict[str, Outcome] = {}

    def scope_of(law: Law) -> list[str]:
        return every if law.scope == "each project" else [project or ""]

    for law in todo:
        if law.needs:
            continue
        if law.scope == "each project" and not every:
            out[law.name] = Outcome(law, NOT_CHECKED, reasons=["the cluster has no projects in the window"])
            continue
        out[law.name] = _run_one(wh, law, cluster=cluster, window=window, projects=scope_of(law))

    whatif_laws = [law for law in todo if "whatif" in law.needs]
    if whatif_laws:
        def also(w, replayed):
            # over the window the what-if replayed: a month in progress to where the loaded data stops
            return {law.name: _run_one(w, law, cluster=cluster, window=replayed, projects=scope_of(law))
                    for law in whatif_laws}

        try:
            # the observed window and its unchanged replay: the tables the what-if's marts read
            res = whatif(wh, cluster=cluster, window=window, changes=[], project=project or "", processes=1,
                         also=also)
            out.update(res["also"])
        except OpsError as e:
            for law in whatif_laws:
                out[law.name] = Outcome(law, NOT_CHECKED, reasons=[f"no what-if replay: {e}"])
    return [out[law.name] for law in todo]
