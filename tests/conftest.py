"""Shared fixtures: the real exports in tests/data (sources and licenses in tests/data/README.md) and a fresh
warehouse per test: embedded, or, for tests marked ``both_forms``, also on a ClickHouse HTTP server
(tests/chdb_server.py: the engine behind the server protocol), so the server branch of every load and report
runs in the suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests import durations

# The run's day of every load in the session, fixed once at its start (core/clock.py OPS_TODAY): a suite that
# passes midnight UTC keeps the day its sites were generated for (CI's run of stop 61 passed it: two nightly
# tests read a window one day later than the days they had generated). Set before pytest-xdist starts its
# workers, so they and every ops-report process they start inherit it.
os.environ.setdefault("OPS_TODAY", datetime.now(timezone.utc).date().isoformat())
TODAY = date.fromisoformat(os.environ["OPS_TODAY"])

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
    config.addinivalue_line("markers", "embedded_only(why): in a both_forms module, a test whose code path has no "
                                       "server branch (names, declarations, rendering): the embedded form only")
    config.addinivalue_line("markers", "real_component(what, missing=False): the test needs a real component "
                                       "(tests/conftest.py: require); such a test is also slow")
    config.addinivalue_line("markers", "slow: builds a generated site, runs the demo or a live service, or takes "
                                       "more than a few seconds; `./scripts/test -m 'not slow'` is the inner loop "
                                       "(docs/testing.md), CI runs everything")
    # pyproject's default `-m 'not slow'` is for `pytest` alone (the fast loop): a run that names its modules or
    # tests (`pytest tests/test_x.py -k y`) runs all of them, slow ones too, unless it gives an -m of its own
    named = config.args_source == pytest.Config.ArgsSource.ARGS
    own_m = any(a == "-m" or (a.startswith("-m") and not a.startswith("--")) for a in config.invocation_params.args)
    if named and not own_m:
        config.option.markexpr = ""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for mark in item.iter_markers("real_component"):
        if mark.kwargs.get("missing"):
            pytest.fail(f"{mark.args[0]} is not installed, and under CI a test that needs a real component fails "
                        "rather than skips (scripts/test installs it as root)", pytrace=False)


# `scripts/test` runs the suite in two processes (pytest-xdist: -n 2). A worker takes whole groups: a module's
# tests together, so a module-scoped fixture (a generated site, a started Prometheus) is built once; every
# Slurm test in one group, since Slurm clusters share the machine's munged and its users; the tests of the
# session's demo runs in one group, so the demo runs once. The groups are worked out from test ids alone (the
# scheduler sees no marks), and the workers check them against the marks and fixtures.
# The two modules of the hand-built scenario month share one worker, so that its server form is loaded once
# (ChdbServer.kept_warehouse; the embedded one is a kept site either way).
XDIST_GROUPS = {"tests/test_slurm_live.py": "slurm", "tests/test_whatif_live_slurm.py": "slurm",
                "tests/test_nightly_faults.py::test_slurm_": "slurm",
                "tests/test_api.py": "demo", "tests/test_demo.py": "demo", "tests/test_notebooks.py": "demo",
                "tests/test_checks.py::test_laws_on_the_demo": "demo",
                "tests/test_focus_export.py::test_demo_": "demo", "tests/test_demo_efficiency.py": "demo",
                "tests/test_demo_load_shapes.py": "demo",
                "tests/test_monthly_scenario.py": "scenario", "tests/test_carbon_intensity.py": "scenario",
                "tests/test_monthly_two_handles.py": "scenario"}


# The groups that took longest in CI's last whole run (tests/durations.json), first; a group it does not know
# (a new module) before them, since its time is unknown; ties in collection order.
_DURATIONS_S = durations.load()


def _group_seconds() -> dict[str, float]:
    seconds: dict[str, float] = {}
    for nodeid, t in _DURATIONS_S.items():
        group = xdist_group(nodeid)
        seconds[group] = seconds.get(group, 0.0) + t
    return seconds


def xdist_group(nodeid: str) -> str:
    for prefix, group in XDIST_GROUPS.items():
        if nodeid.startswith(prefix):
            return group
    return nodeid.split("::")[0]


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a run without the plugin has no scheduler
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        # a test that needs a real component, the demo or the live Slurm is slow; so is the server-form run of
        # a both_forms test (the inner loop runs the embedded one: the same SQL, the same loads)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.get_closest_marker("real_component") or {"demo_runs", "slurm"} & set(item.fixturenames) \
                or params.get("form") == "server":
            item.add_marker(pytest.mark.slow)
        # and so is one that took more than SLOW_S in CI's last run: `pytest` alone runs the rest in about a minute
        elif _DURATIONS_S.get(item.nodeid, 0.0) > durations.SLOW_S:
            item.add_marker(pytest.mark.slow)
    if not hasattr(config, "workerinput"):  # not an xdist worker
        return
    for item in items:
        slurm = "slurm" in item.fixturenames or any(
            str(m.args[0]).startswith("Slurm") for m in item.iter_markers("real_component"))
        need = "slurm" if slurm else "demo" if "demo_runs" in item.fixturenames else None
        if need and xdist_group(item.nodeid) != need:
            raise pytest.UsageError(f"{item.nodeid} belongs in the {need!r} group: add it to XDIST_GROUPS "
                                    "(tests/conftest.py)")
    # the longest groups first (scripts/test passes --no-loadscope-reorder so the scheduler keeps this order):
    # the Slurm workload's minutes of waiting and the demo overlap the rest, and short modules fill the end
    seconds = _group_seconds()
    items.sort(key=lambda item: -seconds.get(xdist_group(item.nodeid), float("inf")))


def pytest_generate_tests(metafunc):
    # module scope: a module may build one warehouse per form for all its tests (a module-scoped fixture that
    # takes `form`, with warehouse_config), and its tests run form by form
    if "form" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_forms"):
        # a test that takes nothing from the form but its transport, which the module's others read through the
        # server, runs once (its node id keeps `[embedded]`: CI's times and the forms' summary still find it)
        only = metafunc.definition.get_closest_marker("embedded_only")
        metafunc.parametrize("form", ["embedded"] if only else ["embedded", "server"], scope="module")


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


@pytest.fixture(scope="module")  # (module-wide, as the both_forms parameter is: a module fixture may load by it)
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
        self.template: str | None = None
        self.kept: dict[str, str] = {}  # loaded warehouses several modules copy (kept_warehouse)
        self.created: list[str] = []  # the tests' databases, dropped when their test or module ends

    def dsn(self, database: str = "default") -> str:
        return f"http://default@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh database (one test's warehouse) on the server; its DSN."""
        import clickhouse_connect

        name = f"t_{uuid.uuid4().hex[:12]}"
        admin = clickhouse_connect.get_client(dsn=self.dsn())
        admin.command(f"CREATE DATABASE {name}")
        admin.close()
        self.created.append(name)
        return self.dsn(name)

    def new_warehouse(self) -> str:
        """A fresh, migrated warehouse on the server; its DSN. A copy of a template database that
        open_warehouse() migrated through this server once (in a third of the time a migration takes): each
        table and view from the DDL the server gives for it, the template's rows (the migration log, the
        default cost model) copied; functions are the server's, there already. test_server_form.py has the
        CLI migrate an empty database (new_database)."""
        if self.template is None:
            dsn = self.new_database()
            open_warehouse(Config(dsn=dsn)).close()
            self.template = dsn.rsplit("/", 1)[1]
        return self.copy_database(self.template)

    def kept_warehouse(self, key: str, build) -> str:
        """A copy of a warehouse ``build(dsn)`` loaded through this server once (the first test that asks; kept
        until the server stops, under ``key``): tests of several modules that read one loaded site, each on a
        copy of its own that it may write. The load itself is the server path under test; a copy is the
        server copying its own rows (INSERT ... SELECT), a fraction of a load."""
        if key not in self.kept:
            dsn = self.new_warehouse()
            build(dsn)
            self.kept[key] = dsn.rsplit("/", 1)[1]
        return self.copy_database(self.kept[key])

    def copy_database(self, source: str) -> str:
        """A new database with ``source``'s tables, views and rows; its DSN."""
        import clickhouse_connect

        dsn = self.new_database()
        name = dsn.rsplit("/", 1)[1]
        admin = clickhouse_connect.get_client(dsn=self.dsn())
        try:
            objects = admin.query("SELECT name, create_table_query, total_rows FROM system.tables "
                                  "WHERE database = {db:String} ORDER BY engine = 'View', name",
                                  parameters={"db": source}).result_rows
            while objects:  # a view made before one it reads fails: made again in the next round
                failed = []
                for table, ddl, n in objects:
                    try:
                        admin.command(ddl.replace(f"{source}.", f"{name}."))
                    except Exception:
                        failed.append((table, ddl, n))
                        continue
                    if n:
                        admin.command(f"INSERT INTO {name}.{table} SELECT * FROM {source}.{table}")
                if len(failed) == len(objects):
                    raise RuntimeError(f"cannot copy {[t for t, _, _ in failed]} from {source}")
                objects = failed
        finally:
            admin.close()
        return dsn

    def drop(self, *databases: str) -> None:
        """Drop tests' databases (names or DSNs) once done: a server keeps background work going for every
        table it holds (merge and cleanup scheduling), measured at 3.3 s of CPU per 30 s idle with 40 test
        warehouses, a tenth of a core, growing with every finished test."""
        import clickhouse_connect

        admin = clickhouse_connect.get_client(dsn=self.dsn())
        try:
            for db in databases:
                name = db.rsplit("/", 1)[-1]
                admin.command(f"DROP DATABASE IF EXISTS {name} SYNC")
                if name in self.created:
                    self.created.remove(name)
        finally:
            admin.close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="session")
