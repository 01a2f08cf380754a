"""The run log (issue 13): every load writes one etl_run_log row, and a load that fails — for any reason: an
engine error, an unreachable database, SIGINT — says `failed` with the error, never `ok`.

Failures are real: the engine refuses inserts into a table given a CHECK constraint that every row violates,
slurmdbd's address is a closed port, and SIGINT is sent to `ops-report` running in a subprocess mid-load (a
generated sacct file of ~100 MB, after its first chunk; slurmdbd and nightly while they wait to retry)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import DATA, LIVE, REPO, warehouse_checksums
from tests.cli_runner import OPS, ops

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

ENGINE_ERROR = "VIOLATED_CONSTRAINT"
SECRET = "s3cr3t-slurmdbd-pw-for-the-run-log"


def refuse_inserts(wh, table: str) -> None:
    """A real engine failure: every later insert into ``table`` violates a constraint."""
    wh.command(f"ALTER TABLE {table} ADD CONSTRAINT refuse_all CHECK 0")


def run_log(wh) -> list[tuple]:
    return wh.query_rows("SELECT source_kind, status, error, rows_read FROM etl_run_log ORDER BY started_at, "
                         "source_kind")


def run_log_at(path: Path) -> list[tuple]:
    w = open_warehouse(Config(dsn=f"chdb://{path}"), migrate=False)
    try:
        return run_log(w)
    finally:
        close_embedded()


def nightly_with_sacct_script(tmp_path: Path, wh: Path, body: str) -> dict:
    """A config whose nightly run has one sacct source, the site's sacct command being a shell script of
    ``body``; the warehouse first holds the live Slurm file's 15 job runs. Returns the env to run with."""
    sacct = tmp_path / "sacct"
    sacct.write_text("#!/bin/sh\n" + body)
    sacct.chmod(0o755)
    conf = tmp_path / "ops.toml"
    conf.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\n[sacct]\ncommand = ["{sacct}"]\n'
                    '[[nightly.slurm]]\ncluster = "c1"\nsource = "sacct"\n')
    env = {"OPS_CONFIG": str(conf), "OPS_WAREHOUSE": ""}
    ops("etl", "sacct", str(LIVE / "sacct.psv"), env=env)
    return env


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused at once
    return port


def interrupt_when(args: list[str], env: dict, ready: str, cwd: Path,
                   sig: int = signal.SIGINT) -> subprocess.CompletedProcess:
    """Run ``ops-report ARGS``, send ``sig`` once a line of its output contains ``ready``; its exit and its
    stdout and stderr as one (in ``stderr``: the nightly run's step lines go to stdout, the loads' to stderr)."""
    import os

    p = subprocess.Popen([*OPS, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, **env}, cwd=cwd)
    seen = []
    for line in p.stdout:
        seen.append(line)
        if ready in line:
            p.send_signal(sig)
            break
    rest, _ = p.communicate(timeout=300)
    return subprocess.CompletedProcess(args, p.returncode, "", "".join(seen) + rest)


# ---------------------------------------------------------------------------------------------- sacct


def test_sacct_engine_error_is_logged_failed(wh):
    from ops_warehouse.etl.sacct_load import load_sacct

    refuse_inserts(wh, "slurm_job_run")
    with pytest.raises(Exception, match=ENGINE_ERROR):
        load_sacct(wh, LIVE / "sacct.psv")
    (kind, status, error, read), = run_log(wh)
    assert (kind, status) == ("sacct", "failed") and ENGINE_ERROR in error, error
    assert read == 31  # the file's 31 records were read before the insert failed


def test_sacct_ok_and_refused_file(wh, tmp_path):
    from ops_warehouse.errors import OpsError
    from ops_warehouse.etl.sacct_load import load_sacct

    load_sacct(wh, LIVE / "sacct.psv")
    with pytest.raises(OpsError, match="no such file"):
        load_sacct(wh, tmp_path / "missing.psv")
    log = run_log(wh)
    assert [(k, s) for k, s, _, _ in log] == [("sacct", "ok"), ("sacct", "failed")], log
    assert log[0][2] == "" and log[0][3] == 31 and log[1][2]


@pytest.fixture(scope="module")
def big_sacct(tmp_path_factory) -> Path:
    """~100 MB of sacct text: a generated day (3,000 jobs on 16 nodes) written 50 times over (the same
    jobs again: a load of it is idempotent, and its size is what makes it take seconds)."""
    out = tmp_path_factory.mktemp("big")
    ops("generate", "--out", str(out / "gen"), "--start", "2026-10-01", "--days", "1", "--jobs-per-day", "3000",
        "--nodes", "16", "--telemetry", "none", "--seed", "5")
    header, *body = (out / "gen" / "sacct" / "sacct.psv").read_text().splitlines(keepends=True)
    big = out / "big.psv"
    with open(big, "w") as f:
        f.write(header)
        for _ in range(50):
            f.writelines(body)
    return big


