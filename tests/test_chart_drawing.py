"""The monthly report's charts (reports/charts.py) drawn cheaply and still showing the report's figures: fixed
ticks (a log axis ticked at its decades as plain numbers, without minor ticks or mathtext: most of a chart's
drawing was matplotlib laying out tick text it worked out at draw time), bars as one collection. The figures
are read back from the drawn figure (each bar's rectangle) and compared with a report whose numbers are worked
out here by hand."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

charts = pytest.importorskip("ops_warehouse.reports.charts")


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
        "gpu_heatmap": [], "largest_jobs": [],
        "end_states": [{"state": "COMPLETED", "gpu_h": 120.5}, {"state": "FAILED", "gpu_h": 30.25}],
        "xid_codes": [{"xid": 79, "events": 3}, {"xid": 31, "events": 5}],
        "idle_gpu_users": [], "hung_jobs": [],
        "energy": [{"project_key": "", "gpu_kwh": 3000, "rest_kwh": 750},
                   {"project_key": "A", "gpu_kwh": 2000, "rest_kwh": 500},
                   {"project_key": "B", "gpu_kwh": 1000, "rest_kwh": 250}],
        "goodput": [{"project_key": "A", "ettr": 0.5}, {"project_key": "B", "ettr": 0.75}], "campaigns": [],
    }


@pytest.fixture()
def figures(monkeypatch):
    """Each chart's figure, kept when it is saved."""
    got = {}
    real = charts._png

    def keep(fig):
        got[len(got)] = fig
        return real(fig)

    monkeypatch.setattr(charts, "_png", keep)
    r = _report()

    def draw(name: str):
        got.clear()
        fn = dict((n, f) for n, _, f in charts.CHARTS)[name]
        assert fn(r) is not None
        return got[0]
    return draw


def _bars(ax) -> list[tuple[float, float, float, float]]:
    """Every rectangle the axes draw (x0, x1, y0, y1), one collection's or a patch each, sorted."""
    out = []
    for c in ax.collections:
        for p in c.get_paths():
            v = p.vertices[:4]
            out.append((v[:, 0].min(), v[:, 0].max(), v[:, 1].min(), v[:, 1].max()))
    for p in ax.patches:
        (x0, y0), (x1, y1) = p.get_bbox().get_points()
        out.append((x0, x1, y0, y1))
    return sorted((round(a, 6), round(b, 6), round(c, 6), round(d, 6)) for a, b, c, d in out)


def test_a_log_axis_is_ticked_at_its_decades_in_plain_numbers(figures):
    ax = figures("runtime_cdf").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.01", "0.1", "1", "10", "100"]
    assert list(ax.get_xticks()) == pytest.approx([0.01, 0.1, 1, 10, 100])
    assert len(ax.xaxis.get_minorticklocs()) == 0
    (line,) = ax.get_lines()  # the step line is the 100 quantiles, in hours
    assert line.get_xdata()[[0, -1]] == pytest.approx([0.01, 100])
    assert line.get_ydata()[[0, -1]] == pytest.approx([1, 100])


@pytest.mark.parametrize("name", ["runtime_cdf", "size_shares", "capacity_timeline", "failures", "energy",
                                  "goodput"])
def test_no_tick_label_is_mathtext(figures, name):
    fig = figures(name)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()]
    assert labels and not [s for s in labels if "$" in s]


def test_the_bars_are_the_reports_figures(figures):
    a1, a2 = figures("failures").axes  # GPU-hours by end state (horizontal), Xid events by code, sorted
    assert _bars(a1) == [(0, 30.25, 0.6, 1.4), (0, 120.5, -0.4, 0.4)]
    assert [t.get_text() for t in a1.get_yticklabels()] == ["COMPLETED", "FAILED"]
    assert [b[3] for b in _bars(a2)] == [5, 3]
    assert [t.get_text() for t in a2.get_xticklabels()] == ["31", "79"]

    (ax,) = figures("energy").axes  # MWh by project: GPUs, the rest of the node stacked on them
    assert _bars(ax) == [(-0.4, 0.4, 0, 2.0), (-0.4, 0.4, 2.0, 2.5), (0.6, 1.4, 0, 1.0), (0.6, 1.4, 1.0, 1.25)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B"]

    a1 = figures("goodput").axes[0]  # ETTR % by project
    assert [b[3] for b in _bars(a1)] == [50, 75]

    (ax,) = figures("size_shares").axes  # % of jobs and of GPU-hours side by side
    assert [b[3] for b in _bars(ax)] == [75, 25, 25, 75]

    (ax,) = figures("capacity_timeline").axes  # allocated, then free, then down, stacked per day
    tops = {}
    for x0, x1, y0, y1 in _bars(ax):
        tops[round((x0 + x1) / 2)] = max(tops.get(round((x0 + x1) / 2), 0), y1)
    assert sorted(tops.values(), reverse=True) == [150, 100]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2026-10-01", "2026-10-02"]


def test_the_goodput_charts_digest_covers_the_failure_rate_it_draws_with():
    # the model's curves are drawn at the report's DOWN events per 1,000 node-days (2.34 without any): a report
    # whose rate changed draws another picture, so a chart kept from an earlier run under the same digest
    # would be stale
    r = _report()
    faster = {**r, "node_failures": [{"cluster_down_per_1000_node_days": 10.0}]}
    assert charts.goodput(r) != charts.goodput(faster)
    assert charts.chart_key("goodput", r) != charts.chart_key("goodput", faster)
    assert charts.chart_key("goodput", r) != charts.chart_key("goodput", {**r, "campaign_min_gpus": 128})
    assert charts.chart_key("energy", r) == charts.chart_key("energy", faster)  # (another chart's input)
