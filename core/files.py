"""The files the reports and exports write (issue 27): names made from data, and writes that are whole or
not at all.

:func:`safe_name` turns a name that comes from the data or from a user (a cluster, a project, a user) into
one file-name component: it can never be ``.`` or ``..``, hold a path separator or a control character, or
start a hidden file, and two different names never give the same component. Every writer that builds a path
from such a name goes through it (analytics/export.py, reports/monthly_render.py).

:func:`write_file` and :func:`replacing` put a file in place whole or leave the previous one: the bytes go
to a temporary file in the same folder, which is flushed to the disk (fsync) and renamed over the target
(os.replace, atomic on POSIX), and the folder is flushed so that the rename survives a crash. A write that
fails (a full disk, a kill, an error half-way through) leaves the previous file as it was. Every report,
chart and export goes through them (reports/, analytics/export.py, the CLI).
"""

from __future__ import annotations

import hashlib
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ops_warehouse.errors import OpsError
from ops_warehouse.processes import process_alive

# Kept as they are: letters, digits and - _ . of ASCII (readable, the same on every file system and in a
# shell). Everything else, '%' included, is percent-encoded byte by byte (UTF-8), so the name can be read
# back and distinct names stay distinct.
_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
# File systems allow 255 bytes a name; the writers add a prefix and a suffix around the component.
MAX_COMPONENT = 120


def _encode(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


def safe_name(name: str, what: str = "name") -> str:
    """``name`` as one file-name component: ASCII letters, digits, ``-``, ``_`` and ``.`` as they are, every
    other character percent-encoded (``a/b`` -> ``a%2Fb``, ``../x`` -> ``%2E.%2Fx``); a leading ``.`` or
    ``-`` is encoded too (no ``.``, ``..``, hidden file or option-like name). Stable, and one-to-one: the
    name can be decoded back (urllib.parse.unquote). A component that would pass :data:`MAX_COMPONENT`
    characters is cut there and ends in ``%-`` and a digest of the whole name. An empty name is refused."""
    name = str(name)
    if not name:
        raise OpsError(f"the {what} is empty: a file cannot be named after it")
    out = [c if c in _KEEP else _encode(c) for c in name]
    if name.strip(".") == "":
        out = [_encode(c) for c in name]  # "." and ".." whole
    elif name[0] in ".-":
        out[0] = _encode(name[0])
    text = "".join(out)
    if len(text) <= MAX_COMPONENT:
        return text
    # '%' followed by '-' is never an encoding, so a shortened name cannot equal another name's component
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    keep, n = [], 0
    for piece in out:
        if n + len(piece) > MAX_COMPONENT - 18:
            break
        keep.append(piece)
        n += len(piece)
    return "".join(keep) + "%-" + digest


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # a file system that cannot flush a folder: the rename is still atomic
        pass
    finally:
        os.close(fd)


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_stale(path: Path) -> None:
    """Temporary files of earlier writes of ``path`` whose process is gone (killed half-way)."""
    prefix = _temp_prefix(path)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return
    for e in entries:
        rest = e.name[len(prefix):]
        if not (e.name.startswith(prefix) and e.name.endswith(".tmp")):
            continue
        pid = rest.split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            try:
                os.unlink(e.path)
            except OSError:
                pass


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path in ``path``'s folder to write the new file to (by any writer: polars, matplotlib);
    when the block ends without an error the file is flushed and renamed over ``path``, else removed and
    ``path`` left as it was. The new file keeps the mode of the one it replaces. An OSError is raised as a
    one-line OpsError naming ``path``."""
    path = Path(path)
    folder = path.parent
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale(path)
        tmp = folder / f"{_temp_prefix(path)}{os.getpid()}.{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o666)  # the umask decides, as for any new file
        try:
            try:
                old = os.stat(path)
                if stat.S_ISREG(old.st_mode):
                    os.fchmod(fd, stat.S_IMODE(old.st_mode))
            except FileNotFoundError:
                pass
        finally:
            os.close(fd)
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(folder)
    except OSError as e:
        raise OpsError(f"cannot write {path}: {e.strerror or e} (the previous file, if any, is unchanged)") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_file(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text in ``encoding``, or bytes) to ``path`` whole, or leave the previous file."""
    raw = data.encode(encoding) if isinstance(data, str) else bytes(data)
    path = Path(path)
    with replacing(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            view = memoryview(raw)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
    return path
