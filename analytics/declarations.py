"""What each mart declares about itself, in the ``--- `` lines of its file (TOML under ``[mart]``), as dbt's
models/*.yml describe jaffle-shop's models:

    --- [mart]
    --- grain = "one row per hung run"
    --- scope = "project"                 # "project": takes {project} ('' the whole cluster); "cluster": never
    --- parameters = { hang_minutes = 20 } # the ones its own text names, with the report's values
    --- depends = ["x"]                   # only a dependency its text does not name (none today): see below
    --- columns = ["job_id", ...]         # what it returns, in order
    --- user_columns = ["user"]           # pseudonymized with --anonymize-users
    --- filters = { level = "level" }     # the API's keyword -> the column it keeps rows on
    --- export = 21                       # its place in `ops-report export` (absent: not exported)
    --- report = 21                       # its place in the monthly report, a key of its name (analytics/monthly.py)
    --- previous = true                   # the report reads the month before too (<name>_previous)
    --- project_only = true               # only for a project (users): the API requires one
    --- rule = "Points: 3 a fault, ..."   # the rule in a sentence for readers of the report (node_health)

``depends`` is inferred, not typed: the marts a mart's statements include (``{{mart name}}``, the marker
ops_warehouse.sqlfiles inlines) are what it depends on, so a new include can never be left undeclared and
run before its input. A ``depends`` line is for what the text does not name (a mart reading another's result
by some other way); one naming a mart its text includes is refused as a restatement. :func:`order` gives the
marts with every one after those it depends on.

``kind`` is "window" (the default: a window [from_ts, to_ts) of one cluster), "dates" (whole days
``takes`` names: summary, telemetry) or "whatif" (the what-if's: most read the replays' temporary tables).
The declarations are read once; :func:`check` holds each to its text (the parameters and includes it names),
and the tests hold the columns to what the mart returns (tests/test_monthly_scenario.py,
test_every_declared_mart_is_what_it_declares).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from graphlib import CycleError, TopologicalSorter

from ops_warehouse.errors import OpsError
from ops_warehouse.sqlfiles import mart_query, split_statements, sql_files

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the package tomllib came from (a dependency there: pyproject.toml)
    import tomli as tomllib

KINDS = ("window", "dates", "whatif")
SCOPES = ("cluster", "project")
# what every window mart is given besides its declared parameters: the window, the cluster, the project, and
# the site's settings (config [reports] idle_util_pct, [energy] carbon_g_per_kwh)
GIVEN = frozenset({"cluster", "from_ts", "to_ts", "project", "idle_util_pct", "carbon_g_per_kwh"})
# the marker a query includes another mart's query with (ops_warehouse.sqlfiles inlines it): its dependencies
_INCLUDES_MART = re.compile(r"\{\{mart (\w+)(?: project='')?\}\}")
_KEYS = {"grain", "kind", "scope", "takes", "parameters", "depends", "columns", "user_columns", "filters", "export",
         "project_only", "rule", "report", "previous"}


@dataclass(frozen=True)
class Mart:
    name: str
    grain: str
    scope: str
    kind: str = "window"
    takes: tuple[str, ...] = ()
    parameters: dict = field(default_factory=dict)
    depends: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    user_columns: tuple[str, ...] = ()
    filters: dict = field(default_factory=dict)
    export: int | None = None
    project_only: bool = False
    rule: str = ""
    report: int | None = None
    previous: bool = False


def declaration(name: str, text: str) -> Mart:
    """The declaration in the `--- ` lines of a mart's text (``name``: its file's stem), refused in one line where
    it is not one."""
    block = "\n".join(line[4:] for line in text.splitlines() if line.startswith("--- "))
    try:
        doc = tomllib.loads(block)["mart"]
    except (tomllib.TOMLDecodeError, KeyError) as e:
        raise OpsError(f"sql/marts/{name}.sql: no [mart] declaration in its '--- ' lines ({e})") from None
    unknown = set(doc) - _KEYS
    if unknown:
        raise OpsError(f"sql/marts/{name}.sql declares what no mart declares: {', '.join(sorted(unknown))}")
    for key in ("grain", "scope"):
        if key not in doc:
            raise OpsError(f"sql/marts/{name}.sql: its declaration lacks {key}")
    if doc["scope"] not in SCOPES or doc.get("kind", "window") not in KINDS:
        raise OpsError(f"sql/marts/{name}.sql: scope is one of {', '.join(SCOPES)}, kind one of {', '.join(KINDS)}")
    report = doc.get("report")
    # a place, not a flag: the report's keys keep one order from run to run (the JSON a reader diffs)
    if report is not None and (isinstance(report, bool) or not isinstance(report, int) or report < 1):
        raise OpsError(f"sql/marts/{name}.sql: report is the mart's place in the monthly report, a whole number "
                       f"from 1 (report = 28), not {report!r}")
    if doc.get("previous") and report is None:
        raise OpsError(f"sql/marts/{name}.sql declares previous = true but no place in the report (report = N)")
    return Mart(name=name, grain=doc["grain"], scope=doc["scope"], kind=doc.get("kind", "window"),
                takes=tuple(doc.get("takes", ())), parameters=dict(doc.get("parameters", {})),
                depends=_depends(text, doc.get("depends", ())), columns=tuple(doc.get("columns", ())),
                user_columns=tuple(doc.get("user_columns", ())), filters=dict(doc.get("filters", {})),
                export=doc.get("export"), project_only=bool(doc.get("project_only", False)),
                rule=doc.get("rule", ""), report=report, previous=bool(doc.get("previous", False)))


def _depends(text: str, declared) -> tuple[str, ...]:
    """The marts ``text``'s statements include (comments aside), then the declared ones its text does not
    name, each once."""
    included = re.findall(_INCLUDES_MART, "\n".join(split_statements(text)))
    return tuple(dict.fromkeys((*included, *declared)))


def included(text: str) -> set[str]:
    """The marts a mart's text includes (``{{mart name}}``): what its depends holds without being told."""
    return set(re.findall(_INCLUDES_MART, "\n".join(split_statements(text))))