def chdb_server(tmp_path_factory):
    global _server
    server = _server = ChdbServer(tmp_path_factory.mktemp("chdb-server"))
    yield server
    _server = None
    server.stop()


_server: ChdbServer | None = None  # this process's test server, once a test started it


@pytest.fixture(scope="module", autouse=True)
def _drop_the_modules_databases():
    """The server databases a module made (its module-scoped warehouses too) are dropped when it ends."""
    before = set(_server.created) if _server else set()
    yield
    if _server:
        keep = {_server.template, *_server.kept.values()}
        _server.drop(*[d for d in _server.created if d not in before and d not in keep])


def _migrated_empty(out: Path) -> dict:
    # in a process of its own, so that no engine of this one is closed to make it
    subprocess.run([sys.executable, "-c", "import sys; from ops_warehouse.config import Config; "
                    "from ops_warehouse.warehouse import close_embedded, open_warehouse; "
                    "open_warehouse(Config(dsn='chdb://' + sys.argv[1])).close(); close_embedded()",
                    str(out / "warehouse")], check=True, timeout=300)
    return {}


@pytest.fixture(scope="session")
def embedded_template(tmp_path_factory) -> Path:
    """An empty embedded warehouse, migrated once (tests/sites.py: kept by code hash like the generated sites),
    never opened: a fresh embedded warehouse is a copy of it, with the same schema, cost model and functions
    that open_warehouse() writes into an empty folder (its links are relative, so a copy stands alone). A
    copy and its first open take ~0.3 s; migrating an empty folder ~1-2 s."""
    from tests.sites import built_site

    return built_site(tmp_path_factory, "empty-warehouse", _migrated_empty).path / "warehouse"


