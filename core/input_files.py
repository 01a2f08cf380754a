"""What is wrong with an input path, in one line: every loader checks its files with :func:`check_readable`."""

from __future__ import annotations

import os
from pathlib import Path

from ops_warehouse.errors import OpsError


def check_readable(path) -> None:
    """Refuse a path that is not a readable file, saying which of the usual mistakes it is (a typo, a folder
    given for a file, a file of another user's)."""
    p = Path(path)
    if p.is_dir():
        raise OpsError(f"cannot read {p}: it is a folder, not a file")
    if not p.is_file():
        raise OpsError(f"cannot read {p}: no such file")
    if not os.access(p, os.R_OK):
        raise OpsError(f"cannot read {p}: permission denied")
