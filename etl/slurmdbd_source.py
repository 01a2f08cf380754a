"""slurmdbd's MariaDB/MySQL database as a source: how large sites read years of accounting without making
slurmdbd answer sacct calls.

The engine reads the database itself (the `mysql()` table function) with a read-only user, and
sql/staging/slurmdbd_records.sql turns the job and step tables into the records sacct would print for the
same jobs (decoding epoch times, TRES id lists, raw exit codes and state words with the SQL functions of
sql/functions/slurm_decoding.sql). From there the sacct path's normalization and staging take over, so both
sources give the same warehouse facts. Node events (`<cluster>_event_table`) and reservations
(`<cluster>_resv_table`) go to node_event and reservation.

The password comes from ``OPS_SLURMDBD_PASSWORD`` or the config (``[slurmdbd] password``), never from the
command line; it travels to the engine as a query parameter and appears in no log or error message.
"""

from __future__ import annotations

import grp
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from urllib.parse import unquote, urlsplit

import polars as pl
from ops_warehouse.dsn import dsn_secret
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.grains import history_as_of, refresh_after_jobs
from ops_warehouse.etl.hostlist import expand_one
from ops_warehouse.etl.normalize import QUARANTINE_SCHEMA, TimeWindow, normalize
from ops_warehouse.etl.retry import Retry, Transient
from ops_warehouse.etl.run_log import logged_run
from ops_warehouse.etl.sacct_load import LoadResult, stage_job_frames
from ops_warehouse.etl.staging import load_frames, staged
from ops_warehouse.etl.watermarks import set_extracted_through, set_watermark, watermark
from ops_warehouse.sqlfiles import split_statements, sql_text

_MYSQL = re.compile(r"\{\{mysql (\w+)\}\}")
NOT_INCREMENTAL = 2**64 - 1  # modified_since that selects by the window alone
# re-read this much before the last change seen: rows committed out of order by slurmdbd's agent land too
OVERLAP_S = 600
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class DbUrl:
    host: str
    port: int
    database: str
    user: str

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:  # what logs and the run log show: never a password
        return f"mysql://{self.user}@{self.host}:{self.port}/{self.database}"


def parse_db_url(url: str) -> DbUrl:
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb"):
        raise OpsError(f"--db must be mysql://USER@HOST:PORT/DBNAME, not {parts.scheme or url!r}")
    if parts.password is not None or dsn_secret(url):  # the user part or a password= parameter (core/dsn.py)
        raise OpsError("--db must not hold a password (it would show in the process list): put it in "
                       "OPS_SLURMDBD_PASSWORD or the config's [slurmdbd] password")
    try:
        port = parts.port or 3306
    except ValueError:
        port = None
    if not parts.username or not parts.hostname or not parts.path.strip("/") or port is None:
        raise OpsError("--db must be mysql://USER@HOST:PORT/DBNAME (user, host, a port number and database name)")
    return DbUrl(parts.hostname, port, parts.path.strip("/"), unquote(parts.username))


def db_password(cfg) -> str:
    pw = os.environ.get("OPS_SLURMDBD_PASSWORD")
    if pw is None:
        pw = getattr(cfg, "slurmdbd_password", None)
    if pw is None:
        raise OpsError("no password for the slurmdbd database: set OPS_SLURMDBD_PASSWORD or [slurmdbd] password "
                       "in the config (a file only you can read)")
    return pw


def _render(sql: str, cluster: str) -> tuple[str, dict]:
    """{{mysql name}} -> the engine's mysql() table function, every argument a query parameter."""
    params: dict[str, str] = {}

    def one(m: re.Match) -> str:
        name = m.group(1)
        table = name if name in ("tres_table", "qos_table") else f"{cluster}_{name}"
        params[f"t_{name}"] = table
        return f"mysql({{db_address:String}}, {{db_name:String}}, {{t_{name}:String}}, {{db_user:String}}, " \
               f"{{db_password:String}})"

    return _MYSQL.sub(one, sql), params


# failures of the connection to the database, which heal (MariaDB restarting, the network back): retried;
# anything else (an SQL error in our query, a wrong password or database name) is raised at once
_TRANSIENT = re.compile(r"\b(ALL_CONNECTION_TRIES_FAILED|SOCKET_TIMEOUT|NETWORK_ERROR)\b|ERROR 20(02|03|06|13|55)\b|"
                        r"Can't connect|Lost connection|gone away|Connection refused|Connection reset|"
                        r"Too many connections|[Tt]imeout|timed out")
_PERMANENT = re.compile(r"ERROR 10(44|45|49)\b|Access denied|Unknown database")


