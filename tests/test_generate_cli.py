"""`ops-report generate`: a small site's files, in the formats the loaders read."""

from __future__ import annotations

import polars as pl

from ops_warehouse.etl.sacct_load import load_sacct
from tests.conftest import rows
from tests.cli_runner import cli


def test_generate_small_site_and_load_it(tmp_path, wh):
    out = tmp_path / "site"
    p = cli("generate", "--out", str(out), "--days", "2", "--jobs-per-day", "150", "--nodes", "12",
            "--metrics-step", "600", "--telemetry", "both", "--nightly", "--seed", "3")
    assert "job runs on 12 nodes" in p.stdout
    inv = pl.read_csv(out / "inventory.csv")
    assert inv.height == 12 and set(inv["partition"]) == {"h100", "h200", "b200"}
    assert inv.columns == ["node", "gpu_model", "gpus", "partition", "rack", "in_service_date"]
    assert (out / "slurm" / "events.psv").read_text().startswith("Cluster|NodeName|TimeStart|TimeEnd|State|Reason")
    assert "ReservationName=proja_h100" in (out / "slurm" / "reservations.txt").read_text()
    assert sorted(f.name for f in (out / "sacct" / "nightly").iterdir()) == ["2026-10-01.psv", "2026-10-02.psv"]
    om = sorted((out / "telemetry" / "openmetrics").glob("*.om"))
    assert len(om) == 2 * 12  # one file per 2-hour window
    assert om[0].read_text().rstrip().endswith("# EOF")
    dcgm = pl.read_parquet(out / "telemetry" / "dcgm" / "2026-10-01.parquet")
    assert {"timestamp", "Hostname", "gpu", "UUID", "modelName", "DCGM_FI_DEV_GPU_UTIL"} <= set(dcgm.columns)
    # GPUs in service that day x 10-minute steps (the B200 node enters service on day 5: silent before)
    in_service = inv.filter(pl.col("in_service_date") <= "2026-10-01").height
    assert in_service == 11 and dcgm.height == in_service * 8 * 144
    # the accounting loads cleanly and matches the simulation's runs
    r = load_sacct(wh, out / "sacct" / "sacct.psv")
    truth = pl.read_parquet(out / "truth" / "runs.parquet")
    assert r.quarantined == 0 and r.jobs_loaded == truth.height
    assert rows(wh, "SELECT count() FROM fct_job_run") == [(truth.height,)]
    # same seed, same files
    cli("generate", "--out", str(tmp_path / "again"), "--days", "2", "--jobs-per-day", "150", "--nodes", "12",
        "--metrics-step", "600", "--telemetry", "none", "--seed", "3")
    assert (tmp_path / "again" / "sacct" / "sacct.psv").read_bytes() == (out / "sacct" / "sacct.psv").read_bytes()


def test_generate_refuses_nonsense(tmp_path):
    bad = cli("generate", "--out", str(tmp_path / "x"), "--telemetry", "csv", check=False)
    assert bad.returncode == 2 and "--telemetry must be" in bad.stderr


def test_simulation_in_chunks_gives_the_same_frames(monkeypatch, tmp_path):
    """Run records are compacted into frames every CHUNK_RUNS runs (memory); the result must not change."""
    from datetime import datetime, timezone

    from ops_warehouse.generate import schedule

    kw = dict(start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=3, jobs_per_day=400, seed=4)
    whole = schedule.simulate(**kw)
    monkeypatch.setattr(schedule, "CHUNK_RUNS", 97)
    chunked = schedule.simulate(**kw)
    assert whole.runs.height > 97 * 5
    assert chunked.runs.equals(whole.runs)
    assert chunked.gpu_alloc.equals(whole.gpu_alloc)
    assert chunked.xids.equals(whole.xids)
    # spilled to Parquet as it goes (flat memory), read back lazily: the same frames again
    spilled = schedule.simulate(**kw, spill_dir=tmp_path / "parts")
    assert len(list((tmp_path / "parts").glob("runs-*.parquet"))) > 5
    assert spilled.runs.collect().equals(whole.runs)
    assert spilled.gpu_alloc.collect().equals(whole.gpu_alloc)
    assert spilled.xids.equals(whole.xids)
