"""The cluster schema, checked by the engine's own parser (docs/deployment.md, "Cluster schema: what the
engine checks").

chDB has no cluster, so ON CLUSTER statements cannot run here; the engine parses them all the same. Every
statement ``ops-report schema --deployment cluster`` prints is parsed (``formatQuerySingleLine`` for the
canonical text, ``EXPLAIN AST`` for the tree), and the facts below are read from the parse, not from the
template files: which tables exist at the end of the schema (CREATE, ALTER ADD COLUMN, EXCHANGE and DROP
replayed in order), their engines, Keeper paths and ORDER BY, and each Distributed table's sharding key.

- A ReplacingMergeTree removes duplicates of a sorting key within one shard only, and ``FINAL`` on a
  Distributed table is applied on each shard: both are right only if every version of a row lands on the
  same shard, i.e. the sharding key is a function of columns of the ORDER BY key.
- Migration 0009 rebuilds etl_quarantine; on a cluster its copy must read every shard and put each row back
  on its shard before the exchange, and the Distributed table in front must get the new column.
"""

from __future__ import annotations

import ast
import copy
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.migrations import Deployment, apply_migrations, render, rendered_schema
from ops_warehouse.sqlfiles import split_statements, sql_files
from ops_warehouse.warehouse import close_embedded, open_warehouse

REPO = Path(__file__).resolve().parents[1]
CLUSTER = Deployment("cluster", "ops")
# functions whose value is not a function of the row: a sharding key using them scatters a row's versions
NON_DETERMINISTIC = {"rand", "rand32", "rand64", "randConstant", "now", "now64", "generateUUIDv4",
                     "generateUUIDv7", "rowNumberInAllBlocks", "rowNumberInBlock", "blockNumber", "hostName"}
STORAGE_CLAUSES = ("PARTITION BY", "PRIMARY KEY", "ORDER BY", "SAMPLE BY", "TTL", "SETTINGS")


# --- the engine's parse ------------------------------------------------------------------------------

@dataclass
class Node:
    """One line of EXPLAIN AST: its kind (CreateQuery, Function, Identifier, ...), the rest of its label
    (a name, a literal), and its children."""

    kind: str
    name: str
    children: list[Node] = field(default_factory=list)

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, kind: str) -> list[Node]:
        return [n for n in self.walk() if n.kind == kind]

    def child(self, kind: str) -> Node:
        [c] = [c for c in self.children if c.kind == kind]
        return c

    def columns(self) -> set[str]:
        return {n.name for n in self.find("Identifier")}

    def functions(self) -> set[str]:
        return {n.name for n in self.find("Function")}

    def shape(self) -> tuple:
        return (self.kind, self.name, tuple(c.shape() for c in self.children))


_LABEL = re.compile(r"^(?P<kind>Columns definition|Storage definition|\w+)(?P<rest>.*?)(?: \(children \d+\))?$")


def parse_ast(lines: list[str]) -> Node:
    root = None
    stack: list[tuple[int, Node]] = []
    for line in lines:
        depth = len(line) - len(line.lstrip(" "))
        m = _LABEL.match(line.strip())
        node = Node(m["kind"], re.sub(r" \(alias \w+\)$", "", m["rest"].strip()))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            stack[-1][1].children.append(node)
        else:
            assert root is None, "EXPLAIN AST gave more than one tree"
            root = node
        stack.append((depth, node))
    return root


@dataclass
class Parsed:
    sql: str  # as rendered
    text: str  # the engine's canonical form, one line
    tree: Node


class Engine:
    """The embedded engine (an empty warehouse: nothing here needs a table), parsing statements."""

    def __init__(self, wh):
        self.wh = wh
        self.cache: dict[str, Parsed] = {}

    def __call__(self, sql: str) -> Parsed:
        if sql not in self.cache:
            text = self.wh.query_rows("SELECT formatQuerySingleLine({q:String})", {"q": sql})[0][0]
            tree = parse_ast([r[0] for r in self.wh.query_rows("EXPLAIN AST " + sql)])
            # the client sends the query with FORMAT Native, which some trees show as their last child
            if tree.children and tree.children[-1].shape() == ("Identifier", "Native", ()):
                tree.children.pop()
            self.cache[sql] = Parsed(sql, text, tree)
        return self.cache[sql]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    yield Engine(open_warehouse(Config(dsn=f"chdb://{tmp_path_factory.mktemp('engine') / 'wh'}"), migrate=False))
    close_embedded()


