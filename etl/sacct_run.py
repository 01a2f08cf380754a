"""Run sacct itself for a window and load its output.

Always ``-S``/``-E`` (without them sacct picks its own window), ``--allusers --duplicates`` (every run
of requeued jobs), ``--parsable2`` with our field list, and ``TZ=UTC`` so times need no guessing. The
command is configurable (``[sacct] command``) for sites that wrap sacct (ssh, sudo, a container).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from datetime import date, timedelta
from pathlib import Path

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.retry import Retry, Transient
from ops_warehouse.etl.sacct_contract import SACCT_FORMAT


def sacct_argv(command: list[str], date_from: date, date_to: date) -> list[str]:
    end = date_to + timedelta(days=1)  # --to is inclusive: up to midnight after it
    return [*command, "--allusers", "--duplicates", "--parsable2", f"--format={SACCT_FORMAT}",
            "-S", f"{date_from:%Y-%m-%d}T00:00:00", "-E", f"{end:%Y-%m-%d}T00:00:00"]


# sacct's own complaints about how it was called: these do not heal, whatever else a failing sacct says
# (slurmdbd or munged away, a wrapping ssh that cannot connect) is tried again
_USAGE = re.compile(r"invalid option|unrecognized option|Invalid field|[Uu]sage:|not a valid|Invalid (time|date)")


def run_sacct(command: list[str], date_from: date, date_to: date, workdir: Path | None = None,
              retry: Retry | None = None) -> Path:
    """Run sacct into a file (streamed to disk, never held in memory); return its path. A sacct that exits
    non-zero is run again as ``retry`` says (default: not), except for a usage error; one that is not there
    or not executable is not."""
    argv = sacct_argv(command, date_from, date_to)
    env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}

    def once() -> Path:
        fd, out = tempfile.mkstemp(prefix="sacct-", suffix=".psv", dir=workdir)
        try:
            with os.fdopen(fd, "wb") as f:
                p = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, env=env, timeout=3600)
        except (FileNotFoundError, PermissionError):
            os.unlink(out)
            raise OpsError(f"sacct command not found or not executable: {command[0]!r} "
                           "(set [sacct] command in the config)") from None
        except subprocess.TimeoutExpired:
            os.unlink(out)
            raise OpsError(f"sacct did not finish within an hour: {' '.join(command)}") from None
        if p.returncode != 0:
            os.unlink(out)
            lines = p.stderr.decode("utf-8", "replace").strip().splitlines()
            msg = f"sacct failed (exit {p.returncode}): {lines[-1] if lines else 'no message'}"
            if _USAGE.search("\n".join(lines)):
                raise OpsError(msg)
            raise Transient(msg)
        return Path(out)

    return (retry or Retry()).call(once)
