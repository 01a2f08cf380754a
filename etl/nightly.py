"""`ops-report etl nightly`: every configured source, each for the window since its watermark, for cron.

Sources come from the config:

    [[nightly.slurm]]            # one per Slurm cluster
    cluster = "ai1"
    source = "slurmdbd"          # or "sacct" (runs [sacct] command for the window), or "slurmrestd"
    db = "mysql://ops_ro@dbhost:3306/slurm_acct_db"   # slurmdbd only; password: OPS_SLURMDBD_PASSWORD
    # url = "http://slurmctld:6820"  # slurmrestd only: /slurmdb/v0.0.4x/jobs for the window, token SLURM_JWT

    [nightly.telemetry]
    source = "prometheus"        # or "file"
    url = "http://vm:8428"       # prometheus
    path = "/data/telemetry"     # file: <path>/<family>/<YYYY-MM-DD>.parquet
    cluster = "ai1"

    [nightly.capacity]           # files the site refreshes (scontrol / sacctmgr dumps, its inventory)
    cluster = "ai1"
    inventory = "/etc/ops/inventory.csv"
    events = "/var/spool/ops/events.psv"
    reservations = "/var/spool/ops/reservations.txt"

Windows: sacct and telemetry reload from two days before their watermark (late updates, and jobs still
running are re-read until they end) to yesterday; slurmdbd loads incrementally by modification time. `--from/--to` backfills a window instead. One source
failing does not stop the others; each is recorded in etl_run_log and the exit status says whether all
succeeded. A lock file keeps two runs from overlapping.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import one_refresh, refresh_pending
from ops_warehouse.etl.prometheus_source import PromClient, load_prometheus
from ops_warehouse.etl.retry import Retry
from ops_warehouse.etl.run_log import failure_text, log_run, logged_run
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.sacct_run import run_sacct
from ops_warehouse.etl.slurmdbd_source import load_slurmdbd
from ops_warehouse.etl.slurmrestd_source import fetch_jobs, token
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.etl.watermarks import days_since, extract_end, set_watermark
from ops_warehouse.progress import count_progress, file_progress, step_progress
from ops_warehouse.warehouse import embedded_path, open_warehouse

OVERLAP_DAYS = 2


@dataclass
class Source:
    kind: str  # sacct | slurmdbd | telemetry-file | telemetry-prometheus | capacity
    cluster: str
    params: dict = field(default_factory=dict)
    # whether the config names the cluster (the source's cluster or [sacct] cluster): else telemetry and
    # capacity rows go under the warehouse's one cluster of jobs, not the fallback name (etl/row_cluster.py);
    # the key and the log lines keep the name the source was configured with
    cluster_given: bool = True

    @property
    def rows_cluster(self) -> str | None:
        return self.cluster if self.cluster_given else None

    @property
    def key(self) -> str:
        return f"nightly:{self.kind}:{self.cluster}"


@dataclass
class Outcome:
    source: Source
    window: str
    status: str = "ok"
    detail: str = ""
    seconds: float = 0.0


def configured_sources(cfg) -> list[Source]:
    n = getattr(cfg, "nightly", {}) or {}
    out = []
    for s in n.get("slurm", []):
        kind = s.get("source", "sacct")
        if kind not in ("sacct", "slurmdbd", "slurmrestd"):
            raise OpsError(f"nightly.slurm source must be sacct, slurmdbd or slurmrestd, not {kind!r}")
        if kind == "slurmdbd" and not s.get("db"):
            raise OpsError("nightly.slurm with source = slurmdbd needs db = \"mysql://USER@HOST:PORT/DBNAME\"")
        if kind == "slurmrestd" and not s.get("url"):
            raise OpsError("nightly.slurm with source = slurmrestd needs url = \"http://HOST:6820\"")
        # slurmrestd's jobs answer is sacct --json's document for the same window: the sacct source, asked there
        params = {**s, "slurmrestd": s["url"]} if kind == "slurmrestd" else dict(s)
        out.append(Source("sacct" if kind == "slurmrestd" else kind, s.get("cluster", cfg.default_cluster), params))
    t = n.get("telemetry")
    if t:
        kind = t.get("source", "file")
        if kind not in ("file", "prometheus", "victoriametrics"):
            raise OpsError(f"nightly.telemetry source must be file, prometheus or victoriametrics, not {kind!r}")
        out.append(Source("telemetry-file" if kind == "file" else "telemetry-prometheus",
                          t.get("cluster", cfg.default_cluster), dict(t),
                          "cluster" in t or cfg.default_cluster_configured))
    c = n.get("capacity")
    if c:
        out.append(Source("capacity", c.get("cluster", cfg.default_cluster), dict(c),
                          "cluster" in c or cfg.default_cluster_configured))
    if not out:
        raise OpsError("no nightly sources configured: add [[nightly.slurm]], [nightly.telemetry] or "
                       "[nightly.capacity] to the config (docs/nightly.md)")
    return out


def lock_path(cfg) -> Path:

    p = embedded_path(cfg.dsn)
    if p is not None:
        return p.parent / f".{p.name}.nightly.lock"
    return Path(os.environ.get("XDG_RUNTIME_DIR") or Path.home() / ".cache") / "ops-warehouse-nightly.lock"


def _open_lock(path: Path) -> int:
    """The lock file opened for this run, or a one-line refusal: it sits in a folder others may write to
    (the warehouse's parent, the runtime folder), so a symbolic link, a file that is not a regular one or one
    of another user's is never followed or written (a link there would have the pid written over the file it
    points to). Made with mode 600."""
    refuse = f"the nightly lock {path} "
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OpsError(refuse + "is a symbolic link: remove it (the run writes its pid into the lock, and "
                           "would into whatever the link points to); this run did nothing") from None
        raise OpsError(refuse + f"cannot be opened: {e.strerror or e}; this run did nothing") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OpsError(refuse + "is not a regular file: remove it; this run did nothing")
        if st.st_uid != os.geteuid():
            raise OpsError(refuse + f"belongs to another user (uid {st.st_uid}): remove it; this run did nothing")
        if stat.S_IMODE(st.st_mode) != 0o600:
            os.fchmod(fd, 0o600)  # a lock made by an earlier version (mode 644)
    except BaseException:
        os.close(fd)
        raise
    return fd


class NightlyLock:
    """An exclusive, non-blocking lock: a second run exits at once instead of waiting or overlapping."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = _open_lock(self.path)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(self.fd, 64).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            raise OpsError(f"another ops-report etl nightly is running (pid {holder}, lock {self.path}); "
                           "this run did nothing") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _day_window(wh, s: Source, date_from: date | None, date_to: date | None) -> tuple[date, date]:

    if date_from and date_to:
        return date_from, date_to
    return days_since(wh, s.key, OVERLAP_DAYS)


