"""Schema migrations, the cluster rendering of the same files, and the embedded warehouse's lock."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.config import Config
from ops_warehouse.migrations import Deployment, apply_migrations, rendered_schema
from ops_warehouse.warehouse import close_embedded, open_warehouse, redact
from tests.conftest import rows


def test_migrations_apply_once_and_are_recorded(wh):
    assert apply_migrations(wh) == []  # open_warehouse() already applied them
    names = [n for (n,) in rows(wh, "SELECT name FROM schema_migrations FINAL ORDER BY name")]
    assert "0001_slurm_accounting.sql" in names and "fct_job_run.sql" in names
    tables = {t for (t,) in rows(wh, "SELECT name FROM system.tables WHERE database = currentDatabase()")}
    assert {"slurm_job_run", "slurm_job_step", "etl_quarantine", "etl_run_log", "account_project",
            "fct_job_run"} <= tables


@pytest.mark.parametrize("mode", ["single", "cluster"])
def test_rendered_ddl_parses_with_the_engines_own_parser(wh, mode):
    stmts = rendered_schema(Deployment(mode, "ops_prod"))
    for s in stmts:
        formatted = rows(wh, "SELECT formatQuery({q:String})", q=s)[0][0]
        assert formatted
    text = "\n".join(stmts)
    if mode == "cluster":
        assert "ON CLUSTER 'ops_prod'" in text
        assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/slurm_job_run_local', " \
               "'{replica}', _version)" in text
        assert ("CREATE TABLE IF NOT EXISTS slurm_job_run ON CLUSTER 'ops_prod' AS slurm_job_run_local "
                "ENGINE = Distributed('ops_prod', currentDatabase(), 'slurm_job_run_local', "
                "cityHash64(cluster, job_id))") in text
        # small dimensions are replicated to every node, not sharded
        assert "'/clickhouse/tables/all/{database}/account_project'" in text
        distributed = {s.split()[5] for s in stmts if "ENGINE = Distributed" in s}
        assert distributed == {"slurm_job_run", "slurm_job_step", "etl_quarantine", "etl_run_log", "gpu_sample",
                               "node_sample", "xid_event", "gpu_hour", "node_hour", "capacity_node_hour",
                               "lustre_job_io", "gpu_instance_sample"}
    else:
        assert "Replicated" not in text and "ON CLUSTER" not in text and "_local" not in text


def test_second_process_gets_one_clear_line(wh, cfg):
    """--no-wait: a process that finds the warehouse held says so in one line, naming the holder, at once
    (waiting is tests/test_taking_turns.py)."""
    code = ("from ops_warehouse.cli.main import main; import sys; "
            f"sys.argv=['ops-report', '--warehouse', {cfg.dsn!r}, '--no-wait', 'init']; main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert str(wh.embedded_path) in lines[0] and "ClickHouse server" in lines[0]
    assert f"pid {os.getpid()}" in lines[0] and "busy" in lines[0]
    assert "Traceback" not in p.stderr


def test_unsupported_dsn_and_password_redaction():
    with pytest.raises(OpsError, match="unsupported warehouse DSN"):
        open_warehouse(Config(dsn="postgres://u:secret@h/db"))
    assert redact("http://ops:s3cret@ch:8123/db") == "http://ops:***@ch:8123/db"


def test_unreachable_server_is_one_line(tmp_path):
    # the password from the config, as it must be (one in the DSN is refused: tests/test_security.py)
    with pytest.raises(OpsError, match=r"cannot reach warehouse http://ops@127.0.0.1:9/db") as e:
        open_warehouse(Config(dsn="http://ops@127.0.0.1:9/db", warehouse_password="s3cret"))
    assert "s3cret" not in str(e.value) and "\n" not in str(e.value)


def test_fine_telemetry_ttl_from_config(cfg):
    from ops_warehouse.warehouse import close_embedded

    cfg.telemetry_ttl_days = 90
    w = open_warehouse(cfg)
    ddl = dict(rows(w, "SELECT name, create_table_query FROM system.tables WHERE database = currentDatabase() "
                       "AND name IN ('gpu_sample', 'node_sample', 'gpu_hour')"))
    assert "TTL ts + toIntervalDay(90)" in ddl["gpu_sample"] and "TTL ts + toIntervalDay(90)" in ddl["node_sample"]
    assert "TTL" not in ddl["gpu_hour"]  # rollups are kept
    close_embedded()


def test_a_connection_without_the_sites_config_keeps_its_projects_and_cost_model(tmp_path):
    """A notebook or a one-off command run without the site's config must not erase the account -> project
    mapping or replace the cost model with the defaults; a config that names them does replace them."""
    from ops_warehouse.config import DEFAULT_COST_MODEL, load_config
    from ops_warehouse.migrations import warehouse_cost_model

    site = tmp_path / "site.toml"
    site.write_text('[projects]\nproja = "A"\n[cost.h100]\nnode_price = 123456\namortization_years = 4\n'
                    'power_price_per_kwh = 0.2\npue = 1.1\npeak_bf16_tflops = 989\ncurrency = "EUR"\n')
    dsn = f"chdb://{tmp_path / 'wh'}"
    cfg = load_config(site)
    cfg.dsn = dsn
    open_warehouse(cfg)
    close_embedded()
    wh = open_warehouse(Config(dsn=dsn))  # no config: the defaults would say nothing of projects, h100 at list price
    try:
        assert wh.query_rows("SELECT account, project FROM account_project FINAL") == [("proja", "A")]
        assert warehouse_cost_model(wh) == {"h100": {"node_price": 123456.0, "amortization_years": 4.0,
                                                     "power_price_per_kwh": 0.2, "pue": 1.1,
                                                     "peak_bf16_tflops": 989.0, "currency": "EUR"}}
    finally:
        close_embedded()
    fresh = open_warehouse(Config(dsn=f"chdb://{tmp_path / 'fresh'}"))  # an empty warehouse gets the defaults
    try:
        assert set(warehouse_cost_model(fresh)) == set(DEFAULT_COST_MODEL)
    finally:
        close_embedded()


def test_init_without_the_sites_config_keeps_its_projects_and_cost_model(tmp_path):
    """`ops-report init` (issue 13) keeps what open_warehouse() keeps: run without [projects] or [cost.*] it leaves
    the mapping and the cost model the site's config gave (before: it emptied account_project)."""
    from tests.cli_runner import cli

    dsn = f"chdb://{tmp_path / 'wh'}"
    site = tmp_path / "site.toml"
    site.write_text('[projects]\nproja = "A"\nprojb = "B"\n[cost.h100]\nnode_price = 123456\namortization_years = 4\n'
                    'power_price_per_kwh = 0.2\npue = 1.1\npeak_bf16_tflops = 989\n')
    bare = tmp_path / "bare.toml"
    bare.write_text('timezone = "UTC"\n')
    env = {"OPS_WAREHOUSE": ""}
    cli("--config", str(site), "--warehouse", dsn, "init", env=env)

    def state():
        from ops_warehouse.migrations import warehouse_cost_model

        wh = open_warehouse(Config(dsn=dsn), migrate=False)
        try:
            return (wh.query_rows("SELECT account, project FROM account_project FINAL ORDER BY account"),
                    warehouse_cost_model(wh).get("h100", {}).get("node_price"))
        finally:
            close_embedded()

    assert state()[0] == [("proja", "A"), ("projb", "B")]
    out = cli("--config", str(bare), "--warehouse", dsn, "init", env=env).stdout
    assert "schema up to date" in out
    assert state()[0] == [("proja", "A"), ("projb", "B")]
    assert state()[1] == 123456.0  # init synced the site's cost model, and the bare config kept it
    # a config that names the mapping does replace it, through init as through any command
    site.write_text('[projects]\nproja = "Z"\n')
    cli("--config", str(site), "--warehouse", dsn, "init", env=env)
    assert state()[0] == [("proja", "Z")]


def test_an_https_dsn_is_tls_whatever_the_port():
    """clickhouse-connect infers TLS from the port: https://host/db would otherwise go to 8123 in clear."""
    with pytest.raises(OpsError, match=r"HTTPSConnection.*port=8443"):
        open_warehouse(Config(dsn="https://ops@127.0.0.1/db"))
    with pytest.raises(OpsError, match=r"HTTPSConnection.*port=9"):
        open_warehouse(Config(dsn="https://ops@127.0.0.1:9/db"))
