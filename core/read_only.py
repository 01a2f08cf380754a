"""Reading an embedded warehouse this process may not write: an analyst's read-only mount, a folder of another
user (issue 49). chDB locks a warehouse it opens by writing <warehouse>/status, to read too (its `mode=ro`
only refuses writes once open), so such a warehouse cannot be opened where it lies. Instead a scratch engine in
a temporary folder attaches it: every table from a read-only local disk rooted at the warehouse (ClickHouse's
`disk(type = local, path = …, readonly = true)`: the parts are read where they lie, nothing is copied and
nothing written there), its functions and views from their DDL. Reports and the API read it as usual; the
scratch folder (the engine's own catalog, a few kB) is removed when the engine closes.

A read-only reader takes no turn: the turn's lock file beside the warehouse cannot be made there. A load
writing the warehouse at the same time (on a host that can write it) may make such a read fail: run it again."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import unquote

from ops_warehouse.errors import OpsError

_HEAD = re.compile(r"^ATTACH (TABLE|VIEW|MATERIALIZED VIEW|DICTIONARY) _ ")


def writable(path: Path) -> bool:
    """Whether chDB can open the warehouse where it lies: its folder and lock file, and the turn's lock file
    beside it (or the folder that holds it), writable by this process."""
    turn_file = path.parent / f".{path.name}.turn"
    status = path / "status"
    return (os.access(path, os.W_OK) and (not status.exists() or os.access(status, os.W_OK))
            and (os.access(turn_file, os.W_OK) or os.access(path.parent, os.W_OK)))


class NoTurn:
    """The turn of a read-only reader: none to take or give (see the module's note)."""

    def give(self) -> None:
        pass

    def others_waiting(self) -> bool:
        return False


class ScratchClient:
    """The scratch engine's client; closing it removes the scratch folder too."""

    def __init__(self, client, scratch: Path):
        self._inner = client
        self._scratch = scratch

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _ddl(path: Path) -> tuple[list[str], list[str], list[str]]:
    """The warehouse's functions, tables and views as statements for the scratch engine."""
    meta = path / "metadata" / "default"
    if not meta.is_dir():
        raise OpsError(f"no warehouse at {path}: check the path (--warehouse, OPS_WAREHOUSE or the config's "
                       "[warehouse] dsn), or make one with ops-report init")
    disk = "disk(type = local, path = '{}', readonly = true)".format(str(path).replace("\\", "\\\\")
                                                                     .replace("'", "\\'") + "/")
    functions = [f.read_text() for f in sorted((path / "user_defined").glob("*.sql"))]
    tables, views = [], []
    for f in sorted(meta.glob("*.sql")):
        text = f.read_text().strip()
        m = _HEAD.match(text)
        if m is None:
            raise OpsError(f"cannot read the warehouse {path} read-only: {f.name} is not a table or view this "
                           "version knows how to attach")
        name = "`" + unquote(f.stem).replace("`", "\\`") + "`"
        rest = re.sub(r"^UUID '[0-9a-f-]+'\s*", "", text[m.end():]) if m.group(1) != "TABLE" else text[m.end():]
        # a table is attached with its UUID (its parts lie under store/<uuid>); a view has no data, and ATTACH
        # takes no definition for it: made anew
        text = f"{'ATTACH' if m.group(1) == 'TABLE' else 'CREATE'} {m.group(1)} {name} " + rest
        if m.group(1) == "TABLE":
            if "MergeTree" not in text:
                raise OpsError(f"cannot read the warehouse {path} read-only: table {unquote(f.stem)} is not a "
                               "MergeTree table")
            text += (", " if re.search(r"\bSETTINGS\b[^()]*$", text) else " SETTINGS ") + f"disk = {disk}"
            tables.append(text)
        else:
            views.append(text)
    return functions, tables, views


def _create_views(client, views: list[str]) -> None:
    """Views read tables and other views: each made once what it reads exists (a pass makes those it can)."""
    while views:
        failed, error = [], None
        for v in views:
            try:
                client.command(v)
            except Exception as e:
                failed.append(v)
                error = e
        if len(failed) == len(views):
            raise error
        views = failed


def open_read_only(path: Path):
    """(client, turn) of a scratch engine with the warehouse at ``path`` attached read-only."""
    import clickhouse_connect

    functions, tables, views = _ddl(path)
    scratch = Path(tempfile.mkdtemp(prefix="ops-warehouse-read-"))
    try:
        client = clickhouse_connect.get_client(
            dsn=f"chdb://{scratch}", chdb_options={"custom_local_disks_base_directory": f"{path}/"})
    except Exception as e:
        shutil.rmtree(scratch, ignore_errors=True)
        raise OpsError(f"cannot open the read-only warehouse {path}: {str(e).strip().splitlines()[0]}") from None
    try:
        for statement in (*functions, *tables):
            client.command(statement)
        _create_views(client, views)
    except Exception as e:
        client.close()
        shutil.rmtree(scratch, ignore_errors=True)
        first = next((ln for ln in str(e).splitlines() if "Code:" in ln), str(e).strip().splitlines()[0])
        raise OpsError(f"cannot attach the read-only warehouse {path}: {first[:300]}") from None
    return ScratchClient(client, scratch), NoTurn()
