"""The mart layer: parameterized SQL under sql/marts/ over the facts and the intermediate grains.

Every statistic of the monthly report, and of an analyst's notebook, is one of these files run for a
window ``[from_ts, to_ts)`` of one Slurm cluster (and a project, where the file takes one):

    from ops_warehouse.analytics.marts import run_mart
    sizes = run_mart(wh, "job_sizes", cluster="ai1", window=(w0, w1), project="A")

Reads only: the grains the marts read (capacity_node_hour, run_node_hour, gpu_day, and job_run and
as_of_by_cluster behind the views fct_job_run and cluster_as_of) are kept up to date by the loads
(ops_warehouse.etl.grains; docs/sql.md, "Grains").
"""

from __future__ import annotations

import itertools
import re
import threading
import weakref
from collections import Counter
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache

import polars as pl
from ops_warehouse.analytics import declarations
from ops_warehouse.analytics.mart_schedule import groups
from ops_warehouse.sqlfiles import mart_query, sql_query
from ops_warehouse.warehouse import INTERPRETED

# The parameters some marts take beyond the window and the project, with the report's values (the report
# records the values it ran with): each declared by the marts that name it, in their "--- parameters" line,
# and explained in the comment above it (hung_jobs.sql: hang_minutes = 20, and why 20, not 30); read here
# once (ops_warehouse.analytics.declarations), one value whoever declares it.
PARAMETERS = declarations.parameters()


# The engine's settings every mart statement runs with, where the engine knows them and the user may set them
# (a read-only server user, readonly = 1, may not; an engine before the setting does not know it): the
# statement runs the same without them, only slower. analyzer_inline_views: the analyzer plans an ordinary
# view a mart reads (fct_job_run, and dim_account inside it; cluster_as_of) as the subquery it stands for, in
# the mart's own query, instead of as a view of its own: the same rows (the view's own SETTINGS kept), the
# report's mart statements planned in 0.81 CPU-s where they took 1.05 (docs/benchmarks.md, issue 51, round 7).
# INTERPRETED (core/warehouse.py): the engine's JIT compilation of expressions off. A report runs each mart once
# with its own window and project, and what the engine compiles (LLVM, milliseconds a statement) serves that
# statement alone: the cluster report in fresh processes 2.78 -> 2.45 CPU-s median, the same JSON byte for byte
# (docs/benchmarks.md, issue 51 round 11, coordinator).
SETTINGS = {"analyzer_inline_views": 1, **INTERPRETED}


def _settings(wh) -> str:
    """SETTINGS as the clause ending a mart statement on ``wh``'s engine ('' for the ones it cannot take), asked
    of the engine once a warehouse object, as an Arrow read: through the client's ``server_settings`` every mart
    read made the client, which a read on the embedded engine otherwise never needs (core/engine_reads.py)."""
    asked = tuple(SETTINGS.items())
    if getattr(wh, "_mart_settings", (None, ""))[0] != asked:
        names = wh.query_arrow("SELECT name FROM system.settings WHERE name IN {names:Array(String)} "
                               "AND toString(getSetting('readonly')) IN ('0', '2')",
                               {"names": list(SETTINGS)}).column(0).to_pylist()
        taken = {k: v for k, v in SETTINGS.items() if k in names}
        clause = "\nSETTINGS " + ", ".join(f"{k} = {v!r}" for k, v in taken.items()) if taken else ""
        wh._mart_settings = asked, clause
    return wh._mart_settings[1]


def mart_sql(name: str) -> str:
    """The text of sql/marts/<name>.sql, comments dropped, the marts and intermediate models it includes
    (``{{mart name}}``, ``{{intermediate name}}``) inlined (ops_warehouse.sqlfiles.mart_query)."""
    return mart_query(name)


