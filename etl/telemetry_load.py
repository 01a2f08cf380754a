"""Telemetry day files into the warehouse: ``<root>/<family>/<YYYY-MM-DD>.parquet`` (or ``.csv``).

The families are the exporters' (``dcgm`` for dcgm-exporter, ``nic``, ``lustre``, ``ipmi`` and any other
folder of node-level metrics the catalog knows; a folder whose files have a ``jobid`` column holds Lustre
job_stats, loaded into ``lustre_job_io``: etl/lustre_jobs.py), each file exporter-shaped: a ``timestamp`` column, the
exporter's labels and one column per metric under the exporter's name (the generator writes this; so does a
VictoriaMetrics or Prometheus export turned wide). The engine reads the files itself
(etl/telemetry_insert.py, sql/staging/): a day at a time, the day before seeding its counters, then the hourly
rollups of the whole load once. Each next day's files are read and checked, on a handle of its own, while the
day's tables are written (``DaysAhead``): its writes wait for the day before's, its reads for nothing. A load
made of several calls (a backfill's chunks: etl/backfill.py) carries one ``DaysAhead`` across them, so that the
next call's first day is staged beside this call's last day's writes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import ExitStack
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.etl.metric_catalog import catalog
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, telemetry_counts, window_text
from ops_warehouse.etl.staging import staging_dir
from ops_warehouse.etl.telemetry_insert import ExporterFiles, StagedWindow, stage_window, write_window

GPU_FAMILY = "dcgm"
# the most days of samples loaded before their grains are refreshed (what one refresh holds in memory)
REFRESH_DAYS = 7
_LABELS_AS_TEXT = ("gpu", "UUID", "hpc_job", "device", "modelName", "Hostname", "instance", "port", "fs", "target", "component",
                   "jobid", "operation")


def _day_file(root: Path, family: str, d: date) -> Path | None:
    for ext in ("parquet", "csv"):
        p = root / family / f"{d:%Y-%m-%d}.{ext}"
        if p.is_file():
            return p
    return None


def _as_parquet(p: Path, stage: Path) -> Path:
    """CSV day files are converted once (labels stay text); Parquet is read where it lies."""
    if p.suffix != ".csv":
        return p
    df = pl.read_csv(p, infer_schema_length=10000, schema_overrides={c: pl.String for c in _LABELS_AS_TEXT})
    out = stage / f"{p.parent.name}-{p.stem}.parquet"
    df.with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC", time_unit="ms")).write_parquet(
        out, compression="uncompressed", statistics=False)
    return out


def _check_whole(p: Path) -> None:
    """A Parquet day file cut short (a copy in progress, a full disk) has no footer: say which file, in one
    line, before anything of the day is loaded."""
    if p.suffix != ".parquet":
        return
    try:
        pq.read_metadata(p)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OpsError(f"cannot read {p}: not a whole Parquet file ({first})") from None


@logged_load("telemetry", lambda a: f"file:{a['root']} {window_text(a)}", telemetry_counts)
def load_parquet_dir(wh, root: str | Path, date_from: date, date_to: date, *, cluster: str | None = None,
                     progress=None, refresh_days: int = REFRESH_DAYS, ahead: "bool | DaysAhead" = True,
                     ready: Callable[[date], None] | None = None, through: date | None = None) -> dict:
    """Load the exporter day files of whole days ``date_from`` .. ``date_to``, refreshing the grains after at
    most ``refresh_days`` days (1: after each day, as before 2026-12; bench/bench_telemetry_refresh.py).
    ``ahead``: each next day staged beside the day's writes (``DaysAhead``; False: one day after the other, on
    one handle, as before issue 51 round 8: bench/bench_backfill_days.py compares the two), or a ``DaysAhead``
    the caller holds across calls (a backfill's chunks): then a day this call's predecessor staged is taken
    rather than read again, and where ``through`` is after ``date_to`` (the last day of the caller's whole
    window) the day after ``date_to`` is staged beside this call's last writes and left staged for the next
    call. ``ready(day)``: returns once the day's files are whole, called before they are read (the demo's
    generator writing them beside)."""

    root = Path(root)
    if (root / "telemetry").is_dir():
        root = root / "telemetry"
    if not root.is_dir():
        raise OpsError(f"no telemetry folder at {root}")
    families = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "openmetrics")
    if not families:  # e.g. the dcgm/ folder itself given: nothing would load, and nothing would say so
        raise OpsError(f"{root}: no telemetry family folders in it (dcgm/, nic/, ipmi/, lustre/ with one "
                       "<YYYY-MM-DD>.parquet or .csv a day): give the folder above them")
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster_for_rows(wh, cluster)
    source = f"file:{root}"
    counts = {"gpu_rows": 0, "node_rows": 0, "xid_events": 0, "days": 0}
    days = (date_to - date_from).days + 1
    # the days staged: this call's, and the next call's first where the caller's window goes on
    staging = days + (isinstance(ahead, DaysAhead) and through is not None and through > date_to)
    unrefreshed: datetime | None = None  # the first day whose samples are in but not yet in the grains
    with ExitStack() as held:
        next_day = ahead if isinstance(ahead, DaysAhead) else held.enter_context(DaysAhead(wh, ahead and days > 1))
        stage = next_day.folder()

        def read(k: int, handle) -> StagedWindow:
            """Day k's files staged on ``handle`` (its converted CSV files in a folder of the day's own)."""
            d = date_from + timedelta(days=k)
            w0 = datetime.combine(d, datetime.min.time(), timezone.utc)
            if ready:
                ready(d)
            folder = stage / f"{d}"
            folder.mkdir(exist_ok=True)
            files = ExporterFiles()
            for fam in families:
                for day, seed in ((d, False), (d - timedelta(days=1), True)):
                    p = _day_file(root, fam, day)
                    if p is None:
                        continue
                    _check_whole(p)
                    csv, p = p, _as_parquet(p, folder)
                    if p != csv:  # its bad values are quarantined by the CSV's own path and line (a header first)
                        files.origin[p] = (str(csv), 2)
                    kind = "gpu" if fam == GPU_FAMILY else "job" if "jobid" in pq.read_schema(p).names else "node"
                    getattr(files, f"{kind}_seed" if seed else kind).append(p)
            return stage_window(handle, files, cat, cluster, source, (w0, w0 + timedelta(days=1)))

        def day_key(k: int) -> tuple:  # what a day staged by an earlier call must match to be taken
            return (str(root), cluster, date_from + timedelta(days=k))

        try:
            if not next_day.holds(day_key(0)):
                next_day.start(read, 0, day_key(0))
            for k in range(days):
                c = _write_day(wh, next_day, read, day_key, k, staging)
                d = date_from + timedelta(days=k)
                w0 = datetime.combine(d, datetime.min.time(), timezone.utc)
                for key, n in c.items():
                    counts[key] = counts.get(key, 0) + n
                counts["days"] += 1
                shutil.rmtree(stage / f"{d}", ignore_errors=True)  # converted CSV of this day and the day before
                unrefreshed = unrefreshed or w0
                # the hourly rollups and the grains of the days loaded so far, in one refresh: at the end, when a
                # report or notebook waits for the warehouse (it gets it whole, grains and samples agreeing), and
                # every REFRESH_DAYS days (a refresh of several days costs little more than one of a day: most of
                # it reads the runs' samples whatever the window; measured in docs/benchmarks.md)
                end = w0 + timedelta(days=1)
                if k == days - 1 or wh.others_waiting() or (end - unrefreshed).days >= refresh_days:
                    refresh_hourly(wh, unrefreshed, end)
                    unrefreshed = None
                    if wh.others_waiting():  # nothing staged ahead, the days' handles closed: the engine can close
                        next_day.close()
                        wh.between_steps()
                if progress:
                    progress(k + 1, days)
                if k + 1 < days and not next_day.pending():
                    next_day.start(read, k + 1, day_key(k + 1))
        except BaseException:
            next_day.close()  # a failed day: nothing of the next is kept staged, not even for a next call
            raise
    return counts


def _write_day(wh, next_day: "DaysAhead", read, day_key, k: int, staging: int) -> dict:
    """Day k's tables written from its stage, the next day (of ``staging`` days) staged beside the writes."""
    window = next_day.take()
    if k + 1 < staging and next_day.enabled and not wh.others_waiting():
        next_day.start(read, k + 1, day_key(k + 1))  # staged beside this day's writes (DaysAhead)
    return write_window(window)


