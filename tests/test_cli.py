"""`ops-report` end to end: in a subprocess, as an operator or cron runs it, where the process is the point (a
load, exit codes); in this process (tests/cli_runner.py: cli) where parsing and output are."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.cli_runner import cli, ops
from tests.conftest import LIVE, XDMOD



@pytest.fixture
def dsn(tmp_path):
    return f"chdb://{tmp_path / 'wh'}"


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_etl_then_summary_json(dsn):
    out = ops("--warehouse", dsn, "etl", "sacct", "--fields", "xdmod", str(XDMOD / "phillips.log")).stdout
    assert re.search(r"read 4285, loaded 4285 \(4285 job runs, 0 steps\), quarantined 0", out)
    p = cli("--warehouse", dsn, "summary", "--from", "2016-12-22", "--to", "2017-01-01",
            "--by", "cluster", "--by", "gpu_count_bin,wall_time_bin", "--period", "month", "--format", "json")
    data = json.loads(p.stdout)
    assert data and set(data[0]) == {
        "cluster", "gpu_count_bin", "wall_time_bin", "period_start", "jobs_ended", "jobs_started",
        "jobs_cancelled_before_start", "cpu_hours", "gpu_h", "node_hours", "wall_hours", "wait_hours",
        "avg_wait_hours"}
    assert {d["period_start"] for d in data} == {"2016-12-01", "2017-01-01"}
    assert sum(d["jobs_cancelled_before_start"] for d in data) == 239
    csv = cli("--warehouse", dsn, "summary", "--from", "2016-12-22", "--to", "2017-01-01", "--format", "csv").stdout
    assert csv.splitlines()[0].startswith("jobs_ended,jobs_started,")
    table = cli("--warehouse", dsn, "summary", "--from", "2016-12-22", "--to", "2017-01-01").stdout
    assert "| jobs_ended" in table


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_env_var_selects_the_warehouse_and_errors_are_one_line(dsn):
    ops("etl", "sacct", str(LIVE / "sacct.psv"), env={"OPS_WAREHOUSE": dsn})
    bad = ops("summary", "--from", "2026-11-29", "--to", "2026-11-29", "--by", "nonsense",
              env={"OPS_WAREHOUSE": dsn}, check=False)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "unknown --by key" in bad.stderr
    missing = ops("etl", "sacct", "/nonexistent.psv", env={"OPS_WAREHOUSE": dsn}, check=False)
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    noheader = ops("etl", "sacct", str(XDMOD / "phillips.log"), env={"OPS_WAREHOUSE": dsn}, check=False)
    assert noheader.returncode == 2 and "--fields" in noheader.stderr


def test_quarantine_does_not_fail_the_run(dsn, tmp_path):
    p = tmp_path / "x.psv"
    p.write_text((LIVE / "sacct.psv").read_text() + "garbage line without fields\n")
    r = cli("--warehouse", dsn, "etl", "sacct", str(p))
    assert "quarantined 1" in r.stdout and "1 fields, expected 21" in r.stdout


def test_runs_sacct_for_a_window_through_a_site_wrapper(dsn, tmp_path):
    """The sacct command is configurable; here a site wrapper that records its arguments and prints the
    output of a real Slurm 22.05 cluster (the live Slurm in the tests arrives with the slurmdbd issue)."""
    argv_file = tmp_path / "argv"
    wrapper = tmp_path / "site-sacct"
    wrapper.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {argv_file}\necho TZ=$TZ >> {argv_file}\n"
                       f"exec cat {LIVE / 'sacct.psv'}\n")
    wrapper.chmod(0o755)
    cfg = tmp_path / "ops.toml"
    cfg.write_text(f'[sacct]\ncommand = ["{wrapper}"]\ncluster = "testclu"\n')
    out = cli("--config", str(cfg), "--warehouse", dsn, "etl", "sacct", "--from", "2026-11-29", "--to", "2026-11-30")
    assert "read 31, loaded 31 (15 job runs, 16 steps), quarantined 0" in out.stdout
    args = argv_file.read_text().splitlines()
    assert "--allusers" in args and "--duplicates" in args and "--parsable2" in args
    assert args[args.index("-S") + 1] == "2026-11-29T00:00:00" and args[args.index("-E") + 1] == "2026-12-01T00:00:00"
    assert "TZ=UTC" in args
    failing = tmp_path / "fail-sacct"
    failing.write_text("#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n")
    failing.chmod(0o755)
    # the default retries (4) with short waits: the default 10+20+40+80 s backoff only slows the suite
    cfg.write_text(f'[sacct]\ncommand = ["{failing}"]\n[nightly]\nbackoff_s = 0.01\n')
    bad = cli("--config", str(cfg), "--warehouse", dsn, "etl", "sacct", "--from", "2026-11-29", "--to", "2026-11-30",
              check=False)
    assert bad.returncode == 2 and "sacct failed (exit 1): sacct: error: Problem talking" in bad.stderr
    assert "(after 5 tries)" in bad.stderr


def test_every_option_is_documented_in_help():
    from typer.main import get_command

    from ops_warehouse.cli.main import app

    root = get_command(app)

    def walk(cmd, path):
        for p in cmd.params:
            if p.param_type_name == "option" and p.name != "help":
                assert p.help, f"{' '.join(path)} {p.opts} has no help text"
        for name, sub in getattr(cmd, "commands", {}).items():
            assert sub.help or sub.callback.__doc__, f"{' '.join(path + [name])} has no description"
            walk(sub, path + [name])

    walk(root, ["ops-report"])


def test_schema_command_prints_cluster_ddl():
    out = cli("schema", "--deployment", "cluster", "--cluster-name", "prod").stdout
    assert "ENGINE = Distributed('prod'" in out and "ReplicatedReplacingMergeTree" in out


def test_one_import_namespace_and_sql_shipped(tmp_path):
    """Nothing generic (`cli`, `etl`) is importable outside the source tree; the SQL ships with the package."""
    code = ("import importlib.util as u, importlib.resources as r; "
            "print([m for m in ('cli', 'etl', 'sql', 'reports', 'core', 'analytics', 'generate') if u.find_spec(m)]); "
            "print(r.files('ops_warehouse.sql').joinpath('marts/summary.sql').is_file())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert p.stdout.split("\n")[:2] == ["[]", "True"], p.stderr