def plan(wh, sources: list[Source], date_from: date | None, date_to: date | None) -> list[tuple[Source, str]]:
    out = []
    for s in sources:
        if s.kind == "slurmdbd" and not (date_from and date_to):
            out.append((s, "changed since the last load (mod_time)"))
        elif s.kind == "capacity":
            out.append((s, "whole files"))
        else:
            d0, d1 = _day_window(wh, s, date_from, date_to)
            out.append((s, f"{d0}..{d1}"))
    return out


@contextmanager
def _progress(s: Source, window: str, unit: str, log):
    """A bar on a terminal (days, or bytes of sacct output); under cron a log line at most every 10 s."""
    if sys.stderr.isatty():

        with (file_progress if unit == "bytes" else count_progress)(f"{s.kind} {s.cluster} {window}") as cb:
            yield cb
        return
    last = [time.time()]

    def cb(done: int, total: int) -> None:
        if time.time() - last[0] >= 10 and done < total:
            last[0] = time.time()
            log(f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%S} nightly {s.kind} {s.cluster} {window}: "
                f"{done}/{total} {unit}")

    yield cb


def _retry(cfg, s: Source):
    """How a network source retries: [nightly] retries, backoff_s (etl/retry.py); each retry a line on stderr."""

    return Retry(cfg.nightly_retries, cfg.nightly_backoff_s, f"{s.kind} {s.cluster}")