def test_sacct_interrupted_by_sigint_is_logged_failed(big_sacct, tmp_path):
    wh = tmp_path / "wh"
    lines = sum(1 for _ in open(big_sacct)) - 1
    # the first progress line comes once the first 32 MB chunk is parsed: the load is under way
    p = interrupt_when(["--warehouse", f"chdb://{wh}", "etl", "sacct", str(big_sacct)], {"OPS_CONFIG": ""},
                       "loading ", tmp_path)
    assert p.returncode == 130 and "Traceback" not in p.stderr, p.stderr
    log = run_log_at(wh)
    assert len(log) == 1, log
    kind, status, error, read = log[0]
    assert (kind, status, error) == ("sacct", "failed", "interrupted (SIGINT)")
    assert 0 < read < lines, (read, lines)  # it stopped part of the way through


def test_sacct_stopped_by_sigterm_is_undone_and_logged(big_sacct, tmp_path):
    """SIGTERM (cron's `timeout`, `systemctl stop`) is taken as SIGINT (issue 49: before, the process died
    mid-insert with 41,943 of 100,229 runs loaded and no run-log row): the warehouse holds exactly the rows
    it held before the load, the run log says why, and the exit is 143 (128 + SIGTERM)."""
    wh = tmp_path / "wh"
    ops("--warehouse", f"chdb://{wh}", "etl", "sacct", str(LIVE / "sacct.psv"), env={"OPS_CONFIG": ""})
    before = warehouse_checksums(wh)
    assert before["slurm_job_run"][0] == 15  # the live Slurm file's 15 job runs (JobIDRaw without a '.')
    lines = sum(1 for _ in open(big_sacct)) - 1
    p = interrupt_when(["--warehouse", f"chdb://{wh}", "etl", "sacct", str(big_sacct)], {"OPS_CONFIG": ""},
                       "loading ", tmp_path, signal.SIGTERM)
    assert p.returncode == 143 and "Traceback" not in p.stderr, p.stderr
    assert "stopped by SIGTERM" in p.stderr
    assert warehouse_checksums(wh) == before
    log = run_log_at(wh)
    assert [(k, s, e) for k, s, e, _ in log] == [("sacct", "ok", ""), ("sacct", "failed", "interrupted (SIGTERM)")]
    assert 0 < log[1][3] < lines, (log[1][3], lines)  # it stopped part of the way through


def test_nightly_stopped_by_sigterm_is_undone_and_logged(big_sacct, tmp_path):
    """The same for `etl nightly` (what cron's `timeout` stops), its sacct source mid-load: the site's sacct
    command prints the big file twice (~170 MB, 10-20 s of load) and leaves behind a process that sends the
    nightly run SIGTERM once the load is under way: when the command has exited (the nightly spools its output
    to a file, then loads it) and the nightly process has spent 3 more CPU-seconds. A CPU clock, not a wall
    one: a fixed 4 s from the command's start landed before the first chunk on a loaded machine (read 0).
    (Its output names no point to wait for: a nightly run under cron prints a step's line at its start and
    end, and progress only every 10 s.)"""
    wh = tmp_path / "wh"
    killer = ("(while kill -0 $$ 2>/dev/null; do sleep 0.05; done\n"
              " cpu() { awk '{print $14 + $15}' /proc/$PPID/stat; }\n"
              " t0=$(cpu); hz=$(getconf CLK_TCK)\n"
              " while [ $(( $(cpu) - t0 )) -lt $(( 3 * hz )) ]; do sleep 0.05; done\n"
              " kill -TERM $PPID) </dev/null >/dev/null 2>&1 &\n")
    env = nightly_with_sacct_script(tmp_path, wh, killer + f"cat '{big_sacct}'\ntail -n +2 '{big_sacct}'\n")
    before = warehouse_checksums(wh)
    p = ops("etl", "nightly", "--from", "2026-10-01", "--to", "2026-10-01", env=env, check=False)
    assert p.returncode == 143 and "Traceback" not in p.stderr, (p.stdout, p.stderr)
    assert warehouse_checksums(wh) == before
    log = run_log_at(wh)
    assert sorted((k, s, e) for k, s, e, _ in log[1:]) == [
        ("nightly:sacct", "failed", "interrupted (SIGTERM)"), ("sacct", "failed", "interrupted (SIGTERM)")], log
    lines = 2 * (sum(1 for _ in open(big_sacct)) - 1)
    read = next(r for k, _, _, r in log[1:] if k == "sacct")
    # stopped mid-load, not before it (rc 143 and `interrupted` say not after it): since the sacct reader went
    # to 16 MiB chunks (issue 50) the two copies may be read whole in the 4 s, the SIGTERM landing in the
    # grains' refresh, which the undo takes back just the same
    assert 0 < read <= lines, (read, lines)