def warehouse_config(form: str, folder: Path, request) -> Config:
    """A fresh warehouse of the form: a new database on the test server, or an embedded one in ``folder``
    (a copy of the session's empty, migrated one: relative links only, so a copy is a warehouse of its own)."""
    if form == "server":
        return Config(dsn=request.getfixturevalue("chdb_server").new_warehouse())
    shutil.copytree(request.getfixturevalue("embedded_template"), folder / "warehouse", symlinks=True)
    return Config(dsn=f"chdb://{folder / 'warehouse'}")


@pytest.fixture
def cfg(tmp_path, form, request):
    c = warehouse_config(form, tmp_path, request)
    yield c
    if form == "server":
        request.getfixturevalue("chdb_server").drop(c.dsn)


@pytest.fixture
def wh(cfg):
    w = open_warehouse(cfg)
    yield w
    w.close()
    close_embedded()


def rows(wh, sql: str, **params):
    return wh.query_rows(sql, params)


def assert_same_report(a, b, path=""):
    """Two reports' JSON equal; floats to 1e-9 relative: the engine adds floats in whatever order its threads
    finish, so two evaluations of one month differ in the last digits (tests/test_demo.py,
    tests/test_demo_load_shapes.py)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same_report(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_report(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


# Columns that say when a row was (re)written or where in the last read it was seen, not what it says:
# they differ between two loads of the same facts by design. etl_run_log is a log, one row per run.
VOLATILE_COLUMNS = ("loaded_at", "refreshed_at", "synced_at", "updated_at", "applied_at", "source_line", "line_no")
LOG_TABLES = ("etl_run_log",)


def table_checksums(wh, ignore: tuple[str, ...] = ()) -> dict[str, tuple]:
    """Order-independent content checksums (row count, sum of row hashes) of every warehouse table, as
    queries see it (FINAL: after ReplacingMergeTree's deduplication), without VOLATILE_COLUMNS nor the
    columns ``ignore`` names."""
    # every table's columns in one query and every table's checksum in one more (a query a table, two with its
    # columns, cost ~60 statements' fixed cost a call: the SIGKILL and rerun tests call this dozens of times)
    cols: dict[str, list[str]] = {}
    for t, c in wh.query_rows(
            "SELECT table, name FROM system.columns WHERE database = currentDatabase() AND table IN (SELECT name "
            "FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree') "
            "ORDER BY table, position"):
        if t not in LOG_TABLES:
            cols.setdefault(t, [])
            if c not in VOLATILE_COLUMNS and c not in ignore:
                cols[t].append(c)
    # over one tuple: cityHash64(a, b, ...) is NULL when any argument is, and sum() skips NULLs, so a row
    # with a NULL column counted by count() alone; a tuple's hash sets NULL apart from 0 and '' (issue 49)
    parts = [f"SELECT '{t}', count(), sum(cityHash64(tuple(" + ", ".join(f"`{c}`" for c in cs) + f"))) FROM {t} FINAL"
             for t, cs in sorted(cols.items())]
    got = {t: (n, h) for t, n, h in wh.query_rows(" UNION ALL ".join(parts))} if parts else {}
    return {t: got[t] for t in sorted(got)}


def warehouse_checksums(path) -> dict[str, tuple]:
    """table_checksums of the embedded warehouse at ``path`` (opened and closed again, so that an
    ops-report subprocess can use it next)."""
    wh = open_warehouse(Config(dsn=f"chdb://{path}"), migrate=False)
    try:
        return table_checksums(wh)
    finally:
        close_embedded()


@pytest.fixture(scope="session")
def slurm():
    """The test run's one live Slurm cluster (tests/slurm_harness.py), started when a test first needs it and
    stopped at the end; every Slurm test module calls ``forget_jobs()`` before its workload. The Slurm tests
    form one xdist group (XDIST_GROUPS), so one worker starts it."""
    import tempfile

    from tests import slurm_harness

    cluster_dir = Path(tempfile.mkdtemp(prefix="ops-slurm-"))  # the daemons run as munge and mysql: reachable
    try:
        with slurm_harness.SlurmCluster(cluster_dir) as sc:
            yield sc
    finally:
        shutil.rmtree(cluster_dir, ignore_errors=True)


DEMO_DAYS = 3


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory):
    """`ops-report demo` run twice (3 days, 300 jobs a day) in folders a and b, as the README runs it: the
    folder and the outputs of each (tests/test_demo.py); the notebooks run on a's warehouse. What each printed
    is kept beside its folder (``a.stdout``, ``b.stdout``): b is the backfill shape of
    tests/test_demo_load_shapes.py."""
    from tests.cli_runner import ops

    base = tmp_path_factory.mktemp("demo")
    outs = []
    for run in ("a", "b"):
        p = ops("demo", "--dir", str(base / run), "--days", str(DEMO_DAYS), "--jobs-per-day", "300", cwd=base,
                env={"OPS_WAREHOUSE": "", "OPS_CONFIG": ""})
        assert "quarantined 0" in p.stdout and "| A " in p.stdout
        (base / f"{run}.stdout").write_text(p.stdout)
        out = base / run / "out"
        outs.append({str(f.relative_to(out)): f.read_bytes() for f in sorted(out.rglob("*")) if f.is_file()})
    return base, outs
