"""Clock skew in sacct input (issue 27, item 2): a time outside the window a record may hold is quarantined
with its reason, and a load that fails leaves nothing of itself behind.

The files are in tests/data/hostile (its README.md): ``future-2099.psv`` and ``future-2027.psv`` hold the same
three October 2026 jobs of cluster c1 and a fourth, 104, dated 2099-06-01 (a node whose clock ran 73 years
ahead) or 2027-06-01:
  101  alice proja  8 GPUs gpu001  10-01 01:00 .. 03:00                  8 × 2 h = 16 GPU-h
  102  bob   projb  4 GPUs gpu002  10-10 00:30 .. 01:30                  4 × 1 h =  4
  103  alice proja  8 GPUs gpu001  10-31 22:00 .. 11-01 01:00    October: 8 × 2 h = 16 (1 h in November)
  October allocated 36 GPU-h of 2 nodes × 8 GPUs × 744 h = 11,904 (tests/data/hostile/inventory.csv).
103 ends in November, so October is the last complete month once 104 is out of the way.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.analytics.periods import history_span, last_complete_month, month_window
from ops_warehouse.errors import OpsError
from ops_warehouse.etl import sacct_load
from ops_warehouse.etl.capacity_sources import load_capacity
from tests.cli_runner import cli
from tests.conftest import DATA, VOLATILE_COLUMNS, rows

HOSTILE = DATA / "hostile"
CLOCK = datetime(2026, 11, 15, tzinfo=timezone.utc)  # the load's clock where a test sets it


def test_a_job_dated_2099_is_quarantined_and_the_nightly_goes_on(cfg, wh):
    """Before: the load failed with "Too many partitions for single INSERT block (more than 100)" (the grains'
    refresh spanned 2026-10 .. 2099-06), job 104 stayed in slurm_job_run, every later `etl capacity` failed the
    same way and `monthly` without --month reported 2099-05. Now the load reads 4, loads 3 and quarantines 104
    (its Submit is the first time checked), `etl capacity` loads, and the report is October's: 36 of 11,904."""
    inv = ["--warehouse", cfg.dsn, "etl", "capacity", "--inventory", str(HOSTILE / "inventory.csv"), "--cluster", "c1"]
    cli(*inv)
    out = cli("--warehouse", cfg.dsn, "etl", "sacct", str(HOSTILE / "future-2099.psv")).stdout
    assert "read 4, loaded 3 (3 job runs, 0 steps), quarantined 1" in out, out
    assert "quarantined 1: submit time more than 24 h past the load's clock" in out
    assert rows(wh, "SELECT line_no, reason FROM etl_quarantine FINAL") == [
        (5, "submit time more than 24 h past the load's clock '2099-06-01T00:00:00'")]
    assert rows(wh, "SELECT job_id FROM slurm_job_run FINAL ORDER BY job_id") == [("101",), ("102",), ("103",)]
    assert "node_inventory: 2 rows" in cli(*inv).stdout  # exit 0: the capacity refresh no longer fails
    # the month `monthly` and `nodes` report without --month (analytics/monthly.py), and its utilization
    assert last_complete_month(*history_span(wh, "c1")) == date(2026, 10, 1)
    u = run_mart(wh, "utilization", cluster="c1", window=month_window(date(2026, 10, 1)))
    assert u.filter(pl.col("level") == "cluster").select("capacity_gpu_h", "allocated_gpu_h").row(0) == (11904.0, 36.0)


def test_a_job_months_ahead_does_not_make_a_month_to_come_complete(wh, tmp_path):
    """Before: job 104 dated 2027-06-01 loaded, and the reports took 2027-05 for the last complete month (0
    GPU-hours allocated in it). With the load's clock at 2026-11-15 it is 4,000-odd hours ahead: quarantined,
    and October 2026 is the last complete month again."""
    r = sacct_load.load_sacct(wh, HOSTILE / "future-2027.psv", now=CLOCK)
    assert (r.records_read, r.jobs_loaded, r.quarantined) == (4, 3, 1)
    assert r.reasons == {"submit time more than 24 h past the load's clock": 1}
    assert last_complete_month(*history_span(wh, "c1")) == date(2026, 10, 1)
    # every time of a record is held to the window, not its Submit alone: 104 submitted on time, run in 2027
    text = (HOSTILE / "future-2027.psv").read_text().replace("104|104|c1|h100|normal|projb|grp|carol|2027-06-01T00:00:00|2027-06-01T00:00:00",
                                     "104|104|c1|h100|normal|projb|grp|carol|2026-11-14T00:00:00|2026-11-14T00:00:00")
    p = tmp_path / "started-in-2027.psv"
    p.write_text(text)
    r = sacct_load.load_sacct(wh, p, now=CLOCK)
    assert r.reasons == {"start time more than 24 h past the load's clock": 1}


