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
            started = [False]

            def bar(done: int, total: int) -> None:
                if not started[0]:  # a resumed load starts part-way: its skipped days are no speed
                    started[0] = True
                    p.reset(task, completed=done, total=total)
                p.update(task, completed=done, total=total)

            yield bar
        return
    last: list[float | None] = [None]
    start: list[tuple[float, int]] = []  # (when, done) of the first call: the rate counts only this run's work

    def log(done: int, total: int) -> None:
        now = time.monotonic()
        if not start:
            start.append((now, done))
            if done == 0 and total:  # the rate's starting point; a resumed load's first line says where it is
                return
        if last[0] is None or now - last[0] >= 10 or done >= total:
            last[0] = now
            what = f"{100 * done / total if total else 100:.0f}% ({done}/{total} bytes)" if unit == "bytes" \
                else f"{done}/{total}"
            t0, done0 = start[0]
            if done >= total:
                what += f", done in {duration_text(now - t0)}"
            else:
                left = remaining_s(t0, done0, done, total, now)
                if left is not None:
                    what += f", about {duration_text(left)} left"
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {label}: {what}", file=sys.stderr)

    yield log


def remaining_s(started_s: float, done_at_start: int, done: int, total: int, now_s: float) -> float | None:
    """Seconds left at the rate of the work done since ``started_s`` (None before any): what is left of
    ``total`` divided by the rate since then, so work a resumed load skipped does not make it look fast."""
    if done <= done_at_start or now_s <= started_s:
        return None
    return (now_s - started_s) / (done - done_at_start) * max(total - done, 0)


def duration_text(seconds: float) -> str:
    """"2 h 05 min", "12 min 30 s", "45 s": coarse, as an estimate is."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


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
