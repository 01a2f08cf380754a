"""Schema as SQL files under sql/: rendered for the deployment, applied, recorded.

sql/functions/*.sql are the rules (SQL functions, ``CREATE OR REPLACE FUNCTION``), applied first and
re-applied whenever a file's text changes or a function it defines is missing from the server;
sql/migrations/NNNN_name.sql (tables) are applied in order, once each; sql/intermediate/*.sql are views
(``CREATE OR REPLACE``) re-applied whenever their text changes. Each is recorded in ``schema_migrations``
(functions as ``functions/<file>``). The same files render for one server / the embedded engine, or for a
cluster (ON CLUSTER, Replicated*MergeTree and a Distributed table in front of each sharded table).

SQL functions are objects of the server, not of a database: every warehouse (database) on one ClickHouse
server sees the same definition, the one applied last (docs/sql.md).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ops_warehouse.errors import OpsError
from ops_warehouse.grain_versions import fingerprints, record_grains
from ops_warehouse.sqlfiles import split_statements, sql_files

_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(\w+?)(?:\{\{local\}\})?\s", re.IGNORECASE)
_MERGETREE = re.compile(r"\{\{(mergetree|mergetree_all) ([A-Za-z]*MergeTree)(?:\(([^)]*)\))?\}\}")
_DISTRIBUTED = re.compile(r"^--\s*distributed:\s*(.+)$", re.MULTILINE)
# INSERT INTO {{sharded T KEY}}: T on one server; on a cluster T_local of every shard, each row sent to the
# shard KEY picks (the cluster() table function, synchronously), for an insert into a table that has no
# Distributed table in front (migration 0009's rebuilt table)
_SHARDED = re.compile(r"\{\{sharded (\w+) ([^{}]+)\}\}")
# a statement starting with {{cluster_only}} is rendered on a cluster only (about a Distributed table in
# front, which on one server is the table itself)
_CLUSTER_ONLY = "{{cluster_only}}"
_DROP_TABLE = re.compile(r"DROP\s+TABLE\b", re.IGNORECASE)
_CREATE_FUNCTION = re.compile(r"CREATE\s+OR\s+REPLACE\s+FUNCTION\s+(\w+)", re.IGNORECASE)
# applied in this order: the rules first (a migration or a view may use them), then tables, then views
SCHEMA_FOLDERS = ("functions", "migrations", "intermediate")
# intermediate/ holds views (schema, re-applied when their text changes) and the grains' refresh statements
# (run by the loads, not here): a file is schema when it creates a view
_CREATE_VIEW = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\b", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Deployment:
    mode: str = "single"  # or "cluster"
    cluster: str = "ops"


def _schema_files(folder: str, root=None) -> list[tuple[str, str]]:
    files = sql_files(folder, root)
    return [f for f in files if _CREATE_VIEW.search(f[1])] if folder == "intermediate" else files


def render(statement: str, dep: Deployment) -> list[str]:
    """One template statement -> the statements to run for this deployment (none for a
    ``{{cluster_only}}`` statement on one server)."""
    cluster = dep.mode == "cluster"
    if statement.lstrip().startswith(_CLUSTER_ONLY):
        if not cluster:
            return []
        statement = statement.lstrip()[len(_CLUSTER_ONLY):]
    m = _CREATE_TABLE.search(statement)
    table = m.group(1) if m else None
    dist = _DISTRIBUTED.search(statement)
    stmt = _DISTRIBUTED.sub("", statement).strip()
    stmt = stmt.replace("{{local}}", "_local" if cluster else "")
    stmt = stmt.replace("{{on_cluster}}", f"ON CLUSTER '{dep.cluster}'" if cluster else "")

    def engine(mt: re.Match) -> str:
        kind, name, args = mt.group(1), mt.group(2), mt.group(3)
        if not cluster:
            return f"{name}({args})" if args is not None else name
        shard = "all" if kind == "mergetree_all" else "{shard}"
        local = f"{table}_local" if kind == "mergetree" else table
        zk = f"'/clickhouse/tables/{shard}/{{database}}/{local}', '{{replica}}'"
        return f"Replicated{name}({zk}{', ' + args if args else ''})"

    stmt = _MERGETREE.sub(engine, stmt)

    def sharded(mt: re.Match) -> str:
        name, key = mt.group(1), mt.group(2).strip()
        return f"FUNCTION cluster('{dep.cluster}', currentDatabase(), '{name}_local', {key})" if cluster else name

    stmt, n_sharded = _SHARDED.subn(sharded, stmt)
    if cluster and n_sharded:
        # the insert returns once every shard has its rows (not queued on this node to be sent later); added
        # to the statement's own SETTINGS where it has some
        own = re.search(r"\bSETTINGS\b", stmt, re.IGNORECASE)
        stmt += (", " if own else " SETTINGS ") + "insert_distributed_sync = 1"
    if cluster and _DROP_TABLE.match(stmt):
        # a Replicated table's Keeper path is freed before the statement returns, so a table of that name
        # (and path) can be created again right after (a rerun of an interrupted migration)
        stmt += " SYNC"
    out = [stmt]
    if cluster and dist and table:
        key = dist.group(1).strip()
        out.append(
            f"CREATE TABLE IF NOT EXISTS {table} ON CLUSTER '{dep.cluster}' AS {table}_local "
            f"ENGINE = Distributed('{dep.cluster}', currentDatabase(), '{table}_local', {key})"
        )
    return out


def rendered_schema(dep: Deployment) -> list[str]:
    """Every DDL statement of the schema (functions, migrations, models) for a deployment."""
    stmts = []
    for _, text in [f for folder in SCHEMA_FOLDERS for f in _schema_files(folder)]:
        for s in split_statements(text):
            stmts.extend(render(s, dep))
    return stmts


def _deployment(wh) -> Deployment:
    return Deployment(mode=wh.cfg.deployment, cluster=wh.cfg.cluster_name)


@dataclass(frozen=True)
class SchemaState:
    """What a warehouse holds of the schema and of the config-fed tables, read in one query
    (:func:`read_schema_state`): on a warehouse that is up to date, what a connection checks and all it sends."""

    recorded: dict[str, str]  # schema_migrations: name -> checksum
    functions: frozenset[str]  # the server's SQL (user-defined) functions
    cost_rows: int  # rows of cost_model
    projects: list[tuple] | None = None  # account_project's rows, when asked for
    table_ddl: dict[str, str] | None = None  # create_table_query of the fine telemetry tables, when asked for


def read_schema_state(wh, *, projects: bool = False, ttl: bool = False) -> SchemaState | None:
    """The warehouse's :class:`SchemaState` in one query, or None when it cannot be read so (a new warehouse:
    no schema_migrations or cost_model yet; a table a later migration adds): then the caller takes the
    step-by-step path, which creates what is missing and reports any real error."""
    dep = _deployment(wh)
    parts = ["SELECT 'm' AS k, name AS a, checksum AS b FROM schema_migrations FINAL",
             "SELECT 'c', toString(count()), '' FROM cost_model"]
    folder = _embedded_functions_folder(wh)
    if folder is None:
        # the user-defined functions only: filtering system.functions by name builds every built-in's row
        parts.append("SELECT 'f', name, '' FROM system.functions WHERE origin = 'SQLUserDefined'")
    if projects:
        parts.append("SELECT 'p', account, project FROM account_project FINAL")
    if ttl:
        parts.append("SELECT 't', name, create_table_query FROM system.tables WHERE database = currentDatabase() "
                     "AND name IN {ttl_tables:Array(String)}")
    try:
        # an Arrow read, text columns: on the embedded engine a read-only command then never needs the client
        # (core/engine_reads.py)
        table = wh.query_arrow(" UNION ALL ".join(parts), {"ttl_tables": _ttl_tables(dep)} if ttl else None)
    except Exception:  # a missing table (a new or older warehouse): the step-by-step path decides
        return None
    rows = zip(*(c.to_pylist() for c in table.columns))
    by_kind: dict[str, list] = {}
    for k, a, b in rows:
        by_kind.setdefault(k, []).append((a, b))
    if len(by_kind.get("c", ())) != 1:
        return None
    if folder is not None:
        functions = frozenset(f.name[len("function_"):-len(".sql")] for f in folder.glob("function_*.sql"))
    else:
        functions = frozenset(a for a, _ in by_kind.get("f", ()))
    return SchemaState(
        recorded=dict(by_kind.get("m", ())),
        functions=functions,
        cost_rows=int(by_kind["c"][0][0]),
        projects=by_kind.get("p", []) if projects else None,
        table_ddl=dict(by_kind.get("t", ())) if ttl else None,
    )


def _embedded_functions_folder(wh):
    """Where the embedded engine keeps the SQL functions, or None (a server).

    chDB keeps each one as <warehouse>/user_defined/function_<name>.sql (CREATE writes the file, DROP
    FUNCTION removes it): listing the folder spares the one-query check a read of system.functions, which
    costs the embedded engine 0.1-0.2 s when first read in a process. A function the folder does not show is looked up
    in system.functions by the step-by-step path before anything is created, so a different layout in a
    later chDB makes the check slower, never wrong."""
    path = getattr(wh, "embedded_path", None)
    return None if path is None else path / "user_defined"


def _schema_plan(root) -> list[tuple[str, str, str, str, str]]:
    """(kind, record, name, text, checksum) of every schema file, in the order they are applied."""
    plan = []
    for kind in SCHEMA_FOLDERS:
        for name, text in sql_files(kind, root) if kind == "functions" else _schema_files(kind, root):
            record = f"functions/{name}" if kind == "functions" else name
            plan.append((kind, record, name, text, hashlib.sha256(text.encode()).hexdigest()))
    return plan


def _pending(plan, done: dict[str, str], on_server) -> list[tuple[str, str, str, str, str]]:
    """What of the plan is not applied yet or has changed, given the records and the server's functions."""
    out = []
    for item in plan:
        kind, record, _, text, checksum = item
        if kind == "migrations" and record in done:
            continue  # versioned: applied once, never edited afterwards
        if kind == "intermediate" and done.get(record) == checksum:
            continue  # repeatable: re-applied when its text changes
        if (kind == "functions" and done.get(record) == checksum
                and set(_CREATE_FUNCTION.findall(text)) <= on_server):
            continue  # repeatable: re-applied when its text changes or a function is missing
        out.append(item)
    return out