def test_the_window_is_the_configs(cfg, wh, tmp_path):
    """[sacct] earliest and max_future_hours (core/config.py; default 2000-01-01 and 24 h): with earliest =
    2026-10-05, job 101 (submitted 10-01) is before the window; a bad value is one line naming the key."""
    conf = tmp_path / "ops.toml"
    conf.write_text("[sacct]\nearliest = 2026-10-05\nmax_future_hours = 48\n")
    out = cli("--warehouse", cfg.dsn, "--config", str(conf), "etl", "sacct", str(HOSTILE / "future-2099.psv")).stdout
    assert "read 4, loaded 2 (2 job runs, 0 steps), quarantined 2" in out, out
    assert rows(wh, "SELECT reason FROM etl_quarantine FINAL ORDER BY line_no") == [
        ("submit time before 2026-10-05 '2026-10-01T00:00:00'",),
        ("submit time more than 48 h past the load's clock '2099-06-01T00:00:00'",)]
    conf.write_text('[sacct]\nmax_future_hours = "a day"\n')
    bad = cli("--warehouse", cfg.dsn, "--config", str(conf), "etl", "sacct", str(HOSTILE / "future-2099.psv"), check=False)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "sacct.max_future_hours must be" in bad.stderr
    conf.write_text('[sacct]\nearliest = "yesterday"\n')
    bad = cli("--warehouse", cfg.dsn, "--config", str(conf), "etl", "sacct", str(HOSTILE / "future-2099.psv"), check=False)
    assert bad.returncode != 0 and "sacct.earliest must be a date (YYYY-MM-DD), not 'yesterday'" in bad.stderr


def test_a_load_refused_by_the_engine_leaves_nothing_behind(wh):
    """The engine refuses the quarantine insert (a CHECK 0 constraint, as tests/test_run_log.py injects it),
    after the chunk's three runs were inserted. Before, a failed load kept what it had written: this file,
    with the inventory loaded, failed on the grains' refresh (too many partitions) and its four runs stayed in
    slurm_job_run. Now none is left, nor a scratch table of the load's; the run log says it failed after
    reading 4 records."""
    load_capacity(wh, inventory=HOSTILE / "inventory.csv", cluster="c1")
    wh.command("ALTER TABLE etl_quarantine ADD CONSTRAINT refuse_all CHECK 0")
    with pytest.raises(Exception) as failed:
        sacct_load.load_sacct(wh, HOSTILE / "future-2099.psv")
    assert rows(wh, "SELECT count() FROM slurm_job_run") == [(0,)]
    assert "VIOLATED_CONSTRAINT" in str(failed.value)
    assert rows(wh, "SELECT count() FROM system.tables WHERE database = currentDatabase() "
                    "AND startsWith(name, 'etl_undo_')") == [(0,)]
    assert rows(wh, "SELECT source_kind, status, rows_read FROM etl_run_log ORDER BY started_at") == [
        ("capacity", "ok", 2), ("sacct", "failed", 4)]


def test_a_failed_reload_puts_back_what_it_replaced(wh, monkeypatch):
    """original.psv loaded (101; 401: ivan, projf, 2 GPUs), then corrected.psv (401: judy, projg, 8 GPUs, the
    same End) fails after its refresh wrote the grains (the failure injected after refresh_after_jobs). Every
    table is as it was before the reload (``contents``: job runs, job_run, the as-of time, run_node_hour,
    ...): 401 is ivan's again, with 2 GPUs. (No inventory: the capacity grid would cost seconds more, and is
    brought back by the same refresh as run_node_hour, etl/undo.py.)"""
    sacct_load.load_sacct(wh, HOSTILE / "original.psv")
    before = contents(wh)
    refresh = sacct_load.refresh_after_jobs

    def fails_after(*args, **kwargs):
        refresh(*args, **kwargs)
        raise OpsError("injected after the refresh")

    monkeypatch.setattr(sacct_load, "refresh_after_jobs", fails_after)
    with pytest.raises(OpsError, match="injected"):
        sacct_load.load_sacct(wh, HOSTILE / "corrected.psv")
    assert contents(wh) == before
    assert rows(wh, "SELECT user, account, gpus FROM slurm_job_run FINAL WHERE job_id = '401'") == [("ivan", "projf", 2)]
    assert rows(wh, "SELECT user, account, gpus FROM fct_job_run WHERE job_id = '401'") == [("ivan", "projf", 2)]


def contents(wh) -> dict[str, tuple]:
    """table_checksums (tests/conftest.py) with each row hashed as one tuple: a NULL in any column (a job
    without UID, Eligible or Reservation) makes cityHash64 of the columns NULL, which sum() skips, so there a
    row's content did not count."""
    out = {}
    for (t,) in rows(wh, "SELECT name FROM system.tables WHERE database = currentDatabase() "
                         "AND engine LIKE '%MergeTree' AND name != 'etl_run_log' ORDER BY name"):
        cols = [c for (c,) in rows(wh, "SELECT name FROM system.columns WHERE database = currentDatabase() "
                                       "AND table = {t:String} ORDER BY position", t=t) if c not in VOLATILE_COLUMNS]
        out[t] = rows(wh, f"SELECT count(), sum(cityHash64(tuple({', '.join(f'`{c}`' for c in cols)}))) FROM {t} FINAL")[0]
    return out
