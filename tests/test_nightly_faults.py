"""Faulty sources under `ops-report etl nightly` (issue 7): the real servers of the integration tests,
stopped, killed, paused and misconfigured by the test while the nightly run reads them.

Prometheus (Debian's 2.42, tests/prometheus_harness.py, backfilled with yesterday's telemetry of the
generator's 4-node site) under a nightly run that also loads the capacity files:

- down for the whole run (stopped): the run retries, gives up, exits 1 with one stderr line for the
  telemetry source; the capacity source loads; etl_run_log says failed / ok; no watermark moves; with
  Prometheus back the next run exits 0 and the warehouse is that of a clean run;
- killed (SIGKILL) after the first requests of the day with data, restarted 3 s later;
- paused (SIGSTOP: connections are accepted by the kernel, nothing answers) with a 1 s request timeout,
  resumed 3 s later;
- answering 503: restarted with ``--query.timeout=1ms`` (every range query answers 503 "query timed out in
  expression evaluation", label queries still answer), restarted normally after the first 503 was retried;
  a 400 (our query wrong) is not retried.

Each healed run must leave every warehouse table as the clean run left it (row counts and sums of row
hashes, tests/conftest.py): nothing lost, nothing doubled.

Slurm (tests/slurm_harness.py: slurmctld, slurmd, slurmdbd, MariaDB on loopback): a few short jobs, then a
nightly run with the slurmdbd source, the sacct source and the capacity files while MariaDB and slurmdbd
are stopped: both Slurm sources fail after their retries, capacity loads, exit 1; both restarted, the next
run loads the same job and step rows as a clean run.
"""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.prometheus_source import PromClient
from ops_warehouse.etl.retry import Retry, Transient
from tests import prometheus_harness as ph
from tests import slurm_harness
from tests.conftest import TODAY, require, warehouse_checksums
from tests.cli_runner import ops

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

YESTERDAY = TODAY - timedelta(days=1)
CLUSTER = "c"
RETRY_LINE = re.compile(r"^ops-report: retry: (\S+ \S+): attempt (\d+) of (\d+) failed: (.+); next try in ([\d.]+) s$")

needs_prometheus = require(ph.available(), "prometheus/promtool")
needs_slurm = require(slurm_harness.available(), "Slurm (slurm-wlm slurmdbd munge mariadb-server, as root)")


# --- Prometheus ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    from ops_warehouse.generate import generate

    base = tmp_path_factory.mktemp("prom")
    site = base / "site"
    generate(site, start=datetime(YESTERDAY.year, YESTERDAY.month, YESTERDAY.day, tzinfo=timezone.utc), days=1,
             jobs_per_day=100, nodes=4, seed=5, metrics_step_s=60, telemetry=("openmetrics",))
    ph.backfill(sorted((site / "telemetry" / "openmetrics").glob("*.om")), base / "tsdb")
    p = ph.Prometheus(base / "tsdb").start()
    yield site, p
    p.stop()


def _config(path: Path, wh: Path, site: Path, url: str, *, retries: int, backoff_s: float,
            timeout_s: float | None = None) -> Path:
    path.write_text(
        f'[warehouse]\ndsn = "chdb://{wh}"\n'
        f"[nightly]\nretries = {retries}\nbackoff_s = {backoff_s}\n"
        f'[nightly.telemetry]\nsource = "prometheus"\nurl = "{url}"\ncluster = "{CLUSTER}"\nstep_s = 60\n'
        + (f"timeout_s = {timeout_s}\n" if timeout_s else "")
        + f'[nightly.capacity]\ncluster = "{CLUSTER}"\ninventory = "{site / "inventory.csv"}"\n'
        f'events = "{site / "slurm" / "events.psv"}"\nreservations = "{site / "slurm" / "reservations.txt"}"\n')
    return path


def _nightly(config: Path, wh: Path):
    """One nightly run in this process (the fault threads need to see its requests)."""
    from ops_warehouse.config import load_config
    from ops_warehouse.etl.nightly import run_nightly
    from ops_warehouse.warehouse import close_embedded

    cfg = load_config(config)
    cfg.dsn = f"chdb://{wh}"  # not OPS_WAREHOUSE's
    try:
        return run_nightly(cfg, log=lambda line: None)
    finally:
        close_embedded()


