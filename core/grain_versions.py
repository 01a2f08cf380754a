"""Which version of the SQL built each intermediate grain: a fingerprint per grain, recorded in the warehouse.

A grain's rows are written by its refresh statements (sql/intermediate/*.sql that are not views) and keep
what the SQL said when they were written: a warehouse upgraded to a new version keeps the old rows until
they are rebuilt. The fingerprint of a grain is a hash of what decides its rows: the statements of its files
as sent (includes inlined, comments left out, so that a reworded comment rebuilds nothing), the SQL functions
and intermediate views they name (followed through the functions and views those name), the names of the
migrations (a new table or column a grain reads or writes) and the fingerprints of the grains it reads. It
is recorded beside the migrations in ``schema_migrations`` (kind ``grain``, name ``grains/<grain>``); a grain
whose recorded fingerprint differs from today's (or is missing: a warehouse built before the record) is
stale, and the writers rebuild it over the whole loaded history (etl/grains.py: ``rebuild_stale``).

A new warehouse records today's fingerprints when its schema is created: its grains are empty, and the
loads fill them with today's SQL.
"""

from __future__ import annotations

import hashlib
import re
import sys
from functools import lru_cache

from ops_warehouse.sqlfiles import split_statements, sql_files

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the package tomllib came from (a dependency there: pyproject.toml)
    import tomli as tomllib

# what each intermediate model declares about itself, in the ``--- `` lines of its file (TOML under
# ``[model]``, as the marts declare themselves: analytics/declarations.py):
#   kind      "incremental_by_time_range" (refreshed for whole units, ``unit``, of [from_ts, to_ts)),
#             "incremental_by_key" (the rows of the keys a load wrote), "full", "view" (CREATE VIEW, what it
#             ``defines``), "include" (inlined by {{intermediate name}}), "query" (read by etl/grains.py)
#   grain     the group refreshed and fingerprinted together (its files' statements are one fingerprint)
#   writes    the tables its statements write; reads: the tables, views and includes it names
#   requires  the table, or list of tables (any one suffices), without which the model has nothing to write
#             (capacity_node_hour: node_inventory; run_telemetry: node_sample or gpu_sample)
#   settings  engine settings its refresh's writing statements run with, in their own SETTINGS clause (a table
#             of names and numbers or strings); how the rows are planned, not which: not in the fingerprint
# The grains, their files and the grains they read follow from these, in dependency order (``GRAINS``), and
# etl/grains.py refreshes a grain's files in that order: nothing keeps the order by hand.
_KINDS = ("incremental_by_time_range", "incremental_by_key", "full", "view", "include", "query")
_KEYS = {"kind", "unit", "grain", "writes", "reads", "defines", "requires", "settings"}


@lru_cache(maxsize=None)
def _installed_models() -> dict[str, dict]:
    return _read_models(None)


def models(root=None) -> dict[str, dict]:
    """Every sql/intermediate file's declaration (name -> the ``[model]`` table): those installed are read
    once."""
    return _installed_models() if root is None else _read_models(root)


def _read_models(root) -> dict[str, dict]:
    """Every sql/intermediate file's declaration (name -> the ``[model]`` table), checked: a known kind, known
    keys, and every table it says it writes or reads named in its statements."""
    out: dict[str, dict] = {}
    for file, text in sql_files("intermediate", root):
        name = file.removesuffix(".sql")
        lines = [ln[4:] if ln.startswith("--- ") else ln[3:] for ln in text.splitlines() if ln.startswith("---")]
        if not lines:
            raise ValueError(f"sql/intermediate/{name}.sql declares nothing (a '--- [model]' block)")
        m = tomllib.loads("\n".join(lines)).get("model", {})
        if m.get("kind") not in _KINDS or set(m) - _KEYS:
            raise ValueError(f"sql/intermediate/{name}.sql: kind {m.get('kind')!r} or keys {sorted(set(m) - _KEYS)}")
        settings = m.get("settings", {})
        if not isinstance(settings, dict) or not all(
                isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in settings.values()):
            raise ValueError(f"sql/intermediate/{name}.sql: settings must be a table of engine settings "
                             "(name = number or string)")
        code = set(_WORD.findall("\n".join(_code(text))))
        for word in [*m.get("writes", ()), *m.get("reads", ()), *m.get("defines", ())]:
            if word not in code and "{{intermediate " + word + "}}" not in text:
                raise ValueError(f"sql/intermediate/{name}.sql declares {word}, which its statements never name")
        out[name] = m
    return out


