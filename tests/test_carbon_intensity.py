"""Hourly grid carbon intensity: the loader (etl/carbon_intensity.py, `ops-report etl carbon`) on a real
Electricity Maps export, and the energy marts pricing each hour at its intensity (sql/marts/job_energy.sql,
energy.sql), worked out by hand on the monthly scenario (tests/test_monthly_scenario.py).

The real file: tests/data/carbon/DE_2024_hourly-2024-09-08.csv, the 24 lines of 2024-09-08 of Electricity
Maps' hourly export for Germany (tests/data/README.md), CRLF line ends kept, 11 of its hours estimated
by Electricity Maps ("Electricity Maps Estimation", ESTIMATED_FORECASTS_HIERARCHY).

The hand-built case. In the scenario (cluster t1, October 2026, PUE 1.3, no IPMI power) J1 (1001) holds all 8
GPUs of n1 from 10-05 00:00 to 10-06 00:00, the only run on the node, and the GPUs' energy counters give 300 kJ
a GPU per 10-minute step. A step is counted in the hour of the sample that ends it, and the day's first sample
ends none, so J1's IT energy is 8 × 5 × 300 kJ = 3.333 kWh in hour 00 and 8 × 6 × 300 kJ = 4 kWh in each of
hours 01..23 (95.333 kWh). J0 (1000) holds n1 in October for 10-01 00:00 .. 04:00 with no telemetry (0 kWh).
J2 (1002, 10-20) and J4 (1004, 10-15) have 3.84 and 4.72 kWh, J3 and J5 none. The site's hourly file gives
10-01 00:00 .. 03:00 at 250 g/kWh and 10-05 hh:00 at 100 + 10 × hh g/kWh for hh = 0..11; the constant is 400.
  J1  Σ IT kWh × g = 3.333 × 100 + 4 × Σ(100 + 10 hh, hh = 1..11) + 12 × 4 × 400
                   = 333.333 + 4 × 1,760 + 19,200 = 26,573.333 g; × PUE 1.3 ÷ 1000 = 34.5453 kg, 'hourly and
      constant'; priced hourly: (3.333 + 11 × 4) × 1.3 = 61.533 facility kWh
  J0  every hour in the file, no energy: 0 kg, 'hourly'
  J2, J4  no hour in the file: the constant, 1.3 × kWh × 0.4 kg, 'constant'
  A (J0, J1, J3) 34.5453 kg; B 1.3 × 8.56 × 0.4 = 4.4512 kg; the part priced hourly of A 61.533 ÷ (1.3 ×
  95.333) = 0.4965.
Without the constant J1's hours 12..23 have energy and no intensity: no carbon figure ('hourly with gaps'), and
no total for A or B; J0 keeps 0 ('hourly'). A second file adds 10-05 12:00 .. 23:00 at 300 g/kWh: J1 is then
'hourly' throughout, 1.3 × (333.333 + 7,040 + 12 × 4 × 300) ÷ 1000 = 28.3053 kg without any constant, and A
has a total (J3's hours have neither, but it used no energy).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.carbon_intensity import load_carbon_intensity, read_carbon_intensity
from tests.conftest import DATA, table_checksums
from tests.cli_runner import cli
from tests.test_monthly_scenario import mart, scenario_warehouse

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

UTC = timezone.utc
EXCERPT = DATA / "carbon" / "DE_2024_hourly-2024-09-08.csv"
J1_KWH = [8 * 5 * 3e5 / 3.6e6] + [8 * 6 * 3e5 / 3.6e6] * 23


def _raw_rows() -> list[dict[str, str]]:
    """The excerpt's lines split at commas by hand (no field of it is quoted)."""
    head, *lines = EXCERPT.read_bytes().decode("utf-8").split("\r\n")
    assert lines[-1] == ""  # every line ends in CRLF, the last one too
    names = head.split(",")
    return [dict(zip(names, line.split(","))) for line in lines[:-1]]


