"""Telemetry values no exporter should send, but some do (issue 49, item 3): NaN and ±Inf samples, gauges out
of their range, and an energy counter that steps back without a reset. Each is quarantined with its reason
and counted in the load's summary, on every load path (they meet in etl/telemetry_insert.py), and the figures
are those of the good samples.

The inputs are dcgm-exporter's own format (its labels as the real H100 scrapes in tests/data/metrics carry
them): one H100 on node gpu01 drawing 300 W for an hour, sampled every 60 s from 00:00 to 01:00 (61 samples,
60 steps), its energy counter (mJ since the driver loaded, as DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION is) at
2.6e12 mJ (722 kWh) and 18,000,000 mJ (300 W × 60 s) more each step. Worked by hand: mean power 300 W, energy
60 × 18 kJ = 1,080 kJ = 0.3 kWh."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.analytics.checks import BROKEN, HOLDS, run_checks
from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.cli_runner import cli
from tests.conftest import rows

T0 = datetime(2026, 10, 1, tzinfo=timezone.utc)
DAY = date(2026, 10, 1)
STEPS = 60
STEP_S = 60
E0_MJ = 2_600_000_000_000  # the since-boot counter: 722.2 kWh
STEP_MJ = 18_000_000  # 300 W × 60 s
UUID = "GPU-9c1b6f3e-52f7-4a55-8a3b-8c7d0e1f2a3b"
LABELS = (f'gpu="0",UUID="{UUID}",pci_bus_id="00000000:1B:00.0",device="nvidia0",'
          f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu01",DCGM_FI_DRIVER_VERSION="550.54.15"')
METRICS = {  # name: (type, help) as dcgm-exporter prints them
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "Total energy consumption since boot (in mJ)."),
    "DCGM_FI_PROF_SM_ACTIVE": ("gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
}


def _series(**changes) -> dict[str, list]:
    """The hour's samples, metric by metric; ``changes``: {metric: {sample index: value}}."""
    s = {"DCGM_FI_DEV_GPU_UTIL": [90.0] * (STEPS + 1), "DCGM_FI_DEV_POWER_USAGE": [300.0] * (STEPS + 1),
         "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": [float(E0_MJ + k * STEP_MJ) for k in range(STEPS + 1)],
         "DCGM_FI_PROF_SM_ACTIVE": [0.5] * (STEPS + 1)}
    for metric, at in changes.items():
        for k, v in at.items():
            s[metric][k] = v
    return s


