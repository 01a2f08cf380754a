"""The monthly report's charts drawn while its marts are evaluated (reports/charts_ahead.py; analytics/monthly.py
``early``): the charts handed back are the ones drawn from the whole report, byte for byte, whichever were drawn
from its parts; the parts are the report's own values and come in before the report is whole; a part that is
not the whole report's value is drawn again from the whole; the report itself is the same. On the hand-built
month of tests/test_monthly_scenario.py, whose figures are worked out by hand there."""

from __future__ import annotations

import pytest

from ops_warehouse.analytics.api import Connection
from ops_warehouse.analytics.marts import each_mart_once
from ops_warehouse.analytics.monthly import monthly_report
from ops_warehouse.reports import charts
from ops_warehouse.reports.chart_inputs import INPUTS
from ops_warehouse.reports.charts_ahead import ChartsAhead, drawing_ahead
from ops_warehouse.reports.monthly_render import to_json
from tests.test_monthly_scenario import ALLOCATED, CAPACITY, scenario  # noqa: F401  (the module-scoped scenario warehouse)


class _Recorded(ChartsAhead):
    """The parts handed to the drawing process, with whether the report was whole yet."""

    def __init__(self):
        super().__init__()
        self.parts, self.whole = [], False

    def take(self, part):
        self.parts.append((self.whole, part))
        super().take(part)


def _report(wh, early=None) -> dict:
    with each_mart_once(wh):
        return monthly_report(Connection(wh), cluster="t1", early=early)


@pytest.mark.both_forms
def test_charts_drawn_ahead_are_the_whole_reports_and_the_report_unchanged(scenario):
    ahead = _Recorded()
    try:
        r = _report(scenario, ahead)
        ahead.whole = True
        got = ahead.charts(r)
    finally:
        ahead.close()
    plain = _report(scenario)
    assert to_json({**r, "generated_at": None}) == to_json({**plain, "generated_at": None})
    u = next(x for x in r["utilization"] if x["level"] == "cluster")
    assert (u["capacity_gpu_h"], u["allocated_gpu_h"]) == pytest.approx((CAPACITY, ALLOCATED))
    # every key a chart reads came in as a part, before the report was whole, as the report holds it
    # (the what-if's alone comes with the whole report: no [[whatif]] here)
    taken = {}
    for whole, part in ahead.parts:
        assert not whole
        taken.update(part)
    wanted = {k for name, keys in INPUTS.items() if name != "whatif" for k in keys}
    assert wanted <= set(taken)
    assert all(taken[k] == r[k] for k in wanted)
    # the same PNGs, byte for byte, as drawn here from the whole report (the digests the same too)
    charts._DRAWN.clear()
    want = charts.draw_all(r, workers=1)
    assert got.keys() == want.keys() and {"capacity_timeline", "size_shares", "gantt"} <= set(got)
    assert all(got[n] == want[n] for n in want)


@pytest.mark.both_forms
@pytest.mark.embedded_only("the drawing process's choice between a part and the whole report: no warehouse in it")
def test_a_part_that_is_not_the_whole_reports_is_drawn_again_from_the_whole(scenario):
    r = _report(scenario)
    rows = r["job_sizes"]
    assert sum(x["jobs"] for x in rows) > 0
    with drawing_ahead() as ahead:
        # job sizes as a part with every share doubled, then the whole report: drawn from the whole
        ahead.take({k: r[k] for k in ("scope", "project")})
        ahead.take({"job_sizes": [{**x, "job_share": 2 * (x["job_share"] or 0)} for x in rows]})
        got = ahead.charts(r)
    charts._DRAWN.clear()
    want = charts.draw_all(r, workers=1)
    assert got["size_shares"] == want["size_shares"]
    charts._DRAWN.clear()
    wrong = charts.draw_all({**r, "job_sizes": [{**x, "job_share": 2 * (x["job_share"] or 0)} for x in rows]},
                            workers=1)
    assert wrong["size_shares"] != want["size_shares"]  # (the doubled part draws another picture)


def test_no_format_with_charts_forks_nothing():
    with drawing_ahead(False) as ahead:
        assert ahead is None
