"""Running `ops-report` from a test, two ways:

- ``ops(...)``: in a subprocess, as an operator or cron runs it. For tests where the process boundary is the
  point: exit codes of a real process, two processes taking turns, SIGKILL, cron's environment, the
  interpreter's start-up imports.
- ``cli(...)``: in this process, through the same ``main()`` (its one-line errors and exit codes) inside typer's
  (click's) CliRunner isolation: argv, stdin, stdout, stderr and the environment are the call's own, the
  working directory too. For tests of parsing and output, a second or more cheaper than a subprocess
  (no interpreter start, no imports). The command closes the warehouse it opened when it returns, as it
  does in a process of its own, so the test (or a subprocess) can open it next. One process has one embedded
  engine: a command that opens another folder closes the test's open one (use ``ops`` there).

Both return a ``subprocess.CompletedProcess`` (returncode, stdout, stderr as text) and, with ``check``,
raise with the command's output when it did not exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys

OPS = [sys.executable, "-c", "from ops_warehouse.cli.main import main; main()"]


def _checked(args, p: subprocess.CompletedProcess, check: bool) -> subprocess.CompletedProcess:
    if check and p.returncode != 0:
        raise AssertionError(f"ops-report {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def ops(*args, env=None, cwd=None, check=True) -> subprocess.CompletedProcess:
    e = {**os.environ, **(env or {})}
    p = subprocess.run([*OPS, *args], capture_output=True, text=True, env=e, cwd=cwd, timeout=600)
    return _checked(args, p, check)


def cli(*args, env=None, cwd=None, check=True) -> subprocess.CompletedProcess:
    from click.testing import CliRunner

    from ops_warehouse.cli.main import main

    argv, old_cwd = sys.argv, os.getcwd()
    code = 0
    with CliRunner().isolation(env=env) as (out, err, _):
        sys.argv = ["ops-report", *args]
        try:
            if cwd is not None:
                os.chdir(cwd)
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.argv = argv
            os.chdir(old_cwd)
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    return _checked(args, subprocess.CompletedProcess(["ops-report", *args], code, stdout, stderr), check)
