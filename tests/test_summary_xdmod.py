"""`ops-report summary` against an independent DuckDB implementation of Open XDMoD's Jobs-realm
definitions, on Open XDMoD's own test data (ubccr/xdmod, LGPL-3.0: phillips.log and pozidriv.log)."""

from __future__ import annotations

from datetime import date

import pytest

from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.sacct_text import XDMOD_FIELDS, parse_fields
from ops_warehouse.analytics.summary import summary
from tests.conftest import XDMOD, warehouse_config
from tests.xdmod_reference import reference_summary

# the loads and reports here run on the embedded warehouse and on a ClickHouse server (tests/conftest.py)
pytestmark = pytest.mark.both_forms

LOGS = [XDMOD / "phillips.log", XDMOD / "pozidriv.log"]
STATS = ["jobs_ended", "jobs_started", "jobs_cancelled_before_start", "cpu_hours", "gpu_h", "node_hours",
         "wall_hours", "wait_hours"]


@pytest.fixture(scope="module")
def loaded(form, tmp_path_factory, request):
    """The two logs loaded once per form; the tests only read (summary)."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    folder = tmp_path_factory.mktemp(f"xdmod-{form}")
    wh = open_warehouse(warehouse_config(form, folder, request))
    for p in LOGS:
        r = load_sacct(wh, p, fields=parse_fields(XDMOD_FIELDS))
        assert r.quarantined == 0
    yield wh
    wh.close()
    close_embedded()


@pytest.mark.parametrize("period", ["none", "day", "month"])
@pytest.mark.parametrize("window", [(date(2016, 12, 22), date(2017, 1, 1)), (date(2016, 12, 1), date(2017, 1, 31)),
                                    (date(2016, 12, 25), date(2016, 12, 27))])
def test_summary_matches_xdmod_reference_to_4_decimals(loaded, period, window):
    ours = summary(loaded, window[0], window[1], ["cluster"], period)
    ref = reference_summary([str(p) for p in LOGS], window[0], window[1], period)
    ours_rows = {(r["cluster"], r.get("period_start", window[0])): r for r in ours.iter_rows(named=True)}
    ref_rows = {(r["cluster"], r["period_start"] if period != "none" else window[0]): r for r in ref}
    assert set(ours_rows) == set(ref_rows)
    assert len(ref_rows) >= 2
    for k, ref_row in ref_rows.items():
        for s in STATS:
            assert ours_rows[k][s] == pytest.approx(ref_row[s], abs=5e-5), (k, s)


def test_known_totals_of_the_xdmod_fixture(loaded):
    """Figures worked out from the files with awk, independently of both engines."""
    df = summary(loaded, date(2016, 12, 22), date(2017, 1, 1), ["cluster"], "none")
    got = {r["cluster"]: r for r in df.iter_rows(named=True)}
    # `grep -c "None assigned"`: jobs that never ran
    assert got["phillips"]["jobs_cancelled_before_start"] == 239
    assert got["pozidriv"]["jobs_cancelled_before_start"] == 419
    # phillips holds two GPU jobs (gres/gpu=2 each): 163485 ran 2016-12-22T07:15:13 .. 2017-01-01T20:42:19
    # (912,426 s) and 196835 ran 17 s on 2017-01-01; pozidriv holds none.
    assert got["pozidriv"]["gpu_h"] == 0
    assert got["phillips"]["gpu_h"] == pytest.approx(2 * (912426 + 17) / 3600, abs=1e-9)


def test_period_split_of_a_month_spanning_job(loaded):
    """Job 163485 (12 CPUs, 2 GPUs) spans the new year: 837,887 s in December, 74,539 s in January."""
    df = summary(loaded, date(2016, 12, 1), date(2017, 1, 31), ["cluster", "gpu_count_bin"], "month")
    rows = {(r["cluster"], r["gpu_count_bin"], r["period_start"]): r for r in df.iter_rows(named=True)}
    gpu2 = [r for k, r in rows.items() if k[0] == "phillips" and k[1] == "2"]
    by_month = {r["period_start"]: r for r in gpu2}
    # the other gres/gpu=2 job of phillips (196835, 12 CPUs) ran 17 s on 2017-01-01
    dec, jan = by_month[date(2016, 12, 1)], by_month[date(2017, 1, 1)]
    assert dec["gpu_h"] == pytest.approx(2 * 837887 / 3600, abs=1e-9)
    assert dec["cpu_hours"] == pytest.approx(12 * 837887 / 3600, abs=1e-9)
    assert dec["jobs_started"] == 1 and dec["jobs_ended"] == 0
    assert dec["wait_hours"] == pytest.approx(1 / 3600, abs=1e-12)  # submitted 07:15:12, started 07:15:13
    assert jan["gpu_h"] == pytest.approx(2 * (74539 + 17) / 3600, abs=1e-9)
    assert jan["cpu_hours"] == pytest.approx(12 * (74539 + 17) / 3600, abs=1e-9)
    assert jan["jobs_ended"] == 2 and jan["jobs_started"] == 1
    assert jan["wall_hours"] == pytest.approx((74539 + 17) / 3600, abs=1e-9)
