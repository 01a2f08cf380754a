"""The grains the reports read are kept up to date by the loads, for what each load changed (issue 16):
night by night (each night's sacct extract re-reads the jobs still running, some of them for days), the
refresh covers the days the night changed, not every hour back to the earliest run it re-read, and what
the loads leave equals a refresh of the whole history from what is loaded (capacity_node_hour,
run_node_hour, job_run, gpu_day, run_telemetry, compared as content checksums). A night loaded again changes nothing and
refreshes nothing but the day its as-of time sits in.

The site is the generator's: 6 days of a 16-node cluster with nightly sacct extracts, 30-minute
telemetry, the inventory, node events and a reservation loaded first (the grid exists from the start)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from ops_warehouse.config import Config
from ops_warehouse.etl import grains
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.generate import generate
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import table_checksums
from tests.sites import built_site

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

START = datetime(2026, 10, 1, tzinfo=timezone.utc)
DAYS = 6
PROJECTS = {f"proj{c}": c.upper() for c in "abcdef"}
GRAINS = ("capacity_node_hour", "run_node_hour", "job_run", "gpu_day", "run_telemetry")


def build(out, **params) -> dict:
    """The site loaded night by night, recording the hours each load refreshed (and each night's earliest
    run re-read)."""
    h = generate(out, **params)
    cfg = Config(dsn=f"chdb://{out / 'warehouse'}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    load_capacity(wh, inventory=out / "inventory.csv", events=out / "slurm" / "events.psv",
                  reservations=out / "slurm" / "reservations.txt", cluster=h.spec.name)
    windows: list[list[tuple[datetime, datetime]]] = []
    real = grains.refresh_capacity

    def recording(wh_, cluster, w0, w1, idle_util_pct=None, changed=None):
        windows[-1].append((w0, w1))
        return real(wh_, cluster, w0, w1, idle_util_pct, changed)

    grains.refresh_capacity = recording
    try:
        nights = sorted((out / "sacct" / "nightly").glob("*.psv"))
        firsts = []
        for f in nights:
            windows.append([])
            firsts.append(load_sacct(wh, f, source="nightly").first_ts)
            day = date.fromisoformat(f.stem)
            load_parquet_dir(wh, out, day, day, cluster=h.spec.name)
        windows.append([])
        load_sacct(wh, nights[-1], source="nightly")  # the last night again
    finally:
        grains.refresh_capacity = real
        close_embedded()
    return {"windows": [[[w0.isoformat(), w1.isoformat()] for w0, w1 in night] for night in windows],
            "firsts": [f and f.isoformat() for f in firsts]}


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    s = built_site(tmp_path_factory, "grains-nightly", build, start=START, days=DAYS, jobs_per_day=300, nodes=16,
                   seed=5, metrics_step_s=1800, nightly=True)
    cfg = Config(dsn=f"chdb://{s.open_copy(tmp_path_factory.mktemp('site'))}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    windows = [[(datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in night]
               for night in s.facts["windows"]]
    yield wh, windows, [f and datetime.fromisoformat(f) for f in s.facts["firsts"]]
    close_embedded()


def test_each_night_refreshes_the_days_it_changed(nightly):
    wh, windows, firsts = nightly
    # the first night builds the history; every later night refreshes (sacct, then its telemetry day) only
    # hours from the day before the night it loaded, though it re-read runs that started days earlier
    assert windows[0]
    reread_earlier = 0
    for k in range(1, DAYS):
        night = START + timedelta(days=k)
        assert windows[k], k
        for w0, w1 in windows[k]:
            assert w0 >= night - timedelta(days=1) and w1 <= night + timedelta(days=1, hours=1), (k, w0, w1)
        reread_earlier += firsts[k] < night - timedelta(days=1)
    assert reread_earlier >= 2, "no night re-read a run started two days before: nothing was tested"
    # the last night loaded again: the day of its as-of time at most
    again = windows[-1]
    assert sum((w1 - w0 for w0, w1 in again), timedelta()) <= timedelta(days=1), again


def test_what_the_loads_keep_equals_a_refresh_of_everything(nightly):
    wh = nightly[0]
    kept = {t: c for t, c in table_checksums(wh).items() if t in GRAINS}
    assert all(kept[t][0] > 0 for t in GRAINS), kept
    grains.refresh_history(wh)  # everything again, from what is loaded
    again = {t: c for t, c in table_checksums(wh).items() if t in GRAINS}
    assert again == kept