def test_nightly_grains_refresh_failing_is_logged(tmp_path):
    """The nightly run's one refresh of the hourly grains, after its last source (issue 50), fails here on a
    warehouse whose run_sample_hour table was dropped: the run exits 1 with one line naming the table, and
    the run log has a failed `nightly:grains` row with the engine's reason (before, the failure left the run
    with the source's row saying ok and nothing on record for the refresh)."""
    wh = tmp_path / "wh"
    env = nightly_with_sacct_script(tmp_path, wh, f"cat '{LIVE / 'sacct.psv'}'\n")
    w = open_warehouse(Config(dsn=f"chdb://{wh}"))
    try:
        w.command("DROP TABLE run_sample_hour")
    finally:
        close_embedded()
    p = ops("etl", "nightly", "--from", "2026-11-29", "--to", "2026-11-29", env=env, check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr, (p.stdout, p.stderr)
    # the engine's words for it: "Table default.run_sample_hour does not exist" where a statement writes it,
    # "Unknown table expression identifier 'run_sample_hour'" where the refresh's guard SELECT reads it first
    last = p.stderr.strip().splitlines()[-1]
    assert "run_sample_hour" in last and ("does not exist" in last or "Unknown table" in last), p.stderr
    log = run_log_at(wh)
    kinds = [(k, s) for k, s, _, _ in log]
    assert kinds[-1] == ("nightly:grains", "failed") and ("nightly:sacct", "ok") in kinds, log
    assert "UNKNOWN_TABLE" in log[-1][2] and "run_sample_hour" in log[-1][2], log[-1]


# ---------------------------------------------------------------------------------------------- slurmdbd


def test_slurmdbd_unreachable_and_interrupted_are_logged_failed(tmp_path):
    port = closed_port()
    db = f"mysql://ops_ro@127.0.0.1:{port}/slurm_acct_db"
    wh = tmp_path / "wh"
    conf = tmp_path / "ops.toml"
    conf.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\n[nightly]\nretries = 0\n')
    env = {"OPS_CONFIG": str(conf), "OPS_WAREHOUSE": "", "OPS_SLURMDBD_PASSWORD": SECRET}
    r = ops("etl", "slurmdbd", "--db", db, "--cluster", "c1", env=env, check=False)
    assert r.returncode == 2 and "Can't connect" in r.stderr, r.stderr
    # the same, with patience: interrupted while it waits to try again
    conf.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\n[nightly]\nretries = 3\nbackoff_s = 60\n')
    p = interrupt_when(["etl", "slurmdbd", "--db", db, "--cluster", "c1"], env, "ops-report: retry:", tmp_path)
    assert p.returncode == 130 and "Traceback" not in p.stderr, p.stderr
    log = run_log_at(wh)
    assert [(k, s) for k, s, _, _ in log] == [("slurmdbd", "failed")] * 2, log
    assert "Can't connect" in log[0][2] and log[1][2] == "interrupted (SIGINT)"
    assert not any(SECRET in e for _, _, e, _ in log)


# ---------------------------------------------------------------------------------------------- nightly


def test_nightly_interrupted_is_logged_failed(tmp_path):
    """SIGINT while the nightly run's slurmdbd source waits to retry: both the load's row and the nightly
    source's row say failed (before: the load said ok and the nightly source had no row at all)."""
    wh = tmp_path / "wh"
    conf = tmp_path / "ops.toml"
    conf.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\n[nightly]\nretries = 3\nbackoff_s = 60\n'
                    f'[[nightly.slurm]]\ncluster = "c1"\nsource = "slurmdbd"\n'
                    f'db = "mysql://ops_ro@127.0.0.1:{closed_port()}/slurm_acct_db"\n')
    env = {"OPS_CONFIG": str(conf), "OPS_WAREHOUSE": "", "OPS_SLURMDBD_PASSWORD": SECRET}
    p = interrupt_when(["etl", "nightly"], env, "ops-report: retry:", tmp_path)
    assert p.returncode == 130 and "Traceback" not in p.stderr, p.stderr
    log = run_log_at(wh)
    assert sorted((k, s, e) for k, s, e, _ in log) == [
        ("nightly:slurmdbd", "failed", "interrupted (SIGINT)"), ("slurmdbd", "failed", "interrupted (SIGINT)")], log