class DaysAhead:
    """The next day's files staged while this day's tables are written (issue 51 item 3: a day's stage, its file
    reads and value checks, is about a third of its time, and reads nothing an earlier day writes; its tables,
    whose counter steps read the day before's last readings, are written in day order). The staging runs in a
    thread, so the engine works on both cores. A session takes one statement at a time (a server refuses a
    second in the same session), so the days take turns on two handles of their own
    (``Warehouse.another_handle``), each day written on the one that staged it (its temporary tables are that
    session's), and ``wh`` stays the calling thread's (the record of the days in, the refreshes).
    ``enabled=False`` (one day): on ``wh`` alone, in turn. Held across the calls of one load (a backfill's
    chunks: ``with DaysAhead(wh, True) as ahead``, each call given ``ahead=``), a chunk's first day is staged
    beside the chunk before's last writes (round 9: each chunk began with a day staged with nothing beside it);
    the staging folder (CSV days converted to Parquet) is the holder's too, so a day staged by one call is still
    whole for the next."""

    def __init__(self, wh, enabled: bool):
        self.wh = wh
        self.enabled = enabled
        self.handles: list = []  # the two handles the days take turns on, opened at their first use
        self.turn = 0  # which of them stages the next day
        self.pool = None
        self.future = None
        self.key = None  # the staged day's (root, cluster, day): a later call takes it only where they match
        self._folder = None
        self._held = ExitStack()

    def __enter__(self):
        return self

    def folder(self) -> Path:
        """The load's staging folder (its converted CSV days), made at first use, removed at the end."""
        if self._folder is None:
            self._folder = staging_dir(self.wh)
            self._held.callback(shutil.rmtree, self._folder, ignore_errors=True)
        return self._folder

    def holds(self, key: tuple) -> bool:
        """Whether the day ``key`` is staged (by an earlier call); what is staged for another day is dropped."""
        if self.future is not None and self.key != key:
            self._drop()
        return self.future is not None

    def start(self, read, k: int, key: tuple | None = None) -> None:
        self.key = key
        if not self.enabled:
            self.future = _done_now(read, k, self.wh)
            return
        if len(self.handles) < 2:
            self.handles.append(self.wh.another_handle())
        handle = self.handles[self.turn % 2]
        self.turn += 1
        if self.pool is None:
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="telemetry-stage")
        self.future = self.pool.submit(read, k, handle)

    def pending(self) -> bool:
        return self.future is not None

    def take(self) -> StagedWindow:
        future, self.future = self.future, None
        return future.result()

    def _drop(self) -> None:
        future, self.future = self.future, None
        if future is not None:
            try:
                future.result().drop()
            except BaseException:  # its own failure: the day is loaded again by the next run
                pass

    def close(self) -> None:
        """Drop what is staged ahead (a failed day's load) and close the handles of the days."""
        try:
            self._drop()
        finally:
            handles, self.handles = self.handles, []
            for h in handles:
                h.close()
            self.turn = 0

    def __exit__(self, *exc):
        try:
            self.close()
        finally:
            if self.pool is not None:
                self.pool.shutdown()
            self._held.close()


def _done_now(read, k: int, handle) -> Future:
    """Day k staged at once on the calling thread (one handle), as a future already done."""
    f: Future = Future()
    try:
        f.set_result(read(k, handle))
    except BaseException as e:
        f.set_exception(e)
    return f
