"""Shared fixtures: the real exports in tests/data (sources and licenses in tests/data/README.md) and a fresh
warehouse per test: embedded, or, for tests marked ``both_forms``, also on a ClickHouse HTTP server
(tests/chdb_server.py: the engine behind the server protocol), so the server branch of every load and report
runs in the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SACCT = DATA / "sacct"
XDMOD = SACCT / "xdmod"
SHREDDER = XDMOD / "shredder-unit"
HB = SACCT / "hb-jobinfo" / "sacct.txt"
LIVE = SACCT / "slurm-22.05-live"
SARC = SACCT / "sarc-json"
# Habrok's fixture was written per job with this --format, --parsable --noheader --delimiter=☃
HB_FIELDS = (
    "JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,Timelimit,Elapsed,"
    "TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,AllocTRES,TRESUsageInMax,"
    "TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,MaxRSSNode,MaxRSSTask,MaxVMSizeNode,"
    "MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,MaxDiskWriteNode,MaxDiskWriteTask,Comment"
)


def require(available: bool, what: str):
    """A mark for tests that need a real component: skipped off CI (a developer without root), a failure
    under CI (CI=true), where the README's test command installs it: the test fails before its fixtures
    start anything, naming what is missing."""
    if available:
        return pytest.mark.real_component(what)
    if os.environ.get("CI"):
        return pytest.mark.real_component(what, missing=True)
    return pytest.mark.skip(reason=f"{what} not installed (scripts/test installs it as root)")


def pytest_configure(config):
    config.addinivalue_line("markers", "both_forms: run the test on the embedded warehouse and on a ClickHouse "
                                       "server (the `form` parameter)")
    config.addinivalue_line("markers", "real_component(what, missing=False): the test needs a real component "
                                       "(tests/conftest.py: require)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for mark in item.iter_markers("real_component"):
        if mark.kwargs.get("missing"):
            pytest.fail(f"{mark.args[0]} is not installed, and under CI a test that needs a real component fails "
                        "rather than skips (scripts/test installs it as root)", pytrace=False)


def pytest_generate_tests(metafunc):
    # module scope: a module may build one warehouse per form for all its tests (a module-scoped fixture that
    # takes `form`, with warehouse_config), and its tests run form by form
    if "form" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_forms"):
        metafunc.parametrize("form", ["embedded", "server"], scope="module")


_FORMS: dict[str, dict[str, int]] = {}


def pytest_runtest_logreport(report):
    m = re.search(r"[\[-](embedded|server)[\]-]", report.nodeid)
    if m and report.when == "call":
        outcomes = _FORMS.setdefault(m.group(1), {})
        outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter):
    """The CI log says how many load and report tests ran in each warehouse form."""
    if _FORMS:
        terminalreporter.write_sep("-", "warehouse forms (tests marked both_forms)")
        for form, outcomes in sorted(_FORMS.items()):
            terminalreporter.write_line(f"{form}: " + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())))


@pytest.fixture
def form() -> str:
    """Which warehouse a test runs on: "embedded" unless the test is marked both_forms."""
    return "embedded"


class ChdbServer:
    """A ClickHouse HTTP server (tests/chdb_server.py) in a process of its own, with a warehouse of its own."""

    def __init__(self, folder: Path):
        self.folder = folder
        port_file = folder / "port"
        self.log = open(folder / "server.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "chdb_server.py"), "--path", str(folder / "data"),
             "--port-file", str(port_file)], stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() - t0 > 60:
                raise RuntimeError(f"the test ClickHouse server did not start: {(folder / 'server.log').read_text()}")
            time.sleep(0.05)
        self.port = int(port_file.read_text())

    def dsn(self, database: str = "default") -> str:
        return f"http://default@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh database (one test's warehouse) on the server; its DSN."""
        import clickhouse_connect

        name = f"t_{uuid.uuid4().hex[:12]}"
        admin = clickhouse_connect.get_client(dsn=self.dsn())
        admin.command(f"CREATE DATABASE {name}")
        admin.close()
        return self.dsn(name)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="session")
def chdb_server(tmp_path_factory):
    server = ChdbServer(tmp_path_factory.mktemp("chdb-server"))
    yield server
    server.stop()


def warehouse_config(form: str, folder: Path, request) -> Config:
    """A fresh warehouse of the form: a new database on the test server, or an embedded one in ``folder``."""
    if form == "server":
        return Config(dsn=request.getfixturevalue("chdb_server").new_database())
    return Config(dsn=f"chdb://{folder / 'warehouse'}")


@pytest.fixture
def cfg(tmp_path, form, request) -> Config:
    return warehouse_config(form, tmp_path, request)


@pytest.fixture
def wh(cfg):
    w = open_warehouse(cfg)
    yield w
    w.close()
    close_embedded()


def rows(wh, sql: str, **params):
    return wh.query_rows(sql, params)


# Columns that say when a row was (re)written or where in the last read it was seen, not what it says:
# they differ between two loads of the same facts by design. etl_run_log is a log, one row per run.
VOLATILE_COLUMNS = ("loaded_at", "refreshed_at", "synced_at", "updated_at", "applied_at", "source_line", "line_no")
LOG_TABLES = ("etl_run_log",)


def table_checksums(wh) -> dict[str, tuple]:
    """Order-independent content checksums (row count, sum of row hashes) of every warehouse table, as
    queries see it (FINAL: after ReplacingMergeTree's deduplication), without VOLATILE_COLUMNS."""
    out = {}
    tables = [t for (t,) in wh.query_rows(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree' "
        "ORDER BY name")]
    for t in tables:
        if t in LOG_TABLES:
            continue
        cols = [c for (c,) in wh.query_rows(
            "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = {t:String} "
            "ORDER BY position", {"t": t}) if c not in VOLATILE_COLUMNS]
        expr = "cityHash64(" + ", ".join(f"`{c}`" for c in cols) + ")"
        out[t] = tuple(wh.query_rows(f"SELECT count(), sum({expr}) FROM {t} FINAL")[0])
    return out


def warehouse_checksums(path) -> dict[str, tuple]:
    """table_checksums of the embedded warehouse at ``path`` (opened and closed again, so that an
    ops-report subprocess can use it next)."""
    wh = open_warehouse(Config(dsn=f"chdb://{path}"), migrate=False)
    try:
        return table_checksums(wh)
    finally:
        close_embedded()


DEMO_DAYS = 3


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory):
    """`ops-report demo` run twice (3 days, 300 jobs a day) in folders a and b, as the README runs it: the
    folder and the outputs of each (tests/test_demo.py); the notebooks run on a's warehouse."""
    from tests.test_cli import ops

    base = tmp_path_factory.mktemp("demo")
    outs = []
    for run in ("a", "b"):
        p = ops("demo", "--dir", str(base / run), "--days", str(DEMO_DAYS), "--jobs-per-day", "300", cwd=base,
                env={"OPS_WAREHOUSE": "", "OPS_CONFIG": ""})
        assert "quarantined 0" in p.stdout and "| A " in p.stdout
        out = base / run / "out"
        outs.append({str(f.relative_to(out)): f.read_bytes() for f in sorted(out.rglob("*")) if f.is_file()})
    return base, outs
