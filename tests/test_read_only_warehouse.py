"""A warehouse this user cannot write (an analyst's read-only mount, `chmod -R a-w` for a non-root user). The
embedded engine (chDB) opens <warehouse>/status for writing to lock it whenever it opens one, to read too:
its `mode=ro` only refuses writes once the engine is open, and a read-only mount fails before that (tried
with chDB 26.9). So a read cannot work there; issue 49 found every read printing the engine's raw
`Code: 76 ... Read-only file system` line, then a second about `EmbeddedServer`, and `monthly` making its
`--out` folder first. Now: one line saying why and what to do, and nothing made.

The failure is real: the warehouse folder is bind-mounted read-only onto itself in a mount namespace of the
command's own (`unshare -m`, as root: a write there fails with EROFS, for root too)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.cli_runner import OPS, ops
from tests.conftest import LIVE, require, warehouse_checksums

pytestmark = pytest.mark.slow  # four ops-report processes


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


def read_only(wh, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-m", "sh", "-c", READ_ONLY, "sh", str(wh), *OPS, *args], capture_output=True,
                          text=True, env={**os.environ, **ENV}, timeout=300)


def files(folder) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*")}


@needs_mount
def test_reads_of_a_read_only_warehouse_fail_in_one_line_and_make_nothing(tmp_path):
    wh = tmp_path / "wh"
    ops("--warehouse", f"chdb://{wh}", "etl", "sacct", "--cluster", "r1", str(LIVE / "sacct.psv"), env=ENV)
    before, made = warehouse_checksums(wh), files(tmp_path)
    assert before["slurm_job_run"][0] == 15  # the file's 15 job runs: the warehouse reads when writable
    dsn = f"chdb://{wh}"
    for args, out in ((("summary", "--from", "2026-11-01", "--to", "2026-11-30"), None),
                      (("monthly", "--cluster", "--month", "2026-11", "--format", "all", "--out"), tmp_path / "out"),
                      (("export", "--month", "2026-11", "--out"), tmp_path / "exports"),
                      (("nodes", "--month", "2026-11"), None)):
        p = read_only(wh, "--warehouse", dsn, *args, *([str(out)] if out else []))
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, (args, p.stderr)
        assert "Code:" not in p.stderr and "read-only file system" in lines[0] and "ClickHouse server" in lines[0]
        assert out is None or not out.exists(), (args, out)
    assert files(tmp_path) == made  # nothing made or touched beside it either (the turn's lock file included)
    assert warehouse_checksums(wh) == before
