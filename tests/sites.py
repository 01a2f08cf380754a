"""Generated sites the tests share: each built once (generated and loaded into a warehouse) and reused.

A site is a folder: the generator's files (sacct, telemetry, node events, truth/...), the warehouse they were
loaded into (``warehouse/``) and ``facts.json`` (what the build returned: the cluster's name, the planted lemon
nodes...). It is built by a module's ``build(out, **params)`` function and kept under a key made of the site's
name, its parameters, the build function's source and a hash of the installed ops_warehouse package (every
.py and .sql file): change the generator, a loader, a mart or the build and the site is built anew.

Where sites are kept (``OPS_TEST_SITES``):
- unset: ``~/.cache/ops-warehouse/test-sites`` for a developer, so a rerun with unchanged code reuses them
  (``./scripts/test -m "not slow"`` and a rerun of one slow module both start in seconds); under CI (``CI``
  set) the test run's own temporary folder, so every CI run builds every site from nothing, as a fresh
  machine would;
- a folder: kept there;
- ``session``: the run's temporary folder (built once per run, shared by the xdist workers, gone after).

Nobody opens the kept warehouse itself: ``Site.open_copy()`` copies it (a few MB to ~100 MB: well under a
second) into the caller's folder, so a test that writes to it changes only its copy, and two xdist workers
never wait for each other's engine. Two workers that need one site build it once: the second waits on a file
lock for the first.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

_FINGERPRINT: str | None = None
PROJECTS = {f"proj{c}": c.upper() for c in "abcdef"}  # the generator's accounts, as a site maps them


def code_fingerprint() -> str:
    """A hash of the installed package's code and SQL: what a built site depends on."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import importlib

        # every folder of the package: one tree when installed, the source's top-level folders when editable
        roots = sorted({Path(importlib.import_module(f"ops_warehouse{sub}").__file__).resolve().parent
                        for sub in ("", ".etl", ".analytics", ".generate", ".reports", ".planning", ".cli", ".sql")})
        roots = [r for r in roots if not any(o != r and o in r.parents for o in roots)]
        h = hashlib.sha256()
        for root in roots:
            for f in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".sql") and p.is_file()):
                h.update(str(f.relative_to(root.parent)).encode())
                h.update(f.read_bytes())
        h.update(Path(__file__).read_bytes())  # generated_site() below is part of every build
        _FINGERPRINT = h.hexdigest()
    return _FINGERPRINT


def sites_root(tmp_path_factory) -> Path:
    where = os.environ.get("OPS_TEST_SITES", "")
    if where and where != "session":
        return Path(where).expanduser()
    if where == "session" or os.environ.get("CI"):
        # under xdist every worker has a basetemp of its own under one shared parent
        base = tmp_path_factory.getbasetemp()
        return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "sites"
    return Path.home() / ".cache" / "ops-warehouse" / "test-sites"


@dataclass
class Site:
    path: Path          # the generator's files (read them, never write)
    facts: dict         # what the build returned

    def open_copy(self, folder: Path) -> Path:
        """A copy of the site's loaded warehouse in ``folder``: the caller's own, to open and write."""
        dest = Path(folder) / "warehouse"
        shutil.copytree(self.path / "warehouse", dest, symlinks=True)
        return dest


