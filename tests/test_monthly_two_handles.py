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
    the cluster's cluster-level marts), each mart evaluation recorded with the handle it ran on: (handle, its
    table, its statement), the table None for a mart read as a query of its own (one no other mart includes)."""
    made = []
    command, query_arrow = Warehouse.command, Warehouse.query_arrow

    def record(self, sql, params=None):
        # a mart's table made from its query: CREATE ... AS SELECT, or, for the same query with other values
        # (A's efficiency after the cluster's), INSERT ... SELECT into a table of the first one's columns
        m = re.match(r"CREATE TEMPORARY TABLE (\w+) ENGINE = Memory AS |INSERT INTO (_mart_\w+) SELECT ", sql)
        if m:
            made.append((self, m.group(1) or m.group(2), sql))
        return command(self, sql, params)

    def record_read(self, sql, params=None):
        # a mart read as a query, its rows numbered as a table's are (a table's own read names the table)
        if sql.startswith("SELECT * EXCEPT _mart_row FROM (SELECT *, rowNumberInAllBlocks() AS _mart_row FROM ("):
            made.append((self, None, sql))
        return query_arrow(self, sql, params)

    monkeypatch.setattr(Warehouse, "command", record)
    monkeypatch.setattr(Warehouse, "query_arrow", record_read)
    with each_mart_once(wh, handles=handles) as state:
        reports = [monthly_report(Connection(wh), cluster="t1", project=p) for p in (None, "A")]
        evaluations = dict(state.evaluations)
        tables = len(state.tables)
        inlined = dict(state.inlined)
    monkeypatch.undo()
    return reports, made, {"evaluations": evaluations, "tables": tables, "inlined": inlined}


@pytest.mark.both_forms
def test_each_mart_once_per_scope_on_a_handle_holding_its_includes(scenario, monkeypatch):
    _, made, state = _reports(scenario, 2, monkeypatch)
    # every evaluation one statement, a table or a query read alone, none evaluated twice (the project's report
    # reads the cluster's cluster-level marts, whichever handle holds them)
    assert len(made) == sum(state["evaluations"].values()) - sum(state["inlined"].values())
    assert len([t for _, t, _ in made if t]) == state["tables"]
    assert state["evaluations"]["utilization"] == 2  # October and September, read by both reports
    assert state["evaluations"]["efficiency"] == 4  # the cluster's and A's, each month
    handles = {id(h) for h, _, _ in made}
    assert len(handles) == 2  # both handles evaluated marts
    where = {table: id(h) for h, table, _ in made if table}
    for k, (handle, table, sql) in enumerate(made):
        read = set(re.findall(r"\b(_mart_\w+?_\d+)\b", sql)) - {table}
        assert all(where[t] == id(handle) for t in read), (table, read)
        assert read <= {t for _, t, _ in made[:k]}  # made before it


@pytest.mark.both_forms
def test_a_table_only_for_a_mart_two_read_or_asked_for_too(scenario, monkeypatch):
    """A mart's table is made only where another mart of the block reads it (its ``{{mart name}}``, found here in
    the SQL files' own text) and it is asked for too or read by a second mart; the marts no other includes
    (largest_jobs, node_health, job_sizes, ...) are read as queries of their own, and an include read by one
    mart alone is inlined into it (job_efficiency into largest_jobs): a table analyzes its query twice and is
    written and read again (docs/benchmarks.md, issue 51, round 9)."""
    from pathlib import Path

    marts_dir = Path(__file__).resolve().parents[1] / "sql" / "marts"
    readers = {}
    for f in marts_dir.glob("*.sql"):
        for m in set(re.findall(r"\{\{mart (\w+)", f.read_text())):
            readers.setdefault(m, set()).add(f.stem)
    reports, made, state = _reports(scenario, 2, monkeypatch)
    tables = {re.sub(r"^_mart_(\w+)_\d+$", r"\1", t) for _, t, _ in made if t}
    alone = set(state["evaluations"]) - tables - set(state["inlined"])
    assert tables and tables <= set(readers)
    assert {"largest_jobs", "node_health", "job_sizes", "run_times", "end_states", "gpu_heatmap"} <= alone
    # read by several marts of the report: tables
    assert {"hung_jobs", "data_through", "utilization", "cost"} <= tables
    # job_efficiency: read by largest_jobs alone (of every mart), inlined into it in each scope, never a table
    assert readers["job_efficiency"] == {"largest_jobs"}
    assert state["inlined"]["job_efficiency"] == state["evaluations"]["job_efficiency"] == 2
    assert "job_efficiency" not in tables
    largest = [sql for _, t, sql in made if "every_run" in sql]  # job_efficiency's text, inlined
    assert len(largest) == 2 and all(t is None for _, t, sql in made if "every_run" in sql)
    # an inlined mart includes none itself
    assert not {m for m in state["inlined"] if re.search(r"\{\{mart ", (marts_dir / f"{m}.sql").read_text())}
    # the same figures, byte for byte, as with every included mart a table (none inlined)
    from ops_warehouse.analytics import marts

    monkeypatch.setattr(marts, "_keeps_totals", lambda name: True)
    tabled, made, state = _reports(scenario, 2, monkeypatch)
    assert not state["inlined"] and "job_efficiency" in {re.sub(r"_\d+$", "", t)[6:] for _, t, _ in made if t}
    for a, b in zip(reports, tabled):
        assert to_json({**a, "generated_at": None}) == to_json({**b, "generated_at": None})
    assert reports[0]["largest_jobs"] and reports[0]["largest_jobs"][0]["gpu_h"] > 0


@pytest.mark.both_forms
def test_a_mart_read_alone_then_included_is_evaluated_for_the_includer(scenario):
    """In a block, the report reads job_sizes as a query of its own (no table); a law that includes it after
    (sql/checks/size_classes_sum_to_totals.sql) has it evaluated then, as a table: the law's rows are the law's
    outside any block, and job_sizes' rows the report's."""
    from datetime import datetime, timezone

    from ops_warehouse.analytics.marts import run_file, run_mart

    w = (datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, tzinfo=timezone.utc))
    alone = run_mart(scenario, "job_sizes", cluster="t1", window=w)  # no include: its query alone
    law = run_file(scenario, "checks/size_classes_sum_to_totals.sql", cluster="t1", window=w)
    with each_mart_once(scenario) as state:
        report = monthly_report(Connection(scenario), cluster="t1")
        assert report["month"] == "2026-10" and state.evaluations["job_sizes"] == 1
        assert not any(k[0] == "job_sizes" for k in state.tables)
        assert run_mart(scenario, "job_sizes", cluster="t1", window=w).equals(alone)  # the report's rows, kept
        assert run_file(scenario, "checks/size_classes_sum_to_totals.sql", cluster="t1", window=w).equals(law)
        assert state.evaluations["job_sizes"] == 2 and any(k[0] == "job_sizes" for k in state.tables)
    assert report["job_sizes"] == alone.to_dicts() and alone["jobs"].sum() > 0


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
    planned inside the mart's query; the engine's JIT compilation off) end every mart evaluation where the engine
    takes them, and the cluster's and project A's reports are byte for byte those of statements without them."""
    from ops_warehouse.analytics import marts

    with_settings, made, _ = _reports(scenario, 2, monkeypatch)
    carried = {sql.endswith("\nSETTINGS analyzer_inline_views = 1, compile_expressions = 0, "
                            "compile_aggregate_expressions = 0, compile_sort_description = 0") for _, _, sql in made}
    # every evaluation or none (a server user that may not set them, an engine that does not know them); the
    # suite's chDB knows it
    assert len(carried) == 1 and (carried == {True} or not scenario.embedded)
    monkeypatch.setattr(marts, "SETTINGS", {})
    without, made, _ = _reports(scenario, 2, monkeypatch)
    assert not any("analyzer_inline_views" in sql or "compile_expressions" in sql for _, _, sql in made)
    for a, b in zip(with_settings, without):
        assert to_json({**a, "generated_at": None}) == to_json({**b, "generated_at": None})


