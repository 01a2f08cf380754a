"""The monthly report's charts module (reports/charts.py), imported when a chart is first drawn (numpy, which
a JSON report, Markdown on the terminal and the what-if's tables never need), and the charts' place in HTML."""

from __future__ import annotations

import base64
import html
from types import ModuleType


def charts() -> ModuleType:
    """ops_warehouse.reports.charts, imported by the first call."""
    from ops_warehouse.reports import charts as module  # numpy: only once a chart is drawn (above)

    return module


def chart_img(svg: str, alt: str, chart_id: str | None = None) -> str:
    """An <img> of an SVG chart, inline as a data: URI: the page stays one file, and a picture shown through
    <img> runs no script whatever its text held (the charts' text is escaped besides, reports/svg.py)."""
    at = f' id="{chart_id}"' if chart_id else ""
    b64 = base64.b64encode(svg.encode()).decode()
    return f'<img alt="{html.escape(alt)}"{at} src="data:image/svg+xml;base64,{b64}">'
