"""What an operator backfilling years of telemetry expects of `ops-report etl metrics` (issue 50): progress
lines that say how long is left, and a load stopped part-way (Ctrl-C, SIGTERM) that, run again, goes on at
the first day it had not loaded instead of loading the window from its first day again, leaving what one
uninterrupted load leaves."""

from __future__ import annotations

import io
import shutil
from datetime import date, datetime, timedelta, timezone

import pytest

from ops_warehouse import progress as progress_mod
from ops_warehouse.etl import telemetry_load
from ops_warehouse.generate import generate
from ops_warehouse.warehouse import close_embedded
from tests.cli_runner import cli
from tests.conftest import warehouse_checksums

DAY1 = date(2026, 10, 1)
DAYS = 4


def _log_lines(monkeypatch, calls: list[tuple[float, int, int]]) -> list[str]:
    """The plain (non-terminal) progress lines for calls (clock s, done, total)."""
    clock = iter(t for t, _, _ in calls)
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: next(clock))
    err = io.StringIO()
    monkeypatch.setattr(progress_mod.sys, "stderr", err)
    with progress_mod.count_progress("telemetry days") as p:
        for _, done, total in calls:
            p(done, total)
    return [ln.split(" ", 1)[1] for ln in err.getvalue().splitlines()]


def test_progress_lines_say_how_long_is_left(monkeypatch):
    # the start prints nothing (a load that fails at once says so in one line); 2 days in 20 s: 10 s a day,
    # 8 days left = 80 s; the call 5 s later is within 10 s of the last line (not printed); the end says how
    # long the whole took
    lines = _log_lines(monkeypatch, [(100, 0, 10), (120, 2, 10), (125, 3, 10), (200, 10, 10)])
    assert lines == ["telemetry days: 2/10, about 1 min 20 s left", "telemetry days: 10/10, done in 1 min 40 s"]