def apply_migrations(wh, root=None, state: SchemaState | None = None) -> list[str]:
    """Apply what is not yet applied or has changed; return the names applied (functions as
    ``functions/<file>``). Safe to run any number of times: with nothing changed, one query is sent (the
    :class:`SchemaState`; none when the caller passes the ``state`` it read). ``root``: a folder laid out
    like sql/ to read the files from (default: the installed package)."""
    plan = _schema_plan(root)
    if state is None:
        state = read_schema_state(wh)
    if state is not None and not _pending(plan, state.recorded, state.functions):
        return []
    # behind, or new: step by step
    dep = _deployment(wh)
    oc = f"ON CLUSTER '{dep.cluster}'" if dep.mode == "cluster" else ""
    engine = (
        "ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/schema_migrations', '{replica}', applied_at)"
        if dep.mode == "cluster" else "ReplacingMergeTree(applied_at)"
    )
    # created only when missing: a read-only user (docs/deployment.md) never sends DDL to a warehouse that
    # has its schema
    new = not wh.query_rows("SELECT 1 FROM system.tables WHERE database = currentDatabase() "
                            "AND name = 'schema_migrations'")
    if new:
        wh.command(
            f"CREATE TABLE IF NOT EXISTS schema_migrations {oc} (name String, kind LowCardinality(String), "
            f"checksum String, applied_at DateTime64(3, 'UTC')) ENGINE = {engine} ORDER BY name"
        )
    done = dict(wh.query_rows("SELECT name, checksum FROM schema_migrations FINAL"))
    # functions belong to the server, not to this database: one dropped there (or a database restored onto
    # another server) is created again even though this warehouse recorded it
    on_server = {r[0] for r in wh.query_rows("SELECT name FROM system.functions WHERE origin = 'SQLUserDefined'")}
    applied = []
    for kind, record, _, text, checksum in _pending(plan, done, on_server):
        for s in split_statements(text):
            for r in render(s, dep):
                wh.command(r)
        wh.command(
            "INSERT INTO schema_migrations (name, kind, checksum, applied_at) "
            "VALUES ({n:String}, {k:String}, {c:String}, now64(3))",
            {"n": record, "k": kind, "c": checksum},
        )
        applied.append(record)
    if new:
        # empty grains: the loads fill them with this SQL (an older warehouse has no record: its grains are
        # rebuilt by the next writer, etl/grains.py's rebuild_stale)
        current = fingerprints(root)
        record_grains(wh, current, current)
    return applied


