"""A warehouse loaded once per module, and a copy of it for each test that writes to it.

A module whose tests each load the same few hand-made files (a day of one node's samples, two runs) spends most
of a test on the load and its grains' refresh, not on what the test asks. `Loaded` loads them once per form and
variant (the first test that asks), and `copy_of` gives a test that writes (a refresh, a hand-made row, a
stale grain record) a warehouse of its own with the same rows: the embedded folder copied (its links are
relative: tests/conftest.py `embedded_template`), or, on the server form, a database the test server copies
from its own rows (`ChdbServer.copy_database`), dropped when the test ends. The load itself is still the
product's path under test: the copy is the same warehouse, not a second way of building it.
"""

from __future__ import annotations

import dataclasses
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import warehouse_config


class Loaded:
    """``build(wh, folder, variant)`` run once per variant into a fresh warehouse of the module's form (its
    files written under ``folder``): ``get(variant)`` -> (its Config, its folder, what ``build`` returned)."""

    def __init__(self, form: str, request, tmp_path_factory, build: Callable, projects: dict[str, str] | None = None):
        self.form, self.request, self.factory = form, request, tmp_path_factory
        self.build, self.projects = build, projects or {}
        self.kept: dict = {}

    def get(self, variant=None) -> tuple[Config, Path, object]:
        if variant not in self.kept:
            folder = self.factory.mktemp("loaded")
            cfg = warehouse_config(self.form, folder, self.request)
            cfg.projects = dict(self.projects)
            with open_warehouse(cfg) as wh:
                built = self.build(wh, folder, variant)
            close_embedded()  # the folder is copied from now on: no engine of this process holds it open
            self.kept[variant] = (cfg, folder, built)
        return self.kept[variant]

    @contextmanager
    def opened_copy(self, folder: Path, request, variant=None):
        """A copy of ``variant``'s warehouse of the test's own (``copy_of``), opened; closed after."""
        wh = open_warehouse(copy_of(self.get(variant)[0], folder, request))
        try:
            yield wh
        finally:
            wh.close()


def copy_of(cfg: Config, folder: Path, request) -> Config:
    """A warehouse of the test's own holding ``cfg``'s rows, in ``folder`` (embedded) or a new database on the
    test server, dropped at the test's end."""
    if cfg.dsn.startswith("chdb://"):
        shutil.copytree(cfg.dsn.removeprefix("chdb://"), folder / "warehouse", symlinks=True)
        return dataclasses.replace(cfg, dsn=f"chdb://{folder / 'warehouse'}", projects=dict(cfg.projects))
    server = request.getfixturevalue("chdb_server")
    dsn = server.copy_database(cfg.dsn.rsplit("/", 1)[1])
    request.addfinalizer(lambda: server.drop(dsn))
    return dataclasses.replace(cfg, dsn=dsn, projects=dict(cfg.projects))