@pytest.fixture(scope="module")
def cluster_schema(engine) -> list[Parsed]:
    return [engine(s) for s in rendered_schema(CLUSTER)]


# --- the tables the schema leaves, replayed from the parsed statements -------------------------------

@dataclass
class Table:
    name: str
    engine: str
    engine_args: list[Node]
    columns: list[str]
    order_by: Node | None = None  # local tables
    as_table: str | None = None  # Distributed tables: the table they were created AS (and read)

    @property
    def order_by_columns(self) -> set[str]:
        """The bare columns of the sorting key: every row with the same key has the same value of each."""
        o = self.order_by
        if o is None:
            return set()
        if o.kind == "Identifier":
            return {o.name}
        if o.kind == "Function" and o.name == "tuple":
            return {e.name for e in o.child("ExpressionList").children if e.kind == "Identifier"}
        return set()

    @property
    def sharding_key(self) -> Node:
        assert self.engine == "Distributed"
        return self.engine_args[3]

    @property
    def keeper_path(self) -> str | None:
        if self.engine.startswith("Replicated"):
            return self.engine_args[0].name.strip("'")
        return None


def _storage(p: Parsed) -> tuple[str, list[Node], Node | None]:
    storage = p.tree.child("Storage definition")
    engine_fn, *clauses = storage.children
    # EXPLAIN AST lists a storage's clauses in a fixed order without naming them: which are present is read
    # from the engine's canonical text
    tail = p.text.split(" ENGINE = ", 1)[1]
    present = [c for c in STORAGE_CLAUSES if f" {c} " in tail]
    assert len(present) == len(clauses), (p.text, present)
    named = dict(zip(present, clauses))
    args = engine_fn.children[0].children if engine_fn.children else []
    return engine_fn.name, args, named.get("ORDER BY")


def replay(statements: list[Parsed], tables: dict[str, Table] | None = None) -> dict[str, Table]:
    """The tables after these statements, from their parse: CREATE TABLE, ALTER ... ADD COLUMN (a MODIFY
    SETTING changes neither columns nor engine), EXCHANGE TABLES, DROP TABLE."""
    tables = copy.deepcopy(tables or {})
    for p in statements:
        t = p.tree
        if t.kind == "CreateQuery" and any(c.kind == "Storage definition" for c in t.children):
            if t.name in tables and "IF NOT EXISTS" in p.text:
                continue
            engine, args, order_by = _storage(p)
            if any(c.kind == "Columns definition" for c in t.children):
                cols = [c.name for c in t.child("Columns definition").find("ColumnDeclaration")]
                tables[t.name] = Table(t.name, engine, args, cols, order_by)
            else:  # CREATE TABLE x AS y: y's columns as they are now
                as_table = re.search(rf"^CREATE TABLE (?:IF NOT EXISTS )?{t.name} .*?\bAS (\w+) ENGINE", p.text)[1]
                tables[t.name] = Table(t.name, engine, args, list(tables[as_table].columns), as_table=as_table)
        elif t.kind == "AlterQuery":
            for cmd in t.find("AlterCommand"):
                if cmd.name == "MODIFY_SETTING":  # (a table setting: its columns and engine as they were)
                    continue
                assert cmd.name == "ADD_COLUMN", p.text
                col, *after = cmd.children  # the column, then the one it goes AFTER (else: at the end)
                cols = tables[t.name].columns
                if col.name not in cols:
                    cols.insert(cols.index(after[0].name) + 1 if after else len(cols), col.name)
        elif t.kind == "Rename":
            assert p.text.startswith("EXCHANGE TABLES"), p.text
            a, b = (c.name for c in t.children)
            tables[a], tables[b] = tables[b], tables[a]
            tables[a].name, tables[b].name = a, b
        elif t.kind == "DropQuery" and (t.name in tables or "IF EXISTS" not in p.text):
            del tables[t.name]
    return tables