def _retry_lines(stderr: str) -> list[tuple[str, int, str]]:
    """(source, attempt, error) of each retry line; every other stderr line must be a failed source."""
    out = []
    for line in stderr.splitlines():
        m = RETRY_LINE.match(line)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(4)))
        else:
            assert line.startswith("ops-report: nightly source failed: "), line
    return out


class Requests:
    """Counts PromClient's requests; calls ``at(n)`` hooks from the load's thread."""

    def __init__(self, monkeypatch):
        self.n, self.transient, self.hooks = 0, [], {}
        orig = PromClient._once

        def once(client, path, q, post):
            self.n += 1
            if self.n in self.hooks:
                self.hooks[self.n].set()
            try:
                return orig(client, path, q, post)
            except Transient as e:
                self.transient.append(str(e))
                raise

        monkeypatch.setattr(PromClient, "_once", once)

    def at(self, n: int) -> threading.Event:
        self.hooks[n] = threading.Event()
        return self.hooks[n]


@pytest.fixture(scope="module")
def clean(prom, tmp_path_factory):
    """The warehouse of a nightly run that met no fault, and how many requests that run made."""
    site, p = prom
    base = tmp_path_factory.mktemp("clean")
    with pytest.MonkeyPatch.context() as mp:
        req = Requests(mp)
        outcomes = _nightly(_config(base / "ops.toml", base / "wh", site, p.url, retries=0, backoff_s=0), base / "wh")
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.detail for o in outcomes]
    sums = warehouse_checksums(base / "wh")
    # 3 H100 + 1 H200 nodes x 8 GPUs x 1,440 minutes of yesterday
    assert sums["gpu_sample"][0] == 32 * 1440 and sums["node_inventory"][0] > 0
    return sums, req.n


def _ensure_up(p) -> None:
    if p.proc is None or p.proc.poll() is not None:
        p.start()


@needs_prometheus
def test_prometheus_down_for_the_whole_run(prom, clean, tmp_path):
    site, p = prom
    wh = tmp_path / "wh"
    env = {"OPS_CONFIG": str(_config(tmp_path / "ops.toml", wh, site, p.url, retries=2, backoff_s=0.2)),
           "OPS_WAREHOUSE": ""}
    p.stop()
    try:
        r = ops("etl", "nightly", env=env, check=False)
    finally:
        p.start()
    assert r.returncode == 1, r.stdout + r.stderr
    window = f"{YESTERDAY - timedelta(days=2)}..{YESTERDAY}"
    failed = [line for line in r.stderr.splitlines() if line.startswith("ops-report: nightly source failed: ")]
    assert failed == [(f"ops-report: nightly source failed: telemetry-prometheus {CLUSTER} {window}: prometheus at "
                       f"{p.url} unreachable after 3 tries: [Errno 111] Connection refused")], r.stderr
    retries = _retry_lines(r.stderr)
    assert [(s, a) for s, a, _ in retries] == [(f"telemetry-prometheus {CLUSTER}", 1),
                                               (f"telemetry-prometheus {CLUSTER}", 2)], r.stderr
    assert f"nightly capacity {CLUSTER} whole files: ok" in r.stdout
    from ops_warehouse.config import Config
    from ops_warehouse.etl.watermarks import watermark
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    w = open_warehouse(Config(dsn=f"chdb://{wh}"), migrate=False)
    try:
        log = w.query_rows("SELECT source_kind, status, error FROM etl_run_log WHERE source_kind LIKE 'nightly:%' "
                           "ORDER BY started_at")
        assert [(k, s) for k, s, _ in log] == [("nightly:telemetry-prometheus", "failed"), ("nightly:capacity", "ok")]
        assert "unreachable after 3 tries" in log[0][2]
        assert watermark(w, f"nightly:telemetry-prometheus:{CLUSTER}") is None
        assert watermark(w, f"prometheus:{p.url}") is None
        assert w.query_rows("SELECT count() FROM gpu_sample")[0][0] == 0
    finally:
        close_embedded()
    # Prometheus back: the next run reads the same window again and exits 0
    r = ops("etl", "nightly", env=env, check=False)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert f"nightly telemetry-prometheus {CLUSTER} {window}: ok" in r.stdout
    assert warehouse_checksums(wh) == clean[0]


