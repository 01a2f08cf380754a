"""The run's day: the one date an incremental load's window is measured from ("to yesterday").

``OPS_TODAY=YYYY-MM-DD`` fixes it (UTC), as a scheduler's logical date does: a night's run made late, or run
again, reads the window that night would have read, and a run that passes midnight UTC keeps the day it
started with. Without it, the clock's UTC date. Timestamps of what happened (a load's start, a running job's
end so far) are always the clock's: only the window's day is fixed."""

from __future__ import annotations

import os
from datetime import date, datetime, timezone

from ops_warehouse.errors import OpsError

TODAY_ENV = "OPS_TODAY"


def utc_today() -> date:
    """``OPS_TODAY`` where set, else today's UTC date."""
    fixed = os.environ.get(TODAY_ENV, "").strip()
    if not fixed:
        return datetime.now(timezone.utc).date()
    try:
        return date.fromisoformat(fixed)
    except ValueError:
        raise OpsError(f"{TODAY_ENV}={fixed!r} is not a date: give YYYY-MM-DD (UTC), or unset it") from None
