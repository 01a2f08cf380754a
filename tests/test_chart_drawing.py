"""The monthly report's charts (reports/charts.py), SVG written directly, still show the report's figures.

Each chart is read back as a person reads it: its SVG parsed as XML, each axes' tick labels give the
mapping from pixels to values (a line fitted through the labelled ticks' positions), and every bar is turned
back into the values it stands for. Those are compared with a report whose numbers are worked out here by
hand. Text from the data (project names, job ids) is escaped: a hostile name is drawn as its characters.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import date, datetime

import numpy as np
import pytest

from ops_warehouse.reports import charts

NS = "{http://www.w3.org/2000/svg}"


def _report() -> dict:
    # run times of the one size class: 100 quantiles from 36 s (0.01 h) to 360,000 s (100 h), evenly in log
    cdf_s = [int(round(v)) for v in np.geomspace(36, 360_000, 100)]
    day = {"capacity_gpu_h": 0, "down_gpu_h": 0, "drained_gpu_h": 0, "allocated_gpu_h": 0,
           "reserved_idle_gpu_h": 0, "free_gpu_h": 0, "allocated_idle_gpu_h": 0, "project_allocated_gpu_h": 0}
    return {
        "scope": "cluster", "project": None,
        "run_times": [{"size_class": "1", "jobs_ended": 4, "cdf_s": cdf_s}],
        "job_sizes": [{"size_class": "1", "job_share": 0.75, "gpu_h_share": 0.25},
                      {"size_class": "2-8", "job_share": 0.25, "gpu_h_share": 0.75}],
        "utilization_daily": [{**day, "day": date(2026, 10, 1), "allocated_gpu_h": 100, "free_gpu_h": 50},
                              {**day, "day": date(2026, 10, 2), "allocated_gpu_h": 80, "down_gpu_h": 20}],
        # two nodes of two GPUs, one GPU without a sample
        "gpu_heatmap": [{"rack": "r1", "node": "n1", "gpu": 0, "gpu_util_pct": 0.0},
                        {"rack": "r1", "node": "n1", "gpu": 1, "gpu_util_pct": 100.0},
                        {"rack": "r2", "node": "n2", "gpu": 0, "gpu_util_pct": 50.0}],
        # job 7 on two nodes for a day, job 9 on one node for half a day
        "largest_jobs": [{"job_id": 7, "start_ts": datetime(2026, 10, 1), "end_ts": datetime(2026, 10, 2),
                          "nodes": ["n1", "n2"]},
                         {"job_id": 9, "start_ts": datetime(2026, 10, 2), "end_ts": datetime(2026, 10, 2, 12),
                          "nodes": ["n3"]}],
        "end_states": [{"state": "COMPLETED", "gpu_h": 120.5}, {"state": "FAILED", "gpu_h": 30.25}],
        "xid_codes": [{"xid": 79, "events": 3}, {"xid": 31, "events": 5}],
        "idle_gpu_users": [{"level": "project", "project": "A", "whole_node_gpu_h": 40, "shared_gpu_h": 10}],
        "hung_jobs": [{"job_id": 11, "hung_gpu_h": 6.5}],
        "energy": [{"project_key": "", "gpu_kwh": 3000, "rest_kwh": 750},
                   {"project_key": "A", "gpu_kwh": 2000, "rest_kwh": 500},
                   {"project_key": "B", "gpu_kwh": 1000, "rest_kwh": 250}],
        "goodput": [{"project_key": "A", "ettr": 0.5}, {"project_key": "B", "ettr": 0.75}], "campaigns": [],
    }


def _svg(name: str, r: dict | None = None) -> ET.Element:
    text = dict((n, f) for n, _, f in charts.CHARTS)[name](r or _report())
    assert text is not None
    return ET.fromstring(text)  # well-formed XML, or this fails


def _axes(root: ET.Element) -> list[ET.Element]:
    return root.findall(f"{NS}g[@class='axes']")


def _texts(el: ET.Element) -> list[ET.Element]:
    return list(el.iter(f"{NS}text"))


def _ticks(ax: ET.Element, which: str) -> list[tuple[str, float]]:
    """The tick labels of the x axis (centred under the box, or ending at it, rotated) or the y axis (ending
    left of the box) with their pixel position along the axis."""
    frame = ax.findall(f"{NS}rect")[-1]
    left, top = float(frame.get("x")), float(frame.get("y"))
    bottom = top + float(frame.get("height"))
    out = []
    for t in _texts(ax):
        x, y = float(t.get("x")), float(t.get("y"))
        if which == "x" and bottom < y < bottom + 12:
            out.append((t.text, x))
        elif which == "y" and x < left and t.get("text-anchor") == "end" and top - 1 <= y <= bottom + 1:
            out.append((t.text, y))
    return out


def _scale(ax: ET.Element, which: str, log: bool = False):
    """pixels -> value along an axis, fitted through its numeric tick labels."""
    ticks = [(float(s.replace(",", "")), p) for s, p in _ticks(ax, which) if re.fullmatch(r"[-\d.,]+", s)]
    values, px = np.array([v for v, _ in ticks]), np.array([p for _, p in ticks])
    slope, icept = np.polyfit(px, np.log10(values) if log else values, 1)
    return (lambda p: 10 ** (slope * np.asarray(p) + icept)) if log else (lambda p: slope * np.asarray(p) + icept)


def _bars(ax: ET.Element) -> list[tuple[float, float, float, float, str]]:
    """Every bar (data rectangles: those in a crisp-edged group) as pixels x0, x1, y0 (top), y1, fill."""
    out = []
    for g in ax.iter(f"{NS}g"):
        if g.get("shape-rendering") == "crispEdges":
            for rect in g.findall(f"{NS}rect"):
                x, y, w, h = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
                out.append((x, x + w, y, y + h, rect.get("fill") or g.get("fill")))
    return out


def _values(ax: ET.Element, horizontal: bool = False) -> list[tuple[float, float]]:
    """Each bar's (from, to) in the value axis' units, in drawing order, to two decimals: the SVG's pixels
    are written to a hundredth, a few thousandths of these axes' units."""
    if horizontal:
        to_value = _scale(ax, "x")
        return [tuple(np.round(to_value([x0, x1]), 2) + 0.0) for x0, x1, _, _, _ in _bars(ax)]
    to_value = _scale(ax, "y")
    return [tuple(np.round(to_value([y1, y0]), 2) + 0.0) for _, _, y0, y1, _ in _bars(ax)]


