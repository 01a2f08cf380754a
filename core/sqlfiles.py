"""The shipped SQL files: read one, list a folder, split a file into statements, inline the models a query
includes.

Every table and statistic is a file under sql/ (sql/README.md says which folder holds what); Python reads
them through these functions only. A query names another file's query with ``{{mart name}}``
(sql/marts/name.sql; ``{{mart name project=''}}``: for the whole cluster, whatever project the query runs
for) or ``{{intermediate name}}`` (sql/intermediate/name.sql, e.g. run_node_hour, the run → node → hour
fan-out); :func:`sql_statements` and :func:`sql_query` inline them, for the marts
(analytics/) and the grains the loads refresh (etl/) alike.
"""

from __future__ import annotations

import re
from importlib.resources import files

from ops_warehouse.errors import OpsError

_STATEMENT_END = re.compile(r";[ \t]*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{(mart|intermediate) (\w+)( project='')?\}\}")
# the folder a marker names, and the folders whose files may include it: a layer reads its own and the ones
# below it, never above (sql/README.md); the laws (checks/) read every layer they check
_INCLUDED = {"mart": ("marts", {"marts", "checks"}),
             "intermediate": ("intermediate", {"marts", "intermediate", "checks"})}
# `{{mart name project=''}}`: the mart for the whole cluster, whatever {project} the including query runs with
# (a law comparing a project's figures with the cluster's reads both)
_PROJECT = "{project:String}"


def sql_text(relpath: str) -> str:
    """The text of a shipped SQL file, e.g. ``marts/summary.sql``."""
    try:
        return files("ops_warehouse.sql").joinpath(relpath).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OpsError(f"SQL file missing from the installation: sql/{relpath}") from None


def sql_files(folder: str, root=None) -> list[tuple[str, str]]:
    """(name, text) of the .sql files of one folder of ``root`` (default: the installed sql/ package; any
    folder laid out like it, e.g. a pathlib.Path, for reviewing a changed rule before shipping it)."""
    base = (files("ops_warehouse.sql") if root is None else root).joinpath(folder)
    names = sorted(p.name for p in base.iterdir() if p.name.endswith(".sql"))
    return [(n, base.joinpath(n).read_text(encoding="utf-8")) for n in names]


def split_statements(text: str) -> list[str]:
    """Statements end with ';' at the end of a line; a '-- distributed:' line right after one belongs to it."""
    out: list[str] = []
    for part in _STATEMENT_END.split(text):
        m = re.match(r"\s*(--\s*distributed:[^\n]*)", part)
        if m and out:
            out[-1] += "\n" + m.group(1)
            part = part[m.end():]
        # whole-line comments document the file; they are not sent (the directive line is kept above)
        code = "\n".join(line for line in part.splitlines() if not line.strip().startswith("--"))
        if code.strip():
            out.append(code.strip())
    return out


def sql_statements(relpath: str) -> list[str]:
    """The statements of a shipped SQL file (:func:`split_statements`), with the queries they include
    (``{{mart name}}``, ``{{intermediate name}}``) inlined."""
    return [_inline(s, relpath, ()) for s in split_statements(sql_text(relpath))]


def sql_query(relpath: str, marts=None) -> str:
    """The one query of a shipped SQL file (a mart, an included model), without its ';', includes inlined.
    ``marts(name, whole_cluster)``, when given, is asked for the text that stands for an included mart
    instead of the mart's own text (analytics/marts.py: a query over the mart's result, evaluated once), or
    None to have it inlined; intermediate models are always inlined."""
    return _query(relpath, (), marts)


def mart_query(name: str) -> str:
    """The query of sql/marts/<name>.sql, includes inlined (:func:`sql_query`): what the report, the API and
    Grafana's views run. A name that is not a plain word (``../x``) is refused in one line."""
    if not re.fullmatch(r"\w+", name):
        raise OpsError(f"no mart named {name!r}")
    return sql_query(f"marts/{name}.sql")


def _query(relpath: str, seen: tuple[str, ...], marts=None) -> str:
    stmts = split_statements(sql_text(relpath))
    if len(stmts) != 1:
        raise OpsError(f"sql/{relpath} must hold one query")
    return _inline(stmts[0].rstrip().rstrip(";"), relpath, seen, marts)


def _inline(sql: str, relpath: str, seen: tuple[str, ...], marts=None) -> str:
    def one(m: re.Match) -> str:
        folder, readers = _INCLUDED[m.group(1)]
        target = f"{folder}/{m.group(2)}.sql"
        if relpath.split("/")[0] not in readers:
            raise OpsError(f"sql/{relpath} may not include sql/{target}: a layer reads its own and the ones below")
        if target in (*seen, relpath):
            raise OpsError(f"sql/{relpath} includes sql/{target}, which includes it")
        text = _query(target, (*seen, relpath))  # the layer and cycle checks, also where a table stands for it
        if marts is not None and m.group(1) == "mart":
            instead = marts(m.group(2), bool(m.group(3)))
            if instead is not None:
                return instead
        if m.group(1) == "mart":
            text = unordered(text)
        return text.replace(_PROJECT, "''") if m.group(3) else text

    return _INCLUDE.sub(one, sql)


_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def unordered(query: str) -> str:
    """``query`` without its final ORDER BY, when that clause orders the whole result and nothing after it
    but SETTINGS depends on the order (no LIMIT, no WITH FILL): an included mart's rows are a set to the query
    that reads them, and sorting them there is work thrown away (goodput over a year: campaigns' 300,000 rows
    sorted for nothing, 0.5 of 2.0 s). ORDER BY inside parentheses (a window, a CTE, a subquery), in quotes
    and in comments is never touched; a query it cannot read so is returned as it is."""
    depth, i, n, last = 0, 0, len(query), -1
    while i < n:
        ch = query[i]
        if query.startswith("--", i):  # a comment after code, to the end of its line
            j = query.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch in "'`\"":  # a quoted literal or name: skip to its closing quote (a backslash escapes)
            j = i + 1
            while j < n and query[j] != ch:
                j += 2 if query[j] == "\\" else 1
            i = j + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and (m := _WORD.match(query, i)) and not (i and _WORD.match(query[i - 1])):
            word = m.group().upper()
            if word == "ORDER" and re.match(r"ORDER\s+BY\b", query[i:], re.IGNORECASE):
                last = i
            elif word in ("LIMIT", "FILL", "UNION", "SELECT", "FROM", "FORMAT") and last >= 0:
                last = -2  # a clause after it that is not SETTINGS, or a later query: keep the order
            elif word == "SETTINGS" and last >= 0:
                return query[:last].rstrip() + "\n" + query[i:]
            i = m.end()
            continue
        i += 1
    if depth != 0 or last < 0:
        return query
    return query[:last].rstrip()
