"""The run's day (core/clock.py): ``OPS_TODAY`` fixes the day an incremental window ends before, as a
scheduler's logical date does; a suite or a nightly run that passes midnight UTC keeps the day it began with
(CI's run of stop 61 passed midnight: two nightly tests read a window a day later than their site's days)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import polars as pl

from tests.cli_runner import cli


def _config(path, wh, telemetry) -> dict:
    path.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\n[sacct]\ncluster = "ai1"\n'
                    f'[nightly.telemetry]\nsource = "file"\npath = "{telemetry}"\ncluster = "ai1"\n')
    return {"OPS_CONFIG": str(path), "OPS_WAREHOUSE": ""}


def test_the_nightly_window_ends_the_day_before_ops_today(tmp_path):
    """Four generated days, 2026-11-26..29, and the run's day set to 2026-11-29: the first nightly run (no
    watermark: the two days before yesterday, and yesterday; docs/nightly.md) reads 2026-11-26..2026-11-28 and
    loads those three days' GPU samples, not the fourth's, whatever the clock says; the run's day a day later,
    the next run reads from two days before the watermark (the end of 2026-11-28: 2026-11-29 00:00, less two
    days) to 2026-11-29, and the fourth day comes in. The day counts are the day files' own rows, read by polars."""
    from ops_warehouse.config import Config
    from ops_warehouse.generate import generate
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    site = tmp_path / "site"
    generate(site, start=datetime(2026, 11, 26, tzinfo=timezone.utc), days=4, jobs_per_day=20, nodes=2, seed=3,
             metrics_step_s=900)
    files = pl.read_parquet(site / "telemetry" / "dcgm" / "*.parquet")
    per_day = dict(files.group_by(pl.col("timestamp").dt.date()).agg(
        pl.struct("Hostname", "gpu", "timestamp").n_unique()).iter_rows())
    assert sorted(per_day) == [date(2026, 11, d) for d in (26, 27, 28, 29)]
    wh = tmp_path / "wh"
    env = _config(tmp_path / "ops.toml", wh, site / "telemetry")

    planned = cli("etl", "nightly", "--dry-run", env={**env, "OPS_TODAY": "2026-11-29"}).stdout
    assert "nightly telemetry-file ai1 2026-11-26..2026-11-28: dry-run" in planned, planned
    out = cli("etl", "nightly", env={**env, "OPS_TODAY": "2026-11-29"}).stdout
    assert "nightly telemetry-file ai1 2026-11-26..2026-11-28: ok" in out, out

    def days_loaded() -> dict:
        w = open_warehouse(Config(dsn=f"chdb://{wh}"), migrate=False)
        try:
            return dict(w.query_rows("SELECT toDate(ts), count() FROM gpu_sample FINAL GROUP BY 1"))
        finally:
            close_embedded()

    assert days_loaded() == {d: n for d, n in per_day.items() if d < date(2026, 11, 29)}
    out = cli("etl", "nightly", env={**env, "OPS_TODAY": "2026-11-30"}).stdout
    assert "nightly telemetry-file ai1 2026-11-27..2026-11-29: ok" in out, out
    assert days_loaded() == per_day


def test_an_ops_today_that_is_not_a_date_stops_the_run_in_one_line(tmp_path):
    env = _config(tmp_path / "ops.toml", tmp_path / "wh", tmp_path)
    r = cli("etl", "nightly", "--dry-run", env={**env, "OPS_TODAY": "2026-13-01"}, check=False)
    assert r.returncode != 0
    assert r.stderr.strip() == ("ops-report: error: OPS_TODAY='2026-13-01' is not a date: give YYYY-MM-DD "
                                "(UTC), or unset it"), r.stderr