def built_site(tmp_path_factory, name: str, build: Callable[..., dict], **params) -> Site:
    """The site ``name`` that ``build(out, **params)`` makes (files and ``out/warehouse``, returning JSON-able
    facts), built now or taken from where it was kept."""
    key = hashlib.sha256(json.dumps([params, inspect.getsource(build), code_fingerprint()], sort_keys=True,
                                    default=str).encode()).hexdigest()[:16]
    root = sites_root(tmp_path_factory)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}-{key}"
    with open(root / f"{name}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker building it: wait for its result
        if not (path / "facts.json").exists():  # facts.json is written last: without it, a build that died
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            # built where it stays: the loads record their files' paths (etl_run_log, etl_quarantine)
            facts = build(path, **params)
            (path / "facts.json.part").write_text(json.dumps(facts, sort_keys=True))
            (path / "facts.json.part").rename(path / "facts.json")
            # the same site built by other code and not used for a day: older code's, never used again. Not
            # sooner: two checkouts (two branches, a helper's copy) running at once each use their own build,
            # and one removing the other's mid-run failed it (FileNotFoundError)
            for old in root.glob(f"{name}-*"):
                if old.is_dir() and old != path and len(old.name) == len(path.name) and _unused_for_a_day(old):
                    shutil.rmtree(old, ignore_errors=True)
                    (root / f"{old.name}.lock").unlink(missing_ok=True)
        os.utime(path / "facts.json")  # used now (the pruning above goes by it)
    return Site(path, json.loads((path / "facts.json").read_text()))


def _unused_for_a_day(site: Path) -> bool:
    facts = site / "facts.json"
    try:
        return time.time() - facts.stat().st_mtime > 86400
    except FileNotFoundError:  # a build that died, or one in progress: its own lock's holder decides
        return False


def generated_site(out: Path, *, telemetry_days=None, kernel_log=False, **params) -> dict:
    """A build: ``generate(out, **params)`` loaded into ``out/warehouse`` as a site's nightly loads it (the sacct
    file, the inventory, node events and reservations, the telemetry of ``telemetry_days`` (first, last); with
    ``kernel_log`` the generated kernel logs after the telemetry, as the demo loads them), in one refresh of the
    grains at the end, accounts mapped to projects A-F. Its facts: the cluster's name, the planted lemon nodes
    and the straggler."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.grains import one_refresh
    from ops_warehouse.etl.kernel_log_xid import load_kernel_log
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.generate import generate
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    h = generate(out, **params)
    cfg = Config(dsn=f"chdb://{out / 'warehouse'}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    try:
        # the loads in one refresh of the grains, as `etl nightly` runs a night's (etl/grains.py one_refresh):
        # refreshed load by load, then once more over the window (as before 2026-12-07), the grains were written
        # three or four times over for the same rows: every table's checksum equal, a fifth to a third of the
        # build's CPU (docs/benchmarks.md, issue 51 round 7)
        with one_refresh(wh):
            assert load_sacct(wh, out / "sacct" / "sacct.psv").quarantined == 0
            load_capacity(wh, inventory=out / "inventory.csv", events=out / "slurm" / "events.psv",
                          reservations=out / "slurm" / "reservations.txt", cluster=h.spec.name)
            if telemetry_days:
                load_parquet_dir(wh, out, *telemetry_days, cluster=h.spec.name)
            if kernel_log:  # after the telemetry, whose pci_bus_id labels place the lines' GPUs
                load_kernel_log(wh, sorted((out / "logs" / "kernel").glob("*.log")), cluster=h.spec.name)
    finally:
        close_embedded()
    return {"cluster": h.spec.name, "lemons": h.lemons, "straggler": h.straggler}


# A small generated week that several modules read, built once per run for all of them (each open_copy()s it):
# the laws on a small generated site (tests/test_checks.py) and the planted idle users (tests/test_users_generated.py)
# asked for the same week under two names and built it twice (about 12-15 s each on CI's 2 cores).
SMALL_WEEK = (datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 10, 8, tzinfo=timezone.utc))
SMALL_WEEK_STEP_S = 300


def small_week(tmp_path_factory) -> Site:
    """7 days of October 2026 from the 1st, 200 jobs a day on 16 nodes, seed 5, 5-minute telemetry of the 7 days."""
    return built_site(tmp_path_factory, "small-week", _build_small_week, start=SMALL_WEEK[0], days=7,
                      jobs_per_day=200, nodes=16, seed=5, metrics_step_s=SMALL_WEEK_STEP_S)


def _build_small_week(out: Path, **params) -> dict:
    return generated_site(out, telemetry_days=(SMALL_WEEK[0].date(), SMALL_WEEK[1].date() - timedelta(days=1)),
                          **params)


# Open XDMoD's phillips.log (tests/data/sacct/xdmod, LGPL-3.0; 4,285 jobs, no node inventory) loaded by
# `ops-report etl sacct --fields xdmod` into an empty warehouse: the laws on a real log
# (tests/test_check_real_logs.py) and the charts' workers (tests/test_chart_workers.py) each loaded it anew
PHILLIPS_LOG = Path(__file__).with_name("data") / "sacct" / "xdmod" / "phillips.log"


def phillips(tmp_path_factory) -> Site:
    """phillips.log loaded as a user loads it; its facts: the command's stdout (``stdout``)."""
    # the log's hash in the key: a changed fixture is loaded anew
    return built_site(tmp_path_factory, "phillips", _load_phillips, log=str(PHILLIPS_LOG),
                      log_sha256=hashlib.sha256(PHILLIPS_LOG.read_bytes()).hexdigest())


def _load_phillips(out: Path, *, log: str, log_sha256: str) -> dict:
    from ops_warehouse.warehouse import close_embedded
    from tests.cli_runner import cli

    try:
        stdout = cli("--warehouse", f"chdb://{out / 'warehouse'}", "etl", "sacct", "--fields", "xdmod", log).stdout
    finally:
        close_embedded()  # no engine left on the folder that open_copy() copies
    return {"stdout": stdout}


# tests/user_scenario.py's hand-built day (its sacct lines, inventory and dcgm-exporter samples, loaded): the digest
# (tests/test_digest.py) and the users' figures (tests/test_users_efficiency.py) each loaded it anew (~6 CPU-s)
USER_DAY_SOURCE = Path(__file__).with_name("user_scenario.py")


def user_day(tmp_path_factory, folder: Path):
    """tests/user_scenario.py's day in ``folder`` as its ``load_day`` leaves one: the raw files, a copy of the
    warehouse they were loaded into (built once per run) and ops.toml naming the copy; returns its Config."""
    from ops_warehouse.config import Config

    from tests import user_scenario as us

    # the scenario's file in the key: a changed day is loaded anew
    site = built_site(tmp_path_factory, "user-day", _load_user_day,
                      source_sha256=hashlib.sha256(USER_DAY_SOURCE.read_bytes()).hexdigest())
    shutil.copytree(site.path, folder, symlinks=True, dirs_exist_ok=True,
                    ignore=lambda d, names: ["warehouse", "facts.json"] if Path(d) == site.path else [])
    site.open_copy(folder)
    return us.config_for(folder)


def _load_user_day(out: Path, *, source_sha256: str) -> dict:
    from tests import user_scenario as us

    us.load_day(out)
    (out / "ops.toml").unlink()  # it names this folder's warehouse, which nobody opens: each copy writes its own
    return {}


def open_site(site: Site, folder: Path):
    """An open warehouse on a copy of ``site``'s (in ``folder``), configured as its build was."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{site.open_copy(folder)}")
    cfg.projects = PROJECTS
    return open_warehouse(cfg)


def laws_broken(wh, cluster: str, window) -> dict[str, str]:
    """The laws of sql/checks/ (`ops-report check`, docs/checks.md) that do not hold on ``window`` of ``cluster``
    in ``wh``: {law: its status and first offending row}. Every generated site's module asserts it is empty
    (issue 28: the laws run on every generated site); a law that cannot be checked (link rates the inventory
    does not know) is not broken."""
    from ops_warehouse.analytics.checks import BROKEN, HOLDS, NOT_CHECKED, run_checks

    out = {}
    for o in run_checks(wh, cluster=cluster, window=window):
        if o.status not in (HOLDS, NOT_CHECKED):
            first = o.rows.head(1).to_dicts() if o.status == BROKEN else o.error
            out[o.law.name] = f"{o.status}: {first}"
    return out
