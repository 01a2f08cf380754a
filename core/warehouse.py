"""The warehouse connection: one clickhouse-connect client for the embedded chDB engine or a server.

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
from pathlib import Path
from urllib.parse import urlsplit

import clickhouse_connect
from ops_warehouse.config import Config
from ops_warehouse.errors import OpsError
from ops_warehouse.migrations import apply_migrations, apply_ttl, sync_cost_model, sync_projects

# clickhouse-connect logs its errors as well as raising them; the raised error is reported (one line, no
# secrets), so its log records would only repeat it on stderr through logging's last-resort handler.
logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())

# chDB runs one embedded engine per process, on one directory at a time: keep that client, and close it
# before opening another directory.
_EMBEDDED: dict[str, object] = {}


def close_embedded() -> None:
    """Close the process's embedded engine (a later open_warehouse may then open another directory)."""
    for key, client in list(_EMBEDDED.items()):
        try:
            client.close()
        finally:
            _EMBEDDED.pop(key, None)


# Tables are ReplacingMergeTree read with FINAL: collapsing duplicates inside each inserted block as well
# only costs time.
_INSERT_SETTINGS = {"optimize_on_insert": 0}


class Warehouse:
    """A connected warehouse plus the deployment settings the SQL renders for."""

    def __init__(self, client, dsn: str, cfg: Config, embedded_path: Path | None):
        self.client = client
        self.dsn = dsn
        self.cfg = cfg
        self.embedded_path = embedded_path

    @property
    def embedded(self) -> bool:
        return self.embedded_path is not None

    def query_arrow(self, sql: str, params: dict | None = None):
        return self.client.query_arrow(sql, parameters=params or {})

    def query_rows(self, sql: str, params: dict | None = None):
        return self.client.query(sql, parameters=params or {}).result_rows

    def command(self, sql: str, params: dict | None = None):
        return self.client.command(sql, parameters=params or {})

    def load_parquet(self, table: str, path: Path) -> None:
        """Insert one staged Parquet file into ``table``, column by name (columns added by later migrations
        sit at the end of a table, wherever the frame has them)."""
        import pyarrow.parquet as pq

        cols = pq.read_schema(path).names
        names = ", ".join(f"`{c}`" for c in cols)
        if self.embedded:
            # In-process the engine reads the file itself: the fastest path the notes measured.
            self.client.command(
                f"INSERT INTO {table} ({names}) SELECT {names} FROM file({{p:String}}, Parquet)",
                parameters={"p": str(Path(path).resolve())},
                settings=_INSERT_SETTINGS,
            )
        else:
            from clickhouse_connect.driver.tools import insert_file

            insert_file(self.client, table, str(path), fmt="Parquet", column_names=cols, settings=_INSERT_SETTINGS)


def redact(dsn: str) -> str:
    """The DSN without its password, for messages and logs."""
    parts = urlsplit(dsn)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return dsn


def embedded_path(dsn: str) -> Path | None:
    if not dsn.startswith("chdb://"):
        return None
    rest = dsn[len("chdb://"):]
    return Path(rest or "./warehouse").expanduser().resolve()


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


def open_warehouse(cfg: Config, dsn: str | None = None, migrate: bool = True) -> Warehouse:
    dsn = dsn or cfg.dsn
    path = embedded_path(dsn)
    if path is not None:
        key = str(path)
        if key not in _EMBEDDED:
            close_embedded()
            if _locked_by_other(path):
                raise OpsError(
                    f"the embedded warehouse {path} is in use by another process; embedded chDB allows one "
                    "process at a time: wait for it, or use a ClickHouse server (--warehouse http://host:8123/db) "
                    "for concurrent use"
                )
            path.mkdir(parents=True, exist_ok=True)
            try:
                _EMBEDDED[key] = clickhouse_connect.get_client(dsn=f"chdb://{path}")
            except Exception as e:  # chDB raises generic errors for a held lock; report it as one line
                if _locked_by_other(path):
                    raise OpsError(
                        f"the embedded warehouse {path} is in use by another process; use a ClickHouse server "
                        "for concurrent use"
                    ) from None
                raise OpsError(f"cannot open embedded warehouse {path}: {str(e).splitlines()[0]}") from None
        client = _EMBEDDED[key]
    elif dsn.startswith(("http://", "https://", "clickhouse://", "clickhouses://")):
        parts = urlsplit(dsn)
        kwargs = {}
        password = os.environ.get("OPS_WAREHOUSE_PASSWORD") or cfg.warehouse_password
        if not parts.password and password:
            kwargs["password"] = password
        try:
            client = clickhouse_connect.get_client(dsn=dsn, **kwargs)
        except Exception as e:
            raise OpsError(f"cannot reach warehouse {redact(dsn)}: {str(e).splitlines()[0]}") from None
    else:
        raise OpsError(f"unsupported warehouse DSN {redact(dsn)!r}: use chdb:///path or http(s)://host:port/db")
    wh = Warehouse(client, dsn, cfg, path)
    if migrate:
        bring_up_to_date(wh)
    return wh


def bring_up_to_date(wh: Warehouse) -> list[str]:
    """The schema migrated, and what the config says synced into the warehouse (what every connection and
    `ops-report init` do); returns the migrations applied. What the config does not name is kept: a config
    without [projects] (a notebook, a one-off command) keeps the account -> project mapping, one without
    [cost.*] the site's cost model (an empty warehouse gets the defaults)."""

    cfg = wh.cfg
    applied = apply_migrations(wh)
    if cfg.projects or cfg.projects_configured:
        sync_projects(wh)
    if cfg.cost_configured or not wh.query_rows("SELECT count() FROM cost_model")[0][0]:
        sync_cost_model(wh)
    apply_ttl(wh)
    return applied