def test_the_bars_are_the_reports_figures():
    a1, a2 = _axes(_svg("failures"))  # GPU-hours by end state (horizontal), Xid events by code, sorted
    assert _values(a1, horizontal=True) == [(0, 120.5), (0, 30.25)]
    assert [s for s, _ in _ticks(a2, "x")] == ["31", "79"]
    assert [v[1] for v in _values(a2)] == [5, 3]

    (ax,) = _axes(_svg("energy"))  # MWh by project: GPUs, the rest of the node stacked on them
    assert _values(ax) == [(0, 2.0), (0, 1.0), (2.0, 2.5), (1.0, 1.25)]
    assert [s for s, _ in _ticks(ax, "x")] == ["A", "B"]

    a1, _ = _axes(_svg("goodput"))  # ETTR % by project
    assert [v[1] for v in _values(a1)] == [50, 75]

    (ax,) = _axes(_svg("size_shares"))  # % of jobs, then of GPU-hours, per size class
    assert [v[1] for v in _values(ax)] == [75, 25, 25, 75]

    (ax,) = _axes(_svg("capacity_timeline"))  # allocated, then free, then down, stacked per day
    assert [v for v in _values(ax) if v[1] > v[0]] == [(0, 100), (0, 80), (100, 150), (80, 100)]
    assert [s for s, _ in _ticks(ax, "x")] == ["2026-10-01", "2026-10-02"]

    a1, a2 = _axes(_svg("waste"))  # idle GPU-hours by project (whole nodes, shared stacked), hung runs
    assert _values(a1) == [(0, 40), (40, 50)] and [v[1] for v in _values(a2)] == [6.5]
    assert [s for s, _ in _ticks(a2, "x")] == ["11"]


def test_the_capacity_legend_sits_above_the_tallest_bar():
    """The capacity chart's legend (its framed box) is drawn over no bar: before, in the lower left, it hid the
    first days' stacks, which start at zero; so for a project's report, whose legend has a row more."""
    for r in (_report(), {**_report(), "scope": "project", "project": "A"}):
        (ax,) = _axes(_svg("capacity_timeline", r))
        (box,) = [e for e in ax.iter(f"{NS}rect") if e.get("rx") == "3"]
        box_bottom = float(box.get("y")) + float(box.get("height"))
        assert box_bottom < min(y0 for _, _, y0, y1, _ in _bars(ax) if y1 > y0)


def test_a_log_axis_is_ticked_at_its_decades_in_plain_numbers():
    (ax,) = _axes(_svg("runtime_cdf"))
    assert [s for s, _ in _ticks(ax, "x")] == ["0.01", "0.1", "1", "10", "100"]
    hours, pct = _scale(ax, "x", log=True), _scale(ax, "y")
    (line,) = ax.iter(f"{NS}polyline")  # the step line is the 100 quantiles, in hours
    pts = np.array([p.split(",") for p in line.get("points").split()], float)
    assert hours(pts[[0, -1], 0]) == pytest.approx([0.01, 100], rel=1e-3)
    assert pct(pts[[0, -1], 1]) == pytest.approx([1, 100], abs=0.01)
    assert len(pts) == 2 * 100 - 1  # held to the next quantile: a step each


