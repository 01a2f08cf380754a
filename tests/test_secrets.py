"""Secrets (issue 7): the ClickHouse and slurmdbd passwords and the pseudonym key come from the environment
or a config file only its owner can read; never from argv, and never written to output, errors or the
warehouse. The same grep over a real slurmdbd source's runs (ok and failing) is in tests/test_slurm_live.py."""

from __future__ import annotations

import os
import socket

import pytest

from tests.cli_runner import ops

SECRET = "s3cret-Pa55-9137"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.parametrize("section", [
    f'[warehouse]\ndsn = "http://ops@127.0.0.1:8123/ops"\npassword = "{SECRET}"\n',
    # a password in the DSN is refused whatever the file's mode (issue 27): tests/test_security.py
    f'[slurmdbd]\npassword = "{SECRET}"\n',
    f'[reports]\npseudonym_key = "{SECRET}"\n',
])
def test_a_config_with_a_secret_must_be_private(tmp_path, section):
    cfg = tmp_path / "ops.toml"
    cfg.write_text(section)
    cfg.chmod(0o644)
    p = ops("--config", str(cfg), "init", check=False)
    assert p.returncode == 2 and "readable by others: chmod 600" in p.stderr and SECRET not in p.stdout + p.stderr
    assert p.stderr.count("\n") == 1
    cfg.chmod(0o600)
    p = ops("--config", str(cfg), "--warehouse", f"chdb://{tmp_path / 'wh'}", "init", check=False)
    assert p.returncode == 0, p.stderr


def test_a_user_name_in_the_dsn_is_not_a_secret(tmp_path):
    cfg = tmp_path / "ops.toml"
    cfg.write_text('[warehouse]\ndsn = "http://ops@127.0.0.1:8123/ops"\n')
    cfg.chmod(0o644)
    p = ops("--config", str(cfg), "--warehouse", f"chdb://{tmp_path / 'wh'}", "init", check=False)
    assert p.returncode == 0, p.stderr


def test_passwords_on_the_command_line_are_refused_without_echoing_them():
    for args in (["--warehouse", f"http://ops:{SECRET}@127.0.0.1:{_closed_port()}/ops", "init"],
                 ["etl", "slurmdbd", "--db", f"mysql://ops_ro:{SECRET}@127.0.0.1:3306/slurm_acct_db",
                  "--cluster", "c1"]):
        p = ops(*args, check=False, env={"OPS_WAREHOUSE": "chdb://" + os.devnull + "-unused"})
        assert p.returncode == 2 and "must not hold a password" in p.stderr, p.stderr
        assert SECRET not in p.stdout + p.stderr and p.stderr.count("\n") == 1


def test_an_unreachable_server_is_one_line_without_the_password(tmp_path):
    """The password from the environment reaches the client, not the message: the server is not there."""
    dsn = f"http://ops@127.0.0.1:{_closed_port()}/ops"
    p = ops("init", check=False, env={"OPS_WAREHOUSE": dsn, "OPS_WAREHOUSE_PASSWORD": SECRET})
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert SECRET not in p.stdout + p.stderr and p.stderr.count("\n") == 1 and "127.0.0.1" in p.stderr