def fronts(tables: dict[str, Table]) -> dict[str, Table]:
    return {n: t for n, t in tables.items() if t.engine == "Distributed"}


def local_of(front: Table, tables: dict[str, Table]) -> Table:
    return tables[front.engine_args[2].name.strip("'")]


def keeps_versions_on_one_shard(front: Table, local: Table) -> bool:
    """Every row with one sorting key goes to one shard: the key reads only bare ORDER BY columns, and
    reads at least one (rand() scatters), through functions of the row only."""
    key = front.sharding_key
    cols = key.columns()
    return bool(cols) and cols <= local.order_by_columns and not (key.functions() & NON_DETERMINISTIC)


# --- every statement, parsed ------------------------------------------------------------------------

def _printed_statements() -> list[str]:
    cli = [sys.executable, "-c", "from ops_warehouse.cli.main import main; main()"]
    p = subprocess.run([*cli, "schema", "--deployment", "cluster"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert p.returncode == 0, p.stderr
    # the command prints each statement followed by ';' and an empty line
    return [s for s in re.split(r";\n(?:\n|$)", p.stdout) if s.strip()]


def _source_statement_count(cluster: bool) -> int:
    """Statements of the schema folders counted from the files themselves: one per ';' that ends a line of
    code, one more per '-- distributed:' line on a cluster, none for a {{cluster_only}} one on one server."""
    n = 0
    for folder in ("functions", "migrations", "intermediate"):
        for name, text in sql_files(folder):
            code = "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("--"))
            view = re.search(r"^\s*CREATE\s+(OR\s+REPLACE\s+)?VIEW\b", code, re.MULTILINE)
            if folder == "intermediate" and not view:
                continue  # a refresh statement the loads run, not schema
            n += len(re.findall(r";[ \t]*$", code, re.MULTILINE))
            if cluster:
                n += len(re.findall(r"^\s*--\s*distributed:", text, re.MULTILINE))
            else:
                n -= len(re.findall(r"^\s*\{\{cluster_only\}\}", code, re.MULTILINE))
    return n


def test_every_statement_the_schema_command_prints_is_parsed_by_the_engine(engine, cluster_schema):
    printed = _printed_statements()
    assert len(printed) == _source_statement_count(cluster=True) == len(cluster_schema)
    assert len(rendered_schema(Deployment("single"))) == _source_statement_count(cluster=False)
    kinds: dict[str, int] = {}
    for text, rendered in zip(printed, cluster_schema):
        p = engine(text)  # raises on a syntax error; one statement each (the engine refuses two)
        assert p.text == rendered.text
        kinds[p.tree.kind] = kinds.get(p.tree.kind, 0) + 1
        if p.tree.kind == "InsertQuery":
            continue  # runs on the node that runs the migration (its target is every shard: 0009)
        # DDL runs on every node: a statement without ON CLUSTER would leave the other nodes behind
        assert re.search(r"\bON CLUSTER ops\b", p.text), p.text
    assert set(kinds) == {"CreateSQLFunctionQuery", "CreateQuery", "AlterQuery", "DropQuery", "InsertQuery",
                          "Rename"}, kinds


class Recording:
    """A new cluster warehouse as apply_migrations sees it (nothing applied yet): records what it sends."""

    cfg = Config(deployment="cluster", cluster_name="ops")

    def __init__(self):
        self.sent: list[str] = []

    def command(self, sql, params=None):
        self.sent.append(sql)

    def query_rows(self, sql, params=None):
        return []


def _apply_on_a_new_cluster() -> list[str]:
    wh = Recording()
    apply_migrations(wh)
    return wh.sent


def test_apply_sends_on_a_cluster_what_the_schema_command_prints(cluster_schema):
    ddl = [s for s in _apply_on_a_new_cluster() if not s.startswith("INSERT INTO schema_migrations ")]
    assert ddl[0].startswith("CREATE TABLE IF NOT EXISTS schema_migrations ON CLUSTER 'ops'")
    assert ddl[1:] == [p.sql for p in cluster_schema]


def test_tables_engines_and_keeper_paths(engine, cluster_schema):
    created = [p for p in cluster_schema if p.tree.kind == "CreateQuery"
               and any(c.kind == "Storage definition" for c in p.tree.children)]
    tables = replay(cluster_schema)
    paths: dict[str, str] = {}
    for p in created:
        name = p.tree.name
        eng, args, order_by = _storage(p)
        if eng == "Distributed":
            cluster_arg, db, local, _key = args
            assert (cluster_arg.name, db.shape(), local.name) == (
                "'ops'", ("Function", "currentDatabase", (("ExpressionList", "", ()),)), f"'{name}_local'")
            continue
        # every MergeTree of a cluster is replicated; a sharded one (a Distributed table in front, the
        # _local name) keeps a path per shard, a small dimension one path every node replicates
        assert eng.startswith("Replicated") and eng.endswith("MergeTree"), p.text
        path, replica = (a.name.strip("'") for a in args[:2])
        shard = "{shard}" if name.endswith("_local") else "all"
        assert (path, replica) == (f"/clickhouse/tables/{shard}/{{database}}/{name}", "{replica}"), p.text
        assert path not in paths, f"{name} and {paths[path]} share a Keeper path"
        paths[path] = name
        assert order_by is not None, p.text
    # every _local table has a Distributed table in front of it by the end, and no other table is sharded
    locals_ = {n for n in tables if n.endswith("_local")}
    assert {local_of(f, tables).name for f in fronts(tables).values()} == locals_
    assert len(fronts(tables)) == len(locals_) == 12


def test_sharding_keys_keep_a_rows_versions_on_one_shard(engine, cluster_schema):
    """For every table with a Distributed table in front, at its creation and at the end of the schema:
    the sharding key's columns are ORDER BY columns of the local table (a job's reloads, a node's
    telemetry, a source's quarantine go to one shard), so ReplacingMergeTree and FINAL see every version."""
    checked = {}
    states = [replay(cluster_schema[:i + 1]) for i, p in enumerate(cluster_schema) if "Distributed" in p.text]
    for tables in [*states, replay(cluster_schema)]:
        for name, front in fronts(tables).items():
            local = local_of(front, tables)
            if "Replacing" in local.engine:
                assert keeps_versions_on_one_shard(front, local), (name, front.sharding_key.shape(),
                                                                   local.order_by_columns)
            else:  # a log: nothing to deduplicate, rows spread evenly
                assert local.engine == "ReplicatedMergeTree", (name, local.engine)
            # the Distributed table reads every column the local table has
            assert front.columns == local.columns, (name, front.columns, local.columns)
            checked[name] = (sorted(front.sharding_key.columns()), sorted(local.order_by_columns), local.engine)
    assert checked == {
        "slurm_job_run": (["cluster", "job_id"], ["cluster", "job_id", "submit_ts"], "ReplicatedReplacingMergeTree"),
        "slurm_job_step": (["cluster", "job_id"], ["cluster", "job_id", "start_ts", "step_id"],
                           "ReplicatedReplacingMergeTree"),
        # after 0009: ORDER BY (source, cityHash64(raw), reason, occurrence)
        "etl_quarantine": (["source"], ["occurrence", "reason", "source"], "ReplicatedReplacingMergeTree"),
        "etl_run_log": ([], ["run_id", "started_at"], "ReplicatedMergeTree"),
        "gpu_sample": (["cluster", "node"], ["cluster", "gpu", "node", "ts"], "ReplicatedReplacingMergeTree"),
        "node_sample": (["cluster", "node"], ["cluster", "node", "ts"], "ReplicatedReplacingMergeTree"),
        "xid_event": (["cluster", "node"], ["cluster", "gpu", "node", "ts", "xid"], "ReplicatedReplacingMergeTree"),
        "gpu_hour": (["cluster", "node"], ["cluster", "gpu", "hour", "node"], "ReplicatedReplacingMergeTree"),
        "node_hour": (["cluster", "node"], ["cluster", "hour", "node"], "ReplicatedReplacingMergeTree"),
        # after 0021: ORDER BY (cluster, node, hour, gpu_model)
        "capacity_node_hour": (["cluster", "node"], ["cluster", "gpu_model", "hour", "node"],
                               "ReplicatedReplacingMergeTree"),
        "gpu_instance_sample": (["cluster", "node"], ["cluster", "gpu", "gpu_instance", "node", "ts"],
                                "ReplicatedReplacingMergeTree"),
        "lustre_job_io": (["cluster", "job_id"], ["cluster", "component", "fs", "job_id", "jobid", "operation", "ts"],
                          "ReplicatedReplacingMergeTree"),
    }


def test_the_shard_check_catches_a_key_that_scatters_versions(engine):
    """The check above fails where it should: keys that put two versions of one row on two shards."""
    local = engine("CREATE TABLE IF NOT EXISTS t_local ON CLUSTER 'ops' (cluster String, job_id String, "
                   "submit_ts DateTime, _version UInt64) ENGINE = ReplicatedReplacingMergeTree("
                   "'/clickhouse/tables/{shard}/{database}/t_local', '{replica}', _version) "
                   "ORDER BY (cluster, job_id, submit_ts)")
    for key, ok in [("cityHash64(cluster, job_id)", True), ("cluster", True), ("rand()", False),
                    ("cityHash64(cluster, job_id, _version)", False), ("cityHash64(job_id, rand())", False)]:
        front = engine(f"CREATE TABLE IF NOT EXISTS t ON CLUSTER 'ops' AS t_local "
                       f"ENGINE = Distributed('ops', currentDatabase(), 't_local', {key})")
        tables = replay([local, front])
        assert keeps_versions_on_one_shard(tables["t"], tables["t_local"]) is ok, key


# --- migration 0009 on a cluster ----------------------------------------------------------------------

def _migration(name: str, dep: Deployment) -> list[str]:
    [text] = [t for n, t in sql_files("migrations") if n == name]
    return [r for s in split_statements(text) for r in render(s, dep)]


def test_0009_on_a_cluster_copies_every_shards_rows_back_to_their_shard(engine, cluster_schema):
    first_0009 = min(i for i, p in enumerate(cluster_schema) if "etl_quarantine_v2" in p.text)
    tables = replay(cluster_schema[:first_0009])
    old_front = tables["etl_quarantine"]
    stmts = [engine(s) for s in _migration("0009_quarantine_identity.sql", CLUSTER)]
    kinds = [p.tree.kind for p in stmts]
    assert kinds == ["DropQuery", "CreateQuery", "InsertQuery", "Rename", "AlterQuery", "DropQuery"]
    drop0, create, insert, exchange, alter, drop1 = stmts

    # the copy reads the Distributed table (every shard; FINAL per shard), not this node's local table
    assert {n.name for n in insert.tree.find("TableIdentifier")} == {"etl_quarantine"}
    assert tables["etl_quarantine"].engine == "Distributed"
    assert re.search(r"\bFROM etl_quarantine FINAL\b", insert.text)
    assert keeps_versions_on_one_shard(old_front, local_of(old_front, tables))
    # ... and writes every shard's new local table, each row where etl_quarantine's key sends it
    target = insert.tree.children[0]
    assert (target.kind, target.name) == ("Function", "cluster")
    cluster_arg, _db, local, key = target.child("ExpressionList").children
    assert (cluster_arg.name, local.name) == ("'ops'", "'etl_quarantine_v2_local'")
    assert key.shape() == old_front.sharding_key.shape()
    # ... synchronously: the rows are on their shards when the exchange runs, not queued on this node
    assert "Set" in [c.kind for c in insert.tree.children]
    assert re.search(r"\bSETTINGS insert_distributed_sync = 1$", insert.text)
    tables = replay([drop0, create], tables)
    assert tables["etl_quarantine_v2_local"].keeper_path == (
        "/clickhouse/tables/{shard}/{database}/etl_quarantine_v2_local")  # sharded, as etl_quarantine_local

    # the exchange swaps the local tables on every node; the Distributed table in front gets the new column
    assert {c.name for c in exchange.tree.children} == {"etl_quarantine_local", "etl_quarantine_v2_local"}
    assert "occurrence" not in tables["etl_quarantine"].columns
    tables = replay([exchange, alter, drop1], tables)
    front, local_t = tables["etl_quarantine"], tables["etl_quarantine_local"]
    assert front.columns == local_t.columns == ["source", "line_no", "reason", "raw", "occurrence", "loaded_at"]
    assert "etl_quarantine_v2_local" not in tables and "etl_quarantine_v2" not in tables
    assert keeps_versions_on_one_shard(front, local_t)
    # the drops free the Keeper path at once: a rerun creates etl_quarantine_v2_local again right away
    assert all(re.search(r" ON CLUSTER ops SYNC$", p.text) for p in (drop0, drop1))


def test_0009_on_one_server_is_unchanged(engine):
    """The single-server rendering is the statements it always was: none of the cluster's extras."""
    single = _migration("0009_quarantine_identity.sql", Deployment("single"))
    assert [engine(s).tree.kind for s in single] == ["DropQuery", "CreateQuery", "InsertQuery", "Rename",
                                                     "DropQuery"]
    assert single[2] == (
        "INSERT INTO etl_quarantine_v2 (source, line_no, reason, raw, occurrence, loaded_at)\n"
        "SELECT source, line_no, reason, raw,\n"
        "       toUInt32(row_number() OVER (PARTITION BY source, raw, reason ORDER BY line_no) - 1), loaded_at\n"
        "FROM etl_quarantine FINAL")
    assert [single[0].strip(), single[4].strip()] == ["DROP TABLE IF EXISTS etl_quarantine_v2",
                                                      "DROP TABLE etl_quarantine_v2"]
    assert not any(w in s for s in single for w in ("SYNC", "SETTINGS", "cluster(", "_local", "ON CLUSTER"))


def test_0009_rebuild_keeps_every_row_when_run(engine):
    """The single-server statements run on the engine: two versions of one (source, line) collapse (FINAL),
    identical bad lines keep their occurrence numbers."""
    wh = engine.wh
    try:
        [create_old] = [s for s in _migration("0001_slurm_accounting.sql", Deployment("single"))
                        if s.startswith("CREATE TABLE IF NOT EXISTS etl_quarantine ")]
        wh.command(create_old)
        wh.command("INSERT INTO etl_quarantine VALUES ('f', 1, 'bad', 'x', '2026-01-01 00:00:00'), "
                   "('f', 1, 'bad', 'x', '2026-01-02 00:00:00'), ('f', 7, 'bad', 'x', '2026-01-01 00:00:00'), "
                   "('g', 1, 'bad', 'x', '2026-01-01 00:00:00')")
        for s in _migration("0009_quarantine_identity.sql", Deployment("single")):
            wh.command(s)
        got = wh.query_rows("SELECT source, line_no, occurrence, toString(loaded_at) FROM etl_quarantine FINAL "
                            "ORDER BY source, line_no")
        assert got == [("f", 1, 0, "2026-01-02 00:00:00"), ("f", 7, 1, "2026-01-01 00:00:00"),
                       ("g", 1, 0, "2026-01-01 00:00:00")]
    finally:
        wh.command("DROP TABLE IF EXISTS etl_quarantine")
        wh.command("DROP TABLE IF EXISTS etl_quarantine_v2")


# --- FINAL on Distributed tables ----------------------------------------------------------------------

_FINAL_READ = r"\b(?:FROM|JOIN)\s+(\{?\w+\}?)(?:\s+(?:AS\s+)?(?!FINAL\b)\w+)?\s+FINAL\b"


def _sql_final_reads() -> list[tuple[str, str]]:
    reads = []
    for path in sorted((REPO / "sql").rglob("*.sql")):
        code = "\n".join(re.sub(r"--.*$", "", ln) for ln in path.read_text().splitlines())
        found = re.findall(_FINAL_READ, code, re.IGNORECASE)
        assert len(found) == len(re.findall(r"\bFINAL\b", code, re.IGNORECASE)), f"unread FINAL in {path}"
        reads += [(str(path.relative_to(REPO)), t.replace("{{local}}", "")) for t in found]
    return reads


def _python_final_reads() -> list[tuple[str, str]]:
    """FINAL reads in the Python's SQL strings; f-strings' {table} resolved through the literal names the
    function is called with in the same module."""
    reads = []
    for folder in ("core", "etl", "analytics", "cli", "reports"):
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
            in_fstring = {id(c) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for c in ast.walk(n)}
            for n in ast.walk(tree):
                if isinstance(n, ast.JoinedStr):
                    text = "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                                   for v in n.values)
                elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in in_fstring:
                    text = n.value
                else:
                    continue
                found = re.findall(_FINAL_READ, text)
                if re.search(r"\b(SELECT|FROM)\b", text):  # SQL, not prose
                    assert len(found) == len(re.findall(r"\bFINAL\b", text)), f"unread FINAL in {path}: {text}"
                for t in found:
                    if not t.startswith("{"):
                        reads.append((str(path.relative_to(REPO)), t))
                        continue
                    fn = n
                    while not isinstance(fn, ast.FunctionDef):
                        fn = parents[fn]
                    params = [a.arg for a in fn.args.args]
                    assert t.strip("{}") in params, f"{path}: {t} read with FINAL is not a parameter of {fn.name}"
                    pos = params.index(t.strip("{}"))
                    names = [c.args[pos].value for c in ast.walk(tree) if isinstance(c, ast.Call)
                             and getattr(c.func, "id", None) == fn.name and len(c.args) > pos
                             and isinstance(c.args[pos], ast.Constant)]
                    assert names, f"{path}: {fn.name}'s {t} read with FINAL, called with no literal table"
                    reads += [(str(path.relative_to(REPO)), name) for name in names]
    return reads


def test_final_reads_are_shard_local_on_a_cluster(engine, cluster_schema):
    """Every table read with FINAL (marts, views, refreshes, the loads' checks) is, on a cluster, either a
    Distributed table whose key keeps a row's versions on one shard (FINAL runs on each shard) or a table
    every node holds whole (Keeper path /all/). FINAL only means something on a Replacing engine."""
    create_schema_migrations = _apply_on_a_new_cluster()[0]
    tables = replay([engine(create_schema_migrations), *cluster_schema])
    reads = _sql_final_reads() + _python_final_reads()
    by_table: dict[str, list[str]] = {}
    for where, name in reads:
        by_table.setdefault(name, []).append(where)
    assert len(reads) >= 40 and "slurm_job_run" in by_table and "schema_migrations" in by_table
    sharded, whole = set(), set()
    for name, where in sorted(by_table.items()):
        assert name in tables, (name, where)
        t = tables[name]
        if t.engine == "Distributed":
            local = local_of(t, tables)
            assert "Replacing" in local.engine and keeps_versions_on_one_shard(t, local), (name, where)
            sharded.add(name)
        else:
            assert t.engine.startswith("ReplicatedReplacing"), (name, t.engine, where)
            assert t.keeper_path.startswith("/clickhouse/tables/all/"), (name, t.keeper_path, where)
            whole.add(name)
    # (a FINAL read added later is checked by the loop above; these are the ones there are today)
    assert sharded >= {"slurm_job_run", "etl_quarantine", "gpu_sample", "node_sample", "xid_event", "gpu_hour",
                       "node_hour", "capacity_node_hour", "lustre_job_io"}
    assert whole >= {"schema_migrations", "account_project", "cost_model", "node_inventory", "node_event",
                     "reservation", "etl_watermark"}