def _query(wh, db: DbUrl, password: str, cluster: str, relpath: str, params: dict,
           retry: Retry | None = None) -> pl.DataFrame:

    (stmt,) = split_statements(sql_text(relpath))
    sql, tables = _render(stmt, cluster)

    def once() -> pl.DataFrame:
        try:
            return pl.from_arrow(wh.query_arrow(sql, {
                **params, **tables, "db_address": db.address, "db_name": db.database, "db_user": db.user,
                "db_password": password, "cluster": cluster}))
        except Exception as e:
            msg = str(e).replace(password, "***") if password else str(e)
            first = next((ln for ln in msg.splitlines() if "Exception" in ln or "Code:" in ln),
                         msg.splitlines()[0] if msg.strip() else type(e).__name__)
            if _TRANSIENT.search(msg) and not _PERMANENT.search(msg):
                raise Transient(first[:300]) from None
            raise OpsError(f"reading {db}: {first[:300]}") from None

    return (retry or Retry()).call(once, f"reading {db}")


def read_records(wh, db: DbUrl, password: str, cluster: str, w0: datetime, w1: datetime,
                 modified_since: int = NOT_INCREMENTAL, retry: Retry | None = None,
                 inx_range: tuple[int, int] = (0, 2**64 - 1), first_line: int = 1) -> pl.DataFrame:
    """The sacct-shaped records (text fields, line_no, raw) of the jobs and steps of [w0, w1) whose
    job_db_inx lies in ``inx_range`` (after, upto]: one page of a load, its records numbered from
    ``first_line`` (the load's count so far: a record's number is its place in the whole read)."""
    if not _NAME.match(cluster):
        raise OpsError(f"not a Slurm cluster name: {cluster!r}")
    df = _query(wh, db, password, cluster, "staging/slurmdbd_records.sql", {
        "from_ts": w0, "to_ts": w1, "now_ts": datetime.now(timezone.utc), "modified_since": modified_since,
        "after_inx": inx_range[0], "upto_inx": inx_range[1]}, retry)
    # sacct prints the group's name as this host resolves it (NSS); the database holds the gid
    names = {}
    for gid in df.get_column("gid").unique().to_list():
        try:
            names[gid] = grp.getgrgid(int(gid)).gr_name
        except (ValueError, KeyError, OverflowError):
            names[gid] = gid or ""
    return df.with_columns(
        group=pl.col("gid").replace_strict(names, default=pl.col("gid")),
        line_no=pl.int_range(first_line, first_line + pl.len(), dtype=pl.UInt64),
        raw=pl.concat_str([pl.lit(f"{cluster}_job_table job_db_inx="), pl.col("db_inx").cast(pl.String),
                           pl.lit(" "), pl.col("jobidraw")]),
    ).drop("db_inx", "step_order")


def inx_pages(first: int | None, last: int | None, page_jobs: int) -> list[tuple[int, int]]:
    """(after, upto] ranges of job_db_inx covering [first, last], ``page_jobs`` ids each (slurmdbd's ids are
    an auto-increment: a page holds at most that many jobs)."""
    if not last or first is None or last < first:  # an empty table: the engine's min/max of no rows are 0
        return []
    return [(a, min(a + page_jobs, last)) for a in range(first - 1, last, page_jobs)]


def watermark_key(db: DbUrl, cluster: str) -> str:
    return f"slurmdbd:{db}:{cluster}"


# jobs read from the database at a time: a page's records, normalized and staged, take a few hundred MB
PAGE_JOBS = 50_000


def load_slurmdbd(wh, url: str, w0: datetime | None, w1: datetime | None, *, cluster: str,
                  password: str | None = None, retry: Retry | None = None, refresh: bool = True,
                  page_jobs: int = PAGE_JOBS) -> LoadResult:
    """Jobs and steps, node events and reservations of ``cluster`` for [w0, w1) into the warehouse; with
    no window, incrementally: every job changed since the last load's newest change (less an overlap), and
    the node events and reservations of the days since. Each query to the database is tried again as
    ``retry`` says when the connection fails (default: not); the watermark moves only once all answered.
    ``refresh``: bring the hourly capacity grain up to date for the hours the load covers (etl/grains.py).
    The jobs are read ``page_jobs`` job_db_inx at a time, each page normalized and stored before the next is
    read: years of accounting load in the memory of a page (issue 50)."""

    db = parse_db_url(url)
    source = f"slurmdbd:{db}"
    result = LoadResult(source=source)
    started = time.time()
    with logged_run(wh, "slurmdbd", source, started) as run:
        old = history_as_of(wh)
        try:
            password = db_password(wh.cfg) if password is None else password
            _load(wh, db, password, cluster, w0, w1, retry, result, page_jobs)
        finally:
            result.seconds = time.time() - started
            run.count(result.records_read, result.loaded, result.quarantined)
        if result.extracted_through is not None:
            set_extracted_through(wh, cluster, source, result.extracted_through)
        if refresh:
            # node events and reservations change the hours they cover, which the window bounds
            refresh_after_jobs(wh, min((t for t in (result.first_ts, w0) if t is not None), default=None), old)
        # last: a load killed before its grains were refreshed (SIGKILL: nothing runs after it) leaves the mark
        # where it was, so the next incremental load reads its jobs again and refreshes them (before, the
        # rerun read only later changes and job_run missed the killed load's runs: CI, 2026-12-03)
        if result.newest_change is not None:
            set_watermark(wh, watermark_key(db, cluster), result.newest_change)
    return result


