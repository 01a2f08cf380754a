"""Taking turns on an embedded warehouse: one process at a time has the engine open, the others wait.

chDB runs one engine per process and locks its directory while the engine is open, so the nightly load, a
manager's `ops-report monthly` and an analyst's notebook share an embedded warehouse the way SQLite users
share a database file: each opens it for one piece of work and lets go after. A *turn* is an exclusive
``flock`` on ``.<warehouse>.turn`` beside the warehouse directory, held from before the engine opens until
after it closes. The lock file says who holds it (pid, what for, since when) so that a waiting process can
say what it waits for; each waiting process leaves a file in ``.<warehouse>.waiting/`` so that a long load can
see someone is waiting and let them have a turn between its steps (:meth:`Turn.others_waiting`).

A ClickHouse server needs none of this: it serves any number of clients at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

from ops_warehouse.errors import OpsError
from ops_warehouse.processes import process_alive

# how often a waiting process tries the lock: short against a report's second or two, cheap for the CPU
POLL_S = 0.1


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Turn:
    """An exclusive turn on the embedded warehouse at ``path`` for ``purpose`` ("nightly load",
    "ops-report monthly", ...); :meth:`take` waits up to ``wait_s`` seconds for it."""

    def __init__(self, path: Path, purpose: str, wait_s: float, say=_say):
        self.path = Path(path)
        self.purpose = purpose
        self.wait_s = wait_s
        self.say = say
        self.lock_file = self.path.parent / f".{self.path.name}.turn"
        self.waiting_dir = self.path.parent / f".{self.path.name}.waiting"
        self.fd: int | None = None

    # ------------------------------------------------------------------ holding
    @property
    def held(self) -> bool:
        return self.fd is not None

    def _try(self, fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def holder(self) -> dict:
        """Who holds the turn, as the holder wrote it ({} when unknown)."""
        try:
            return json.loads(self.lock_file.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def describe_holder(self) -> str:
        h = self.holder()
        if not h:
            return "another process"
        since = datetime.fromtimestamp(h.get("since", 0)).strftime("%H:%M")
        return f"{h.get('purpose', 'a process')} by pid {h.get('pid', '?')}, since {since}"

    def take(self) -> None:
        """Wait for the turn (up to wait_s), then hold it; one line on stderr when it has to wait, and one
        line (an OpsError) when the wait runs out."""
        if self.held:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        if not self._try(fd):
            try:
                self._wait(fd)
            except BaseException:
                os.close(fd)
                raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "purpose": self.purpose, "since": time.time()}).encode(), 0)
        self.fd = fd

    def _wait(self, fd: int) -> None:
        what = self.describe_holder()
        if self.wait_s <= 0:
            raise OpsError(f"the warehouse {self.path} is busy ({what}); not waiting (--no-wait): try again "
                           "later, or use a ClickHouse server for concurrent use (docs/deployment.md)")
        self.say(f"waiting for the warehouse: {what} (up to {self.wait_s:.0f} s; [warehouse] wait_s)")
        self.waiting_dir.mkdir(parents=True, exist_ok=True)
        marker = self.waiting_dir / str(os.getpid())
        marker.write_text(self.purpose)
        t0 = time.monotonic()
        try:
            while not self._try(fd):
                if time.monotonic() - t0 > self.wait_s:
                    raise OpsError(f"the warehouse {self.path} stayed busy for {self.wait_s:.0f} s "
                                   f"({self.describe_holder()}); try again later, raise [warehouse] wait_s, or "
                                   "use a ClickHouse server for concurrent use (docs/deployment.md)")
                time.sleep(POLL_S)
        finally:
            marker.unlink(missing_ok=True)
        waited = time.monotonic() - t0
        if waited >= 1:
            self.say(f"warehouse free after {waited:.0f} s")

    def give(self) -> None:
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ letting others go first
    def waiting_pids(self) -> set[int]:
        """The live processes waiting for a turn (files of processes that died are removed)."""
        out = set()
        try:
            entries = list(self.waiting_dir.iterdir())
        except OSError:
            return out
        for p in entries:
            try:
                pid = int(p.name)
            except ValueError:
                continue
            if pid != os.getpid() and process_alive(pid):
                out.add(pid)
            elif pid != os.getpid():
                p.unlink(missing_ok=True)
        return out

    def others_waiting(self) -> bool:
        return bool(self.waiting_pids())

    def let_waiting_go(self, max_s: float = 600.0) -> None:
        """Give the turn to the processes waiting now and take it back when they are done (or after
        ``max_s``): how a long load lets a report through between two of its steps. Who starts waiting
        after this call waits for the next step."""
        waiting = self.waiting_pids()
        if not waiting:
            return
        self.give()
        t0 = time.monotonic()
        # each waiter's file goes when it has its turn; it is done when it gives the turn back
        while time.monotonic() - t0 < max_s and waiting & self.waiting_pids():
            time.sleep(POLL_S)
        self.take()
