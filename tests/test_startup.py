"""What every command pays before its work (issue 16, bench/bench_startup.py): the schema check of a warehouse
that is up to date is one query and writes nothing; one that is behind is still brought up to date; the CLI and
`import ops_warehouse` import neither polars nor pyarrow nor the client (a command imports what it needs)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ops_warehouse.warehouse import bring_up_to_date
from tests.conftest import REPO


def recording(wh, monkeypatch) -> list[str]:
    """Every statement the warehouse is sent from now on (queries, commands, inserts)."""
    sent: list[str] = []
    query_rows, command, insert = wh.query_rows, wh.command, wh.insert_rows

    def q(sql, params=None):
        sent.append(sql)
        return query_rows(sql, params)

    def c(sql, params=None):
        sent.append(sql)
        return command(sql, params)

    def i(table, *a, **k):
        sent.append(f"INSERT INTO {table}")
        return insert(table, *a, **k)

    monkeypatch.setattr(wh, "query_rows", q)
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