def _when(event: threading.Event, done: threading.Event) -> None:
    """Until ``event``; fails if the load is over first."""
    while not event.wait(0.05):
        if done.is_set():
            raise AssertionError("the load was over before the fault")


def _heals(prom, clean, tmp_path, capsys, fault, **config) -> list[tuple[str, int, str]]:
    """A nightly run while ``fault`` runs in a thread; the run must succeed and equal the clean one."""
    site, p = prom
    errors, done = [], threading.Event()

    def run_fault():
        try:
            fault(done)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    t = threading.Thread(target=run_fault)
    t.start()
    try:
        outcomes = _nightly(_config(tmp_path / "ops.toml", tmp_path / "wh", site, p.url, **config), tmp_path / "wh")
    finally:
        done.set()
        t.join(60)
        _ensure_up(p)
    assert not errors, errors
    assert [(o.source.kind, o.status) for o in outcomes] == [("telemetry-prometheus", "ok"), ("capacity", "ok")], \
        [o.detail for o in outcomes]
    retries = _retry_lines(capsys.readouterr().err)
    assert retries and {s for s, _, _ in retries} == {f"telemetry-prometheus {CLUSTER}"}
    assert warehouse_checksums(tmp_path / "wh") == clean[0]
    with capsys.disabled():
        print(f"\n  {len(retries)} retries: " + "; ".join(sorted({e for _, _, e in retries})))
    return retries


