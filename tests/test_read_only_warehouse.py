"""A warehouse this user cannot write (an analyst's read-only mount, `chmod -R a-w` for a non-root user). The
embedded engine (chDB) opens <warehouse>/status for writing to lock it whenever it opens one, to read too (its
`mode=ro` only refuses writes once open), so issue 49 found every read printing the engine's raw
`Code: 76 ... Read-only file system` line and a second about `EmbeddedServer`, and `monthly` making its
`--out` folder first. Now a read attaches the warehouse read-only in a scratch engine (core/read_only.py) and
gives the same figures as on the writable warehouse; a load is refused in one line; nothing is made.

The failure is real: the warehouse folder is bind-mounted read-only onto itself in a mount namespace of the
command's own (`unshare -m`, as root: a write there fails with EROFS, for root too)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.cli_runner import OPS, cli
from tests.conftest import LIVE, require, warehouse_checksums

pytestmark = pytest.mark.slow  # three ops-report processes in a read-only mount


def _can_mount_read_only() -> bool:
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp "
                            "&& ! touch /tmp/.ops-ro-probe"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


needs_mount = require(_can_mount_read_only(), "a read-only bind mount (unshare -m, mount; root)")

ENV = {"OPS_CONFIG": "", "OPS_WAREHOUSE": ""}
# bind the folder $1 read-only onto itself, then run the rest of the arguments
READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def read_only(wh, *args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-m", "sh", "-c", READ_ONLY, "sh", str(wh), *OPS, *args], capture_output=True,
                          text=True, env={**os.environ, **ENV, **(env or {})}, timeout=300)


@needs_mount
def test_a_read_only_warehouse_reads_as_the_writable_one_and_refuses_loads(tmp_path):
    wh = tmp_path / "wh"
    cli("--warehouse", f"chdb://{wh}", "etl", "sacct", "--cluster", "r1", str(LIVE / "sacct.psv"), env=ENV)
    before = warehouse_checksums(wh)
    assert before["slurm_job_run"][0] == 15  # the file's 15 job runs (JobIDRaw without a '.')
    dsn = f"chdb://{wh}"
    scratch = tmp_path / "tmp"  # where the scratch engine lives (TMPDIR), removed when it closes
    scratch.mkdir()
    tmp_env = {"TMPDIR": str(scratch)}
    summary = ("summary", "--from", "2026-11-29", "--to", "2026-11-30", "--format", "json")
    # the writable side in this process (`cli`, the same main()); the read-only side a process in its own mount
    writable = cli("--warehouse", dsn, *summary, env=ENV)
    p = read_only(wh, "--warehouse", dsn, *summary, env=tmp_env)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr
    assert json.loads(p.stdout) == json.loads(writable.stdout)
    (row,) = json.loads(p.stdout)
    assert (row["jobs_ended"], row["jobs_started"]) == (15, 15)  # all 15 runs ended 2026-11-29 (the file)
    monthly = ("monthly", "--cluster", "--month", "2026-11", "--format", "json")
    a, b = (json.loads(r.stdout) for r in (cli("--warehouse", dsn, *monthly, env=ENV),
                                             read_only(wh, "--warehouse", dsn, *monthly, env=tmp_env)))
    a.pop("generated_at", None), b.pop("generated_at", None)
    assert a == b
    assert list(scratch.iterdir()) == []
    # a load needs to write: one line, no engine error, nothing written
    p = read_only(wh, "--warehouse", dsn, "etl", "sacct", "--cluster", "r1", str(LIVE / "sacct.psv"))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "Code:" not in p.stderr and "read-only file system" in lines[0], lines
    assert warehouse_checksums(wh) == before
    # a report opens the warehouse before it makes its --out: none made where there is nothing to read
    p = cli("--warehouse", f"chdb://{tmp_path / 'none'}", "monthly", "--cluster", "--out", str(tmp_path / "out"),
            env=ENV, check=False)
    assert p.returncode == 2 and "no warehouse at" in p.stderr and not (tmp_path / "out").exists(), p.stderr