def _sync_table(wh, table: str, columns: list[str], want: list[tuple], have: list[tuple] | None = None) -> None:
    """Make a small config-fed table hold exactly ``want`` (cheap when it already does; ``have``: its rows,
    when the caller read them already)."""
    want = sorted(want)
    if have is None:
        have = wh.query_rows(f"SELECT {', '.join(columns)} FROM {table} FINAL")
    have = sorted(tuple(r) for r in have)
    if want == have:
        return
    dep = _deployment(wh)
    oc = f"ON CLUSTER '{dep.cluster}'" if dep.mode == "cluster" else ""
    wh.command(f"TRUNCATE TABLE {table} {oc}")
    if want:
        wh.insert_rows(table, columns, [list(r) for r in want])


def sync_projects(wh, state: SchemaState | None = None) -> None:
    """Make account_project equal to the config's mapping (``state``: read with ``projects=True``, or None)."""
    _sync_table(wh, "account_project", ["account", "project"], list(wh.cfg.projects.items()),
                state.projects if state is not None else None)


_COST_COLUMNS = ["node_price", "amortization_years", "power_price_per_kwh", "pue", "peak_bf16_tflops", "currency"]


def sync_cost_model(wh) -> None:
    """Make cost_model equal to the config's cost model."""
    _sync_table(wh, "cost_model", ["gpu_model", *_COST_COLUMNS],
                [(m, *[spec[k] for k in _COST_COLUMNS]) for m, spec in wh.cfg.cost_model.items()])


