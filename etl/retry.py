"""Retries with exponential backoff for the network sources (Prometheus requests, slurmdbd queries, running
sacct): a failure that can heal (the server away, a timeout, a 5xx answer) is tried again after
``backoff_s``, then twice that, four times that, ... (each wait at most ``MAX_WAIT_S``), ``retries`` times;
a failure that cannot heal (a 4xx answer, an SQL error in our own query, sacct not installed) is raised at
once. Each retry is one plain line on stderr (under cron it lands in the same log as the run's lines):

    ops-report: retry: telemetry-prometheus ai1: attempt 1 of 5 failed: HTTP 503: query timed out; next try in 10.0 s

`ops-report etl nightly` takes ``retries`` and ``backoff_s`` from the config's ``[nightly]`` (docs/nightly.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ops_warehouse.errors import OpsError

T = TypeVar("T")
MAX_WAIT_S = 600.0


class Transient(Exception):
    """A failure worth another try. Its message (first line) is what the retry line and the final error say."""


def first_line(e: BaseException | str, limit: int = 300) -> str:
    s = str(e).strip()
    if not s:
        return type(e).__name__ if isinstance(e, BaseException) else ""
    return s.splitlines()[0][:limit]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Retry:
    """How often and how patiently to try again. ``label`` names the source in the retry lines."""

    retries: int = 0
    backoff_s: float = 0.0
    label: str = ""
    log: Callable[[str], None] = _stderr
    sleep: Callable[[float], None] = time.sleep

    def wait_s(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based)."""
        return min(self.backoff_s * 2 ** (attempt - 1), MAX_WAIT_S)

    def call(self, fn: Callable[[], T], failed: str | None = None) -> T:
        """``fn()``, tried again on Transient; when every try failed, OpsError "<failed> after N tries: <last
        error>" (without ``failed``: "<last error> (after N tries)"). Anything but Transient goes through at once."""
        tries = self.retries + 1
        for attempt in range(1, tries + 1):
            try:
                return fn()
            except Transient as e:
                last = first_line(e)
                if attempt == tries:
                    break
                wait = self.wait_s(attempt)
                self.log(f"ops-report: retry: {self.label}: attempt {attempt} of {tries} failed: {last}; "
                         f"next try in {wait:.1f} s")
                self.sleep(wait)
        if failed:
            raise OpsError(f"{failed} after {tries} tries: {last}" if self.retries else f"{failed}: {last}")
        raise OpsError(f"{last} (after {tries} tries)" if self.retries else last)

