"""The warehouse connection: one clickhouse-connect client for the embedded chDB engine or a server (on the
embedded engine, made when first needed: a command that only reads sends its Arrow reads to the engine itself,
core/engine_reads.py, with the client's settings and binding).

``chdb:///path`` (or ``chdb://./relative``) opens the on-disk embedded warehouse in this process;
``http(s)://user@host:port/db`` reaches a ClickHouse server or cluster with the same code and SQL.

:func:`open_warehouse` gives the low-level :class:`Warehouse` the loads, the CLI and the analytics layer use;
analysts open a warehouse with ``ops_warehouse.connect`` (ops_warehouse.analytics.api), the one public entry
point, which wraps this one.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from ops_warehouse.engine_reads import Handle as EngineReads
from ops_warehouse.config import Config
from ops_warehouse.dsn import dsn_secret, redact  # redact: imported from here by the loads and the CLI
from ops_warehouse.errors import OpsError
from ops_warehouse.grain_versions import stale_grains
from ops_warehouse.migrations import (
    apply_migrations,
    apply_ttl,
    read_schema_state,
    sync_cost_model,
    sync_projects,
)
from ops_warehouse.read_only import open_read_only, writable
from ops_warehouse.turns import Turn

# clickhouse-connect logs its errors as well as raising them; the raised error is reported (one line, no
# secrets), so its log records would only repeat it on stderr through logging's last-resort handler.
logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())

# chDB runs one embedded engine per process, on one directory at a time. The engine is open only while
# something in this process uses it (Warehouse objects count as users) and only during this process's turn
# (core/turns.py): when the last user closes it, the engine closes and the turn passes to whoever waits.
# Its Arrow reads go to a chDB handle (core/engine_reads.py) until something needs the client (a write, a
# row query, a caller of `.client`): the client is made then, and from then on takes every statement, so
# that one session holds the temporary tables and settings. A read-only command never makes it (issue 51:
# the client's import and handshake were 0.08 of a command's 0.16-0.18 CPU-s over the engine).
class _Engine:
    def __init__(self, path: Path, turn: Turn, client=None):
        self.path = path  # the engine's own folder: the warehouse, or a read-only reader's scratch engine
        self.turn = turn
        self.users = 0
        self._client = client
        self.reads = None if client is not None else _open_chdb(path, EngineReads)

    @property
    def client(self):
        if self._client is None:
            self._client = _open_chdb(self.path)
            if self.reads is not None:
                self.reads.close()
                self.reads = None
        return self._client

    def close(self) -> None:
        try:
            if self.reads is not None:
                self.reads.close()
        finally:
            self.reads = None
            if self._client is not None:
                self._client.close()
            self._client = None

    def reopen(self) -> None:
        """Closed and opened again (another process had its turn in between): a new session, reads first."""
        self.close()
        self.reads = _open_chdb(self.path, EngineReads)


_EMBEDDED: dict[str, _Engine] = {}


def close_embedded() -> None:
    """Close the process's embedded engine whoever still uses it, and give up its turn (tests, and a
    process about to let another one open the warehouse)."""
    for key, engine in list(_EMBEDDED.items()):
        try:
            engine.close()
        finally:
            engine.turn.give()
            _EMBEDDED.pop(key, None)


# Tables are ReplacingMergeTree read with FINAL: collapsing duplicates inside each inserted block as well
# only costs time.
INSERT_SETTINGS = {"optimize_on_insert": 0}
# The engine's JIT compilation of expressions off, for a load's statements: each is run once a day with that day's
# constants, and what the engine compiles (LLVM, 5-30 ms of CPU a statement) serves one day's rows: the next day's
# load compiles again. Interpreted, a telemetry day costs less in all (a 2-node day 0.43-0.51 -> 0.32-0.37 CPU-s;
# two days of 32 nodes -11 to -18 %: docs/benchmarks.md, issue 50 round 11).
INTERPRETED = {"compile_expressions": 0, "compile_aggregate_expressions": 0, "compile_sort_description": 0}
_TRAILING_SETTINGS = re.compile(r"\bSETTINGS\s+\w+\s*=\s*[\w.']+(?:\s*,\s*\w+\s*=\s*[\w.']+)*\s*$", re.I)


def _with_settings(sql: str, settings: dict) -> str:
    """``sql`` (one statement that may end in a query's SETTINGS clause: an INSERT ... SELECT, a DELETE, an
    INSERT INTO FUNCTION) with ``settings`` in its own trailing SETTINGS clause, added to the one it ends with.
    Given to the client instead, chDB's backend reads each back from system.settings, SETs it, runs the
    statement and SETs it back: 2n + 1 more engine calls a statement (docs/benchmarks.md, "Issue 50: sacct loads
    in bounded memory", round 8; issue 51 round 9). A server takes the clause as it takes the parameters."""
    if not settings:
        return sql
    text = sql.rstrip().rstrip(";").rstrip()
    clause = ", ".join(f"{k} = {v if isinstance(v, (int, float)) else _quoted(str(v))}" for k, v in settings.items())
    # on a line of its own: a statement's last line may end in a comment
    return f"{text}, {clause}" if _TRAILING_SETTINGS.search(text) else f"{text}\nSETTINGS {clause}"


def _quoted(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"



class Warehouse:
    """A connected warehouse plus the deployment settings the SQL renders for. Close it (or use it as a
    context manager) when its work is done: on the embedded engine that gives the turn to the next process."""

    def __init__(self, client, dsn: str, cfg: Config, embedded_path: Path | None, engine: _Engine | None = None):
        self._client = client
        self.dsn = dsn
        self.cfg = cfg
        self.embedded_path = embedded_path
        self._engine = engine
        self._closed = False
        # the grains built by an earlier version's SQL (core/grain_versions.py), found by bring_up_to_date:
        # the writers rebuild them (etl/grains.py: rebuild_stale), a report refuses to read them
        self.stale_grains: tuple[str, ...] = ()
        if engine is not None:
            engine.users += 1

    @property
    def embedded(self) -> bool:
        return self.embedded_path is not None

    @property
    def client(self):
        # the embedded engine may have been closed and opened again between two steps (between_steps)
        return self._engine.client if self._engine is not None else self._client

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        engine = self._engine
        if engine is None:
            self._client.close()
            return
        engine.users -= 1
        if engine.users <= 0 and _EMBEDDED.get(str(self.embedded_path)) is engine:
            try:
                engine.close()
            finally:
                engine.turn.give()
                _EMBEDDED.pop(str(self.embedded_path), None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def others_waiting(self) -> bool:
        """Other processes wait for this embedded warehouse (never on a server, which serves them all at once)."""
        engine = self._engine
        return engine is not None and engine.users == 1 and engine.turn.others_waiting()

    def between_steps(self) -> None:
        """A point in a long load where the warehouse is consistent: if other processes wait for the
        embedded warehouse, close the engine, let them have their turns, then open it again. Nothing to do on
        a server, or when nobody waits."""
        if not self.others_waiting():
            return
        engine = self._engine
        engine.close()
        engine.turn.let_waiting_go()
        engine.reopen()

    def another_handle(self) -> "Warehouse":
        """A second client on this warehouse, with its own session: a temporary table is its handle's, so two
        handles evaluate two sets of marts at once (analytics/marts.py: evaluate_ahead). On the embedded engine
        a second chDB handle on the same path (one engine, shared by both: no second turn); on a server a
        second HTTP session. Closed by its caller; the engine stays open while this Warehouse is."""
        import clickhouse_connect

        if self.embedded:
            # the engine's own path: the warehouse, or the scratch engine a read-only reader attaches it to
            path = self._engine.path if self._engine is not None else self.client.path
            client = clickhouse_connect.get_client(dsn=f"chdb://{path}")
        else:
            client = _server_client(self.dsn, self.cfg)
        return Warehouse(client, self.dsn, self.cfg, self.embedded_path)

    def query_arrow(self, sql: str, params: dict | None = None, settings: dict | None = None):
        """``settings`` ride in the query's own SETTINGS clause, as :meth:`command`'s."""
        sql = _with_settings(sql, settings or {})
        reads = self._engine.reads if self._engine is not None else None
        if reads is not None:  # the embedded engine, before anything needed the client (_Engine)
            table = reads.query_arrow(sql, params or {})
            if table is not None:
                return table
        return self.client.query_arrow(sql, parameters=params or {})

    def query_rows(self, sql: str, params: dict | None = None, settings: dict | None = None):
        return self.client.query(_with_settings(sql, settings or {}), parameters=params or {}).result_rows

    def check_one_read(self, sql: str) -> None:
        """Refuse ``sql`` unless it is one statement that reads (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS),
        judged by the engine's own parser (formatQuerySingleLine: comments gone, one statement or a syntax
        error). For text an analyst types (the API's sql()): the embedded engine runs every statement of a
        ``SELECT 1; DROP TABLE x`` it is given, and a session's readonly setting cannot be set back once on."""
        import re

        try:
            text = self.query_rows("SELECT formatQuerySingleLine({q:String})", {"q": sql})[0][0]
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            first = re.sub(r"^.*?(Syntax error)", r"\1", first).split(": In scope")[0]
            raise OpsError(f"cannot run this query: {first}") from None
        if not re.match(r"(SELECT|WITH|SHOW|DESCRIBE|EXPLAIN|EXISTS)\b", text) or re.search(r"\bINTO OUTFILE\b", text):
            raise OpsError(f"sql() runs one read (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN), not {' '.join(text.split()[:2])} "
                           "...: the loads write the warehouse (ops-report etl ...)")

    def command(self, sql: str, params: dict | None = None, settings: dict | None = None):
        """Run one statement; ``settings`` ride in its own SETTINGS clause (:func:`_with_settings`), never the
        client's ``settings=``, which on the embedded engine costs 2n + 1 more engine calls a statement."""
        return self.client.command(_with_settings(sql, settings or {}), parameters=params or {})

    def insert_rows(self, table: str, columns: list[str], rows: list[list]) -> None:
        """Insert a few rows of Python values (the run log, config-fed tables) as JSONEachRow text. The client's
        insert() of Python rows imports pandas to check what it was given: 0.9 s of every short command's
        start (measured, 2 vCPUs). Datetimes go in UTC with their microseconds, UUIDs as text."""
        import json
        from datetime import datetime, timezone

        def value(v):
            if isinstance(v, datetime):
                return (v.astimezone(timezone.utc) if v.tzinfo else v).strftime("%Y-%m-%d %H:%M:%S.%f")
            return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)

        text = "".join(json.dumps(dict(zip(columns, map(value, r))), ensure_ascii=False) + "\n" for r in rows)
        self.client.raw_insert(table, columns, text.encode(), fmt="JSONEachRow")

    def load_parquet(self, table: str, path: Path) -> None:
        """Insert one staged Parquet file into ``table``, column by name (columns added by later migrations
        sit at the end of a table, wherever the frame has them)."""
        import pyarrow.parquet as pq

        cols = pq.read_schema(path).names
        names = ", ".join(f"`{c}`" for c in cols)
        if self.embedded:
            # In-process the engine reads the file itself: the fastest path the notes measured. The settings
            # ride in the statement's own SETTINGS clause (_with_settings; they apply to the insert:
            # tests/test_sacct_fixed_cost.py): three engine calls an insert fewer (4 of its 7 CPU-ms)
            self.command(f"INSERT INTO {table} ({names}) SELECT {names} FROM file({{p:String}}, Parquet)",
                         {"p": str(Path(path).resolve())}, INSERT_SETTINGS)
        else:
            from clickhouse_connect.driver.tools import insert_file

            insert_file(self.client, table, str(path), fmt="Parquet", column_names=cols, settings=INSERT_SETTINGS)


def embedded_path(dsn: str) -> Path | None:
    if not dsn.startswith("chdb://"):
        return None
    rest = dsn[len("chdb://"):]
    return Path(rest or "./warehouse").expanduser().resolve()


def _client_of(path: Path):
    import clickhouse_connect  # 0.07-0.2 s: imported when a command needs the client, not by `import ops_warehouse`

    return clickhouse_connect.get_client(dsn=f"chdb://{path}")


def _open_chdb(path: Path, connect=_client_of):
    """The client (or, ``connect``, another handle) of the embedded engine at ``path``, its failures in one line."""
    try:
        return connect(path)
    except Exception as e:  # chDB raises generic errors for a held lock; report it as one line
        if _locked_by_other(path):
            raise OpsError(
                f"the embedded warehouse {path} is held by a process that does not take turns (an older "
                "ops-warehouse, or chDB opened directly); stop it, or use a ClickHouse server for concurrent use"
            ) from None
        raise OpsError(f"cannot open embedded warehouse {path}: {str(e).splitlines()[0]}") from None


def _refuse_unwritable(path: Path) -> None:
    """A writer (a load, init) of a warehouse this process may not write (a read-only mount, a folder of
    another user): one line, before chDB prints its own `Code: 76 ... Permission denied` and fails with
    another (issue 49). Reads open such a warehouse read-only instead (core/read_only.py)."""
    if not path.exists() or writable(path):
        return
    ro = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    raise OpsError(f"the embedded warehouse {path} is {'on a read-only file system' if ro else 'not writable by this user'}: "
                   "loads and init need to write it (reports, summaries and the API read it as it is)")


def _locked_by_other(path: Path) -> bool:
    status = path / "status"
    if not status.exists():
        return False
    try:
        fd = os.open(status, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def open_warehouse(cfg: Config, dsn: str | None = None, migrate: bool = True, create: bool = True) -> Warehouse:
    """Open (and, with ``migrate``, bring up to date) the warehouse. ``create=False`` for a read: an embedded
    path that holds no warehouse is refused instead of made (a mistyped path must not give an empty report)."""
    dsn = dsn or cfg.dsn
    path = embedded_path(dsn)
    engine = None
    if path is not None:
        key = str(path)
        engine = _EMBEDDED.get(key)
        if engine is None and not create and not (path / "metadata").is_dir():
            # chDB keeps a warehouse's catalog in <path>/metadata: no folder, no warehouse
            raise OpsError(f"no warehouse at {path}: check the path (--warehouse, OPS_WAREHOUSE or the config's "
                           "[warehouse] dsn), or make one with ops-report init")
        if engine is None and not create and not writable(path):
            # a read of a warehouse this process may not write: a scratch engine attaches it read-only
            close_embedded()
            client, turn = open_read_only(path)
            engine = _EMBEDDED[key] = _Engine(Path(client.path), turn, client)
        if engine is None:
            _refuse_unwritable(path)
            close_embedded()  # one engine per process: another directory's is closed first
            turn = Turn(path, cfg.purpose, cfg.wait_s)
            turn.take()
            try:
                path.mkdir(parents=True, exist_ok=True)
                engine = _EMBEDDED[key] = _Engine(path, turn)
            except BaseException:
                turn.give()
                raise
        client = None  # the engine's (Warehouse.client): made at its first use
    elif dsn.startswith(("http://", "https://", "clickhouse://", "clickhouses://")):
        client = _server_client(dsn, cfg)
        readonly = getattr(client.server_settings.get("readonly"), "value", "0")
        if cfg.deployment == "cluster" and str(readonly).strip() in ("0", ""):
            # inserts through Distributed tables reach every shard before the insert returns, so the grain
            # refresh that follows a load reads what the load wrote (docs/deployment.md); a read-only user
            # (readonly = 1) may not change settings and has nothing to insert
            client.set_client_setting("insert_distributed_sync", 1)
    else:
        raise OpsError(f"unsupported warehouse DSN {redact(dsn)!r}: use chdb:///path or http(s)://host:port/db")
    wh = Warehouse(client, dsn, cfg, path, engine)
    if migrate:
        try:
            bring_up_to_date(wh)
            if wh.stale_grains and not create:
                # a read (a report, the API) never rebuilds, and must not show figures of the old SQL
                raise OpsError(f"the warehouse {redact(dsn)} holds grains ({', '.join(wh.stale_grains)}) built by "
                               "an earlier version of ops-warehouse: run ops-report init (as the ETL user) to "
                               "rebuild them before reading")
        except BaseException:
            wh.close()
            raise
    return wh


def _server_client(dsn: str, cfg: Config):
    """A clickhouse-connect client of the server ``dsn`` names (a session of its own), refused in one line
    without its password where it cannot be reached."""
    secret = dsn_secret(dsn)
    if secret:  # a DSN is printed in messages and labels: its password would be too (core/dsn.py)
        raise OpsError(f"the warehouse DSN {redact(dsn)} holds {secret}: put the password in "
                       "OPS_WAREHOUSE_PASSWORD or the config's [warehouse] password (a chmod 600 file)")
    parts = urlsplit(dsn)
    kwargs = {}
    if parts.scheme in ("https", "clickhouses"):
        # clickhouse-connect infers TLS from the port, not the scheme: https://host/db would go to 8123 in
        # clear, password included. The scheme decides here (default port 8443).
        kwargs["secure"] = True
    password = os.environ.get("OPS_WAREHOUSE_PASSWORD") or cfg.warehouse_password
    if not parts.password and password:
        kwargs["password"] = password
    import clickhouse_connect  # 0.2 s: imported when a warehouse is opened, not by `import ops_warehouse`

    try:
        return clickhouse_connect.get_client(dsn=dsn, **kwargs)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if password:
            first = first.replace(password, "***")
        raise OpsError(f"cannot reach warehouse {redact(dsn)}: {first}") from None


def bring_up_to_date(wh: Warehouse) -> list[str]:
    """The schema migrated, and what the config says synced into the warehouse (what every connection and
    `ops-report init` do); returns the migrations applied. What the config does not name is kept: a config
    without [projects] (a notebook, a one-off command) keeps the account -> project mapping, one without
    [cost.*] the site's cost model (an empty warehouse gets the defaults).

    On a warehouse that is up to date this is one query (read_schema_state) and nothing is written."""

    cfg = wh.cfg
    projects = bool(cfg.projects or cfg.projects_configured)
    state = read_schema_state(wh, projects=projects, ttl=bool(cfg.telemetry_ttl_days))
    applied = apply_migrations(wh, state=state)
    if applied:
        state = None  # what the migrations changed is read again, step by step
    recorded = state.recorded if state is not None else dict(
        wh.query_rows("SELECT name, checksum FROM schema_migrations FINAL"))
    wh.stale_grains = stale_grains(recorded)
    if projects:
        sync_projects(wh, state)
    cost_rows = state.cost_rows if state is not None else wh.query_rows("SELECT count() FROM cost_model")[0][0]
    if cfg.cost_configured or not cost_rows:
        sync_cost_model(wh)
    apply_ttl(wh, state)
    return applied