class _Evaluated:
    """The marts evaluated so far in one :func:`each_mart_once` block: a temporary table per mart and
    parameters, the handle whose session holds it, the rows read ahead for the marts asked for
    (:func:`evaluate_ahead`), and how many times each mart was evaluated (included ones and the ones asked
    for). ``handles``: how many engine handles :func:`evaluate_ahead` may use; the block's own beyond the
    first are opened once and closed with the block."""

    def __init__(self, wh, handles: int):
        self.tables: dict[tuple, str] = {}
        self.on: dict[tuple, object] = {}
        self.frames: dict[tuple, pl.DataFrame] = {}
        self.evaluations: Counter[str] = Counter()
        self.handles = [wh]
        self.most_handles = handles
        self.asked: list[tuple[str, dict]] | None = None  # recording what a report asks for (asked_for)
        self.kept: dict = {}  # what is worked out from the marts' rows, for the block (kept_in_block)
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        # a mart's query (its included marts' tables named without their numbers) and its parameters' types →
        # [the first table that held its result, that table's handle, its columns once read] (_table: the next
        # evaluation of the same query with other values, another project's, takes its columns from there)
        self.shapes: dict[tuple, list] = {}
        # the marts evaluate_ahead found one other mart alone reads, to be inlined into it (no table), and how
        # many evaluations were inlined so, by mart (each also counted in evaluations)
        self.inline: set[tuple] = set()
        self.inlined: Counter[str] = Counter()


_ONCE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@contextmanager
def each_mart_once(wh, handles: int = 2):
    """Inside the block, a mart asked for (:func:`run_mart`) or included by another query (``{{mart name}}``) is
    evaluated once per parameters into a temporary table of the session (nothing is written to the
    warehouse, as for the what-if's tables) and every reader reads that table: a report or the laws evaluate
    each mart once, and an included mart gives its whole result whichever of its columns the includer reads
    (a GROUPING SETS total row survives a reader of none of its aggregates). Outside a block, a run_mart
    or run_file call whose query includes a mart runs in a block of its own. The marts over the what-if's own temporary tables are
    always inlined (those tables change from one replay to the next). Yields the block's evaluation counts
    (``.evaluations``: mart → times); nested blocks share the outer one. ``handles``: how many engine handles
    :func:`evaluate_ahead` spreads the marts over (1: all on ``wh``, one after the other)."""
    if wh in _ONCE:
        yield _ONCE[wh]
        return
    state = _ONCE[wh] = _Evaluated(wh, handles)
    try:
        yield state
    finally:
        del _ONCE[wh]
        for key, table in state.tables.items():
            try:
                state.on[key].command(f"DROP TEMPORARY TABLE IF EXISTS {table}")
            except Exception:  # the session is gone (a closed engine): so are its temporary tables
                pass
        for handle in state.handles[1:]:
            handle.close()


def kept_in_block(wh) -> dict | None:
    """Inside an :func:`each_mart_once` block of ``wh``, a dict that lives as long as the block, for a result
    worked out from the marts' rows that every reader in the block would work out the same (the what-if's
    replays of a month, the same for a cluster report and a project's: analytics/whatif.py): the data does not
    change inside a block, as its marts' tables already assume. None outside a block."""
    state = _ONCE.get(wh)
    return None if state is None else state.kept


def _text(wh, relpath: str, params: dict, state: "_Evaluated | None" = None) -> str:
    """The query of ``relpath`` for ``params``: includes inlined, or, inside :func:`each_mart_once` (``state``:
    the block of ``wh``, or of the handle's warehouse for a second handle), the included marts read from
    their tables (evaluated first on ``wh``, in dependency order, when not yet)."""
    state = state or _ONCE.get(wh)
    if state is None:
        return sql_query(relpath)

    def included(name: str, whole_cluster: bool) -> str | None:
        if _reads_whatif(name):
            return None  # inlined
        key = _key(name, {**params, "project": ""} if whole_cluster else params)[0]
        with state._lock:
            if key in state.inline:  # its one reader: inlined here, once (a later reader gets a table)
                state.inline.discard(key)
                state.evaluations[name] += 1
                state.inlined[name] += 1
                return None
        table = _table(wh, state, name, {**params, "project": ""} if whole_cluster else params)
        # (None: a table of another handle's session, which this one cannot read: inlined)
        return None if table is None else f"SELECT * EXCEPT {_ROW} FROM {table}"

    return sql_query(relpath, included)