def test_nightly_engine_error_is_logged_failed(wh, tmp_path):
    """A capacity source whose insert the engine refuses: the load and the nightly source both say failed."""
    from ops_warehouse.etl.nightly import run_nightly

    inv = tmp_path / "inventory.csv"
    inv.write_text("node,gpu_model,gpus,partition\nn1,h100,8,gpu\nn2,h100,8,gpu\n")
    refuse_inserts(wh, "node_inventory")
    close_embedded()
    cfg = Config(dsn=wh.dsn, nightly={"capacity": {"cluster": "c1", "inventory": str(inv)}})
    (o,) = run_nightly(cfg, log=lambda line: None)
    assert o.status == "failed" and ENGINE_ERROR in o.detail
    w = open_warehouse(cfg, migrate=False)
    assert sorted((k, s, ENGINE_ERROR in e) for k, s, e, _ in run_log(w)) == [
        ("capacity", "failed", True), ("nightly:capacity", "failed", True)]


# ---------------------------------------------------------------------------------------------- telemetry


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from ops_warehouse.generate import generate

    out = tmp_path_factory.mktemp("site")
    generate(out, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=1, jobs_per_day=40, nodes=3, seed=2,
             metrics_step_s=1800, telemetry=("parquet",))
    return out


def test_telemetry_loads_are_logged(wh, site):
    from ops_warehouse.etl.openmetrics_source import load_text_files
    from ops_warehouse.etl.telemetry_load import load_parquet_dir

    day = date(2026, 10, 1)
    c = load_parquet_dir(wh, site, day, day, cluster="c1")
    refuse_inserts(wh, "gpu_sample")
    with pytest.raises(Exception, match=ENGINE_ERROR):
        load_parquet_dir(wh, site, day, day, cluster="c1")
    with pytest.raises(Exception, match=ENGINE_ERROR):
        load_text_files(wh, [DATA / "metrics" / "dcgm-exporter-scrape-t4.txt"], day, day,
                        at=datetime(2026, 10, 1, 12, tzinfo=timezone.utc), cluster="c1")
    log = wh.query_rows("SELECT source_kind, status, error, rows_loaded, source FROM etl_run_log "
                        "ORDER BY started_at")
    assert [(k, s) for k, s, *_ in log] == [("telemetry", "ok"), ("telemetry", "failed"), ("telemetry", "failed")]
    assert log[0][3] == c["gpu_rows"] + c["node_rows"] > 0 and "2026-10-01..2026-10-01" in log[0][4]
    assert all(ENGINE_ERROR in e for _, _, e, _, _ in log[1:])


# ---------------------------------------------------------------------------------------------- capacity


def test_capacity_loads_are_logged(wh, tmp_path):
    from ops_warehouse.errors import OpsError
    from ops_warehouse.etl.capacity_sources import load_capacity

    inv = tmp_path / "inventory.csv"
    inv.write_text("node,gpu_model,gpus,partition\nn1,h100,8,gpu\nn2,h100,8,gpu\n")
    assert load_capacity(wh, inventory=inv, cluster="c1") == {"node_inventory": 2}
    bad = tmp_path / "bad.csv"
    bad.write_text("node,gpu_model,gpus,partition\nn1,h100,eight,gpu\n")
    with pytest.raises(OpsError):
        load_capacity(wh, inventory=bad, cluster="c1")
    refuse_inserts(wh, "node_inventory")
    with pytest.raises(Exception, match=ENGINE_ERROR):
        load_capacity(wh, inventory=inv, cluster="c1")
    log = run_log(wh)
    assert [(k, s) for k, s, _, _ in log] == [("capacity", "ok"), ("capacity", "failed"), ("capacity", "failed")]
    assert log[0][3] == 2 and "gpus 'eight' is not a number" in log[1][2] and ENGINE_ERROR in log[2][2]


# ---------------------------------------------------------------------------------------------- one writer


def test_one_module_writes_the_run_log():
    """etl/run_log.py is the one writer: no other module names the table in an insert or imports a private one."""
    writers = []
    for f in sorted([*REPO.glob("etl/*.py"), *REPO.glob("core/**/*.py"), *REPO.glob("cli/*.py")]):
        text = f.read_text()
        if f.name != "run_log.py" and (re.search(r"""insert\(\s*["']etl_run_log""", text) or "_log_run" in text):
            writers.append(str(f.relative_to(REPO)))
    assert writers == []