def _run_one(wh, s: Source, window: str, date_from: date | None, date_to: date | None, log=print) -> str:

    p = s.params
    if s.kind == "capacity":

        c = load_capacity(wh, inventory=p.get("inventory"), events=p.get("events"),
                          reservations=p.get("reservations"), cluster=s.rows_cluster,
                          slurmrestd=p.get("slurmrestd"))  # its token from SLURM_JWT, as for the command
        return ", ".join(f"{t} {n}" for t, n in c.items())
    if s.kind == "slurmdbd":

        w0 = w1 = None
        if date_from and date_to:
            w0 = datetime.combine(date_from, datetime.min.time(), timezone.utc)
            w1 = datetime.combine(date_to, datetime.min.time(), timezone.utc) + timedelta(days=1)
        r = load_slurmdbd(wh, p["db"], w0, w1, cluster=s.cluster, retry=_retry(wh.cfg, s))
        return (f"read {r.records_read}, loaded {r.loaded} ({r.jobs_loaded} job runs, {r.steps_loaded} steps), "
                f"quarantined {r.quarantined}, {r.events_loaded} node events, {r.reservations_loaded} reservations")
    d0, d1 = (date.fromisoformat(x) for x in window.split(".."))
    if s.kind == "sacct":

        through = extract_end(d1)
        if p.get("slurmrestd"):
            start = datetime.combine(d0, datetime.min.time(), timezone.utc)
            path = fetch_jobs(p["slurmrestd"], start, start + timedelta(days=(d1 - d0).days + 1),
                              Path(tempfile.mkdtemp(prefix="ops-slurmrestd-")), token())[0]
        else:
            path = run_sacct(wh.cfg.sacct_command, d0, d1, retry=_retry(wh.cfg, s))
        try:
            with _progress(s, window, "bytes", log) as progress:
                r = load_sacct(wh, path, cluster=s.cluster, source=f"sacct:{s.cluster}", label=f"sacct {d0}..{d1}",
                               progress=progress, extracted_through=through)
        finally:
            path.unlink(missing_ok=True)
            if path.parent.name.startswith("ops-slurmrestd-"):
                path.parent.rmdir()
        detail = f"read {r.records_read}, loaded {r.loaded}, quarantined {r.quarantined}"
    elif s.kind == "telemetry-file":

        with _progress(s, window, "days", log) as progress:
            c = load_parquet_dir(wh, p["path"], d0, d1, cluster=s.rows_cluster, progress=progress)
        detail = f"{c['days']} days, {c['gpu_rows']} GPU samples, {c['node_rows']} node samples"
    else:

        with _progress(s, window, "days", log) as progress:
            c = load_prometheus(wh, p["url"], d0, d1, step_s=int(p.get("step_s", 60)), cluster=s.rows_cluster,
                                progress=progress, client=PromClient(p["url"], timeout_s=float(p.get("timeout_s", 60)),
                                                                     retry=_retry(wh.cfg, s)))
        detail = f"{c['days']} days, {c['gpu_rows']} GPU samples, {c['node_rows']} node samples"
    set_watermark(wh, s.key, datetime.combine(d1 + timedelta(days=1), datetime.min.time(), timezone.utc))
    return detail


@contextmanager
def _spinner(s: Source, window: str):
    """On a terminal, which source is loading (sources without a count of their own: slurmdbd, capacity)."""
    if not sys.stderr.isatty() or s.kind not in ("slurmdbd", "capacity"):
        yield
        return

    with step_progress(f"{s.kind} {s.cluster} {window}"):
        yield


def run_nightly(cfg, *, date_from: date | None = None, date_to: date | None = None, dry_run: bool = False,
                log=print) -> list[Outcome]:
    """Run every configured source; returns one outcome per source (never raises for a failing source)."""

    sources = configured_sources(cfg)
    cfg.purpose = "nightly load"
    # the sources' loads refresh the hourly grains once, at the end, for every hour any of them changed
    # (etl/grains.py: one_refresh; a source's sacct and telemetry change the same hours)
    with NightlyLock(lock_path(cfg)), open_warehouse(cfg) as wh, one_refresh(wh):
        outcomes = []
        for s, window in plan(wh, sources, date_from, date_to):
            if wh.others_waiting():  # each source's load is whole: a report waiting for the warehouse goes
                refresh_pending(wh)  # first, grains and samples agreeing
            wh.between_steps()
            o = Outcome(s, window)
            if dry_run:
                o.status, o.detail = "dry-run", "would load"
            else:
                t0 = time.time()
                log(f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%S} nightly {s.kind} {s.cluster} {window}: start")
                # the source's row says failed for any failure: one it survives (the others go on), or one that
                # ends the run (SIGINT: raised again once logged)
                with logged_run(wh, f"nightly:{s.kind}", f"{s.cluster} {window}", t0) as run:
                    try:
                        with _spinner(s, window):
                            o.detail = _run_one(wh, s, window, date_from, date_to, log)
                    except Exception as e:  # one source failing must not stop the others
                        o.status = "failed"
                        o.detail = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
                        run.failed(o.detail)
                    o.seconds = time.time() - t0
            log(f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%S} nightly {s.kind} {s.cluster} {window}: "
                f"{o.status} {o.detail} ({o.seconds:.1f} s)")
            outcomes.append(o)
        # the grains' one refresh, after the last source: a failure of it gets a run-log row as a source's does
        # (before, it left run_nightly with nothing on record), then ends the run; one_refresh's exit tries the
        # hours again (they stay pending until refreshed)
        t0 = time.time()
        try:
            refresh_pending(wh)
        except BaseException as e:
            log_run(wh, "nightly:grains", "hourly grains", t0, status="failed", error=failure_text(e))
            raise
        return outcomes