def _as_exported(name: str, params: dict) -> bool:
    # the evaluation `ops-report export` makes of the mart: it declares an export place and runs with its
    # declared parameters' values
    m = declarations.mart(name)
    return m.export is not None and all(params.get(k) == v for k, v in m.parameters.items())


@lru_cache(maxsize=None)
def _keeps_totals(name: str) -> bool:
    # rows a GROUPING SETS, ROLLUP, CUBE or WITH TOTALS adds, which only a table of the whole result keeps for a
    # reader that selects none of the aggregates (each_mart_once)
    return bool(re.search(r"\b(GROUPING\s+SETS|ROLLUP|CUBE|WITH\s+TOTALS)\b", mart_sql(name), re.IGNORECASE))


def _inlined_by_one_reader(name: str, readers: int) -> bool:
    # an included mart evaluated inside its one reader's query rather than kept in a table: it includes none
    # itself and has no total rows that a table keeps whatever its reader selects (GROUPING SETS); its table
    # would cost a second analysis, the table's write and its read (largest_jobs' job_efficiency, idle_gpu_jobs'
    # run_observed, chargeback's run_allocation_daily; docs/benchmarks.md, issue 51, round 9). (Named once in
    # all: a reader naming it twice would find it inlined once and then make its table.)
    return readers == 1 and not declarations.mart(name).depends and not _keeps_totals(name)


@lru_cache(maxsize=None)
def _reads_whatif(name: str) -> bool:
    # (whatif_history, whatif_nodes and whatif_reservations read the history and the inventory, not the
    # replays' tables: those are kept like any mart)
    return bool(re.search(r"\bwhatif_(run|node)\b", mart_sql(name)))


# the column a mart's table numbers its rows in, so that a reader of the mart itself gets them in the mart's
# order (a Memory table read by several threads hands its blocks back in any order)
_ROW = "_mart_row"


def _parameter_names(name: str) -> frozenset[str]:
    """The parameters the mart's text (its includes inlined) names: what its result depends on besides the data
    (read once per process, shared with the API's keywords)."""
    return declarations.named(name)


def _key(name: str, params: dict) -> tuple[tuple, dict]:
    """The key of mart ``name``'s result for ``params`` (the parameters the mart names, so a mart asked for by
    the report and included by another mart, hung_jobs by node_health and by campaigns, with the same window,
    project and settings is one evaluation), and the parameters it runs with (its scope's project)."""
    params = {**params, "project": _scoped(declarations.mart(name), params.get("project", ""))}
    return (name, tuple(sorted((k, repr(params.get(k))) for k in _parameter_names(name)))), params


def _table(wh, state: "_Evaluated", name: str, params: dict) -> str | None:
    """The temporary table holding mart ``name``'s result for ``params``, evaluated on handle ``wh`` on first
    use; None when it is a table of another handle (whose session alone can read it)."""
    key, params = _key(name, params)
    if key not in state.tables:
        sql = _text(wh, f"marts/{name}.sql", params, state)
        with state._lock:  # (two handles evaluate at once: evaluate_ahead)
            table = f"_mart_{name}_{next(state._numbers)}"
        select, bound = f"{_numbered(sql)}{_settings(wh)}", _bound(sql, params)
        shape = (_NUMBERED.sub(r"\1", sql), tuple(sorted((k, type(v).__name__) for k, v in bound.items())))
        with state._lock:
            like = state.shapes.get(shape)
        if like is not None and like[1] is wh:
            # the same query with other values (the laws: a mart for each project): its columns are the first
            # table's, and CREATE ... AS SELECT analyzes the query twice (once for the columns, once to fill
            # them) where INSERT ... SELECT into a table of known columns analyzes it once: 0.38 CPU-s
            # instead of 0.59 for seven marts of a project (docs/benchmarks.md, issue 51, round 7, engineer G)
            if like[2] is None:
                like[2] = ", ".join(f"{_quoted(c)} {t}" for c, t, *_ in wh.query_rows(f"DESCRIBE TABLE {like[0]}"))
            wh.command(f"CREATE TEMPORARY TABLE {table} ({like[2]}) ENGINE = Memory")
            try:
                wh.command(f"INSERT INTO {table} {select}", bound)
            except BaseException:  # no half-made table left behind: the error is the caller's
                wh.command(f"DROP TEMPORARY TABLE IF EXISTS {table}")
                raise
        else:
            wh.command(f"CREATE TEMPORARY TABLE {table} ENGINE = Memory AS {select}", bound)
            with state._lock:
                state.shapes.setdefault(shape, [table, wh, None])
        with state._lock:
            state.tables[key], state.on[key] = table, wh
            state.evaluations[name] += 1
    return state.tables[key] if state.on[key] is wh else None


