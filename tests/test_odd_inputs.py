"""Careless and hostile sacct input that used to load silently wrong (issue 27, items 3, 4, 10 and 13): two
outputs concatenated with another field order, a file loaded in two time zones, a file cut mid-line, a Start
before its Submit, a corrected line reloaded at the same version.

The files are hand-made, in tests/data/hostile (its README.md says what each holds); every job is on cluster
c1, its Eligible equal to its Submit, and the figures below are worked out from their lines.
"""

from __future__ import annotations

from datetime import date, datetime

import pytest

from ops_warehouse.analytics.summary import summary
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.sacct_load import load_sacct
from tests.cli_runner import cli
from tests.conftest import DATA, rows

HOSTILE = DATA / "hostile"
OCT = (date(2026, 10, 1), date(2026, 10, 31))


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)  # what the warehouse hands back: naive, UTC


def october(wh, by: str = "") -> list[dict]:
    df = summary(wh, *OCT, by=[by] if by else None)
    return df.to_dicts()


# ------------------------------------------------------------------------------------- item 3: two layouts
def test_a_second_header_starts_its_own_field_order(cfg, wh):
    """two-layouts.psv: a header and 101, 102; a second header with User and Account swapped and Submit and
    Start swapped, 201, the same second header again (it changes nothing), 202; the first header again, 203:
      101 alice proja  8 GPUs 10-01 01:00 .. 03:00, submitted 00:00    16 GPU-h, waited 1 h
      102 bob   projb  4 GPUs 10-10 00:30 .. 01:30, submitted 00:00     4,        0.5 h
      201 dave  projc  8 GPUs 10-05 10:00 .. 12:00, submitted 00:00    16,        10 h
      202 erin  projd  2 GPUs 10-06 00:15 .. 04:15, submitted 00:00     8,        0.25 h
      203 bob   projb  1 GPU  10-07 01:00 .. 02:00, submitted 00:00     1,        1 h
    5 jobs, 45 GPU-h, 12.75 h of waits, no line quarantined (a header is not a record). Before: the second
    header alone was quarantined and 201, 202 were read with the first order: user projc of account dave,
    submitted at 10:00 and started at 00:00, a wait of -10 h."""
    out = cli("--warehouse", cfg.dsn, "etl", "sacct", str(HOSTILE / "two-layouts.psv")).stdout
    assert "read 5, loaded 5 (5 job runs, 0 steps), quarantined 0" in out, out
    assert rows(wh, "SELECT job_id, user, account, submit_ts, start_ts FROM slurm_job_run FINAL "
                    "WHERE job_id IN ('201', '202', '203') ORDER BY job_id") == [
        ("201", "dave", "projc", utc("2026-10-05T00:00:00"), utc("2026-10-05T10:00:00")),
        ("202", "erin", "projd", utc("2026-10-06T00:00:00"), utc("2026-10-06T00:15:00")),
        ("203", "bob", "projb", utc("2026-10-07T00:00:00"), utc("2026-10-07T01:00:00"))]
    (s,) = october(wh)
    assert (s["jobs_ended"], s["gpu_h"], s["wait_hours"]) == (5, 45.0, pytest.approx(12.75))
    assert {r["project"]: r["gpu_h"] for r in october(wh, "project")} == {
        "proja": 16.0, "projb": 5.0, "projc": 16.0, "projd": 8.0}


def test_a_second_header_the_contract_refuses_refuses_the_file(cfg, wh):
    """second-header-without-submit.psv: 101 and 102, then a header `JobID|State|Start|End|User` (no Submit,
    part of every job's key) on line 4 and a line in that order. Refused in one line naming the line; the two
    jobs read before it are taken back: nothing of the file stays (before: 101 and 102 loaded, the header
    and the line after it quarantined, exit 0)."""
    p = cli("--warehouse", cfg.dsn, "etl", "sacct", str(HOSTILE / "second-header-without-submit.psv"), check=False)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("ops-report:")]  # (stderr has the progress too)
    assert p.returncode == 2 and len(errors) == 1 and "Traceback" not in p.stderr
    assert "second-header-without-submit.psv (header at line 4): refused, missing sacct field Submit" in p.stderr
    assert rows(wh, "SELECT count() FROM slurm_job_run") == [(0,)]
    assert rows(wh, "SELECT count() FROM etl_quarantine") == [(0,)]


# ---------------------------------------------------------------------------------- item 4: two time zones
def test_a_file_reloaded_in_another_zone_replaces_its_rows(cfg, wh):
    """tokyo.psv, printed in Asia/Tokyo (UTC+9): 501 (8 GPUs on gpu001, 10:00 .. 12:00 on 10-03, its batch
    step the same) and 502 (4 GPUs on gpu002, 09:30 .. 10:30 on 10-04). Loaded first without --timezone
    (read as UTC, wrongly), then with --timezone Asia/Tokyo. Before: both loads stayed, Submit being part of a
    run's key: 4 runs and 2 steps for 2 jobs, 40 GPU-h. Now the second load replaces the first's rows: 2 runs
    at 01:00 .. 03:00 and 00:30 .. 01:30 UTC, 1 step, 8 × 2 + 4 × 1 = 20 GPU-h; the run → node → hour grain
    holds 2 hours of each run (4 rows, not 8). Loaded in UTC again, it is replaced back."""
    tokyo = str(HOSTILE / "tokyo.psv")
    cli("--warehouse", cfg.dsn, "etl", "sacct", tokyo)
    out = cli("--warehouse", cfg.dsn, "etl", "sacct", "--timezone", "Asia/Tokyo", tokyo).stdout
    assert "read 3, loaded 3 (2 job runs, 1 steps), quarantined 0" in out
    assert "replaced the rows of its earlier load in UTC (times are read in Asia/Tokyo now)" in out
    assert rows(wh, "SELECT job_id, start_ts, end_ts FROM slurm_job_run FINAL ORDER BY job_id") == [
        ("501", utc("2026-10-03T01:00:00"), utc("2026-10-03T03:00:00")),
        ("502", utc("2026-10-04T00:30:00"), utc("2026-10-04T01:30:00"))]
    assert rows(wh, "SELECT job_id, step_id, start_ts FROM slurm_job_step FINAL") == [
        ("501", "batch", utc("2026-10-03T01:00:00"))]
    assert rows(wh, "SELECT count() FROM fct_job_run") == [(2,)]
    assert rows(wh, "SELECT count() FROM run_node_hour FINAL") == [(4,)]
    (s,) = october(wh)
    assert (s["jobs_ended"], s["gpu_h"]) == (2, 20.0)
    cli("--warehouse", cfg.dsn, "etl", "sacct", "--timezone", "UTC", tokyo)
    assert rows(wh, "SELECT job_id, start_ts FROM slurm_job_run FINAL ORDER BY job_id") == [
        ("501", utc("2026-10-03T10:00:00")), ("502", utc("2026-10-04T09:30:00"))]
    assert rows(wh, "SELECT count() FROM slurm_job_step FINAL") == [(1,)]


