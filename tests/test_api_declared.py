"""The API's mart functions are built from the marts' declarations (analytics/api.py, ``_mart_method``; issue
51 item 6), and docs/api.md's table is held to them: every function documented exists with the keywords and
defaults written there, and every function and mart is documented. No engine: Connection.mart is replaced by
a recorder, so what a call asks of the mart layer is read directly."""

from __future__ import annotations

import inspect
import re

import pytest
from ops_warehouse.analytics import declarations
from ops_warehouse.analytics.api import Connection
from ops_warehouse.config import Config
from tests.conftest import REPO

DOC = (REPO / "docs" / "api.md").read_text()


def _table() -> list[tuple[str, str | None]]:
    """(function, its arguments as written, None when written bare) for each function of docs/api.md's table."""
    rows = [line for line in DOC.splitlines() if line.startswith("| `")]
    first = [line.split(" | ")[0] for line in rows]
    return [(m.group(1), m.group(2)) for cell in first for m in re.finditer(r"`(\w+)(?:\(([^)]*)\))?`", cell)]


def _keywords(fn) -> dict[str, inspect.Parameter]:
    return {p.name: p for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}


@pytest.fixture
def wh(tmp_path, monkeypatch):
    calls = []

    def mart(self, name, month=None, **kw):
        calls.append((name, month, kw))
        return name

    monkeypatch.setattr(Connection, "mart", mart)
    c = Connection(Config(dsn=f"chdb://{tmp_path / 'none'}"))  # never opened
    c.calls = calls
    return c


def test_a_built_function_passes_the_declared_keywords_to_its_mart(wh):
    # a parameter of an included mart (hung_jobs' hang_minutes, for hang_suspect_nodes): a parameter, not a filter
    wh.hang_suspect_nodes("2026-10", project="A", hang_minutes=30)
    # a declared filter: the keyword gpu_model keeps the rows of the column model (cost.sql's declaration)
    wh.cost("2026-10", gpu_model="h100")
    wh.node_health(start="2026-10-01", end="2026-10-08", reservation=None)
    n, month, kw = wh.calls[0]
    assert (n, month, kw["project"], kw["params"]) == ("hang_suspect_nodes", "2026-10", "A", {"hang_minutes": 30})
    n, _, kw = wh.calls[1]
    assert (n, kw["model"], kw["project"], kw["params"]) == ("cost", "h100", None, {})
    # the declared values where none is given (node_health.sql: swap_min_score = 6.0, hung_jobs.sql: 20); a
    # None given is left to the mart layer, which then uses the declared value too
    p = wh.calls[2][2]["params"]
    assert p["swap_min_score"] == 6.0 and p["hang_minutes"] == 20 and p["reservation"] is None
    # what the declarations refuse, as Python refuses a keyword a function does not take
    with pytest.raises(TypeError, match="project"):
        wh.utilization("2026-10", project="A")  # the cluster's (scope cluster)
    with pytest.raises(TypeError, match="project"):
        wh.users("2026-10")  # per project (project_only)
    with pytest.raises(TypeError, match="gpu_mdl"):
        wh.cost("2026-10", gpu_mdl="h100")


def test_the_built_functions_follow_a_changed_declaration(wh, monkeypatch):
    import dataclasses

    declared = declarations.marts()
    patched = {**declared, "end_states": dataclasses.replace(declared["end_states"], filters={"state": "state"})}
    monkeypatch.setattr(declarations, "marts", lambda: patched)
    assert "state" in _keywords(Connection.end_states)
    wh.end_states("2026-10", state="FAILED")
    assert wh.calls[-1][2]["state"] == "FAILED"


def test_docs_api_table_is_the_declarations():
    documented = _table()
    names = {n for n, _ in documented}
    conn = Connection(Config(dsn="chdb:///nonexistent"))
    for name, args in documented:
        fn = getattr(Connection, name, None) or getattr(conn, name)  # a mart with no method: __getattr__'s
        if args is None:
            continue
        kw = _keywords(fn)
        m = declarations.marts().get(name)
        written = {}
        for a in (a.strip() for a in args.split(",")):
            if "=" in a:
                k, v = a.split("=", 1)
                written[k] = v
        assert set(written) <= set(kw) or "filters" in kw, (name, sorted(set(written) - set(kw)))
        for k, v in written.items():
            if v and k in kw and kw[k].default is not inspect.Parameter.empty and kw[k].default is not None \
                    and not v.startswith("["):
                d = kw[k].default  # the declared default, as written
                assert (float(v) == d) if isinstance(d, (int, float)) else (str(d) == v), (name, k, v, d)
        if m is not None and m.kind == "window" and "…" not in args and "..." not in args:
            assert ("project" in written) == (m.scope == "project"), (name, m.scope)
    # every method and every window mart is in the table or the prose, by name
    public = {n for n in dir(Connection) if not n.startswith("_")}
    window = {n for n, m in declarations.marts().items() if m.kind == "window"}
    missing = sorted(n for n in public | window if n not in names and f"`{n}" not in DOC and f".{n}(" not in DOC
                     and f'mart("{n}"' not in DOC)
    assert missing == []
    # and every mart function built from a declaration is in the table itself
    built = {n for n in window if getattr(Connection, n, None) is not None}
    assert built - names == set(), sorted(built - names)