def _numbered(sql: str) -> str:
    # rowNumberInAllBlocks() over the mart's output keeps its ORDER BY (a stateful function: the engine keeps the
    # sort under it)
    return f"SELECT *, rowNumberInAllBlocks() AS {_ROW} FROM ({sql})"


# an included mart's table in a query's text, its number apart (the shape of a query: _Evaluated.shapes)
_NUMBERED = re.compile(r"\b(_mart_\w+)_\d+\b")


def _quoted(column: str) -> str:
    return "`" + column.replace("\\", "\\\\").replace("`", "\\`") + "`"


def _read(handle, table: str) -> pl.DataFrame:
    return _frame(handle.query_arrow(f"SELECT * EXCEPT {_ROW} FROM {table} ORDER BY {_ROW}"))


def _rows_of(wh, state: "_Evaluated", name: str, params: dict) -> pl.DataFrame:
    """Mart ``name``'s rows for ``params``, evaluated on handle ``wh`` as a query of its own (its included marts
    read from their tables) and kept in the block's frames, with no table of its own: for a mart that nothing
    evaluated in the block includes. A table costs the engine a second analysis of the query (CREATE ... AS
    SELECT analyzes it once for the columns, once to fill them) and a read of the table after: 15 of the cluster
    report's 32 marts are included by none (docs/benchmarks.md, issue 51, round 9). Should a later query of the
    block include it after all, :func:`_table` evaluates it then."""
    key, params = _key(name, params)
    sql = _text(wh, f"marts/{name}.sql", params, state)
    # the query as a table is filled (its rows numbered) and read (in their order): the same plan under the
    # numbering, so the same rows in the same order, ties in the mart's ORDER BY included
    frame = _frame(wh.query_arrow(f"SELECT * EXCEPT {_ROW} FROM ({_numbered(sql)}) ORDER BY {_ROW}{_settings(wh)}",
                                  _bound(sql, params)))
    with state._lock:
        state.frames[key] = frame
        state.evaluations[name] += 1
    return frame


@contextmanager
def asked_for(wh):
    """Inside an :func:`each_mart_once` block, record the marts :func:`run_mart` is asked for instead of
    evaluating them (each call gets an empty frame): what a report will ask for, found by asking as it does,
    for :func:`evaluate_ahead`. Yields the list of (mart, parameters)."""
    state = _ONCE[wh]
    state.asked = asked = []
    try:
        yield asked
    finally:
        state.asked = None


