"""What every command pays before its work (issue 16, bench/bench_startup.py): the schema check of a warehouse
that is up to date is one query and writes nothing; one that is behind is still brought up to date; the CLI and
`import ops_warehouse` import neither polars nor pyarrow nor the client (a command imports what it needs)."""

from __future__ import annotations

import subprocess
import sys
from datetime import date

import pytest

from ops_warehouse import engine_reads
from ops_warehouse.warehouse import bring_up_to_date
from tests.conftest import REPO


def recording(wh, monkeypatch) -> list[str]:
    """Every statement the warehouse is sent from now on (queries, commands, inserts)."""
    sent: list[str] = []
    query_rows, query_arrow, command, insert = wh.query_rows, wh.query_arrow, wh.command, wh.insert_rows

    def q(sql, params=None):
        sent.append(sql)
        return query_rows(sql, params)

    def a(sql, params=None):
        sent.append(sql)
        return query_arrow(sql, params)

    def c(sql, params=None):
        sent.append(sql)
        return command(sql, params)

    def i(table, *a, **k):
        sent.append(f"INSERT INTO {table}")
        return insert(table, *a, **k)

    monkeypatch.setattr(wh, "query_rows", q)
    monkeypatch.setattr(wh, "query_arrow", a)
    monkeypatch.setattr(wh, "command", c)
    monkeypatch.setattr(wh, "insert_rows", i)
    return sent


@pytest.mark.both_forms
def test_an_up_to_date_warehouse_is_checked_in_one_query(wh, form, monkeypatch):
    sent = recording(wh, monkeypatch)
    assert bring_up_to_date(wh) == []
    assert len(sent) == 1, sent
    assert sent[0].startswith("SELECT") and "schema_migrations" in sent[0] and "cost_model" in sent[0]
    # the embedded engine's functions are listed from its folder: system.functions costs it 0.1-0.2 s
    assert ("system.functions" in sent[0]) == (form == "server")


@pytest.mark.both_forms
def test_a_configured_site_is_checked_in_the_same_one_query(wh, monkeypatch):
    wh.cfg.projects, wh.cfg.projects_configured, wh.cfg.telemetry_ttl_days = {"acct1": "P1"}, True, 30
    assert bring_up_to_date(wh) == []  # the mapping and the TTL written once
    assert wh.query_rows("SELECT account, project FROM account_project FINAL") == [("acct1", "P1")]
    sent = recording(wh, monkeypatch)
    assert bring_up_to_date(wh) == []
    assert len(sent) == 1 and "account_project" in sent[0] and "system.tables" in sent[0], sent
    # a changed mapping is still synced
    wh.cfg.projects = {"acct1": "P2"}
    bring_up_to_date(wh)
    monkeypatch.undo()
    assert wh.query_rows("SELECT account, project FROM account_project FINAL") == [("acct1", "P2")]


@pytest.mark.both_forms
def test_a_warehouse_behind_is_still_brought_up_to_date(wh):
    # a view whose text changed since it was applied, as after an upgrade of ops-warehouse
    wh.command("INSERT INTO schema_migrations (name, kind, checksum, applied_at) "
               "VALUES ('fct_job_run.sql', 'intermediate', 'an older text', now64(3))")
    assert bring_up_to_date(wh) == ["fct_job_run.sql"]
    assert bring_up_to_date(wh) == []


def test_a_dropped_function_is_created_again(wh):
    wh.command("DROP FUNCTION overlap_s")
    assert bring_up_to_date(wh) == ["functions/overlap_s.sql"]
    assert wh.query_rows("SELECT overlap_s(0, 10, 5, 20)") == [(5,)]
    assert bring_up_to_date(wh) == []