def test_a_resumed_load_estimates_from_its_own_days(monkeypatch):
    # resumed at day 1,000 of 1,826 (five years): one day in 30 s, 825 days left = 24,750 s = 6 h 52 min 30 s;
    # counting the skipped days as done in those 30 s would say under 25 s
    lines = _log_lines(monkeypatch, [(0, 1000, 1826), (30, 1001, 1826)])
    assert lines == ["telemetry days: 1000/1826", "telemetry days: 1001/1826, about 6 h 52 min left"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    generate(out, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=DAYS, jobs_per_day=60, nodes=4, seed=11,
             metrics_step_s=1800)
    return out


def _telemetry_runs(path) -> list[tuple[str, str]]:
    """(window, status) of each telemetry row of etl_run_log, in order."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    w = open_warehouse(Config(dsn=f"chdb://{path}"), migrate=False)
    try:
        return [(s.rsplit(" ", 1)[1], st) for s, st in w.query_rows(
            "SELECT source, status FROM etl_run_log WHERE source_kind = 'telemetry' ORDER BY started_at")]
    finally:
        close_embedded()


@pytest.mark.slow  # a generated site: docs/testing.md
def test_a_stopped_backfill_resumes_where_it_stopped(site, tmp_path, monkeypatch):
    """Stopped (KeyboardInterrupt: what SIGINT and SIGTERM raise) once day 2's samples are in: run again, it
    loads days 3 and 4 only (the run log's windows), and the warehouse equals one uninterrupted load of the
    4 days, every table (content checksums). Before, the second run loaded days 1-4 again."""
    env = {"OPS_CONFIG": ""}
    args = ["etl", "metrics", "--source", "file", "--file", str(site), "--from", str(DAY1),
            "--to", str(DAY1 + timedelta(days=DAYS - 1)), "--cluster", "ai1"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    cli("--warehouse", f"chdb://{whole}", "etl", "sacct", str(site / "sacct" / "sacct.psv"), env=env)
    close_embedded()  # closed before it is copied: the stopped side starts from the same sacct load
    shutil.copytree(whole, stopped, symlinks=True)
    cli("--warehouse", f"chdb://{whole}", *args, env=env)

    real = telemetry_load.load_parquet_dir

    def stopping_after_day_2(wh, root, d0, d1, *, progress=None, **kw):
        def p(done, n):
            if progress:
                progress(done, n)
            if d0 + timedelta(days=done - 1) == DAY1 + timedelta(days=1):
                raise KeyboardInterrupt  # Ctrl-C as day 3 begins
        return real(wh, root, d0, d1, progress=p, **kw)

    monkeypatch.setattr(telemetry_load, "load_parquet_dir", stopping_after_day_2)
    r = cli("--warehouse", f"chdb://{stopped}", *args, env=env, check=False)
    assert r.returncode == 130, (r.stdout, r.stderr)
    monkeypatch.setattr(telemetry_load, "load_parquet_dir", real)
    r = cli("--warehouse", f"chdb://{stopped}", *args, env=env)
    assert _telemetry_runs(stopped) == [("2026-10-01..2026-10-04", "failed"), ("2026-10-03..2026-10-04", "ok")]
    assert "resumed at 2026-10-03" in r.stdout, r.stdout
    a, b = warehouse_checksums(whole), warehouse_checksums(stopped)
    assert a["gpu_sample"][0] == DAYS * 48 * 4 * 8  # 4 days of 30-minute samples, 4 nodes of 8 GPUs
    assert {t for t in a if a[t] != b.get(t)} == set()

    # finished, the same command loads the whole window again (a deliberate reload), and changes nothing
    cli("--warehouse", f"chdb://{stopped}", *args, env=env)
    assert _telemetry_runs(stopped)[-1] == ("2026-10-01..2026-10-04", "ok")
    assert warehouse_checksums(stopped) == b


def test_only_the_stopped_window_resumes_and_restart_starts_over(wh, monkeypatch):
    """The records alone, with a load that only counts its days (no telemetry): 10 days in chunks of 3, stopped
    as day 5 ends (inside the second chunk, after its second day). Run again: days 6-10, the grains of days 4-5
    refreshed first (their chunk never ended). Another window of the same source starts at its first day;
    --restart too; a finished window, run again, loads all of it."""
    from ops_warehouse.etl import backfill

    calls: list[tuple[date, date]] = []
    refreshed: list[tuple[datetime, datetime]] = []

    def load(stop_after: date | None = None):
        def f(d0, d1, progress):
            calls.append((d0, d1))
            for k in range((d1 - d0).days + 1):
                progress(k + 1, (d1 - d0).days + 1)
                if d0 + timedelta(days=k) == stop_after:
                    raise KeyboardInterrupt
            return {"gpu_rows": 10 * ((d1 - d0).days + 1)}
        return f

    monkeypatch.setattr(backfill, "refresh_hourly", lambda w, a, b: refreshed.append((a, b)))
    d = [DAY1 + timedelta(days=k) for k in range(10)]  # d[0] is day 1
    run = lambda **kw: backfill.load_resumably(wh, "file:/site", d[0], d[9], chunk_days=3, **kw)  # noqa: E731
    with pytest.raises(KeyboardInterrupt):
        run(load=load(stop_after=d[4]))
    assert calls == [(d[0], d[2]), (d[3], d[5])]
    calls.clear()
    c = run(load=load())
    assert calls == [(d[5], d[7]), (d[8], d[9])]
    assert refreshed == [(datetime(2026, 10, 4, tzinfo=timezone.utc), datetime(2026, 10, 6, tzinfo=timezone.utc))]
    assert (c["gpu_rows"], c["days"], c["resumed_from"], c["skipped_days"]) == (50, 10, d[5], 5)
    calls.clear()
    run(load=load())  # finished: the whole window again
    assert calls[0] == (d[0], d[2]) and len(calls) == 4

    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        run(load=load(stop_after=d[4]))
    calls.clear()
    backfill.load_resumably(wh, "file:/site", d[0], d[8], load(), chunk_days=3)  # another window
    assert calls[0] == (d[0], d[2])
    calls.clear()
    run(load=load(), restart=True)
    assert calls[0] == (d[0], d[2])