def evaluate_ahead(wh, asked: list[tuple[str, dict]]) -> None:
    """Evaluate the marts ``asked`` (:func:`asked_for`) and every mart they include, not yet evaluated in this
    :func:`each_mart_once` block, over the block's handles at once (analytics/mart_schedule.py: a group of
    marts joined by includes on one handle), and read the rows of the ones asked for; :func:`run_mart` then
    hands those rows back. One handle (``each_mart_once(wh, handles=1)``, or a single group): on ``wh``, one
    after the other. A mart asked for that none of them includes is read as a query of its own
    (:func:`_rows_of`), and an included one that a single mart here reads (and that includes none) is inlined
    into that reader: a table only where two read it or it is asked for too."""
    state = _ONCE[wh]
    includes: dict[tuple, list[tuple]] = {}
    what: dict[tuple, tuple[str, dict]] = {}

    def visit(name: str, params: dict) -> tuple:
        key, params = _key(name, params)
        if key in includes or key in state.tables:
            return key
        found: list[tuple[str, bool]] = []
        sql_query(f"marts/{name}.sql", lambda n, whole: found.append((n, whole)) or "SELECT 1")
        what[key] = (name, params)
        includes[key] = []  # (a cycle is refused by the loader before this)
        includes[key] = [visit(n, {**params, "project": ""} if whole else params)
                         for n, whole in found if not _reads_whatif(n)]
        return key

    # (a mart whose rows were read before in the block is not evaluated again: a project report asks for the
    # cluster-level marts its cluster report read)
    wanted = {visit(name, params): None for name, params in asked
              if not _reads_whatif(name) and _key(name, params)[0] not in state.frames}
    # the marts asked for that no other mart evaluated here includes: read as queries, no table (_rows_of)
    included = {d for deps in includes.values() for d in deps}
    alone = {k for k in wanted if k not in included}
    # an included mart not asked for, read by one mart here (_inlined_by_one_reader). An exported mart with its
    # declared parameters is kept a table all the same: an export in the same block (the demo's, after its
    # reports) asks for that very evaluation and reads the table, where an inlined one would be evaluated again
    # (job_energy; largest_jobs' job_efficiency, runs_limit 15, is not the export's).
    readers = Counter(d for deps in includes.values() for d in deps)
    inline = {k for k in includes if k not in wanted and _inlined_by_one_reader(what[k][0], readers[k])
              and not _as_exported(*what[k])}
    state.inline |= inline
    handle_index = {id(h): i for i, h in enumerate(state.handles)}
    todo = groups(includes, {k: handle_index[id(state.on[k])] for k in state.tables})
    if len(todo) > 1 and len(state.handles) < state.most_handles:
        state.handles.append(wh.another_handle())
    if len(state.handles) == 1:
        todo = [(0, [k for _, keys in todo for k in keys])]
    free = [keys for at, keys in todo if at is None]
    pinned = {i: [keys for at, keys in todo if at == i] for i in range(len(state.handles))}
    lock, failed = threading.Lock(), []

    def work(i: int) -> None:
        handle = state.handles[i]
        try:
            while True:
                with lock:
                    keys = pinned[i].pop(0) if pinned[i] else free.pop(0) if free else None
                if keys is None:
                    return
                for key in keys:
                    name, params = what[key]
                    if key in inline:
                        continue
                    if key in alone:
                        _rows_of(handle, state, name, params)
                        continue
                    table = _table(handle, state, name, params)
                    if key in wanted and table is not None:
                        state.frames[key] = _read(handle, table)
        except BaseException as e:  # raised again by the caller's thread
            failed.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, len(state.handles))]
    for t in threads:
        t.start()
    work(0)
    for t in threads:
        t.join()
    if failed:
        raise failed[0]


def _scoped(m: declarations.Mart, project: str) -> str:
    """The project mart ``m`` runs for: a cluster-level mart (node_health, cost, ...) is the cluster's in a
    project's report too, whether asked for or included."""
    return "" if m.scope == "cluster" else project


def _bound(sql: str, params: dict) -> dict:
    # only the parameters the text names: a query whose included marts are tables may name none, and
    # clickhouse-connect formats a query given parameters but no {name:Type} in Python's %-style
    return {k: v for k, v in params.items() if "{" + k + ":" in sql}


def site_parameters(cfg) -> dict:
    """The marts' parameters that are not the window, cluster or project: PARAMETERS, and the idle threshold
    and carbon intensity of the site (config [reports] idle_util_pct, [energy] carbon_g_per_kwh: -1 when not
    set, and the marts then give no carbon)."""
    carbon = cfg.carbon_g_per_kwh
    return {**PARAMETERS, "idle_util_pct": cfg.idle_util_pct, "carbon_g_per_kwh": -1.0 if carbon is None else carbon}


def _params(wh, cluster: str, window: tuple[datetime, datetime], project: str, params: dict) -> dict:
    # the site's parameters unless the caller passes others
    return {**site_parameters(wh.cfg), "cluster": cluster, "from_ts": window[0], "to_ts": window[1],
            "project": project, **params}