@pytest.mark.parametrize("module", ["ops_warehouse", "ops_warehouse.cli.main"])
def test_importing_the_cli_or_the_package_stays_light(module):
    heavy = ("polars", "pyarrow", "numpy", "clickhouse_connect", "chdb", "matplotlib", "duckdb")
    p = subprocess.run([sys.executable, "-c", f"import sys, {module}; "
                        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"],
                       capture_output=True, text=True, cwd=REPO, check=True)
    assert p.stdout.strip() == "[]", p.stdout + p.stderr


@pytest.mark.parametrize("args", [["--help"], ["monthly", "--help"], ["summary", "--help"], ["etl", "sacct", "--help"]],
                         ids=" ".join)
def test_help_imports_no_engine_client_or_frames(args):
    """`ops-report … --help` in a fresh process, as a user types it: the help is printed with none of the engine,
    the client (nor its HTTP stack), the frames or the charts imported."""
    heavy = ("polars", "pyarrow", "numpy", "pandas", "clickhouse_connect", "urllib3", "chdb", "matplotlib", "duckdb",
             "pydantic")
    p = subprocess.run([sys.executable, "-c", "import sys, atexit; atexit.register(lambda: print(sorted(m for m in "
                        f"{heavy!r} if m in sys.modules), file=sys.stderr)); "
                        "from ops_warehouse.cli.main import main; main()", *args],
                       capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Usage: " in p.stdout and "[OPTIONS]" in p.stdout
    assert p.stderr.strip().splitlines()[-1] == "[]", p.stderr[-2000:]


def test_a_summary_imports_only_what_it_uses(cfg):
    """`ops-report summary` in a fresh process, as a user runs it: it imports its own report's module, not the
    other five reports' (the what-if's planning, the checks', the monthly report's), and the CLI's option
    parsing does not import pydantic (typer 0.29 validates every option through pydantic TypeAdapters: 0.2 s of
    CPU a command; pyproject.toml keeps typer below it). Issue 51: a one-day summary's fixed cost was 0.84 s of
    imports; the table is printed from Arrow, without polars. The figures are checked too, by hand from the Phillips fixture's raw line of job 163485: started
    2016-12-22T07:15:13 on 1 node, 12 CPUs and gres/gpu=2, ended 2017-01-01, so 16:44:47 = 16.7464 h of that
    day, 33.4928 GPU-hours."""
    import json
    import os

    sacct = REPO / "tests" / "data" / "sacct" / "xdmod" / "phillips.log"
    env = {**os.environ, "OPS_CONFIG": "", "OPS_WAREHOUSE": cfg.dsn}
    ops = [sys.executable, "-c", "import sys, atexit; atexit.register(lambda: print(' '.join(sorted(sys.modules)), "
           "file=sys.stderr)); from ops_warehouse.cli.main import main; main()"]
    subprocess.run([*ops, "etl", "sacct", "--fields", "xdmod", str(sacct)], env=env, cwd=REPO, check=True,
                   capture_output=True)
    p = subprocess.run([*ops, "summary", "--from", "2016-12-22", "--to", "2016-12-22", "--format", "json"],
                       env=env, cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    modules = set(p.stderr.strip().splitlines()[-1].split())
    assert "ops_warehouse.analytics.summary" in modules
    unused = {"pydantic", *(f"ops_warehouse.analytics.{m}" for m in ("checks", "export", "monthly", "telemetry",
                                                                     "whatif")), "ops_warehouse.planning.scenarios"}
    # nor the analysts' API, its declarations or the digest: the summary reads through none of them (3-4 ms of
    # CPU a start, measured in process, when cli/main.py imported them at its top; round 5)
    unused |= {"ops_warehouse.analytics.api", "ops_warehouse.analytics.declarations", "ops_warehouse.analytics.digest"}
    # nor the client: its schema check and its query are Arrow reads of the engine (core/engine_reads.py); the
    # client's import and handshake were 0.08 CPU-s of the 0.16-0.18 over the engine (issue 51, round 7)
    unused |= {"clickhouse_connect", "urllib3", "asyncio"}
    assert sorted(unused & modules) == []
    [row] = json.loads(p.stdout)
    # printed from the engine's Arrow table: no polars (0.36 CPU-s of the 0.79 over the engine); the table
    # worked out by hand: 16.7464 node-hours, x 2 GPUs 33.4928, x 12 CPUs 200.9567, waited 1 s (0.0003 h)
    p = subprocess.run([*ops, "summary", "--from", "2016-12-22", "--to", "2016-12-22"], env=env, cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "polars" not in p.stderr.strip().splitlines()[-1].split()
    assert p.stdout == (
        "| jobs_ended | jobs_started | jobs_cancelled_before_start | cpu_hours | gpu_h   | node_hours | wall_hours "
        "| wait_hours | avg_wait_hours |\n"
        "|------------|--------------|-----------------------------|-----------|---------|------------|------------"
        "|------------|----------------|\n"
        "| 0          | 1            | 0                           | 200.9567  | 33.4928 | 16.7464    | 16.7464    "
        "| 0.0003     | 0.0003         |\n")
    assert (row["jobs_started"], row["jobs_ended"]) == (1, 0)
    assert row["node_hours"] == pytest.approx(16 + 44 / 60 + 47 / 3600, abs=1e-4)
    assert row["gpu_h"] == pytest.approx(2 * (16 + 44 / 60 + 47 / 3600), abs=1e-4)


# The parameters below as a user's text makes them: quotes, backslashes, the characters the client escapes
# (tab, newline, backtick), an empty string, text in another script; a date, numbers, an array of text.
TRICKY = {"s": "it's a \\ back`tick\ttab\nline; -- not a comment {x:String}", "e": "", "u": "Grüße, 東京",
          "d": date(2026, 10, 31), "i": -9_007_199_254_740_993, "f": 0.1, "a": ["a'b", "c\\d", ""], "b": True}
TRICKY_SQL = ("SELECT {s:String} AS s, {e:String} AS e, {u:String} AS u, {d:Date} AS d, {i:Int64} AS i, "
              "{f:Float64} AS f, {a:Array(String)} AS a, {b:Bool} AS b, length({s:String}) AS n")


@pytest.mark.both_forms
def test_a_read_binds_the_values_given(wh, form, monkeypatch):
    """A report's reads on the embedded engine go to a chDB handle without the client (core/engine_reads.py),
    their parameters bound as the client binds them: the engine sees the values given, on both forms (the
    server's are the client's own binding)."""
    served = []
    handle_read = engine_reads.Handle.query_arrow

    def spy(handle, sql, params):
        table = handle_read(handle, sql, params)
        served.append(table is not None)
        return table

    monkeypatch.setattr(engine_reads.Handle, "query_arrow", spy)
    t = wh.query_arrow(TRICKY_SQL, TRICKY)
    assert served == ([True] if form == "embedded" else [])
    row = {k: v[0] for k, v in t.to_pydict().items()}
    # length() in bytes, counted by hand: "it's a " 7, the backslash 1, " back" 5, "`" 1, "tick" 4, tab 1, "tab" 3,
    # newline 1, "line; -- not a comment " 23, "{x:String}" 10
    assert row == {**TRICKY, "n": 56}
    assert str(t.schema.field("s").type) == "string"  # text, as the client's Arrow reads give it


def test_after_the_client_is_made_every_statement_goes_through_it(wh, monkeypatch):
    """A temporary table is its session's: once a command has gone through the client, reads go there too (on
    the engine's other handle the table would not exist); before, the same values either way."""
    before = wh.query_arrow(TRICKY_SQL, TRICKY)
    wh.command("CREATE TEMPORARY TABLE t_session (x UInt8) ENGINE = Memory")
    wh.command("INSERT INTO t_session VALUES (7)")
    monkeypatch.setattr(engine_reads.Handle, "query_arrow", lambda *a: pytest.fail("read on the handle after the client"))
    assert wh.query_arrow("SELECT x FROM t_session").to_pydict() == {"x": [7]}
    assert wh.query_arrow(TRICKY_SQL, TRICKY).equals(before)  # the client's read: the same table, schema included


def test_what_the_handle_does_not_bind_goes_to_the_client(wh):
    """A DateTime (the client rewrites it for the server's zone), a None, a name the SQL does not use as a
    placeholder: the client binds them; a read the engine refuses raises the client's error."""
    import calendar
    from datetime import datetime

    assert engine_reads.bind("SELECT {t:DateTime}", {"t": datetime(2026, 10, 31, 23, 59, 59)}) is None
    assert engine_reads.bind("SELECT {n:Nullable(String)}", {"n": None}) is None
    assert engine_reads.bind("SELECT 1", {"x": 1}) is None
    t = wh.query_arrow("SELECT {t:DateTime('UTC')} AS t, {n:Nullable(String)} AS n",
                       {"t": datetime(2026, 10, 31, 23, 59, 59), "n": None})
    assert t.column("t")[0].as_py() == calendar.timegm((2026, 10, 31, 23, 59, 59))  # DateTime: Arrow's seconds
    assert t.column("n")[0].as_py() is None
    from clickhouse_connect.driver.exceptions import DatabaseError

    with pytest.raises(DatabaseError, match="UNKNOWN_TABLE|doesn't exist|does not exist"):
        wh.query_arrow("SELECT * FROM no_such_table")
