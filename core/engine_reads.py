"""A read-only command's queries on the embedded engine without the client: Arrow tables from a chDB handle.

A command that only reads (`ops-report summary`; the API's marts) sends its schema check and its queries as
Arrow reads. Through clickhouse-connect each costs the client's import (0.07 CPU-s with the bytecode cached,
its HTTP stack and asyncio included, for the ``chdb://`` form too), its handshake and, per read, a
snapshot, a SET and a restore of the Arrow string setting: together more than a third of a command's fixed
cost (issue 51, docs/benchmarks.md). Here those reads go to a chDB handle of the same engine, with the
session the client would have set (its two handshake settings, Arrow strings as text) and the parameters
bound as the client binds them (``bind``): the same statement, the same settings, the same table.

Only what is bound the same way is taken here (strings, numbers, dates, lists of them, each a ``{name:Type}``
placeholder the SQL names; no Tuple, DateTime or Map types), and only reads: whatever else, and any read the
engine refuses, goes to the client (core/warehouse.py), whose errors and binding stay the product's. Once
the client exists, every statement goes through it (one session: temporary tables, SET).
"""

from __future__ import annotations

import threading
from datetime import date, datetime

# the client's session (clickhouse-connect's handshake, driver/_backend/orchestration.py: the two settings it
# writes on a server that lets it) and the setting its query_arrow sets for each read
SESSION = ("SET date_time_input_format = 'best_effort'",
           "SET cast_string_to_dynamic_use_inference = '1'",
           "SET output_format_arrow_string_as_string = '1'")

# clickhouse-connect's escaping of a parameter's text (driver/binding.py: escape_str)
_ESCAPES = str.maketrans({c: "\\" + c for c in ("\\", "'", "`", "\t", "\n")})
# placeholder types the client rewrites the value for (named tuples, DateTime64 precision, time zones)
_REWRITTEN = ("tuple", "datetime", "variant", "map", "json", "dynamic")


class Handle:
    """A chDB handle on the engine at ``path`` with the client's session settings; one read at a time (as the
    client's lock keeps its handle: a second query on a handle whose result is still being read gets nothing)."""

    def __init__(self, path):
        import chdb

        self._conn = chdb.connect(str(path))
        self._lock = threading.Lock()
        try:
            for s in SESSION:
                self._conn.query(s)
        except BaseException:
            self._conn.close()
            raise

    def query_arrow(self, sql: str, params: dict):
        """The Arrow table of one read, or None when it is the client's to run (see :func:`bind`), or when the
        engine refused it: the client runs it again and raises its own error."""
        sql = sql.rstrip().rstrip(";")
        bound = bind(sql, params)
        if bound is None:
            return None
        import pyarrow.ipc

        try:
            with self._lock:
                data = self._conn.query(sql, "Arrow", params=bound).bytes()
            return pyarrow.ipc.RecordBatchFileReader(data).read_all()
        except Exception:
            return None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _scalar(v, top: bool) -> str | None:
    if isinstance(v, str):
        return v.translate(_ESCAPES) if top else "'" + v.translate(_ESCAPES) + "'"
    if isinstance(v, (bool, int, float)):
        return str(v)
    if isinstance(v, date) and not isinstance(v, datetime):
        return v.isoformat() if top else f"'{v.isoformat()}'"
    return None


def bind(sql: str, params: dict) -> dict[str, str] | None:
    """The parameters as clickhouse-connect sends them for ``sql`` (its format_bind_value at the top level), or
    None when it would bind them otherwise (a type it rewrites, a value not listed here, a name the SQL does
    not use as ``{name:Type}``: the client then formats the SQL itself)."""
    out = {}
    for k, v in params.items():
        at = sql.find("{" + k + ":")
        if at < 0:
            return None
        kind = sql[at + len(k) + 2:sql.find("}", at)].lower()
        if any(w in kind for w in _REWRITTEN):
            return None
        if isinstance(v, list):
            items = [_scalar(x, False) for x in v]
            if any(x is None for x in items):
                return None
            out[k] = "[" + ", ".join(items) + "]"
        else:
            text = _scalar(v, True)
            if text is None:
                return None
            out[k] = text
    return out
