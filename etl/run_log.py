"""etl_run_log: one row per load, written here and nowhere else.

Every load (sacct, slurmdbd, telemetry, capacity, and each source of a nightly run) runs inside
``logged_run``, which writes the row when the load ends, however it ends: ``ok``, or ``failed`` with the
error for any exception at all — an engine error, an unreachable source, a bug, SIGINT or SIGTERM
(``interrupted (SIGINT)``, ``interrupted (SIGTERM)``) — which it then raises again. Only SIGKILL leaves no row
(nothing runs then; docs/reliability.md).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

from ops_warehouse.errors import OpsError, Terminated

ERROR_CHARS = 1000


@dataclass
class Run:
    """What a load tells its row while it runs: its counts, and a failure it handled itself."""

    kind: str
    source: str
    started: float
    rows_read: int = 0
    rows_loaded: int = 0
    rows_quarantined: int = 0
    status: str = "ok"
    error: str = ""

    def count(self, read: int, loaded: int, quarantined: int = 0) -> None:
        self.rows_read, self.rows_loaded, self.rows_quarantined = int(read), int(loaded), int(quarantined)

    def failed(self, error: BaseException | str) -> None:
        """Record a failure the load handles without raising (a nightly source: the others go on)."""
        self.status, self.error = "failed", error if isinstance(error, str) else failure_text(error)


def failure_text(e: BaseException) -> str:
    """What the run log says about an exception: its message (first line, or its kind when it has none)."""
    if isinstance(e, KeyboardInterrupt):  # Terminated is one: SIGTERM taken as SIGINT (errors.py)
        return f"interrupted ({e.signal_name if isinstance(e, Terminated) else 'SIGINT'})"
    if isinstance(e, SystemExit):
        return f"exited ({e.code})"
    text = str(e).strip()
    line = next((ln for ln in text.splitlines() if "Code:" in ln), text.splitlines()[0] if text else "")

    if isinstance(e, OpsError):
        return line or type(e).__name__
    return f"{type(e).__name__}: {line}" if line else type(e).__name__


def _secrets(wh) -> list[str]:
    cfg = getattr(wh, "cfg", None)
    found = [os.environ.get("OPS_WAREHOUSE_PASSWORD"), os.environ.get("OPS_SLURMDBD_PASSWORD"),
             getattr(cfg, "warehouse_password", None), getattr(cfg, "slurmdbd_password", None),
             getattr(cfg, "pseudonym_key", None)]
    return sorted({s for s in found if s and len(s) >= 4}, key=len, reverse=True)


def log_run(wh, kind: str, source: str, started: float, *, rows_read: int = 0, rows_loaded: int = 0,
            rows_quarantined: int = 0, status: str = "ok", error: str = "") -> None:
    """Write one etl_run_log row. Never raises: the run log must not hide the load's own outcome."""
    for s in _secrets(wh):  # an error text never carries a password into the warehouse
        error = error.replace(s, "***")
    try:
        wh.insert_rows(
            "etl_run_log",
            ["run_id", "source_kind", "source", "started_at", "finished_at", "rows_read", "rows_loaded",
             "rows_quarantined", "status", "error"],
            [[uuid.uuid4(), kind, source, datetime.fromtimestamp(started, timezone.utc),
              datetime.now(timezone.utc), max(0, rows_read), max(0, rows_loaded), max(0, rows_quarantined),
              status, error[:ERROR_CHARS]]],
        )
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"warning: could not write etl_run_log: {first}", file=sys.stderr)


@contextmanager
def logged_run(wh, kind: str, source: str, started: float | None = None) -> Iterator[Run]:
    """The block is one load: its row is written when it ends, ``failed`` with the error if anything at all
    was raised (BaseException: SIGINT too), which is raised again."""
    run = Run(kind, source, time.time() if started is None else started)
    try:
        yield run
    except BaseException as e:
        run.failed(e)
        raise
    finally:
        log_run(wh, run.kind, run.source, run.started, rows_read=run.rows_read, rows_loaded=run.rows_loaded,
                rows_quarantined=run.rows_quarantined, status=run.status, error=run.error)


def logged_load(kind: str, source: Callable[[dict], str],
                counts: Callable[[object], tuple[int, int, int]] | None = None):
    """Decorates a load function ``f(wh, ...)``: each call runs in ``logged_run``. ``source(arguments)`` names
    the load from its arguments (by parameter name); ``counts(result)`` gives (read, loaded, quarantined) of
    what it returned (a failed load's row counts nothing)."""

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def logged(wh, *args, **kwargs):
            try:
                bound = sig.bind(wh, *args, **kwargs)
                bound.apply_defaults()
                name = source(bound.arguments)
            except TypeError:  # called wrongly: the function itself says how
                return fn(wh, *args, **kwargs)
            with logged_run(wh, kind, name) as run:
                result = fn(wh, *args, **kwargs)
                if counts is not None:
                    run.count(*counts(result))
                return result

        return logged

    return wrap


def telemetry_counts(c: dict) -> tuple[int, int, int]:
    """(read, loaded, quarantined) of a telemetry load's counts: the sample rows of every kind written."""
    loaded = sum(int(n) for k, n in c.items() if k.endswith("_rows"))
    quarantined = int(c.get("quarantined", 0))
    return loaded + quarantined, loaded, quarantined


def window_text(a: dict) -> str:
    return f"{a['date_from']}..{a['date_to']}"