@needs_prometheus
def test_prometheus_killed_mid_load(prom, clean, tmp_path, monkeypatch, capsys):
    """SIGKILL two thirds into the requests (in the day with data), back 3 s later."""
    _, p = prom
    req = Requests(monkeypatch)
    hit = req.at(clean[1] * 2 // 3)

    def fault(done):
        _when(hit, done)
        p.kill()
        time.sleep(3)
        p.start()

    _heals(prom, clean, tmp_path, capsys, fault, retries=6, backoff_s=0.5)
    assert any(w in e for e in req.transient for w in ("Connection refused", "reset", "cut off", "closed")), req.transient


@needs_prometheus
def test_prometheus_hanging(prom, clean, tmp_path, monkeypatch, capsys):
    """SIGSTOP: the kernel still completes connections, no answer comes; a 1 s timeout; SIGCONT 3 s later."""
    _, p = prom
    req = Requests(monkeypatch)
    hit = req.at(clean[1] * 2 // 3)

    def fault(done):
        _when(hit, done)
        p.pause()
        try:
            time.sleep(3)
        finally:
            p.resume()

    retries = _heals(prom, clean, tmp_path, capsys, fault, retries=6, backoff_s=0.5, timeout_s=1)
    assert any(e == "no answer within 1 s" for _, _, e in retries), retries


@needs_prometheus
def test_prometheus_answering_503(prom, clean, tmp_path, monkeypatch, capsys):
    """The real server answering 5xx: started with --query.timeout=1ms, a range query times out. Where the
    deadline strikes decides the answer (Prometheus 2.42's API): in the evaluation, HTTP 503 (errorType
    timeout, "query timed out in expression evaluation"); while the series are being selected, HTTP 422
    ("expanding series: context deadline exceeded"); label queries still answer. Both are retried. A
    query without series (a subquery of vector(1)) can only time out in the evaluation: 503 every time,
    retried, then given up. Then a nightly run against that server, restarted with its normal timeout once
    the first timeout answer has been retried."""
    _, p = prom
    p.stop()
    p.start(extra_args=("--query.timeout=1ms",))
    try:
        _answering_503(prom, clean, tmp_path, monkeypatch, capsys)
    finally:
        if "--query.timeout=1ms" in p.proc.args:  # the test failed before the fault restarted it
            p.stop()
            p.start()


def _answering_503(prom, clean, tmp_path, monkeypatch, capsys) -> None:
    _, p = prom
    lines: list[str] = []
    client = PromClient(p.url, retry=Retry(2, 0.05, "prometheus test", log=lines.append))
    now = time.time()
    with pytest.raises(OpsError, match=rf"^prometheus at {p.url} unreachable after 3 tries: HTTP 503: query timed out"):
        client.query_range("max_over_time(vector(1)[7d:1s])", now, now, 60)
    assert [RETRY_LINE.match(x).group(4)[:28] for x in lines] == ["HTTP 503: query timed out in"] * 2, lines

    timed_out = threading.Event()
    orig = PromClient._once

    def once(client, path, q, post):
        try:
            return orig(client, path, q, post)
        except Transient as e:
            if str(e).startswith("HTTP "):
                timed_out.set()
            raise

    monkeypatch.setattr(PromClient, "_once", once)

    def fault(done):
        _when(timed_out, done)
        time.sleep(1)  # at least one retry of it too
        p.stop()
        p.start()

    retries = _heals(prom, clean, tmp_path, capsys, fault, retries=6, backoff_s=0.5)
    assert any(e in ("HTTP 503: query timed out in expression evaluation",
                     "HTTP 422: expanding series: context deadline exceeded") for _, _, e in retries), retries


@needs_prometheus
def test_prometheus_4xx_is_not_retried(prom):
    """A query the server rejects (HTTP 400 bad_data) cannot heal: one request, no retry line."""
    _, p = prom
    lines = []
    client = PromClient(p.url, retry=Retry(3, 0.01, "test", log=lines.append))
    with pytest.raises(OpsError, match=r"refused the query \(HTTP 400\): .*parse error"):
        client.query_range("avg_over_time(", 0, 60, 60)
    assert lines == []


# --- sacct and the config, without servers ----------------------------------------------------------------------
def test_sacct_failures_that_heal_and_those_that_cannot(tmp_path):
    """A sacct that exits non-zero is run again; one that is not there, or complains about how it was
    called, is not. (The real sacct with its slurmdbd stopped: the Slurm test below.)"""
    from ops_warehouse.etl.sacct_run import run_sacct

    lines: list[str] = []
    retry = Retry(2, 0.01, f"sacct {CLUSTER}", log=lines.append)

    def fake(body: str) -> list[str]:
        f = tmp_path / f"sacct{len(list(tmp_path.iterdir()))}"
        f.write_text("#!/bin/sh\n" + body)
        f.chmod(0o755)
        return [str(f)]

    down = fake("echo 'sacct: error: Problem talking to the database: Connection refused' >&2; exit 1\n")
    with pytest.raises(OpsError, match=r"^sacct failed \(exit 1\): sacct: error: Problem talking to the database: "
                                       r"Connection refused \(after 3 tries\)$"):
        run_sacct(down, YESTERDAY, YESTERDAY, retry=retry)
    assert [RETRY_LINE.match(x).group(2) for x in lines] == ["1", "2"]
    # down for the first try only: the second one's output is loaded
    flag = tmp_path / "flag"
    once = fake(f"if [ ! -e {flag} ]; then touch {flag}; echo 'sacct: error: Munge encode failed' >&2; exit 1; fi\n"
                "echo 'JobIDRaw|JobID'\n")
    lines.clear()
    out = run_sacct(once, YESTERDAY, YESTERDAY, retry=retry)
    assert out.read_text() == "JobIDRaw|JobID\n" and len(lines) == 1
    out.unlink()
    lines.clear()
    usage = fake("echo \"sacct: invalid option -- 'Z'\" >&2; echo 'Try \"sacct --help\"' >&2; exit 1\n")
    with pytest.raises(OpsError, match=r"^sacct failed \(exit 1\)"):
        run_sacct(usage, YESTERDAY, YESTERDAY, retry=retry)
    with pytest.raises(OpsError, match="not found"):
        run_sacct([str(tmp_path / "nowhere")], YESTERDAY, YESTERDAY, retry=retry)
    assert lines == []


def test_retry_settings_in_the_config(tmp_path):
    from ops_warehouse.config import load_config

    cfg = tmp_path / "ops.toml"
    cfg.write_text("[nightly.capacity]\ninventory = \"x\"\n")
    c = load_config(cfg)
    # the defaults: 10 + 20 + 40 + 80 s of patience for a source that stays away
    assert (c.nightly_retries, c.nightly_backoff_s) == (4, 10.0)
    assert sum(Retry(c.nightly_retries, c.nightly_backoff_s).wait_s(a) for a in range(1, 5)) == 150
    cfg.write_text("[nightly]\nretries = 0\nbackoff_s = 2\n[nightly.telemetry]\nsource = \"prometheus\"\n"
                   "url = \"http://x\"\ntimeout_s = 5\n")
    c = load_config(cfg)
    assert (c.nightly_retries, c.nightly_backoff_s) == (0, 2.0)
    for bad, msg in (("retries = -1", "nightly.retries"), ("retries = 1.5", "nightly.retries"),
                     ('backoff_s = "5"', "nightly.backoff_s"), ("backoff_s = -1", "nightly.backoff_s"),
                     ("[nightly.telemetry]\ntimeout_s = 0", "nightly.telemetry.timeout_s")):
        cfg.write_text(f"[nightly]\n{bad}\n")
        with pytest.raises(OpsError, match=msg):
            load_config(cfg)


# --- Slurm ------------------------------------------------------------------------------------------------
@needs_slurm
def test_slurm_database_and_slurmdbd_down(tmp_path, slurm):
    """MariaDB and slurmdbd stopped under the slurmdbd source and the sacct source: both fail after their
    retries, capacity loads, exit 1; both back, the next run has the job rows of a clean run."""
    sc = slurm  # the run's cluster (tests/conftest.py), emptied of other modules' jobs
    sc.forget_jobs()
    for user, part, gpus in (("alice", "h100", 1), ("bob", "h200", 2), ("alice", "h100", 4)):
        sc.sbatch("-p", part, f"--gres=gpu:{part}:{gpus}", "--wrap", "sleep 1", user=user)
    sc.wait_jobs_done()
    # a day back: into the window the sacct source reads (up to yesterday); the slurmdbd source
    # reads by modification time, which stays
    shift = ";".join(f"UPDATE slurm_acct_db.{slurm_harness.CLUSTER}_{t} SET {c} = {c} - 86400 WHERE {c} != 0"
                     for t, cols in (("job_table", ("time_submit", "time_eligible", "time_start", "time_end")),
                                     ("step_table", ("time_start", "time_end"))) for c in cols)
    sc.sql(shift + ";")
    inventory = tmp_path / "inventory.csv"
    inventory.write_text("node,gpu_model,gpus,partition,in_service_date\n" + "".join(
        f"{n},{m},8,{m},2020-01-01\n" for n, m in slurm_harness.NODES.items()))

    def config(name: str) -> dict:
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(
            f'[warehouse]\ndsn = "chdb://{tmp_path / name}"\n[sacct]\ncluster = "{slurm_harness.CLUSTER}"\n'
            "[nightly]\nretries = 2\nbackoff_s = 0.2\n"
            f'[[nightly.slurm]]\ncluster = "{slurm_harness.CLUSTER}"\nsource = "slurmdbd"\n'
            f'db = "mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{sc.mysql_port}/slurm_acct_db"\n'
            f'[[nightly.slurm]]\ncluster = "{slurm_harness.CLUSTER}"\nsource = "sacct"\n'
            f'[nightly.capacity]\ncluster = "{slurm_harness.CLUSTER}"\ninventory = "{inventory}"\n')
        return {"OPS_CONFIG": str(cfg), "OPS_WAREHOUSE": "", "SLURM_CONF": sc.env["SLURM_CONF"],
                "OPS_SLURMDBD_PASSWORD": slurm_harness.READ_ONLY_PASSWORD}

    r = ops("etl", "nightly", env=config("clean"))
    assert r.stdout.count(": ok ") == 3 and "(3 job runs, 3 steps)" in r.stdout, r.stdout
    clean = warehouse_checksums(tmp_path / "clean")
    assert clean["slurm_job_run"][0] == 3

    env = config("wh")
    sc.stop_slurmdbd()
    sc.stop_mariadb()
    try:
        r = ops("etl", "nightly", env=env, check=False)
    finally:
        sc.start_mariadb()
        sc.start_slurmdbd()
    assert r.returncode == 1, r.stdout + r.stderr
    failed = [line for line in r.stderr.splitlines() if line.startswith("ops-report: nightly source failed:")]
    assert len(failed) == 2, r.stderr
    assert failed[0].startswith(f"ops-report: nightly source failed: slurmdbd {slurm_harness.CLUSTER} ")
    assert "after 3 tries: Code: 279" in failed[0] and "Can't connect" in failed[0]
    assert failed[1].startswith(f"ops-report: nightly source failed: sacct {slurm_harness.CLUSTER} ")
    assert "Problem talking to the database" in failed[1] and "(after 3 tries)" in failed[1]
    retries = _retry_lines(r.stderr)
    assert [(s, a) for s, a, _ in retries] == [
        (f"{k} {slurm_harness.CLUSTER}", a) for k in ("slurmdbd", "sacct") for a in (1, 2)], r.stderr
    assert f"nightly capacity {slurm_harness.CLUSTER} whole files: ok" in r.stdout
    assert slurm_harness.READ_ONLY_PASSWORD not in r.stdout + r.stderr
    from ops_warehouse.config import Config
    from ops_warehouse.etl.watermarks import watermark
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    w = open_warehouse(Config(dsn=f"chdb://{tmp_path / 'wh'}"), migrate=False)
    try:
        log = w.query_rows("SELECT source_kind, status FROM etl_run_log WHERE source_kind LIKE 'nightly:%' "
                           "ORDER BY started_at")
        assert log == [("nightly:slurmdbd", "failed"), ("nightly:sacct", "failed"), ("nightly:capacity", "ok")]
        assert w.query_rows("SELECT count() FROM slurm_job_run")[0][0] == 0
        assert watermark(w, f"nightly:sacct:{slurm_harness.CLUSTER}") is None
        assert not w.query_rows("SELECT source FROM etl_watermark WHERE source LIKE 'slurmdbd:%'")
    finally:
        close_embedded()

    r = ops("etl", "nightly", env=env, check=False)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    got = warehouse_checksums(tmp_path / "wh")
    for t in ("slurm_job_run", "slurm_job_step", "node_inventory"):
        assert got[t] == clean[t], t
    assert got == clean  # node events and reservations too: nothing lost, nothing doubled
    _not_retried(sc)
    print(f"\n  Slurm: {len(retries)} retries: " + "; ".join(sorted({e[:60] for _, _, e in retries})))


def _not_retried(sc) -> None:
    """With the database up: a wrong password, and an SQL error in the query (a cluster without tables),
    fail at once, no retry."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl.slurmdbd_source import load_slurmdbd
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    url = f"mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{sc.mysql_port}/slurm_acct_db"
    lines: list[str] = []
    retry = Retry(3, 0.01, "slurmdbd x", log=lines.append)
    wh = open_warehouse(Config(dsn=f"chdb://{sc.base / 'wh_not_retried'}"))
    try:
        with pytest.raises(OpsError, match="Access denied"):
            load_slurmdbd(wh, url, None, None, cluster=slurm_harness.CLUSTER, password="wrong", retry=retry)
        with pytest.raises(OpsError, match=r"reading mysql://.*nosuch_job_table"):
            load_slurmdbd(wh, url, None, None, cluster="nosuch", password=slurm_harness.READ_ONLY_PASSWORD,
                          retry=retry)
    finally:
        close_embedded()
    assert lines == []


def test_standalone_etl_sacct_retries_as_the_config_says(tmp_path):
    """`ops-report etl sacct --from/--to` (an operator by hand) is as patient as the nightly run: the
    config's [nightly] retries, one stderr line each, then one error line."""
    from tests.cli_runner import ops

    fake = tmp_path / "sacct"
    fake.write_text("#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n")
    fake.chmod(0o755)
    cfg = tmp_path / "ops.toml"
    cfg.write_text(f'[sacct]\ncommand = ["{fake}"]\n[nightly]\nretries = 2\nbackoff_s = 0.01\n')
    p = ops("--config", str(cfg), "--warehouse", f"chdb://{tmp_path / 'wh'}", "etl", "sacct", "--from",
            str(YESTERDAY), "--to", str(YESTERDAY), check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 3, p.stderr
    assert [RETRY_LINE.match(x).group(2) for x in lines[:2]] == ["1", "2"]
    assert lines[2].startswith("ops-report: error: sacct failed (exit 1)") and "(after 3 tries)" in lines[2]
