"""The monthly report's marts evaluated over two engine handles at once (analytics/marts.py: evaluate_ahead;
analytics/mart_schedule.py): each mart once per scope, each on a handle that holds every mart it includes, and
the report the same, byte for byte, as on one handle, with figures worked out from the raw lines of the hand-built
month of tests/test_monthly_scenario.py (by hand there, and by DuckDB over its sacct file here)."""

from __future__ import annotations

import re

import duckdb
import pytest

from ops_warehouse.analytics.api import Connection
from ops_warehouse.analytics.mart_schedule import groups
from ops_warehouse.analytics.marts import each_mart_once
from ops_warehouse.analytics.monthly import monthly_report
from ops_warehouse.reports.monthly_render import to_json
from ops_warehouse.warehouse import Warehouse
from tests.test_monthly_scenario import ALLOCATED, AVAILABLE, CAPACITY, _sacct, scenario  # noqa: F401  (the module-scoped scenario warehouse, one per form)


def test_groups_keep_includers_with_their_includes_and_follow_placed_tables():
    # a <- b <- c and d <- e share nothing; f includes a table already on handle 1; g stands alone
    includes = {"a": [], "b": ["a"], "c": ["b", "a"], "d": [], "e": ["d"], "f": ["t1"], "g": []}
    got = groups(includes, {"t1": 1})
    assert got == [(None, ["a", "b", "c"]), (None, ["d", "e"]), (1, ["f"]), (None, ["g"])]
    # a group reading tables of two handles runs on the lower-numbered one (the other's included mart is inlined there)
    assert groups({"x": ["t0", "t1"]}, {"t0": 0, "t1": 1}) == [(0, ["x"])]




def _reports(wh, handles: int, monkeypatch) -> tuple[list[dict], list[tuple], dict]:
    """The cluster's and project A's reports in one block (as the demo writes them: the project's report reads
    the cluster's cluster-level marts), each mart evaluation recorded with the handle it ran on."""
    made = []
    command = Warehouse.command

    def record(self, sql, params=None):
        # a mart's table made from its query: CREATE ... AS SELECT, or, for the same query with other values
        # (A's efficiency after the cluster's), INSERT ... SELECT into a table of the first one's columns
        m = re.match(r"CREATE TEMPORARY TABLE (\w+) ENGINE = Memory AS |INSERT INTO (_mart_\w+) SELECT ", sql)
        if m:
            made.append((self, m.group(1) or m.group(2), sql))
        return command(self, sql, params)

    monkeypatch.setattr(Warehouse, "command", record)
    with each_mart_once(wh, handles=handles) as state:
        reports = [monthly_report(Connection(wh), cluster="t1", project=p) for p in (None, "A")]
        evaluations = dict(state.evaluations)
        tables = len(state.tables)
    monkeypatch.undo()
    return reports, made, {"evaluations": evaluations, "tables": tables}


@pytest.mark.both_forms
def test_each_mart_once_per_scope_on_a_handle_holding_its_includes(scenario, monkeypatch):
    _, made, state = _reports(scenario, 2, monkeypatch)
    # every evaluation a table of its own, none evaluated twice (the project's report reads the cluster's
    # cluster-level tables, whichever handle holds them)
    assert len(made) == state["tables"] == sum(state["evaluations"].values())
    assert state["evaluations"]["utilization"] == 2  # October and September, read by both reports
    assert state["evaluations"]["efficiency"] == 4  # the cluster's and A's, each month
    handles = {id(h) for h, _, _ in made}
    assert len(handles) == 2  # both handles evaluated marts
    where = {table: id(h) for h, table, _ in made}
    for handle, table, sql in made:
        read = set(re.findall(r"\b(_mart_\w+?_\d+)\b", sql)) - {table}
        assert all(where[t] == id(handle) for t in read), (table, read)
        assert read <= {t for _, t, _ in made[:made.index((handle, table, sql))]}  # made before it


@pytest.mark.both_forms
def test_two_handles_give_the_one_handle_report_and_the_raw_lines_figures(scenario, monkeypatch, tmp_path):
    one, _, _ = _reports(scenario, 1, monkeypatch)
    two, _, _ = _reports(scenario, 2, monkeypatch)
    for a, b in zip(one, two):
        assert to_json({**a, "generated_at": None}) == to_json({**b, "generated_at": None})
    cl, proj = two
    u = next(x for x in cl["utilization"] if x["level"] == "cluster")
    assert (u["capacity_gpu_h"], u["available_gpu_h"], u["allocated_gpu_h"]) == pytest.approx(
        (CAPACITY, AVAILABLE, ALLOCATED))
    # DuckDB over the month's sacct lines: each project's GPU-hours inside October (GPUs x overlap)
    _sacct(tmp_path / "sacct.psv")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    want = dict(con.execute("""
        SELECT upper(replace(Account, 'proj', '')), sum(split_part(split_part(AllocTRES, 'gres/gpu=', 2), ',', 1)::INT
               * greatest(0, epoch(least("End"::TIMESTAMPTZ, TIMESTAMPTZ '2026-11-01 00:00:00+00'))
                             - epoch(greatest(Start::TIMESTAMPTZ, TIMESTAMPTZ '2026-10-01 00:00:00+00')))) / 3600
        FROM read_csv(?, delim = '|', header = true, all_varchar = true) GROUP BY 1""",
        [str(tmp_path / "sacct.psv")]).fetchall())
    assert want == {"A": 226.0, "B": 104.0, "C": 64.0}  # as worked out by hand in test_monthly_scenario.py
    assert {r["project"]: r["allocated_gpu_h"] for r in cl["chargeback"]} == pytest.approx(want)
    assert [r["allocated_gpu_h"] for r in proj["chargeback"]] == pytest.approx([want["A"]])
    assert {r["project_key"]: r["gpu_h"] for r in cl["efficiency_by_project"]} == pytest.approx(want)


@pytest.mark.both_forms
def test_the_statements_engine_settings_ride_on_every_evaluation_and_change_no_figure(scenario, monkeypatch):
    """analytics/marts.py SETTINGS (analyzer_inline_views: a view a mart reads, fct_job_run, dim_account inside it,
    planned inside the mart's query) end every mart evaluation where the engine takes them, and the cluster's
    and project A's reports are byte for byte those of statements without them."""
    from ops_warehouse.analytics import marts

    with_settings, made, _ = _reports(scenario, 2, monkeypatch)
    carried = {sql.endswith("\nSETTINGS analyzer_inline_views = 1") for _, _, sql in made}
    # every evaluation or none (a server user that may not set them, an engine that does not know them); the
    # suite's chDB knows it
    assert len(carried) == 1 and (carried == {True} or not scenario.embedded)
    monkeypatch.setattr(marts, "SETTINGS", {})
    without, made, _ = _reports(scenario, 2, monkeypatch)
    assert not any("analyzer_inline_views" in sql for _, _, sql in made)
    for a, b in zip(with_settings, without):
        assert to_json({**a, "generated_at": None}) == to_json({**b, "generated_at": None})