def test_the_heatmap_has_a_cell_per_gpu_coloured_by_its_utilization():
    (ax, bar) = _axes(_svg("gpu_heatmap"))
    cells = _bars(ax)
    assert len(cells) == 2 * 2  # nodes × GPUs; the GPU without a sample white
    by_place = {(round(x0), round(y0)): fill for x0, _, y0, _, fill in cells}
    xs, ys = sorted({k[0] for k in by_place}), sorted({k[1] for k in by_place})
    # node r1 n1 in the top row: 0% and 100% are viridis' ends; r2 n2: 50% its middle, its GPU 1 no data
    assert [by_place[(x, ys[0])] for x in xs] == ["#440154", "#fde725"]
    assert [by_place[(x, ys[1])] for x in xs] == ["#21918c", "#ffffff"]
    assert [s for s, _ in _ticks(ax, "y")] == ["r1 n1", "r2 n2"]
    assert [t.text for t in _texts(bar)] == ["0", "20", "40", "60", "80", "100"]


def test_the_gantt_has_a_bar_per_job_and_node():
    (ax,) = _axes(_svg("gantt"))
    bars = _bars(ax)
    assert len(bars) == 3  # job 7 on n1 and n2, job 9 on n3
    widths = sorted(round(x1 - x0, 3) for x0, x1, _, _, _ in bars)
    assert widths[0] == pytest.approx(widths[2] / 2, rel=1e-3)  # half a day beside a day
    assert len({fill for *_, fill in bars}) == 2  # a colour a job
    assert {t.text for t in _texts(ax)} >= {"7", "9", "n1", "n2", "n3",
                                             "The 2 largest jobs over nodes (by GPU-hours)"}


def test_text_from_the_data_is_escaped():
    evil = '</text><script>alert(1)</script>&"x'
    r = _report()
    r["energy"] = [{"project_key": evil, "gpu_kwh": 1000, "rest_kwh": 0}]
    r["largest_jobs"] = [{**r["largest_jobs"][0], "nodes": [evil]}]
    for name in ("energy", "gantt"):
        root = _svg(name, r)
        assert evil in {t.text for t in root.iter(f"{NS}text")}, name  # drawn as its characters
        assert not list(root.iter(f"{NS}script")) and not list(root.iter("script")), name


def test_the_model_note_says_the_failure_rate_it_draws_with():
    # the model's curves are drawn at the report's DOWN events per 1,000 node-days (2.34 without any)
    r = _report()
    faster = {**r, "node_failures": [{"cluster_down_per_1000_node_days": 10.0}]}
    notes = [{t.text for t in _texts(_axes(_svg("goodput", x))[1])} for x in (r, faster)]
    assert "model: 2.3 failures / 1,000 node-days," in notes[0]
    assert "model: 10 failures / 1,000 node-days," in notes[1]


def test_a_chart_with_nothing_to_show_is_left_out():
    r = {**_report(), "end_states": [], "largest_jobs": [], "gpu_heatmap": [], "idle_gpu_users": [], "hung_jobs": []}
    drawn = charts.draw_all(r)
    assert set(drawn) == {"capacity_timeline", "size_shares", "runtime_cdf", "energy", "goodput"}
    for svg in drawn.values():
        root = ET.fromstring(svg)
        assert int(root.get("width")) > 200 and root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"


def test_a_report_with_charts_from_the_command(tmp_path, tmp_path_factory):
    """`ops-report monthly --format all` over a real log: the HTML holds each chart inline as an SVG picture,
    the Markdown links the same SVG files, and the charts name what the JSON holds. (Until round 10 the charts
    were drawn in forked workers, whose inherited SIGTERM handler once printed a traceback under every report:
    none now, and no worker.)"""
    import base64
    import json

    from tests.cli_runner import ops
    from tests.sites import phillips

    # Open XDMoD's phillips.log: December 2016 has runs to draw (the run-time and size charts at least); loaded
    # once per run (tests/sites.py), a copy of it here
    dsn = f"chdb://{phillips(tmp_path_factory).open_copy(tmp_path)}"
    p = ops("--warehouse", dsn, "monthly", "--cluster", "--month", "2016-12", "--format", "all",
            "--out", str(tmp_path / "out"))
    assert "Traceback" not in p.stderr, p.stderr
    out = tmp_path / "out"
    page = next(out.glob("*.html")).read_text()
    inline = {m.group(1): base64.b64decode(m.group(2)).decode() for m in re.finditer(
        r'id="chart-(\w+)" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)}
    files = {f.stem: f.read_text() for f in out.glob("*-charts/*.svg")}
    assert len(inline) >= 2 and inline == files
    assert "data:image/png" not in page
    md = next(out.glob("*.md")).read_text()
    assert sorted(re.findall(r"-charts/(\w+)\.svg\)", md)) == sorted(files)
    r = json.loads(next(out.glob("*.json")).read_text())
    # the end states' chart names the JSON's end states, in its order, and the Gantt chart each largest job
    a1, _ = _axes(ET.fromstring(inline["failures"]))
    assert [s for s, _ in _ticks(a1, "y")] == [s["state"] for s in r["end_states"]]
    ids = {str(j["job_id"]) for j in r["largest_jobs"] if j["start_ts"]}
    assert ids and ids <= {t.text for t in ET.fromstring(inline["gantt"]).iter(f"{NS}text")}
