"""Progress for long work: a bar on a terminal, plain log lines otherwise (cron, CI, pipes)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager


@contextmanager
def _progress(label: str, unit: str):
    """Yields a callback(done, total); ``unit`` is "bytes" or "items"."""
    if sys.stderr.isatty():
        from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        amount = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
        with Progress("[bold]{task.description}", BarColumn(), amount, TimeRemainingColumn(), transient=True) as p:
            task = p.add_task(label, total=None)
            yield lambda done, total: p.update(task, completed=done, total=total)
        return
    last = [0.0]

    def log(done: int, total: int) -> None:
        now = time.time()
        if now - last[0] >= 10 or done >= total:
            last[0] = now
            what = f"{100 * done / total if total else 100:.0f}% ({done}/{total} bytes)" if unit == "bytes" \
                else f"{done}/{total}"
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {label}: {what}", file=sys.stderr)

    yield log


def file_progress(label: str):
    """Progress through a file, in bytes."""
    return _progress(label, "bytes")


def count_progress(label: str):
    """Progress through counted items (days, files)."""
    return _progress(label, "items")


@contextmanager
def step_progress(label: str):
    """Progress through named steps of unknown number (the marts of a report): a spinner with the current
    step on a terminal, nothing otherwise (the steps are seconds long; cron logs need no more than the result)."""
    if not sys.stderr.isatty():
        yield lambda step: None
        return
    from rich.console import Console

    with Console(stderr=True).status(label) as status:
        yield lambda step: status.update(f"{label}: {step}")
