"""A careless operator's commands (issue 27, items 5, 11, 12): rows filed under the jobs' cluster, one line
where a traceback was, reads that do not make a warehouse, an API read that cannot write, an `init` that sees a
dropped table. Each case was reproduced on a fresh warehouse before its fix (the docstrings say what happened).

The jobs are the live Slurm 22.05 export (tests/data/sacct/slurm-22.05-live/sacct.psv: 15 jobs, no Cluster
field, all on gpu001-gpu004 on 2026-11-29), loaded under a cluster named on the command line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ops_warehouse import connect
from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.cli_runner import cli
from tests.conftest import DATA, LIVE, rows

SCRAPE = DATA / "metrics" / "dcgm-exporter-scrape-t4.txt"  # GPU 0 of three hosts (tests/data/metrics/README.md)
INVENTORY = "node,gpu_model,gpus,partition,rack,in_service_date\n" + "".join(
    f"gpu00{i},NVIDIA H100 80GB HBM3,8,gpu,r1,2026-01-01\n" for i in range(1, 5))


def _one_line(p) -> str:
    assert p.returncode != 0 and "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
    return p.stderr.strip()


def _loaded(tmp_path, *clusters: str) -> str:
    dsn = f"chdb://{tmp_path / 'wh'}"
    for c in clusters:
        cli("--warehouse", dsn, "etl", "sacct", "--cluster", c, str(LIVE / "sacct.psv"))
    return dsn


@pytest.fixture(scope="module")
def ai1_kept(tmp_path_factory) -> Path:
    """The export loaded under ai1 once for the module (`etl sacct` into a folder with no warehouse yet: its
    migration from nothing and the load were most of each test's time), never opened after."""
    return Path(_loaded(tmp_path_factory.mktemp("ai1"), "ai1").removeprefix("chdb://"))


@pytest.fixture
def ai1(ai1_kept, tmp_path) -> str:
    """A copy of the ai1 warehouse of the test's own (its tests write: loads, a dropped table), at the DSN
    `_loaded(tmp_path, "ai1")` gives."""
    shutil.copytree(ai1_kept, tmp_path / "wh", symlinks=True)
    return f"chdb://{tmp_path / 'wh'}"


def test_telemetry_and_capacity_are_filed_under_the_jobs_cluster(tmp_path, ai1):
    """Before: without --cluster the inventory and the samples went under "cluster" while the jobs were under
    the name sacct gave them, and every report joined nothing to them (no Xids, no throttling, exit 0)."""
    dsn = ai1
    inv = tmp_path / "inventory.csv"
    inv.write_text(INVENTORY)
    cli("--warehouse", dsn, "etl", "capacity", "--inventory", str(inv))
    cli("--warehouse", dsn, "etl", "metrics", "--source", "file", "--file", str(SCRAPE),
        "--at", "2026-11-29T12:00:00Z", "--from", "2026-11-29", "--to", "2026-11-29")
    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    try:
        assert rows(wh, "SELECT cluster, count() FROM node_inventory FINAL GROUP BY cluster") == [("ai1", 4)]
        # the scrape holds GPU 0 of hosts 424773df46e0, 551bdf382151 and ip-11111 at one instant: three sample
        # rows, under the jobs' cluster
        assert rows(wh, "SELECT cluster, count() FROM gpu_sample FINAL GROUP BY cluster") == [("ai1", 3)]
    finally:
        close_embedded()
    # two clusters of jobs: which one an inventory describes cannot be guessed
    cli("--warehouse", dsn, "etl", "sacct", "--cluster", "ai2", str(LIVE / "sacct.psv"))
    line = _one_line(cli("--warehouse", dsn, "etl", "capacity", "--inventory", str(inv), check=False))
    assert "several clusters (ai1, ai2)" in line and "--cluster" in line


def test_a_report_on_jobs_outside_the_inventory_is_written_whole(tmp_path):
    """Before: `monthly --cluster` on jobs whose nodes the inventory does not list crashed in the Markdown
    renderer ('NoneType' object has no attribute 'replace') after writing only the JSON and the charts."""
    dsn = _loaded(tmp_path, "ai2")
    out = tmp_path / "out"
    cli("--warehouse", dsn, "monthly", "--cluster", "--month", "2026-11", "--format", "all", "--out", str(out))
    assert sorted(p.name for p in out.glob("monthly-*") if p.is_file()) == [
        "monthly-ai2-cluster-2026-11.html", "monthly-ai2-cluster-2026-11.json", "monthly-ai2-cluster-2026-11.md"]
    md = (out / "monthly-ai2-cluster-2026-11.md").read_text()
    # the chargeback rows of the jobs' two accounts: no GPU model known for their nodes
    charged = [line for line in md.splitlines() if line.startswith("| proj") and "(not in the inventory)" in line]
    assert len(charged) == len({r.split("|")[4] for r in LIVE.joinpath("sacct.psv")
                                .read_text().splitlines()[1:] if r.split("|")[4]})
    # and utilization's row of the same GPU-hours, whose capacity nothing says: unknown, not 0
    assert "| gpu_model (not in the inventory) | – | – | – |" in md


def test_one_line_where_a_traceback_was(tmp_path, ai1):
    dsn = ai1
    # a half-written Parquet day file: before, pyarrow's "magic bytes not found" traceback, the file unnamed
    day = tmp_path / "telemetry" / "dcgm" / "2026-11-29.parquet"
    day.parent.mkdir(parents=True)
    day.write_bytes(b"PAR1" + bytes(200))
    line = _one_line(cli("--warehouse", dsn, "etl", "metrics", "--source", "file", "--file",
                         str(tmp_path / "telemetry"), "--from", "2026-11-29", "--to", "2026-11-29", check=False))
    assert f"cannot read {day}: not a whole Parquet file" in line
    # the family folder given for the telemetry folder: before, "0 GPU samples" and exit 0
    line = _one_line(cli("--warehouse", dsn, "etl", "metrics", "--source", "file", "--file", str(day.parent),
                         "--from", "2026-11-29", "--to", "2026-11-29", check=False))
    assert "no telemetry family folders" in line
    # a folder given for a file: before, "no such file"
    for args in (("etl", "sacct", str(tmp_path)), ("etl", "capacity", "--inventory", str(tmp_path)),
                 ("etl", "carbon", str(tmp_path))):
        assert _one_line(cli("--warehouse", dsn, *args, check=False)).endswith(f"{tmp_path}: it is a folder, not a file")
    # --out naming a file, or a folder that cannot be made: before, FileExistsError / NotADirectoryError
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me")
    for args in (("monthly", "--cluster", "--month", "2026-11", "--format", "all", "--out", str(a_file)),
                 ("export", "--month", "2026-11", "--out", str(a_file))):
        assert _one_line(cli("--warehouse", dsn, *args, check=False)).endswith(f"--out {a_file} is a file: give a "
                                                                               "folder to write into")
    line = _one_line(cli("--warehouse", dsn, "export", "--month", "2026-11", "--out", str(a_file / "x"), check=False))
    assert line.endswith(f"cannot make the --out folder {a_file / 'x'}: Not a directory")
    assert a_file.read_text() == "keep me"
    # a percentage written as text in the config: before, ValueError: could not convert string to float
    conf = tmp_path / "ops.toml"
    conf.write_text('[reports]\nidle_util_pct = "five"\n')
    line = _one_line(cli("--warehouse", dsn, "monthly", "--cluster", "--month", "2026-11",
                         env={"OPS_CONFIG": str(conf)}, check=False))
    assert line.endswith("reports.idle_util_pct must be a percentage (0-100), not 'five'")
    # sacct options that were accepted without a word
    assert _one_line(cli("--warehouse", dsn, "etl", "sacct", "--format", "xml", str(LIVE / "sacct.psv"),
                         check=False)).endswith("--format must be auto, text or json, not 'xml'")
    assert "--timezone is empty" in _one_line(cli("--warehouse", dsn, "etl", "sacct", "--timezone", "",
                                                  str(LIVE / "sacct.psv"), check=False))


def test_a_read_on_a_mistyped_path_makes_no_warehouse(tmp_path):
    """Before: `summary` on a mistyped chdb path made an empty warehouse there and printed "(no rows)", exit 0."""
    typo = tmp_path / "wharehouse"
    for args in (("summary", "--from", "2026-11-29", "--to", "2026-11-29"), ("monthly", "--cluster"),
                 ("telemetry", "--from", "2026-11-29", "--to", "2026-11-29"), ("nodes",)):
        assert _one_line(cli("--warehouse", f"chdb://{typo}", *args, check=False)).endswith(
            f"no warehouse at {typo}: check the path (--warehouse, OPS_WAREHOUSE or the config's [warehouse] dsn), "
            "or make one with ops-report init")
    try:
        connect(f"chdb://{typo}")
        raise AssertionError("connect() opened a warehouse that does not exist")
    except Exception as e:
        assert str(e).startswith(f"no warehouse at {typo}")
    assert not typo.exists()


def test_the_api_reads_and_init_sees_a_dropped_table(ai1):
    """Before: wh.sql("DROP TABLE reservation") dropped it (and the embedded engine runs every statement of
    "SELECT 1; DROP TABLE x"); `init` then said "schema up to date" and `nodes` failed on every run."""
    dsn = ai1
    api = connect(dsn)
    for q in ("DROP TABLE reservation", "SELECT 1; DROP TABLE reservation", "ALTER TABLE job_run DELETE WHERE 1",
              "SELECT 1 INTO OUTFILE 'x.csv'"):
        try:
            api.sql(q)
            raise AssertionError(f"sql() ran {q!r}")
        except Exception as e:
            assert "runs one read" in str(e) or "Multi-statements are not allowed" in str(e), e
    assert api.sql("SELECT count() AS n FROM fct_job_run WHERE cluster = {c:String}", c="ai1")["n"].item() == 15
    assert api.sql("EXISTS TABLE reservation")[0, 0] == 1
    # dropped behind the product's back (a script, a restore of part of the disk)
    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    try:
        wh.command("DROP TABLE reservation")
        wh.command("DROP TABLE gpu_sample")
    finally:
        close_embedded()
    out = cli("--warehouse", dsn, "init").stdout
    assert "schema up to date" in out and "created again 2 missing tables and views: gpu_sample, reservation" in out
    assert "created again" not in cli("--warehouse", dsn, "init").stdout
    assert cli("--warehouse", dsn, "nodes", "--month", "2026-11").returncode == 0
