"""The ClickHouse-server form end to end, through ClickHouse's HTTP interface (tests/chdb_server.py): the CLI
loads and reports with an http:// DSN, an analyst's read-only user connects and reads the same figures but
cannot write, and the server refuses what a remote server cannot do (read the client's files), so every
load that passes here reached the warehouse through clickhouse-connect uploads.

Figures: Open XDMoD's phillips.log (tests/data/sacct/xdmod, LGPL-3.0) as tests/test_summary_xdmod.py works
them out from the raw lines: two GPU jobs, 163485 (2 GPUs, 912,426 s) and 196835 (2 GPUs, 17 s); 239 jobs
cancelled before they started (`grep -c "None assigned"`).
"""

from __future__ import annotations

import json

import clickhouse_connect
import pytest

import ops_warehouse as ow
from ops_warehouse.errors import OpsError
from tests.conftest import XDMOD
from tests.cli_runner import cli

pytestmark = pytest.mark.slow  # the test ClickHouse server, migrated from nothing by the CLI: docs/testing.md

GPU_H = 2 * (912426 + 17) / 3600


@pytest.fixture
def loaded(chdb_server):
    """A server database the ETL user (default) loaded phillips.log into with the CLI."""
    dsn = chdb_server.new_database()
    env = {"OPS_WAREHOUSE": dsn, "OPS_CONFIG": ""}
    out = cli("etl", "sacct", "--fields", "xdmod", str(XDMOD / "phillips.log"), env=env).stdout
    assert "quarantined 0" in out
    return dsn, env


def test_the_cli_loads_and_reports_through_the_server(loaded):
    dsn, env = loaded
    p = cli("summary", "--from", "2016-12-22", "--to", "2017-01-01", "--by", "cluster", "--format", "json", env=env)
    row = json.loads(p.stdout)[0]
    assert row["cluster"] == "phillips" and row["gpu_h"] == pytest.approx(GPU_H, abs=1e-9)
    assert row["jobs_cancelled_before_start"] == 239
    # a reload is idempotent on the server too (ReplacingMergeTree + FINAL: no mutation to wait for)
    cli("etl", "sacct", "--fields", "xdmod", str(XDMOD / "phillips.log"), env=env)
    again = json.loads(cli("summary", "--from", "2016-12-22", "--to", "2017-01-01", "--by", "cluster", "--format",
                           "json", env=env).stdout)[0]
    assert again == row


def test_an_analysts_read_only_user_reads_the_same_figures_and_writes_nothing(loaded):
    dsn, _ = loaded
    analyst = dsn.replace("http://default@", "http://analyst@")
    wh = ow.connect(analyst)  # the schema is up to date: connecting sends no DDL
    runs = wh.sql("SELECT count() AS n FROM fct_job_run WHERE gpus > 0 AND NOT never_ran")["n"].item()
    assert runs == 2
    gpu_h = wh.sql("SELECT sum(gpus * wall_s) / 3600 AS h FROM fct_job_run WHERE cluster = {c:String}",
                   c="phillips")["h"].item()
    assert gpu_h == pytest.approx(GPU_H, abs=1e-9)
    sizes = wh.job_sizes(start="2016-12-01", end="2017-02-01", cluster="phillips")
    assert sizes.filter(sizes["size_class"] == "2-8")["jobs"].sum() == 2
    wh.close()
    # the user is read-only indeed: a load through it is refused, in one line
    p = cli("etl", "sacct", "--fields", "xdmod", str(XDMOD / "phillips.log"),
            env={"OPS_WAREHOUSE": analyst, "OPS_CONFIG": ""}, check=False)
    assert p.returncode != 0 and "readonly" in p.stderr.lower() and "Traceback" not in p.stderr, p.stderr


def test_the_server_refuses_to_read_the_clients_files(chdb_server, tmp_path):
    """What makes the server form honest: a remote server cannot see this machine's files, and neither does
    the test server, so a load that used file() there would fail."""
    f = tmp_path / "x.csv"
    f.write_text("1\n")
    c = clickhouse_connect.get_client(dsn=chdb_server.dsn())
    with pytest.raises(Exception, match="refuses queries that read files"):
        c.query(f"SELECT * FROM file('{f}', CSV, 'x UInt8')")
    with pytest.raises(OpsError, match="cannot reach warehouse"):
        ow.connect(chdb_server.dsn("no_such_database"))


def test_cluster_connections_insert_synchronously_unless_read_only(loaded):
    """On a cluster the loads' inserts through Distributed tables must reach every shard before the grain
    refresh reads them (insert_distributed_sync = 1); a read-only user may not change settings at all."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    dsn, _ = loaded
    etl = open_warehouse(Config(dsn=dsn, deployment="cluster"), migrate=False)
    assert etl.client.get_client_setting("insert_distributed_sync") == "1"
    etl.close()
    analyst = open_warehouse(Config(dsn=dsn.replace("http://default@", "http://analyst@"), deployment="cluster"),
                             migrate=False)
    assert analyst.client.get_client_setting("insert_distributed_sync") is None
    assert analyst.query_rows("SELECT count() FROM slurm_job_run FINAL")[0][0] > 0
    analyst.close()
