"""Taking back a sacct load that failed: the warehouse is left as it was before the load (issue 27).

A sacct load writes its job runs, steps and quarantined lines chunk by chunk (etl/sacct_load.py), then brings
the grains up to date (etl/grains.py). When anything fails on the way (the engine refusing an insert or the
refresh, a header further down the file refused, SIGINT), the rows the load wrote are deleted and the rows
they replaced are written back as they were: a run's earlier version, a step, a bad line read before. Before
that, a failed load kept its rows: a job dated 2099 failed its load on the grains' refresh, stayed in
slurm_job_run, and failed every later load and `ops-report etl capacity` the same way.

How: each chunk's keys are kept in a file of the load's own (a run: cluster, job id, submit time; a step:
cluster, job id, step id, start time; a quarantined line: source, text, reason, occurrence). Before a chunk is
inserted, the rows of the warehouse it will replace are copied aside, in the engine, to a table of the load's
own (etl_undo_<host>_<pid>_<random>_before_<table>; in process, with the embedded engine, to a Native file of
the load's staging folder, the chunk's keys read from its own Parquet file: a nightly file of one chunk makes
no scratch table), but only when the chunk reaches a partition that held rows before the load began (a
quarantined line: a source that had some): a first load of new months copies nothing and costs a look at
system.parts. Taking back deletes every key the load wrote and inserts the copies,
then, when the load had begun its refresh, rebuilds job_run, the history's as-of time and the hourly grains for
the history as it is again (grains.refresh_all_jobs: a failure path, not a fast one). The
load's tables are dropped when it ends; those of a process that no longer exists (killed with SIGKILL), by the
next load. On a ClickHouse cluster (deployment = "cluster") nothing is kept and nothing taken back: the
shards' tables cannot be deleted from through one server's scratch table.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import uuid
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.etl import grains
from ops_warehouse.etl.staging import staging_dir
from ops_warehouse.processes import process_alive

# table -> (its key columns, the time column its partitions are months of, or None: keyed by source)
KEYS = {
    "slurm_job_run": (("cluster", "job_id", "submit_ts"), "submit_ts"),
    "slurm_job_step": (("cluster", "job_id", "step_id", "start_ts"), "start_ts"),
    "etl_quarantine": (("source", "raw", "reason", "occurrence"), None),
}


def _final_rows(table: str) -> str:
    return f"SELECT * FROM {table} FINAL"


# the rows as queries see them (one version a key), of each table a load writes (by literal name: the tables
# read with FINAL are checked to be shard-local on a cluster, tests/test_cluster_schema.py)
_FINAL_ROWS = {"slurm_job_run": _final_rows("slurm_job_run"), "slurm_job_step": _final_rows("slurm_job_step"),
               "etl_quarantine": _final_rows("etl_quarantine")}
_PREFIX = "etl_undo_"
_STALE = timedelta(days=2)  # another host's tables: left for this long (its process may still be loading)


def _host() -> str:
    return f"{zlib.crc32(socket.gethostname().encode()):08x}"


class Undo:
    """What one load wrote and what it replaced, to take back if it fails. ``before_insert`` is called with
    each chunk's frames before they are inserted; ``take_back`` when the load fails; ``close`` always."""

    def __init__(self, wh, source: str):
        self.wh, self.source = wh, source
        self.enabled = getattr(wh.cfg, "deployment", "single") != "cluster"
        self.name = f"{_PREFIX}{_host()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.files: dict[str, list[Path]] = {t: [] for t in KEYS}
        self.before_files: dict[str, list[Path]] = {t: [] for t in KEYS}  # embedded: the rows replaced, by chunk
        self.uploaded: dict[str, int] = {t: 0 for t in KEYS}
        self.made: set[str] = set()  # scratch tables made
        self.stage: Path | None = None
        self.started = datetime.now(timezone.utc)
        self.extract: tuple[str, str, datetime | None] | None = None
        self.held: dict[str, set[int]] = {}  # the months of each table's partitions that held rows before
        self.quarantine_held = False
        if not self.enabled:
            return
        self.held = {t: set() for t, (_, ts) in KEYS.items() if ts is not None}
        # what a load looks up before it writes, in one statement (three before: each statement costs a small
        # load 1-3 ms of its own whatever it reads; docs/benchmarks.md, "Issue 50: sacct loads in bounded
        # memory", round 8): the scratch tables left behind, the months that held rows, the quarantine held
        tables, parts, self.quarantine_held = wh.query_rows(
            f"SELECT ({_LEFT_BEHIND}), (SELECT groupUniqArray((table, partition_id)) FROM system.parts "
            "WHERE database = currentDatabase() AND table IN {t:Array(String)} AND active AND rows > 0), "
            "(SELECT count() > 0 FROM etl_quarantine WHERE source = {s:String})",
            {"p": _PREFIX, "t": list(self.held), "s": source})[0]
        self.quarantine_held = self.quarantine_held == 1
        _drop_stale(wh, tables)
        self.stage = staging_dir(wh)
        for table, part in parts:
            if str(part).isdigit():
                self.held[table].add(int(part))

    # ------------------------------------------------------------------------------------------ the load
    def before_insert(self, i: int, frames: dict[str, pl.DataFrame]) -> None:
        """Keep chunk ``i``'s keys, and copy aside the rows of the warehouse it will replace."""
        if not self.enabled:
            return
        for table, df in frames.items():
            if table not in KEYS or df is None or not df.height:
                continue
            cols, ts = KEYS[table]
            p = self.stage / f"{table}-{i:05d}.parquet"
            df.select(*cols).with_columns(_chunk=pl.lit(i, pl.UInt32)).write_parquet(p, statistics=False)
            self.files[table].append(p)
            if ts is None:
                if not self.quarantine_held:
                    continue
                where = "source = {s:String}"
                params = {"s": self.source}
            else:
                months = set(df.select((pl.col(ts).dt.year() * 100 + pl.col(ts).dt.month()).unique())
                             .to_series().drop_nulls().to_list())
                if not months & self.held[table]:
                    continue  # no row of these months was there before the load: nothing to replace
                lo, hi = df.select(pl.col(ts).min().alias("lo"), pl.col(ts).max().alias("hi")).row(0)
                where = f"{ts} >= {{lo:DateTime('UTC')}} AND {ts} <= {{hi:DateTime('UTC')}}"
                params = {"lo": lo, "hi": hi}
            key = ", ".join(cols)
            if self.wh.embedded:
                # in process the engine reads the chunk's key file and writes the rows it replaces to a file of
                # the load's own: no scratch table to make, fill and drop for a load of one chunk (a nightly
                # file: 8 statements of the 34 it cost; docs/benchmarks.md, "Issue 50", round 5). Native keeps
                # every column's type as the table has it, for take_back to insert as it was.
                out = self.stage / f"before-{table}-{i:05d}.native"
                into, mine = "FUNCTION file({out:String}, Native)", f"SELECT {key} FROM file({{keys:String}}, Parquet)"
                params = {**params, "keys": str(p.resolve()), "out": str(out.resolve())}
                self.before_files[table].append(out)
            else:
                self._made(table, "before")
                into, mine = f"{self.name}_before_{table}", f"SELECT {key} FROM {self.name}_keys_{table} WHERE _chunk = {i}"
            if i > 0 or not self.wh.embedded:  # (in process a first chunk's keys need not be in the engine)
                self._upload(table)
            # of the earlier chunks' keys, those this chunk has too: the set the engine builds is a chunk's, not
            # the load's, which grew with the file on a reload (a first chunk has no earlier ones)
            earlier = "" if i == 0 else (f"AND ({key}) NOT IN (SELECT {key} FROM {self.name}_keys_{table} "
                                         f"WHERE _chunk < {i} AND ({key}) IN ({mine}))")
            self.wh.command(f"INSERT INTO {into} {_FINAL_ROWS[table]} WHERE {where} AND ({key}) IN ({mine}) {earlier}",
                            params)

    def replace_source(self) -> tuple[datetime, datetime] | None:
        """The rows ``source`` holds that this load did not write (an earlier load of the file in another time
        zone: every time shifted, so every key another), deleted: copied aside first, so that a failure
        after it brings them back too. Returns the span of the runs deleted (earliest start or submit, latest
        time a record of them describes), for the grains to forget them, or None."""
        if not self.enabled:
            return None
        span = None
        for table, (cols, _) in KEYS.items():
            self._upload(table)
            self._made(table, "before")
            key = ", ".join(cols)
            where = f"source = {{s:String}} AND ({key}) NOT IN (SELECT {key} FROM {self.name}_keys_{table})"
            gone = f"{self.name}_gone_{table}"
            self.wh.command(f"CREATE TABLE {gone} ENGINE = MergeTree ORDER BY tuple() AS "
                            f"{_FINAL_ROWS[table]} WHERE {where}", {"s": self.source})
            self.made.add(gone)
            if table == "slurm_job_run":
                lo, hi, n = self.wh.query_rows(
                    f"SELECT min(coalesce(start_ts, submit_ts)), max(greatest(as_of_ts, ifNull(end_ts, as_of_ts))), "
                    f"count() FROM {gone}")[0]
                if n:
                    span = (lo.replace(tzinfo=timezone.utc), hi.replace(tzinfo=timezone.utc))
            if self.wh.query_rows(f"SELECT count() FROM {gone}")[0][0]:
                self.wh.command(f"INSERT INTO {self.name}_before_{table} SELECT * FROM {gone}")
                _delete(self.wh, table, f"({key}) IN (SELECT {key} FROM {gone})")
                if table == "slurm_job_run":
                    _delete(self.wh, "job_run", f"({key}) IN (SELECT {key} FROM {gone})")
        return span

    # --------------------------------------------------------------------------------------- the failure
    def note_extract(self, cluster: str, source: str) -> None:
        """The load is about to record how far ``source`` was read (etl_source_extract): keep what it said."""
        if self.enabled:
            prev = self.wh.query_rows("SELECT max(extracted_through), count() FROM etl_source_extract FINAL "
                                      "WHERE cluster = {c:String} AND source = {s:String}",
                                      {"c": cluster, "s": source})[0]
            self.extract = (cluster, source, prev[0] if prev[1] else None)

    def take_back(self, grains_touched: bool) -> None:
        """Delete what the load wrote, write back what it replaced; with ``grains_touched`` (the load had
        begun bringing the grains up to date), rebuild them for the history as it is again, and delete what
        its refresh wrote outside it. Never raises: a warning says what could not be done, and the load's own
        error is what the caller raises."""
        if not self.enabled:
            return
        try:
            for table, (cols, _) in KEYS.items():
                key = ", ".join(cols)
                if self.files[table]:
                    self._upload(table)
                    _delete(self.wh, table, f"({key}) IN (SELECT {key} FROM {self.name}_keys_{table})")
                    if table == "slurm_job_run" and grains_touched:  # (job_run is written by the refresh only)
                        _delete(self.wh, "job_run", f"({key}) IN (SELECT {key} FROM {self.name}_keys_{table})")
                if f"{self.name}_before_{table}" in self.made:
                    self.wh.command(f"INSERT INTO {table} SELECT * FROM {self.name}_before_{table}")
                for p in self.before_files[table]:
                    if p.stat().st_size:  # (the engine writes an empty file where the chunk replaced nothing)
                        self.wh.command(f"INSERT INTO {table} SELECT * FROM file({{p:String}}, Native)",
                                        {"p": str(p.resolve())})
            if self.extract is not None:
                cluster, source, prev = self.extract
                _delete(self.wh, "etl_source_extract", "cluster = {c:String} AND source = {s:String}",
                        {"c": cluster, "s": source})
                if prev is not None:
                    self.wh.command("INSERT INTO etl_source_extract (cluster, source, extracted_through) "
                                    "VALUES ({c:String}, {s:String}, {t:DateTime('UTC')})",
                                    {"c": cluster, "s": source, "t": prev})
        except Exception as e:
            _warn(f"could not take back the failed load of {self.source}: {_first_line(e)}; load it again")
            return
        if not grains_touched:
            return
        try:
            self._grains_back()
        except Exception as e:
            _warn(f"the failed load of {self.source} was taken back, the grains not: {_first_line(e)}; "
                  "run ops-report etl refresh")

    def _grains_back(self) -> None:
        """job_run, the as-of time and the hourly grains as the load's refresh makes them (etl/grains.py), for
        the history as it is again; what the failed refresh wrote outside it is deleted."""
        span = grains.refresh_all_jobs(self.wh)
        for table, col in (("capacity_node_hour", "hour"), ("run_node_hour", "hour"), ("run_telemetry", "submit_ts")):
            where = "refreshed_at >= {t0:DateTime64(3, 'UTC')}" + (
                "" if span is None else f" AND ({col} < {{first:DateTime('UTC')}} OR {col} >= {{end:DateTime('UTC')}})")
            _delete(self.wh, table, where, {"t0": self.started, **({} if span is None else
                                                                   {"first": span[0], "end": span[1]})})

    # ---------------------------------------------------------------------------------------------- end
    def close(self) -> None:
        for t in sorted(self.made):
            try:
                self.wh.command(f"DROP TABLE IF EXISTS {t} SYNC")
            except Exception as e:
                _warn(f"could not drop {t}: {_first_line(e)}")
        self.made.clear()
        if self.stage is not None:
            shutil.rmtree(self.stage, ignore_errors=True)
            self.stage = None

    def _made(self, table: str, kind: str) -> None:
        """Make the scratch table ``kind`` (keys, before) of ``table`` if it is not there yet."""
        name = f"{self.name}_{kind}_{table}"
        if name in self.made:
            return
        if kind == "keys":
            cols = ", ".join(KEYS[table][0])
            # (on disk, by chunk: a reload's keys are the file's, 15 M of them for a 5 M-job dump; in memory they
            # grew the load's RSS with the file)
            self.wh.command(f"CREATE TABLE {name} ENGINE = MergeTree ORDER BY _chunk AS "
                            f"SELECT {cols}, toUInt32(0) AS _chunk FROM {table} WHERE 0")
        else:
            self.wh.command(f"CREATE TABLE {name} AS {table} ENGINE = MergeTree ORDER BY tuple()")
        self.made.add(name)

    def _upload(self, table: str) -> None:
        """The keys of every chunk kept so far, in the engine."""
        self._made(table, "keys")
        for p in self.files[table][self.uploaded[table]:]:
            self.wh.load_parquet(f"{self.name}_keys_{table}", p)
        self.uploaded[table] = len(self.files[table])


# the scratch tables in the warehouse (name, when made), as one array: read with what a load looks up first
_LEFT_BEHIND = ("SELECT groupArray((name, metadata_modification_time)) FROM system.tables "
                "WHERE database = currentDatabase() AND startsWith(name, {p:String})")


def _drop_stale(wh, rows: list) -> None:
    """Drop the scratch tables (``rows``: name, when made) of loads that ended without dropping them (SIGKILL):
    on this host, those of processes that no longer exist; of another host, those older than two days."""
    me = _host()
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    for name, changed in rows:
        parts = name[len(_PREFIX):].split("_")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        host, pid = parts[0], int(parts[1])
        if (host == me and not process_alive(pid)) or (host != me and changed is not None
                                                 and now - changed.replace(tzinfo=None) > _STALE):
            wh.command(f"DROP TABLE IF EXISTS {name} SYNC")


def _delete(wh, table: str, where: str, params: dict | None = None) -> None:
    """A lightweight DELETE, where it has rows to delete (a mutation costs a tenth of a second even without)."""
    if wh.query_rows(f"SELECT count() FROM {table} WHERE {where}", params)[0][0]:
        wh.command(f"DELETE FROM {table} WHERE {where}", params)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)
