"""The rules (SQL functions) are repeatable schema: sql/functions/*.sql are re-applied on every upgrade whose
text changed, so a changed rule reaches a warehouse built before the change; warehouses that created the
functions with the old versioned migrations 0005/0008 get them replaced. The changed text comes from a copy
of the sql/ folder (apply_migrations' ``root``): the engine and the runner are the real ones."""

from __future__ import annotations

import re
import shutil
from datetime import datetime, timezone
from importlib.resources import as_file, files
from pathlib import Path

from ops_warehouse.config import Config
from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.migrations import Deployment, apply_migrations, rendered_schema
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import REPO

RULE_FILES = sorted(p.name for p in (REPO / "sql" / "functions").glob("*.sql"))
FUNCTIONS = sorted({f for p in (REPO / "sql" / "functions").glob("*.sql")
                    for f in re.findall(r"CREATE OR REPLACE FUNCTION (\w+)", p.read_text())})


def _sql_copy(dest: Path) -> Path:
    with as_file(files("ops_warehouse.sql")) as src:
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    return dest


def _one(wh, sql: str):
    return wh.query_rows(sql)[0][0]


def _commands(wh, monkeypatch) -> list[str]:
    """Record every statement the runner sends (they still go to the engine)."""
    sent: list[str] = []
    real = wh.command

    def command(sql, params=None):
        sent.append(sql)
        return real(sql, params)

    monkeypatch.setattr(wh, "command", command)
    return sent


def test_a_changed_rule_reaches_a_warehouse_built_before_the_change(wh, tmp_path, monkeypatch):
    """Xid 13 (graphics engine exception) is not hardware in the shipped rule; a site that decides it is edits
    xid_is_hardware.sql, and the next upgrade changes the warehouse's answer, in the marts too."""
    assert _one(wh, "SELECT xid_is_hardware(13)") == 0
    assert _one(wh, "SELECT gpu_size_class(64)") == "9-64"
    changed = _sql_copy(tmp_path / "sql")
    rule = changed / "functions" / "xid_is_hardware.sql"
    rule.write_text(rule.read_text().replace("xid IN (48, 63, 64, 74, 79, 92, 94, 95)",
                                             "xid IN (13, 48, 63, 64, 74, 79, 92, 94, 95)"))
    size = changed / "functions" / "gpu_size_class.sql"
    size.write_text(size.read_text().replace("gpus <= 64, '9-64', gpus <= 256, '65-256'",
                                             "gpus <= 32, '9-32', gpus <= 256, '33-256'"))

    assert apply_migrations(wh, root=changed) == ["functions/gpu_size_class.sql", "functions/xid_is_hardware.sql"]
    assert _one(wh, "SELECT xid_is_hardware(13)") == 1 and _one(wh, "SELECT xid_is_hardware(31)") == 0
    assert _one(wh, "SELECT gpu_size_class(64)") == "33-256"
    # a mart uses the rule as the warehouse now holds it
    wh.command("INSERT INTO xid_event (cluster, node, gpu, ts, xid, source) "
               "VALUES ('t1', 'n1', 0, '2026-10-05 10:00:00', 13, 'test')")
    x = run_mart(wh, "xid_events", cluster="t1",
                 window=(datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, tzinfo=timezone.utc)))
    assert x.select("xid", "hardware").rows() == [(13, 1)]

    # the same text again: nothing is sent but the runner's own checks
    sent = _commands(wh, monkeypatch)
    assert apply_migrations(wh, root=changed) == []
    assert [s for s in sent if "FUNCTION" in s or "INSERT" in s] == []

    # back to the shipped rules: replaced again
    monkeypatch.undo()
    assert apply_migrations(wh) == ["functions/gpu_size_class.sql", "functions/xid_is_hardware.sql"]
    assert _one(wh, "SELECT xid_is_hardware(13)") == 0 and _one(wh, "SELECT gpu_size_class(64)") == "9-64"


