"""Whether a process that left something behind (a turn's queue entry, a staging folder, a temporary file, a
load's scratch tables) still runs, by its pid on this host."""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
