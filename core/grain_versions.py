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

from ops_warehouse.sqlfiles import split_statements, sql_files

# each grain, the files whose statements write it, and the grains it reads, in the order they are built:
# the hourly telemetry rollups from the samples, the daily GPU rollup from them, the job-run model and the
# history's as-of time from the loaded runs, then the hourly grains (capacity_node_hour, run_sample_hour,
# run_node_hour, run_telemetry), built together (etl/grains.py: refresh_capacity) from all of these
GRAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "telemetry_hourly": (("telemetry_hourly",), ()),
    "gpu_day": (("gpu_day",), ("telemetry_hourly",)),
    "job_run": (("as_of_by_cluster", "job_run"), ()),
    "hourly": (("run_sample_hour", "capacity_node_hour", "run_node_hour", "run_telemetry"),
               ("job_run", "telemetry_hourly")),
}
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