def _grains(decl: dict[str, dict]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each grain, its files in the order they are built, and the grains it reads, the grains in the order
    they are built: followed through the views and includes a model reads (a stable topological order, ties
    by name)."""
    writer = {t: n for n, m in decl.items() if "grain" in m for t in m.get("writes", ())}
    defined = {d: n for n, m in decl.items() for d in m.get("defines", ())} | {
        n: n for n, m in decl.items() if m["kind"] == "include"}

    def upstream(name: str) -> set[str]:
        """The models that write what ``name`` reads, through views and includes."""
        seen, todo, out = set(), list(decl[name].get("reads", ())), set()
        while todo:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            if r in writer:
                out.add(writer[r])
            elif r in defined:
                todo += decl[defined[r]].get("reads", ())
        return out - {name}

    def order(nodes: set[str], deps: dict[str, set[str]]) -> list[str]:
        done: list[str] = []
        while len(done) < len(nodes):
            ready = sorted(n for n in nodes - set(done) if deps[n] <= set(done))
            if not ready:
                raise ValueError(f"the intermediate models read each other in a cycle: {sorted(nodes - set(done))}")
            done.append(ready[0])
        return done

    groups: dict[str, set[str]] = {}
    for n, m in decl.items():
        if "grain" in m:
            groups.setdefault(m["grain"], set()).add(n)
    ups = {n: upstream(n) for g in groups.values() for n in g}
    reads = {g: {decl[u]["grain"] for n in files for u in ups[n]} - {g} for g, files in groups.items()}
    return {g: (tuple(order(groups[g], {n: ups[n] & groups[g] for n in groups[g]})), tuple(sorted(reads[g])))
            for g in order(set(groups), reads)}


RECORD_PREFIX = "grains/"
_WORD = re.compile(r"[A-Za-z_]\w*")
_INCLUDE = re.compile(r"\{\{intermediate (\w+)\}\}")
_CREATE_FUNCTION = re.compile(r"CREATE\s+OR\s+REPLACE\s+FUNCTION\s+(\w+)", re.IGNORECASE)
_CREATE_VIEW = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?`?(\w+)", re.IGNORECASE)


def _code(text: str) -> list[str]:
    """A file's statements as sent (whole-line comments left out)."""
    return split_statements(text)


def fingerprints(root=None) -> dict[str, str]:
    """Today's fingerprint of every grain (``root``: a folder laid out like sql/, default the installed one)."""
    texts = {f"{folder}/{name}": text for folder in ("functions", "intermediate")
             for name, text in sql_files(folder, root)}
    # the definitions a statement may name: a function's file, a view's file (by the names they create)
    defines: dict[str, str] = {}
    for rel, text in texts.items():
        for name in (_CREATE_FUNCTION if rel.startswith("functions/") else _CREATE_VIEW).findall(text):
            defines[name] = rel
    migrations = "\n".join(name for name, _ in sql_files("migrations", root))

    def closure(files: list[str]) -> list[str]:
        """The files ``files`` read, followed through includes, functions and views, each once, in order."""
        seen: list[str] = []
        pending = list(files)
        while pending:
            rel = pending.pop(0)
            if rel in seen:
                continue
            seen.append(rel)
            code = "\n".join(_code(texts[rel]))
            pending += [f"intermediate/{inc}.sql" for inc in _INCLUDE.findall(code)]
            pending += [defines[w] for w in dict.fromkeys(_WORD.findall(code)) if w in defines]
        return seen

    out: dict[str, str] = {}
    for grain, (files, reads) in GRAINS.items():
        h = hashlib.sha256(migrations.encode())
        for rel in closure([f"intermediate/{f}.sql" for f in files]):
            h.update(f"\n-- {rel}\n".encode() + "\n".join(_code(texts[rel])).encode())
        for upstream in reads:
            h.update(f"\n-- grain {upstream} {out[upstream]}".encode())
        out[grain] = h.hexdigest()
    return out


def stale_grains(recorded: dict[str, str], current: dict[str, str] | None = None) -> tuple[str, ...]:
    """The grains whose recorded fingerprint (``recorded``: schema_migrations' name -> checksum) is not
    today's, in the order they are built."""
    current = fingerprints() if current is None else current
    return tuple(g for g, fp in current.items() if recorded.get(RECORD_PREFIX + g) != fp)


def record_grains(wh, grains, current: dict[str, str] | None = None) -> None:
    """Record that ``grains`` now hold what today's SQL produces."""
    current = fingerprints() if current is None else current
    for g in grains:
        wh.command("INSERT INTO schema_migrations (name, kind, checksum, applied_at) "
                   "VALUES ({n:String}, 'grain', {c:String}, now64(3))", {"n": RECORD_PREFIX + g, "c": current[g]})


# each grain: the files whose statements write it, in the order they are built, and the grains it reads; the
# grains in the order they are built (from the declarations above)
GRAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = _grains(models())
