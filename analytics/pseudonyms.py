"""The key of the `--anonymize-users` pseudonyms (the monthly report and the export): one place computes it.

A pseudonym is ``user-`` + 8 hex digits of HMAC-SHA256(key, user name): the same user gets the same name in
every report of a warehouse, and without the key the name cannot be turned back into its user, even by
someone who has the site's list of user names (with an empty key, hashing each name would reverse every
pseudonym). The key is ``[reports] pseudonym_key`` of the config when it is set (in a file only its owner
can read); otherwise a random 256-bit key made on first use and kept, mode 600, where only the warehouse's
owner reads it:

- an embedded warehouse: ``pseudonym.key`` in the warehouse's folder (it moves and is backed up with it);
- a ClickHouse server: ``~/.config/ops-warehouse/pseudonym-keys/<host>-<port>-<digest>.key``, the digest of
  the DSN less its password (a password change keeps the key). Each user running reports against a server
  has their own key there: sites where several people or machines write reports set ``pseudonym_key``.

A key file that others can read, or one that cannot be made, stops the command with one line.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path
from urllib.parse import urlsplit

from ops_warehouse.errors import OpsError

KEY_FILE = "pseudonym.key"


def pseudonym(user: str, key: str) -> str:
    """The stable pseudonym of ``user`` under ``key`` (``pseudonym_key(wh)``)."""
    return "user-" + hmac.new(key.encode(), user.encode(), hashlib.sha256).hexdigest()[:8]


def pseudonymize(df, key: str, columns=("user",)):
    """A polars frame with its user ``columns`` (what its mart declares: sql/marts/*.sql ``user_columns``)
    replaced by :func:`pseudonym` s. A total row (a ``level`` other than 'user', as idle_gpu_users' project and
    scope rows) names no user and keeps its ''."""
    for col in (c for c in columns if c in df.columns):
        users = df.get_column(col)
        named = users.map_elements(lambda u: pseudonym(u, key), return_dtype=df.schema[col])
        if "level" in df.columns:
            named = named.zip_with(df.get_column("level") == "user", users)
        df = df.with_columns(named)
    return df


def pseudonym_key(wh) -> str:
    """The warehouse's pseudonym key: the configured one, else the one kept for the warehouse (made now if
    there is none yet)."""
    configured = getattr(wh.cfg, "pseudonym_key", "") or ""
    if configured:
        return configured
    return _read_or_create(key_path(wh))


def key_path(wh) -> Path:
    """Where the key of a warehouse without a configured key is kept."""
    if wh.embedded:
        return Path(wh.embedded_path) / KEY_FILE
    parts = urlsplit(wh.dsn)
    # the DSN less its password (and less any query string, which may carry settings or secrets)
    ident = f"{parts.scheme}://{parts.username or ''}@{parts.hostname or ''}:{parts.port or ''}{parts.path}"
    digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
    host = re.sub(r"[^A-Za-z0-9.-]", "_", parts.hostname or "server")
    return Path.home() / ".config" / "ops-warehouse" / "pseudonym-keys" / f"{host}-{parts.port or 'default'}-{digest}.key"


def _refuse(path: Path, why: str) -> OpsError:
    return OpsError(f"--anonymize-users needs a secret key, and {path} {why}; or set [reports] pseudonym_key "
                    "in a config file only you can read (chmod 600)")


def _read(path: Path) -> str:
    st = path.stat()
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise OpsError(f"{path} holds the pseudonym key but is readable by others: chmod 600 {path}")
    key = path.read_text(encoding="ascii", errors="replace").strip()
    if len(key) < 32:
        raise _refuse(path, "holds no key (remove it to make a new one: the pseudonyms will change)")
    return key


def _read_or_create(path: Path) -> str:
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e.strerror or e})") from None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, (secrets.token_hex(32) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # in place whole or not at all; a key another process made first wins
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as e:
        raise _refuse(path, f"cannot be made ({e.strerror or e})") from None
    return _read(path)
