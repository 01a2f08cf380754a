"""The monthly report's charts module (reports/charts.py), imported when a chart is first drawn: it imports
matplotlib (0.5 to 3 s and 30 to 50 MB), which a JSON report, Markdown on the terminal and the what-if's
tables never need, so the renderers reach it through :func:`charts` rather than import it."""

from __future__ import annotations

from types import ModuleType


def charts() -> ModuleType:
    """ops_warehouse.reports.charts, imported by the first call."""
    from ops_warehouse.reports import charts as module  # matplotlib: only once a chart is drawn (above)

    return module