def _load(wh, db: DbUrl, password: str, cluster: str, w0: datetime | None, w1: datetime | None,
          retry: Retry | None, result: LoadResult, page_jobs: int = PAGE_JOBS) -> None:

    source = result.source
    since = NOT_INCREMENTAL
    job_window = (w0, w1)
    # how far the records are complete (the history's as-of time): a window's end, or now if earlier; an
    # incremental load, the database's newest change (stable when nothing changed, so reruns agree)
    result.extracted_through = min(w1, datetime.now(timezone.utc).replace(microsecond=0)) if w0 and w1 else None
    if w0 is None or w1 is None:
        mark = watermark(wh, watermark_key(db, cluster))
        since = 0 if mark is None else max(0, int(mark.timestamp()) - OVERLAP_S)
        w1 = datetime.now(timezone.utc)
        # an empty job window: the changed rows are selected (and the jobs still pending or running); node
        # events and reservations of the days since the mark
        job_window = (w1, w1)
        w0 = datetime.fromtimestamp(since, timezone.utc) - timedelta(days=1) if mark else datetime(1970, 1, 2, tzinfo=timezone.utc)
    # the newest change before reading: whatever changes while the load reads (or waits to retry) is newer
    # and read again next time, however long the retries take (the 10-minute overlap is not what covers it)
    newest = _query(wh, db, password, cluster, "staging/slurmdbd_mod_time.sql", {}, retry)
    first, last = _query(wh, db, password, cluster, "staging/slurmdbd_job_inx_range.sql", {}, retry).row(0)
    window = TimeWindow.of(wh.cfg)
    with staged(wh) as stage:
        for i, inx_range in enumerate(inx_pages(first, last, page_jobs)):
            records = read_records(wh, db, password, cluster, *job_window, modified_since=since, retry=retry,
                                   inx_range=inx_range, first_line=result.records_read + 1)
            if not records.height:
                continue
            runs, steps, q = normalize(records, tz="UTC", cluster=cluster, source=source, window=window)
            result.records_read += records.height
            result.saw_runs(runs)
            result.steps_loaded += steps.height
            result.quarantined += q.height
            for r in q.get_column("reason").to_list():
                result.reasons[r] = result.reasons.get(r, 0) + 1
            # a quarantined record's raw names its job_db_inx: unique across pages, so the copies' numbering
            # (stage_job_frames' CopyCounter, per page) cannot collide
            stage_job_frames(wh, stage, i, runs, steps, q.cast(QUARANTINE_SCHEMA), source)
            del records, runs, steps, q
    now = pl.lit(datetime.now(timezone.utc), dtype=pl.Datetime("ms", "UTC")).alias("loaded_at")
    events = _query(wh, db, password, cluster, "staging/slurmdbd_events.sql", {"from_ts": w0, "to_ts": w1}, retry)
    resv = _query(wh, db, password, cluster, "staging/slurmdbd_reservations.sql", {"from_ts": w0, "to_ts": w1}, retry)
    resv = resv.with_columns(nodes=pl.col("nodelist").map_elements(
        lambda h: expand_one(h) if h else [], return_dtype=pl.List(pl.String))).drop("nodelist")
    load_frames(wh, {"node_event": events.with_columns(now, source=pl.lit(source)),
                     "reservation": resv.with_columns(now, source=pl.lit(source))})
    result.events_loaded, result.reservations_loaded = events.height, resv.height
    if newest.height and newest.item() is not None:
        result.newest_change = newest.item()  # the watermark, moved by load_slurmdbd once the grains are refreshed
        if result.extracted_through is None:
            result.extracted_through = newest.item()