@lru_cache(maxsize=None)
def marts() -> dict[str, Mart]:
    """Every mart's declaration, by name (sql/marts/*.sql)."""
    return {n[:-4]: declaration(n[:-4], text) for n, text in sql_files("marts")}


def mart(name: str) -> Mart:
    try:
        return marts()[name]
    except KeyError:
        raise OpsError(f"no mart named {name!r}; marts: {', '.join(sorted(marts()))}") from None


def check(m: Mart, text: str) -> list[str]:
    """What the declaration of ``m`` says that its file's text does not (empty: they agree): the parameters
    its own statements name beyond GIVEN, and the marts they include."""
    code = "\n".join(split_statements(text))
    named = set(re.findall(r"\{(\w+):", code)) - GIVEN
    wrong = []
    if named != set(m.parameters) | set(m.takes):
        wrong.append(f"names the parameters {sorted(named)}, declares {sorted(set(m.parameters) | set(m.takes))}")
    declared = tomllib.loads("\n".join(line[4:] for line in text.splitlines()
                                        if line.startswith("--- "))).get("mart", {}).get("depends", [])
    restated = sorted(set(declared) & included(text))
    if restated:
        wrong.append(f"declares depends = {restated}, which its text includes: they are inferred, drop them")
    if m.scope == "project" and m.kind == "window" and "{project:String}" not in code and not m.depends:
        wrong.append("declares scope 'project' but takes no {project}")
    if not set(m.user_columns) <= set(m.columns):
        wrong.append(f"declares user columns {sorted(set(m.user_columns) - set(m.columns))} it does not return")
    return wrong


def order(declared: dict[str, Mart] | None = None) -> list[str]:
    """The marts' names, each after every mart it depends on (ties by name: the order is the same from run to
    run); a dependency on no mart or a cycle is refused in one line."""
    declared = marts() if declared is None else declared
    for m in declared.values():
        unknown = [d for d in m.depends if d not in declared]
        if unknown:
            raise OpsError(f"sql/marts/{m.name}.sql depends on {', '.join(unknown)}: no such mart")
    ts = TopologicalSorter({n: declared[n].depends for n in sorted(declared)})
    try:
        ts.prepare()
    except CycleError as e:
        raise OpsError(f"the marts depend on each other in a cycle: {' -> '.join(e.args[1])}") from None
    out: list[str] = []
    while ts.is_active():
        ready = sorted(ts.get_ready())
        out.extend(ready)
        ts.done(*ready)
    return out


def parameters() -> dict:
    """The window marts' parameters with their declared values, each named by the marts that use it (one value
    whoever declares it: a parameter means one thing)."""
    out: dict = {}
    for m in (m for m in marts().values() if m.kind == "window"):
        for k, v in m.parameters.items():
            if k in out and out[k] != v:
                raise OpsError(f"parameter {k} is declared {out[k]!r} by one mart and {v!r} by sql/marts/{m.name}.sql")
            out[k] = v
    return out


# what every window mart is run for, so no keyword of its own: the rest of GIVEN are the site's settings, which
# a call may set for itself (idle_util_pct, carbon_g_per_kwh)
_WINDOW = frozenset({"cluster", "from_ts", "to_ts", "project"})


@lru_cache(maxsize=None)
def named(name: str) -> frozenset[str]:
    """The parameters mart ``name``'s text, its includes inlined, names: what its result depends on besides
    the data. Read once per process for the API's keywords and the mart layer's keys (inlining a mart's
    includes is most of the cost of building its method)."""
    return frozenset(re.findall(r"\{(\w+):", mart_query(name)))


def keywords(name: str) -> tuple[str, ...]:
    """The parameters mart ``name``'s result depends on besides its window, cluster and project: the ones its
    text names, its includes' included (hang_suspect_nodes takes hung_jobs' hang_minutes), in name order.
    The API takes each as a keyword (analytics/api.py)."""
    return tuple(sorted(named(name) - _WINDOW))


def exported() -> list[str]:
    """The marts `ops-report export` writes, in their declared order."""
    return [m.name for m in sorted((m for m in marts().values() if m.export is not None), key=lambda m: m.export)]


def reported() -> list[str]:
    """The marts the monthly report holds, each under a key of its name (analytics/monthly.py), in their
    declared places; two marts declaring one place are refused in one line."""
    placed = sorted((m.report, m.name) for m in marts().values() if m.report is not None)
    for (a, first), (b, second) in zip(placed, placed[1:]):
        if a == b:
            raise OpsError(f"sql/marts/{first}.sql and sql/marts/{second}.sql both declare report = {a}: "
                           "each mart has a place of its own in the monthly report")
    return [name for _, name in placed]


def with_previous() -> list[str]:
    """The reported marts the report also reads for the month before (``previous = true``), under
    ``<name>_previous``: the month-over-month comparisons."""
    return [n for n in reported() if marts()[n].previous]