def test_unchanged_rules_send_nothing_and_a_missing_function_is_created_again(wh, monkeypatch):
    sent = _commands(wh, monkeypatch)
    assert apply_migrations(wh) == []
    assert [s for s in sent if "FUNCTION" in s or "INSERT" in s] == []
    monkeypatch.undo()
    # functions belong to the server: one dropped there is created again though this warehouse recorded it
    wh.command("DROP FUNCTION overlap_s")
    assert apply_migrations(wh) == ["functions/overlap_s.sql"]
    assert _one(wh, "SELECT overlap_s(0, 10, 5, 20)") == 5


def test_a_warehouse_built_with_the_versioned_function_migrations_upgrades(tmp_path):
    """A warehouse that created its functions with migrations 0005/0008 (CREATE FUNCTION IF NOT EXISTS, run
    once): rebuilt here from the same rules in that layout, one of them different from today's. The upgrade
    replaces every function, keeps the migrations' records and re-runs none of them."""
    old = _sql_copy(tmp_path / "old_sql")
    rules = {p.name: p.read_text().replace("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION IF NOT EXISTS")
             for p in sorted((old / "functions").glob("*.sql"))}
    rules["xid_is_hardware.sql"] = rules["xid_is_hardware.sql"].replace("xid IN (48,", "xid IN (13, 48,")
    (old / "migrations" / "0008_slurm_functions.sql").write_text(rules.pop("slurm_decoding.sql"))
    (old / "migrations" / "0005_functions.sql").write_text("\n".join(rules.values()))
    shutil.rmtree(old / "functions")
    (old / "functions").mkdir()

    dsn = f"chdb://{tmp_path / 'wh'}"
    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    try:
        assert "0005_functions.sql" in apply_migrations(wh, root=old)
        assert _one(wh, "SELECT xid_is_hardware(13)") == 1
        assert wh.query_rows("SELECT count() FROM system.functions WHERE name IN {n:Array(String)}",
                             {"n": FUNCTIONS})[0][0] == len(FUNCTIONS)
    finally:
        close_embedded()
    wh = open_warehouse(Config(dsn=dsn))  # the upgrade, as any command runs it
    try:
        names = dict(wh.query_rows("SELECT name, kind FROM schema_migrations FINAL"))
        assert {f"functions/{n}" for n in RULE_FILES} <= set(names)
        assert names["0005_functions.sql"] == "migrations" and names["0008_slurm_functions.sql"] == "migrations"
        assert _one(wh, "SELECT xid_is_hardware(13)") == 0  # today's rule replaced the one 0005 created
        assert _one(wh, "SELECT slurm_tres_text('1=16,4=2', ['cpu', '', '', 'node'])") == "cpu=16,node=2"
        assert apply_migrations(wh) == []
    finally:
        close_embedded()


def test_the_rules_render_on_cluster_before_the_tables():
    stmts = rendered_schema(Deployment("cluster", "ops_prod"))
    funcs = [s for s in stmts if s.startswith("CREATE OR REPLACE FUNCTION")]
    assert sorted(re.match(r"CREATE OR REPLACE FUNCTION (\w+) ON CLUSTER 'ops_prod' AS", s).group(1)
                  for s in funcs) == FUNCTIONS
    assert stmts.index(funcs[-1]) < min(i for i, s in enumerate(stmts) if s.startswith("CREATE TABLE"))
    assert not any("FUNCTION IF NOT EXISTS" in s for s in stmts)  # defined once, in sql/functions/
    single = [s for s in rendered_schema(Deployment("single")) if "FUNCTION" in s]
    assert len(single) == len(FUNCTIONS) and not any("ON CLUSTER" in s for s in single)


def test_every_sql_folder_ships_as_package_data():
    text = (REPO / "pyproject.toml").read_text()
    for folder in sorted(p for p in (REPO / "sql").iterdir() if p.is_dir() and any(p.glob("*.sql"))):
        pkg = f"ops_warehouse.sql.{folder.name}"
        assert f'"{pkg}" = "sql/{folder.name}"' in text and f'"{pkg}" = ["*.sql"]' in text, folder.name
        assert re.search(rf'packages = \[[^\]]*"{re.escape(pkg)}"', text), folder.name