@pytest.mark.both_forms
def test_a_mart_asked_for_outside_a_block_inlines_what_it_names_once(scenario, monkeypatch):
    """run_mart outside a block (a notebook's call, bench_monthly's core six): chargeback's run_allocation_daily,
    named once and including nothing, is inlined, and cost (GROUPING SETS: its total row kept by a table) is its
    one table; gpu_heatmap makes none (data_through inlined). The rows are the cluster report's."""
    from datetime import datetime, timezone

    from ops_warehouse.analytics.marts import run_mart

    w = (datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, tzinfo=timezone.utc))
    made = []
    command = Warehouse.command

    def record(self, sql, params=None):
        m = re.match(r"CREATE TEMPORARY TABLE _mart_(\w+)_\d+ ", sql)
        if m:
            made.append(m.group(1))
        return command(self, sql, params)

    monkeypatch.setattr(Warehouse, "command", record)
    charge = run_mart(scenario, "chargeback", cluster="t1", window=w)
    heat = run_mart(scenario, "gpu_heatmap", cluster="t1", window=w)
    monkeypatch.undo()
    assert made == ["cost"]
    report = monthly_report(Connection(scenario), cluster="t1")
    assert report["month"] == "2026-10"
    assert to_json(charge.to_dicts()) == to_json(report["chargeback"])
    assert to_json(heat.to_dicts()) == to_json(report["gpu_heatmap"])
    # by hand (test_monthly_scenario.py): A 226, B 104, C 64 GPU-hours allocated in October
    assert {r["project"]: r["allocated_gpu_h"] for r in report["chargeback"]} == pytest.approx(
        {"A": 226.0, "B": 104.0, "C": 64.0})