def run_mart(wh, name: str, *, cluster: str, window: tuple[datetime, datetime], project: str = "",
             **params) -> pl.DataFrame:
    """Mart ``name``'s rows for the window of ``cluster`` (and ``project``): evaluated once per parameters inside
    :func:`each_mart_once`, whether asked for here or included by another mart, and read from its table;
    outside a block, one that includes marts in a block of its own (so they give their whole results there
    too), one that includes none as its query alone."""
    m = declarations.mart(name)  # (an unknown name, or one like ../x, is refused here)
    project = _scoped(m, project)
    state = _ONCE.get(wh)
    if state is None:
        if not m.depends:  # nothing to share: the query alone, no table to fill and read
            return run_file(wh, f"marts/{name}.sql", cluster=cluster, window=window, project=project, **params)
        # a block of its own: the mart read as a query (nothing in the block reads it after), an include it names
        # once inlined as evaluate_ahead inlines one (chargeback's run_allocation_daily, gpu_heatmap's
        # data_through), the others in tables
        with each_mart_once(wh) as own:
            p = _params(wh, cluster, window, project, params)
            found: list[tuple[str, tuple]] = []
            sql_query(f"marts/{name}.sql", lambda n, whole: found.append(
                (n, _key(n, {**p, "project": ""} if whole else p)[0])) or "SELECT 1")
            readers = Counter(k for _, k in found)
            own.inline |= {k for n, k in found if _inlined_by_one_reader(n, readers[k])}
            return _rows_of(wh, own, name, p)
    if state.asked is not None:  # a report saying what it will ask for (asked_for)
        if not _reads_whatif(name):
            state.asked.append((name, _params(wh, cluster, window, project, params)))
        return pl.DataFrame()
    if _reads_whatif(name):  # the what-if's marts read tables that change between replays: never kept
        state.evaluations[name] += 1
        return run_file(wh, f"marts/{name}.sql", cluster=cluster, window=window, project=project, **params)
    key, p = _key(name, _params(wh, cluster, window, project, params))
    if key in state.frames:  # read ahead (evaluate_ahead)
        return state.frames[key]
    if _table(wh, state, name, p) is None:  # a table of another handle: read there
        return _read(state.on[key], state.tables[key])
    return _read(wh, state.tables[key])


def run_file(wh, relpath: str, *, cluster: str, window: tuple[datetime, datetime], project: str = "",
             **params) -> pl.DataFrame:
    """The query of a shipped SQL file of the mart layer's kind (a mart, or a law of sql/checks/ that includes
    marts) with the marts' parameters: the window, the cluster, the project, PARAMETERS and the site's
    settings; the marts it includes served as :func:`run_mart` serves them."""
    if _ONCE.get(wh) is None:
        with each_mart_once(wh):
            return run_file(wh, relpath, cluster=cluster, window=window, project=project, **params)
    p = _params(wh, cluster, window, project, params)
    sql = _text(wh, relpath, p)
    # (a second SETTINGS clause after the query's own, if it has one: the engine takes both)
    return _frame(wh.query_arrow(sql + _settings(wh), _bound(sql, p)))


def run_query(wh, sql: str, *, cluster: str, window: tuple[datetime, datetime], project: str = "",
              **params) -> pl.DataFrame:
    """A query text of the mart layer's kind, includes already inlined as text (:func:`mart_sql`), with the
    marts' parameters: what a mart's text gives without the tables of :func:`each_mart_once`."""
    p = _params(wh, cluster, window, project, params)
    return _frame(wh.query_arrow(sql + _settings(wh), _bound(sql, p)))


def _frame(table) -> pl.DataFrame:
    df = pl.from_arrow(table)
    # ClickHouse hands DateTime to Arrow as epoch seconds: columns named *_ts are times (UTC)
    return df.with_columns(pl.from_epoch(pl.col(c).cast(pl.Int64), "s").dt.replace_time_zone("UTC")
                           for c in df.columns if c.endswith("_ts") and df.schema[c].is_integer())
