"""`ops-report` builds only the command it runs (cli/invoked.py, issue 51's fixed cost): typer turned all its
commands (then 20: 12, and the etl group's 8) into click commands at every start, 26 ms of CPU of a one-day summary.
What is printed and parsed must not change: every command's --help, the group's, a mistyped command's error."""

from __future__ import annotations

import pytest
import typer
import typer.main

from ops_warehouse.cli.invoked import narrowed
from ops_warehouse.cli.main import app
from tests.cli_runner import cli


def built_commands(monkeypatch) -> list[str]:
    """The names of the commands typer builds from here on."""
    built: list[str] = []
    real = typer.main.get_command_from_info

    def counting(command_info, **kwargs):
        cmd = real(command_info, **kwargs)
        built.append(cmd.name)
        return cmd

    monkeypatch.setattr(typer.main, "get_command_from_info", counting)
    return built


def test_a_command_builds_only_itself(monkeypatch):
    built = built_commands(monkeypatch)
    p = cli("summary", "--help")
    assert "--from" in p.stdout and "--period" in p.stdout
    assert built == ["summary"]
    built.clear()
    p = cli("etl", "sacct", "--help")
    assert "--fields" in p.stdout
    assert built == ["sacct"]
    built.clear()
    # the options before the command are the app's own, parsed as before
    p = cli("--warehouse", "chdb:///nowhere/at/all", "--no-wait", "monthly", "--help")
    assert "--anonymize-users" in p.stdout
    assert built == ["monthly"]


def test_no_command_or_a_mistyped_one_builds_every_command(monkeypatch):
    built = built_commands(monkeypatch)
    p = cli("--help")
    assert "summary" in p.stdout and "monthly" in p.stdout
    # 15 commands (job, users and digest: issue 52) and the etl group's 8 (cli/main.py): the whole app
    assert len(built) == 23 and {"job", "users", "digest"} <= set(built) and {"summary", "monthly", "sacct", "refresh", "demo"} <= set(built)
    p = cli("sumary", check=False)
    assert p.returncode == 2 and "No such command 'sumary'. Did you mean 'summary'?" in p.stderr
    p = cli("--help", "summary")  # --help before the command: the app's help, every command listed
    assert "whatif" in p.stdout


def paths(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for c in group.registered_commands:
        out.append((*prefix, c.name or c.callback.__name__.lower().replace("_", "-")))
    for g in group.registered_groups:
        out += paths(g.typer_instance, (*prefix, g.name))
    return out


@pytest.mark.parametrize("path", paths(app), ids=lambda p: " ".join(p) or "(app)")
def test_help_is_the_same_text_from_the_narrowed_app(path):
    """Every command's --help from the narrowed app, byte for byte the whole app's (the text a user reads, and
    usage errors, come from the same click objects)."""
    from typer.testing import CliRunner

    argv = [*path, "--help"]
    runner = CliRunner()
    whole = runner.invoke(app, argv, prog_name="ops-report", terminal_width=100)
    narrow = runner.invoke(narrowed(app, argv), argv, prog_name="ops-report", terminal_width=100)
    assert whole.exit_code == 0, whole.output
    assert narrow.output == whole.output
    assert narrow.exit_code == whole.exit_code