def warehouse_cost_model(wh) -> dict[str, dict]:
    """The cost model the warehouse holds (what the cost marts use), as the config spells it."""
    rows = wh.query_rows(f"SELECT gpu_model, {', '.join(_COST_COLUMNS)} FROM cost_model FINAL ORDER BY gpu_model")
    return {r[0]: dict(zip(_COST_COLUMNS, r[1:])) for r in rows}


FINE_TELEMETRY_TABLES = ("gpu_sample", "node_sample")


def _ttl_tables(dep: Deployment) -> list[str]:
    return [f"{t}_local" if dep.mode == "cluster" else t for t in FINE_TELEMETRY_TABLES]


def apply_ttl(wh, state: SchemaState | None = None) -> None:
    """Keep the fine telemetry rows ``telemetry.fine_ttl_days`` (the hourly rollups stay); ``state``: read
    with ``ttl=True``, or None."""
    days = wh.cfg.telemetry_ttl_days
    if not days:
        return
    dep = _deployment(wh)
    oc = f"ON CLUSTER '{dep.cluster}'" if dep.mode == "cluster" else ""
    for local in _ttl_tables(dep):
        if state is not None and state.table_ddl is not None:
            current = [(state.table_ddl[local],)] if local in state.table_ddl else []
        else:
            current = wh.query_rows("SELECT create_table_query FROM system.tables WHERE database = currentDatabase() "
                                    "AND name = {t:String}", {"t": local})
        if current and f"toIntervalDay({int(days)})" in current[0][0]:
            continue
        wh.command(f"ALTER TABLE {local} {oc} MODIFY TTL ts + toIntervalDay({int(days)}) "
                   "SETTINGS materialize_ttl_after_modify = 0")


_BUILDS = re.compile(r"^\s*(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|VIEW|MATERIALIZED\s+VIEW)(?:\s+IF\s+NOT\s+EXISTS)?"
                     r"|ALTER\s+TABLE)\s+`?(\w+)`?", re.IGNORECASE)
_DROPS = re.compile(r"^\s*DROP\s+(?:TABLE|VIEW)\s+(?:IF\s+EXISTS\s+)?`?(\w+)`?", re.IGNORECASE)
_EXCHANGES = re.compile(r"^\s*EXCHANGE\s+TABLES\s+`?(\w+)`?\s+AND\s+`?(\w+)`?", re.IGNORECASE)


def _object_builds(dep: Deployment, root=None) -> dict[str, list[str]]:
    """Each table and view the schema leaves, with the statements that build it as it stands (its CREATE and
    the ALTERs after it, in order), followed through the migrations' DROPs and EXCHANGEs; data statements
    (INSERT ... SELECT) are not part of a table's shape."""
    builds: dict[str, list[str]] = {}
    for kind, _, _, text, _ in _schema_plan(root):
        if kind == "functions":
            continue
        for s in split_statements(text):
            for r in render(s, dep):
                if m := _EXCHANGES.match(r):
                    a, b = m.group(1), m.group(2)
                    # the statements that built b now build a (under a's name), and the other way round
                    sa = [re.sub(rf"\b{b}\b", a, x, count=1) for x in builds.get(b, [])]
                    sb = [re.sub(rf"\b{a}\b", b, x, count=1) for x in builds.get(a, [])]
                    builds[a], builds[b] = sa, sb
                elif m := _DROPS.match(r):
                    builds.pop(m.group(1), None)
                elif m := _BUILDS.match(r):
                    name = m.group(1)
                    if r.lstrip().upper().startswith("CREATE"):
                        builds[name] = [r]
                    elif name in builds:
                        builds[name].append(r)
    return {k: v for k, v in builds.items() if v}


def restore_missing_objects(wh, root=None) -> list[str]:
    """Create again the tables and views the schema defines but the warehouse lacks (dropped by hand, or lost
    with a disk), as they stand after every migration; returns their names. What the migration log records
    says nothing about a table dropped since, so `ops-report init` asks the engine. Their rows are not
    restored: the loads bring them back (a source table: load its files again; a grain: etl refresh)."""
    dep = _deployment(wh)
    have = {r[0] for r in wh.query_rows("SELECT name FROM system.tables WHERE database = currentDatabase()")}
    builds = _object_builds(dep, root)
    missing = [name for name in builds if name not in have]
    pending = list(missing)
    while pending:  # a view made before a table it reads fails: made again in the next round
        failed = []
        for name in pending:
            try:
                for statement in builds[name]:
                    wh.command(statement)
            except Exception:
                failed.append(name)
        if len(failed) == len(pending):
            raise OpsError(f"cannot create again the missing {', '.join(failed)}")
        pending = failed
    return missing
