"""The command line narrowed to the command it runs: typer turns every command's signature into click options
at every start (`typer.main.get_command`: 26 ms of CPU for ops-report's 20 commands, issue 51, as
much as the CLI's own imports), though a process runs one. ``narrowed(app, argv)`` is the same app holding
only the commands and groups that ``argv`` names; anything else (no command, a mistyped one, ``--help`` before
the command, shell completion) gets the whole app, so what is printed and parsed stays the same."""

from __future__ import annotations

import copy
import os

import typer


def _name(info) -> str:
    # typer's own rule for a command registered without a name (typer.main.get_command_name)
    return info.name or info.callback.__name__.lower().replace("_", "-")


def narrowed(app: typer.Typer, argv: list[str]) -> typer.Typer:
    """``app`` with only the commands ``argv`` names (at each level of groups); ``app`` itself when it names
    none. A token that is an option's value and happens to spell a command keeps that command too: harmless,
    click still parses the whole line."""
    if any(k.endswith("_COMPLETE") for k in os.environ):  # click's shell completion lists every command
        return app
    return _narrowed(app, argv) or app


def _narrowed(app: typer.Typer, argv: list[str]) -> typer.Typer | None:
    tokens = set(argv)
    commands = [c for c in app.registered_commands if _name(c) in tokens]
    groups = [g for g in app.registered_groups if g.name in tokens]
    if not commands and not groups:
        return None
    first = min(argv.index(_name(c)) for c in commands) if commands else len(argv)
    first = min([first, *(argv.index(g.name) for g in groups)])
    if "--help" in argv[:first] or "-h" in argv[:first]:
        return None  # the group's own help lists every command
    out = copy.copy(app)
    out.registered_commands = commands
    out.registered_groups = []
    for g in groups:
        sub = copy.copy(g)
        rest = argv[argv.index(g.name) + 1:]
        sub.typer_instance = _narrowed(g.typer_instance, rest) or g.typer_instance
        out.registered_groups.append(sub)
    return out