def _text(series: dict[str, list], path, again: dict[str, dict[int, float]] | None = None):
    """Prometheus text exposition (ms timestamps), the scrapes of the hour one after another; ``again``:
    {metric: {sample index: value}} written a second time after the metric's samples."""
    out = []
    for name, (kind, help_) in METRICS.items():
        out += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
        for k, v in enumerate(series[name]):
            ms = int((T0 + timedelta(seconds=k * STEP_S)).timestamp() * 1000)
            text = {float("inf"): "+Inf", float("-inf"): "-Inf"}.get(v, "NaN" if v != v else repr(v))
            out.append(f"{name}{{{LABELS}}} {text} {ms}")
        for k, v in (again or {}).get(name, {}).items():
            out.append(f"{name}{{{LABELS}}} {v!r} {int((T0 + timedelta(seconds=k * STEP_S)).timestamp() * 1000)}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def _parquet(series: dict[str, list], root):
    """The file source's exporter-shaped day file: dcgm/2026-10-01.parquet."""
    (root / "dcgm").mkdir(parents=True, exist_ok=True)
    n = STEPS + 1
    pl.DataFrame({
        "timestamp": [T0 + timedelta(seconds=k * STEP_S) for k in range(n)], "gpu": ["0"] * n, "UUID": [UUID] * n,
        "pci_bus_id": ["00000000:1B:00.0"] * n, "device": ["nvidia0"] * n,
        "modelName": ["NVIDIA H100 80GB HBM3"] * n, "Hostname": ["gpu01"] * n, **series,
    }).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(root / "dcgm" / f"{DAY}.parquet")
    return root


def _load(wh, how: str, series: dict[str, list], tmp_path) -> dict:
    if how == "text":
        return load_text_files(wh, [_text(series, tmp_path / "scrape.prom")], DAY, DAY, cluster="c")
    return load_parquet_dir(wh, _parquet(series, tmp_path / "telemetry"), DAY, DAY, cluster="c")


def _report(cfg) -> dict:
    """`ops-report telemetry` by GPU: it must not fail (a NaN or Inf energy made it fail with Code 70)."""
    p = cli("--warehouse", cfg.dsn, "telemetry", "--from", str(DAY), "--to", str(DAY), "--by", "gpu",
            "--format", "json", check=False)
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    return row


def _quarantined(wh) -> list[tuple]:
    return rows(wh, "SELECT reason, raw FROM etl_quarantine FINAL ORDER BY raw, reason")


PATHS = ["text", "parquet"]


@pytest.mark.both_forms  # on a server the files are uploaded into scratch tables first: the same rows
@pytest.mark.parametrize("how", PATHS)
def test_a_nan_power_sample_is_quarantined_and_the_mean_is_the_good_samples(cfg, wh, tmp_path, how):
    c = _load(wh, how, _series(DCGM_FI_DEV_POWER_USAGE={30: float("nan")}), tmp_path)
    row = _report(cfg)
    assert row["power_w_mean"] == pytest.approx(300.0)  # was null: avg over a NaN
    assert row["energy_kwh"] == pytest.approx(0.3)
    assert c["quarantined"] == 1
    (reason, raw), = _quarantined(wh)
    assert reason == "DCGM_FI_DEV_POWER_USAGE nan: not a number"
    assert raw == "gpu01 gpu 0 at 2026-10-01 00:30:00 DCGM_FI_DEV_POWER_USAGE nan"


@pytest.mark.parametrize("how", PATHS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_nan_or_inf_energy_sample_does_not_break_the_report_and_its_step_is_not_lost(cfg, wh, tmp_path, how, bad):
    c = _load(wh, how, _series(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION={30: bad}), tmp_path)
    row = _report(cfg)  # failed: Code 70, cannot convert inf or nan to integer
    # the step after the bad sample counts from the sample before it (36 kJ): the hour's 0.3 kWh whole
    assert row["energy_kwh"] == pytest.approx(0.3)
    assert row["power_w_mean"] == pytest.approx(300.0)
    assert c["quarantined"] == 1
    assert rows(wh, "SELECT count() FROM gpu_sample FINAL WHERE energy_j IS NULL") == [(2,)]  # the first and the bad
    assert _quarantined(wh)[0][0].startswith("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION ")


@pytest.mark.parametrize("how", PATHS)
def test_out_of_range_gauges_are_quarantined_and_move_no_mean(cfg, wh, tmp_path, how):
    c = _load(wh, how, _series(DCGM_FI_DEV_POWER_USAGE={10: -50.0}, DCGM_FI_DEV_GPU_UTIL={20: 250.0},
                               DCGM_FI_PROF_SM_ACTIVE={40: 1.7, 41: -0.2}), tmp_path)
    row = _report(cfg)
    # by hand: the good samples only (before: power (60 × 300 − 50) / 61 = 294.3, util 92.6, SM 0.51)
    assert row["power_w_mean"] == pytest.approx(300.0)
    assert row["gpu_util_mean"] == pytest.approx(90.0)
    assert row["sm_active_mean"] == pytest.approx(0.5)
    assert c["quarantined"] == 4
    assert sorted(r for r, _ in _quarantined(wh)) == [
        "DCGM_FI_DEV_GPU_UTIL 250: outside 0-100 %",
        "DCGM_FI_DEV_POWER_USAGE -50: outside 0-2000 W (gpu_max_power_w)",
        "DCGM_FI_PROF_SM_ACTIVE -0.2: outside 0-1",
        "DCGM_FI_PROF_SM_ACTIVE 1.7: outside 0-1",
    ]


@pytest.mark.parametrize("how", PATHS)
def test_an_energy_counter_stepping_back_without_a_reset_is_not_a_reset(cfg, wh, tmp_path, how):
    # sample 30 reads 36 kJ below sample 29, and the counter goes on from there: taken for a reset from zero,
    # its 2.6e9 J were 722 kWh in one minute on a GPU drawing 300 W
    e = [float(E0_MJ + k * STEP_MJ) for k in range(STEPS + 1)]
    e[30:] = [v - 54_000_000 for v in e[30:]]  # 29 + 18 kJ − 54 kJ: 36 kJ below sample 29
    c = _load(wh, how, _series(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION=dict(enumerate(e))), tmp_path)
    row = _report(cfg)
    # by hand: the 59 other steps, 59 × 18 kJ = 1,062 kJ = 0.295 kWh (one step, 18 kJ, short of the 0.3 drawn)
    assert row["energy_kwh"] == pytest.approx(0.295)
    assert c["quarantined"] == 1
    (reason, raw), = _quarantined(wh)
    assert reason == "energy counter stepped back 36000 J: not a reset (2600486000 J > 2000 W × 60 s)"
    assert raw.startswith("gpu01 gpu 0 at 2026-10-01 00:30:00 energy ")


def test_a_reset_the_gpu_could_have_reached_is_still_a_reset(cfg, wh, tmp_path):
    # the driver reloaded at sample 30: the counter starts again and reads 12 kJ a minute later (≤ 2000 W × 60 s)
    e = [float(E0_MJ + k * STEP_MJ) for k in range(STEPS + 1)]
    e[30:] = [12_000_000.0 + (k - 30) * STEP_MJ for k in range(30, STEPS + 1)]
    c = _load(wh, "text", _series(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION=dict(enumerate(e))), tmp_path)
    # by hand: 59 steps of 18 kJ and the reset's 12 kJ = 1,074 kJ
    assert _report(cfg)["energy_kwh"] == pytest.approx(1_074_000 / 3.6e6)
    assert c["quarantined"] == 0


def test_the_law_holds_on_the_good_hour_and_breaks_on_a_counter_taken_for_a_reset(cfg, wh, tmp_path):
    _load(wh, "text", _series(), tmp_path)
    window = (T0, T0 + timedelta(days=1))
    (o,) = run_checks(wh, cluster="c", window=window, names=["gpu_energy_within_peak_power"])
    assert o.status == HOLDS, o.rows
    # what the loader stored before: the step back's whole value (sample 30's 2,600,486,000 J) as its step
    wh.command("INSERT INTO gpu_sample (cluster, node, gpu, ts, step_s, model_name, energy_j, source) VALUES "
               "('c', 'gpu01', 0, '2026-10-01 00:30:00', 60, 'NVIDIA H100 80GB HBM3', 2600486000, 'planted')")
    refresh_hourly(wh, *window)
    (o,) = run_checks(wh, cluster="c", window=window, names=["gpu_energy_within_peak_power"])
    assert o.status == BROKEN
    (r,) = o.rows.to_dicts()
    # by hand: hour 00 holds the steps ending 00:01 to 00:59: 2,600,486,000 J and 58 × 18 kJ = 1,044,000 J,
    # 722.64 kWh, against 2000 W × the hour with no hour before it in the 7 days looked back (169 h): 338 kWh
    assert r["key"] == "gpu01 gpu 0 2026-10-01 00:00"
    assert r["value"] == pytest.approx((2_600_486_000 + 1_044_000) / 3.6e6)
    assert r["bound"] == pytest.approx(2000 * 169 * 3600 / 3.6e6)


def test_two_values_of_one_series_at_one_time_are_counted_and_the_later_line_kept(cfg, wh, tmp_path):
    # sample 30's power is written again further down the file with 310 W: the later line wins (as before),
    # and the earlier one is quarantined instead of dropped without a word
    path = _text(_series(), tmp_path / "twice.prom", again={"DCGM_FI_DEV_POWER_USAGE": {30: 310.0}})
    c = load_text_files(wh, [path], DAY, DAY, cluster="c")
    # by hand: (60 × 300 + 310) / 61 = 300.1639 W
    assert _report(cfg)["power_w_mean"] == pytest.approx((60 * 300 + 310) / 61)
    assert c["quarantined"] == 1
    # lines: 2 + 61 GPU_UTIL, then POWER_USAGE's HELP and TYPE, its samples on lines 66-126 (sample 30: 96),
    # the repeated one on 127
    assert rows(wh, "SELECT source, line_no, reason FROM etl_quarantine FINAL") == [
        (str(path.resolve()), 96, "another value of the series at the same time on line 127 (kept)")]


def test_a_day_file_giving_one_gpu_and_time_twice_with_two_values_is_counted(cfg, wh, tmp_path):
    # the day file holds sample 30 (00:30) a second time, at the end, with 310 W: gpu_sample keeps one row of
    # the two (which one is not defined); before, nothing said so
    root = _parquet(_series(), tmp_path / "telemetry")
    f = root / "dcgm" / f"{DAY}.parquet"
    d = pl.read_parquet(f)
    pl.concat([d, d[30].with_columns(DCGM_FI_DEV_POWER_USAGE=pl.lit(310.0))]).write_parquet(f)
    c = load_parquet_dir(wh, root, DAY, DAY, cluster="c")
    assert c["quarantined"] == 1 and c["gpu_rows"] == 62
    # the file's rows 31 and 62 (row numbers from 1): the first of them is the record's line
    assert rows(wh, "SELECT source, line_no, reason, raw FROM etl_quarantine FINAL") == [
        (str(f), 31, "2 different values of one GPU at one time in 2 rows: one is stored",
         "gpu01 gpu 0 at 2026-10-01 00:30:00")]
    assert rows(wh, "SELECT count() FROM gpu_sample FINAL") == [(61,)]