def test_a_named_source_read_in_another_zone_is_refused(wh):
    """A source that gathers many reads (the nightly's sacct:<cluster>, a window at a time) cannot be replaced
    by one load: tokyo.psv loaded as sacct:c1 in UTC, then as sacct:c1 in Asia/Tokyo, is refused in one line
    naming UTC, and its 2 runs and 1 step stay as the first load wrote them (before: 4 runs, 2 steps)."""
    load_sacct(wh, HOSTILE / "tokyo.psv", source="sacct:c1")
    with pytest.raises(OpsError, match=r"refused, sacct:c1 was loaded with times in UTC, .* load it with "
                                        r"--timezone UTC$"):
        load_sacct(wh, HOSTILE / "tokyo.psv", source="sacct:c1", tz="Asia/Tokyo")
    assert rows(wh, "SELECT job_id, start_ts FROM slurm_job_run FINAL ORDER BY job_id") == [
        ("501", utc("2026-10-03T10:00:00")), ("502", utc("2026-10-04T09:30:00"))]
    assert rows(wh, "SELECT count() FROM slurm_job_step FINAL") == [(1,)]


# ---------------------------------------------------------------------- item 10: records that should be caught
def test_a_file_cut_mid_line_does_not_replace_the_record(wh):
    """complete.psv (ElapsedRaw is its last field): 302 (2 GPUs, 1,800 s) and 301 (resnet50-long, 4 GPUs,
    10-12 00:10:00 .. 01:26:30, ElapsedRaw 4590); cut-last-line.psv is that file cut inside 301's ElapsedRaw,
    "...|45" with no newline. Before: the cut line had every field, and its 45 s replaced 4590 (the same End,
    so the same version: the later load won). Now the last line is quarantined, `truncated last line`, and
    301 keeps 4590 s; 302, read again, is unchanged."""
    load_sacct(wh, HOSTILE / "complete.psv")
    r = load_sacct(wh, HOSTILE / "cut-last-line.psv")
    assert (r.records_read, r.jobs_loaded, r.quarantined, r.reasons) == (2, 1, 1, {"truncated last line": 1})
    (line_no, reason, raw), = rows(wh, "SELECT line_no, reason, raw FROM etl_quarantine FINAL")
    assert (line_no, reason) == (3, "truncated last line") and raw.endswith("|gpu001|resnet50-long|45")
    assert rows(wh, "SELECT job_id, elapsed_s, job_name FROM fct_job_run ORDER BY job_id") == [
        ("301", 4590, "resnet50-long"), ("302", 1800, "tokenize")]


def test_a_start_before_its_submit_is_quarantined(wh):
    """start-before-submit.psv: 101 (waited 1 h) and 105, submitted 10-15 12:00 and started 08:00, 4 h
    before. Before: 105 loaded and October's waits summed 1 − 4 = −3 h. Now 105 is quarantined, `Start before
    Submit`, and the waits are 101's 1 h."""
    r = load_sacct(wh, HOSTILE / "start-before-submit.psv")
    assert (r.jobs_loaded, r.quarantined, r.reasons) == (1, 1, {"Start before Submit": 1})
    (s,) = october(wh)
    assert (s["jobs_ended"], s["wait_hours"]) == (1, 1.0)


# -------------------------------------------------------------------- item 13: a reloaded record, the grains
def test_a_corrected_line_reaches_the_reports_without_a_refresh(wh):
    """original.psv then corrected.psv: 401, submitted 10-20 00:00, ran 01:00 .. 04:00 (3 h) in both, so the
    same version; the correction makes it judy's of account projg with 8 GPUs instead of ivan's of projf with
    2. Before: slurm_job_run took the correction, job_run (and so summary and the monthly report) kept ivan's
    2 × 3 = 6 GPU-h until `ops-report etl refresh`. Now: projg 8 × 3 = 24 GPU-h, projf none; 101 (proja, 16)
    unchanged."""
    load_sacct(wh, HOSTILE / "original.psv")
    assert {r["project"]: r["gpu_h"] for r in october(wh, "project")} == {"proja": 16.0, "projf": 6.0}
    load_sacct(wh, HOSTILE / "corrected.psv")
    assert rows(wh, "SELECT user, account, gpus FROM fct_job_run WHERE job_id = '401'") == [("judy", "projg", 8)]
    assert {r["project"]: r["gpu_h"] for r in october(wh, "project")} == {"proja": 16.0, "projg": 24.0}
