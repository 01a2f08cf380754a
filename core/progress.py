"""Progress for long work: a bar on a terminal, plain log lines otherwise (cron, CI, pipes)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager


@contextmanager
def file_progress(label: str):
    """Yields a callback(done_bytes, total_bytes)."""
    if sys.stderr.isatty():
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        with Progress("[bold]{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                      transient=True) as p:
            task = p.add_task(label, total=None)
            yield lambda done, total: p.update(task, completed=done, total=total)
        return
    last = [0.0]

    def log(done: int, total: int) -> None:
        now = time.time()
        if now - last[0] >= 10 or done >= total:
            last[0] = now
            pct = 100 * done / total if total else 100
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {label}: {pct:.0f}% ({done}/{total} bytes)",
                  file=sys.stderr)

    yield log


@contextmanager
def count_progress(label: str):
    """Yields a callback(done, total) for work counted in items (days, files)."""
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        with Progress("[bold]{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      transient=True) as p:
            task = p.add_task(label, total=None)
            yield lambda done, total: p.update(task, completed=done, total=total)
        return
    last = [0.0]

    def log(done: int, total: int) -> None:
        now = time.time()
        if now - last[0] >= 10 or done >= total:
            last[0] = now
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {label}: {done}/{total}", file=sys.stderr)

    yield log