def test_electricity_maps_export_read_as_published():
    raw = _raw_rows()
    assert len(raw) == 24 and {r["Zone Id"] for r in raw} == {"DE"}
    assert sum(r["Data Estimated"] == "true" for r in raw) == 11
    for basis, column in (("direct", "Carbon Intensity gCO₂eq/kWh (direct)"),
                          ("lifecycle", "Carbon Intensity gCO₂eq/kWh (LCA)")):
        hours, bad, rows, what = read_carbon_intensity(EXCERPT, basis=basis)
        assert (rows, bad.height, what) == (24, 0, f"electricitymaps:{EXCERPT.name} {basis}")
        want = [(datetime.strptime(r["Datetime (UTC)"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC), float(r[column]))
                for r in raw]
        assert hours.select("hour", "g_co2e_per_kwh").rows() == want
        assert set(hours["zone"]) == {"DE"}
    # the estimated hours load like the others: 11:00 is 153.78 g direct, as its line says
    assert read_carbon_intensity(EXCERPT)[0].row(11, named=True)["g_co2e_per_kwh"] == 153.78


def test_electricity_maps_later_header_and_offsets(tmp_path):
    """The export's later header (Zone id, "Carbon intensity", "Life cycle") and ISO times with T, Z and an
    offset; two zones in one file need --zone."""
    p = tmp_path / "two.csv"
    p.write_text("Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
                 "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%)\n"
                 "2024-01-01T00:00:00Z,France,France,FR,20.5,40.25,90\n"
                 "2024-01-01T02:00:00+01:00,France,France,FR,21,41,90\n"
                 "2024-01-01 00:00:00,Sweden,Sweden,SE,2.54,30.02,99\n")
    with pytest.raises(OpsError, match="holds zones FR, SE: load one at a time with --zone"):
        read_carbon_intensity(p)
    hours, bad, rows, _ = read_carbon_intensity(p, zone="FR", basis="lifecycle")
    assert (rows, bad.height) == (2, 0)
    assert hours.select("zone", "hour", "g_co2e_per_kwh").rows() == [
        ("FR", datetime(2024, 1, 1, 0, tzinfo=UTC), 40.25), ("FR", datetime(2024, 1, 1, 1, tzinfo=UTC), 41.0)]


def test_refuses_a_file_without_what_a_record_needs(tmp_path):
    no_value = tmp_path / "no-value.csv"
    no_value.write_text("Datetime (UTC),Country,Zone Name,Zone Id,Low Carbon Percentage\n"
                        "2024-09-08 00:00:00,Germany,Germany,DE,62.37\n")
    with pytest.raises(OpsError, match=r"no carbon intensity column for --basis direct: expected "
                                       r"'Carbon Intensity gCO₂eq/kWh \(direct\)'") as e:
        read_carbon_intensity(no_value)
    assert "\n" not in str(e.value)
    direct_only = tmp_path / "direct-only.csv"
    direct_only.write_text("Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct)\n2024-09-08 00:00:00,DE,3\n")
    with pytest.raises(OpsError, match=r"no carbon intensity column for --basis lifecycle: .*\(LCA\)"):
        read_carbon_intensity(direct_only, basis="lifecycle")
    no_time = tmp_path / "no-time.csv"
    no_time.write_text("zone,g_co2e_per_kwh\nDE,300\n")
    with pytest.raises(OpsError, match="no time column: expected 'Datetime \\(UTC\\)'"):
        read_carbon_intensity(no_time)
    plain = tmp_path / "plain.csv"
    plain.write_text("hour,intensity\n2024-09-08 00:00,300\n")
    with pytest.raises(OpsError, match="no carbon intensity column: expected .*'g_co2e_per_kwh'"):
        read_carbon_intensity(plain)
    # on the command line: exit 2, one line, nothing loaded
    p = cli("--warehouse", f"chdb://{tmp_path / 'wh'}", "etl", "carbon", str(no_value), check=False)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "no carbon intensity column" in p.stderr
    assert "Traceback" not in p.stderr


def test_neso_half_hours_make_hours_and_bad_rows_are_quarantined(wh, tmp_path):
    """NESO's historic generation mix (df_fuel_ckan.csv: DATETIME, ..., CARBON_INTENSITY, half-hourly; the
    header cut to a few of its columns here): an hour is the mean of its half hours; rows that cannot be read
    go to the quarantine with their line and are counted, and the rest load."""
    p = tmp_path / "df_fuel_ckan.csv"
    p.write_text("DATETIME,GAS,COAL,CARBON_INTENSITY,LOW_CARBON\n"
                 "2026-10-05 00:00:00+00:00,9000,0,120.0,20000\n"
                 "2026-10-05 00:30:00+00:00,9000,0,130.0,20000\n"
                 "2026-10-05T01:00:00,9000,0,141,20000\n"
                 "2026-10-05T01:30:00,9000,0,n/a,20000\n"
                 "not a time,9000,0,150,20000\n"
                 "2026-10-05 02:00:00,9000,0,,20000\n"
                 "2026-10-05 02:30:00,9000,0,-3,20000\n")
    r = load_carbon_intensity(wh, p, cluster="t1")
    assert (r["rows"], r["hours"], r["quarantined"], r["zone"]) == (7, 2, 4, "GB")
    assert wh.query_rows("SELECT hour, zone, g_co2e_per_kwh, source FROM carbon_intensity FINAL ORDER BY hour") == [
        (datetime(2026, 10, 5, 0), "GB", 125.0, "neso:df_fuel_ckan.csv"),
        (datetime(2026, 10, 5, 1), "GB", 141.0, "neso:df_fuel_ckan.csv")]
    q = wh.query_rows("SELECT line_no, reason, raw FROM etl_quarantine FINAL WHERE source = {s:String} "
                      "ORDER BY line_no", {"s": str(p.resolve())})
    assert q == [(5, "carbon intensity 'n/a' is not a number", "2026-10-05T01:30:00,9000,0,n/a,20000"),
                 (6, "cannot read time 'not a time'", "not a time,9000,0,150,20000"),
                 (7, "no carbon intensity", "2026-10-05 02:00:00,9000,0,,20000"),
                 (8, "carbon intensity -3.0 is not 0-2000 gCO2e/kWh", "2026-10-05 02:30:00,9000,0,-3,20000")]
    log = wh.query_rows("SELECT source_kind, rows_read, rows_loaded, rows_quarantined, status FROM etl_run_log")
    assert log == [("carbon", 7, 3, 4, "ok")]


@pytest.mark.both_forms
def test_reload_is_idempotent(wh, tmp_path, form):
    r = load_carbon_intensity(wh, EXCERPT, cluster="t1")
    assert (r["rows"], r["hours"], r["quarantined"], r["zone"]) == (24, 24, 0, "DE")
    once = table_checksums(wh)
    load_carbon_intensity(wh, EXCERPT, cluster="t1")
    assert table_checksums(wh) == once
    assert wh.query_rows("SELECT count(), sum(g_co2e_per_kwh) FROM carbon_intensity FINAL")[0] == (
        24, pytest.approx(sum(float(r["Carbon Intensity gCO₂eq/kWh (direct)"]) for r in _raw_rows())))
    # the same hours again as the life-cycle figure replace the direct ones, hour for hour
    load_carbon_intensity(wh, EXCERPT, cluster="t1", basis="lifecycle")
    assert wh.query_rows("SELECT count(), sum(g_co2e_per_kwh), any(source) FROM carbon_intensity FINAL")[0] == (
        24, pytest.approx(sum(float(r["Carbon Intensity gCO₂eq/kWh (LCA)"]) for r in _raw_rows())),
        f"electricitymaps:{EXCERPT.name} lifecycle")
    # another cluster's hours are its own
    load_carbon_intensity(wh, EXCERPT, cluster="t2")
    assert wh.query_rows("SELECT cluster, count() FROM carbon_intensity FINAL GROUP BY cluster ORDER BY cluster") == [
        ("t1", 24), ("t2", 24)]


def test_command_loads_and_reports(tmp_path):
    dsn = f"chdb://{tmp_path / 'wh'}"
    out = cli("--warehouse", dsn, "etl", "carbon", "--cluster", "t1", str(EXCERPT)).stdout
    assert (f"electricitymaps:{EXCERPT.name} direct: read 24 rows, loaded 24 hours of zone DE "
            "(2024-09-08 00:00 .. 2024-09-08 23:00 UTC), quarantined 0") in out
    assert "--basis" in cli("etl", "carbon", "--help").stdout


def _site_csv(path, first: datetime, values: list[float]) -> None:
    path.write_text("hour,g_co2e_per_kwh,zone\n" + "".join(
        f"{(first + timedelta(hours=i)):%Y-%m-%d %H:%M:%S},{v},GB\n" for i, v in enumerate(values)))


@pytest.fixture
def scenario(tmp_path, form, tmp_path_factory, request):
    """The hand-built month of tests/test_monthly_scenario.py, a warehouse of this test's own (it loads into it)."""
    from ops_warehouse.warehouse import close_embedded

    wh = scenario_warehouse(form, tmp_path, tmp_path_factory, request)
    yield wh
    wh.close()
    close_embedded()


@pytest.mark.both_forms
def test_runs_are_priced_hour_by_hour(scenario, tmp_path):
    wh = scenario
    day1 = tmp_path / "hourly-1.csv"
    _site_csv(day1, datetime(2026, 10, 1), [250.0] * 4)
    oct5 = tmp_path / "hourly-2.csv"
    _site_csv(oct5, datetime(2026, 10, 5), [100.0 + 10 * h for h in range(12)])
    for f in (day1, oct5):
        assert load_carbon_intensity(wh, f, cluster="t1")["quarantined"] == 0

    j = {r["job_id"]: r for r in mart(wh, "job_energy", carbon_g_per_kwh=400.0).to_dicts()}
    j1_g = sum(kwh * (100 + 10 * h if h < 12 else 400) for h, kwh in enumerate(J1_KWH))
    assert j1_g == pytest.approx(10 / 3 * 100 + 4 * 1760 + 12 * 4 * 400)
    assert j["1001"]["kg_co2e"] == pytest.approx(1.3 * j1_g / 1000) == pytest.approx(34.545333)
    assert j["1001"]["carbon_source"] == "hourly and constant"
    assert j["1001"]["carbon_hourly_kwh"] == pytest.approx(1.3 * (10 / 3 + 44))
    assert (j["1000"]["kg_co2e"], j["1000"]["carbon_source"], j["1000"]["carbon_hourly_kwh"]) == (0.0, "hourly", 0.0)
    for k, kwh in (("1002", 3.84), ("1004", 4.72)):
        assert j[k]["kg_co2e"] == pytest.approx(1.3 * kwh * 0.4) and j[k]["carbon_source"] == "constant"
    # the columns that were there keep their meaning
    assert j["1001"]["facility_kwh"] == pytest.approx(1.3 * sum(J1_KWH)) and j["1001"]["gpu_energy_source"] == "counters"

    e = {r["project_key"]: r for r in mart(wh, "energy", carbon_g_per_kwh=400.0).to_dicts()}
    assert e["A"]["kg_co2e"] == pytest.approx(34.545333) and e["B"]["kg_co2e"] == pytest.approx(1.3 * 8.56 * 0.4)
    assert e["C"]["kg_co2e"] == 0.0 and e[""]["kg_co2e"] == pytest.approx(34.545333 + 1.3 * 8.56 * 0.4)
    assert e["A"]["carbon_hourly_share"] == pytest.approx((10 / 3 + 44) / sum(J1_KWH))
    assert e["B"]["carbon_hourly_share"] == 0.0 and e["C"]["carbon_hourly_share"] is None

    # no constant: an hour with energy and no intensity leaves the run, and its project, without a figure
    j = {r["job_id"]: r for r in mart(wh, "job_energy").to_dicts()}
    assert (j["1001"]["kg_co2e"], j["1001"]["carbon_source"]) == (None, "hourly with gaps")
    assert (j["1000"]["kg_co2e"], j["1000"]["carbon_source"]) == (0.0, "hourly")
    assert {j[k]["carbon_source"] for k in ("1002", "1003", "1004", "1005")} == {"none"}
    assert mart(wh, "energy")["kg_co2e"].to_list() == [None] * 4

    # the rest of 10-05: J1 is priced hourly throughout, with or without the constant
    rest = tmp_path / "hourly-3.csv"
    _site_csv(rest, datetime(2026, 10, 5, 12), [300.0] * 12)
    load_carbon_intensity(wh, rest, cluster="t1")
    j = {r["job_id"]: r for r in mart(wh, "job_energy").to_dicts()}
    assert j["1001"]["carbon_source"] == "hourly"
    assert j["1001"]["kg_co2e"] == pytest.approx(1.3 * (10 / 3 * 100 + 4 * 1760 + 12 * 4 * 300) / 1000)
    assert j["1001"]["kg_co2e"] == pytest.approx(28.305333)
    assert j["1001"]["carbon_hourly_kwh"] == pytest.approx(j["1001"]["facility_kwh"])
    e = {r["project_key"]: r for r in mart(wh, "energy").to_dicts()}
    assert e["A"]["kg_co2e"] == pytest.approx(28.305333) and e["A"]["carbon_hourly_share"] == pytest.approx(1.0)
    assert e["B"]["kg_co2e"] is None
    # and with the constant the others are priced at it
    j = {r["job_id"]: r for r in mart(wh, "job_energy", carbon_g_per_kwh=400.0).to_dicts()}
    assert j["1001"]["kg_co2e"] == pytest.approx(28.305333) and j["1002"]["carbon_source"] == "constant"
    assert pl.DataFrame(list(j.values())).filter(pl.col("kg_co2e").is_null()).height == 0
