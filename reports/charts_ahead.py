"""The monthly report's charts drawn while its marts are still being evaluated.

A report's statistics are the engine's work on two handles, and its charts matplotlib's afterwards, in this
process's forked workers: one after the other, the charts' 0.5-0.9 s came on top of the statistics' (issue 51,
docs/benchmarks.md). Here a drawing process is forked before the statistics start (so it forks while the
engine is idle, and imports matplotlib beside the marts instead of after them); the report hands it each
mart's part as soon as that mart's rows are read (analytics/monthly.py, ``early``), and it draws each chart
as soon as every key the chart reads (reports/chart_inputs.py) is in. Given the whole report, it keeps the
charts whose input digest is the whole report's (the same rows: the parts are the report's own values) and
draws the rest (the what-if's, made after the marts) as :func:`charts.draw_all` does. The command itself
never imports matplotlib.

    with drawing_ahead() as ahead:
        r = monthly_report(api, ..., early=ahead)
        pngs = ahead.charts(r)   # as charts.draw_all(r) gives them, byte for byte
"""

from __future__ import annotations

import gc
import multiprocessing
import queue
import signal
from contextlib import contextmanager

from ops_warehouse.reports.chart_inputs import INPUTS
from ops_warehouse.reports.chart_library import charts as chart_module


class ChartsAhead:
    """A forked process drawing the report's charts from its parts (:meth:`take`) as they come in."""

    # the report keys the charts read: the report evaluates their marts before its others
    wants = frozenset(k for keys in INPUTS.values() for k in keys)

    def __init__(self):
        ctx = multiprocessing.get_context("fork")
        # (a Queue's put hands the pickling and the pipe to a feeder thread: the marts' threads never wait on
        # the drawing process)
        self._parts, self._back = ctx.Queue(), ctx.Queue()
        # not a daemon: it forks the workers that draw the charts left at the end (charts.draw_all)
        self._process = ctx.Process(target=_drawer, args=(self._parts, self._back), daemon=False,
                                    name="ops-report charts")
        self._process.start()

    def take(self, part: dict) -> None:
        """Keys of the report with their values, as the whole report will hold them."""
        self._parts.put(("part", part))

    def charts(self, r: dict) -> dict[str, bytes]:
        """Every chart of the whole report ``r`` that has something to show, by name (charts.draw_all's)."""
        self._parts.put(("whole", r))
        while True:
            try:
                got = self._back.get(timeout=1)
                break
            except queue.Empty:
                if not self._process.is_alive():  # it died (killed, out of memory): drawn here instead
                    return chart_module().draw_all(r)
        self._process.join()
        return got

    def close(self) -> None:
        if self._process.is_alive():  # a report that failed before its charts: nothing left to draw
            self._process.terminate()
            self._process.join()
        for q in (self._parts, self._back):
            q.close()
            q.cancel_join_thread()


@contextmanager
def drawing_ahead(charts_shown: bool = True):
    """A :class:`ChartsAhead` for one report, or None where the formats show no chart (JSON, Markdown on the
    terminal): nothing forked, matplotlib never imported."""
    if not charts_shown or "fork" not in multiprocessing.get_all_start_methods():
        yield None
        return
    ahead = ChartsAhead()
    try:
        yield ahead
    finally:
        ahead.close()


def _drawer(parts, back) -> None:
    # the command's SIGTERM handler (core/errors.py) raises Terminated for a load to undo itself; a drawer has
    # nothing to undo, and close() ends it with SIGTERM
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # the command's objects, inherited, are never collected here: a collection would walk them all, writing to
    # (so copying) every page that holds one
    gc.freeze()
    charts = chart_module()  # matplotlib: imported here, beside the marts

    r: dict = {}
    drawn: dict[str, tuple[str, bytes | None]] = {}
    while True:
        todo = [n for n, keys in INPUTS.items() if n not in drawn and all(k in r for k in keys)]
        try:  # the parts that came in first; waiting only when no chart can be drawn
            kind, got = parts.get(block=not todo)
        except queue.Empty:
            drawn[todo[0]] = charts.draw(todo[0], r)
            continue
        if kind == "whole":
            break
        r.update(got)
    # a chart drawn from the parts is the whole report's where its input digest is the same
    back.put(charts.draw_all(got, dict(drawn.values())))
