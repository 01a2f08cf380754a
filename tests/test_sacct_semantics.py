"""Load semantics on small hand-written sacct inputs: requeues, reused ids, running jobs replaced by later
loads, pending array ranges, het jobs, idempotency, projects, time zones, quarantine."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.analytics.summary import summary
from tests.conftest import rows, table_checksums

# the loads and reports here run on the embedded warehouse and on a ClickHouse server (tests/conftest.py)
pytestmark = pytest.mark.both_forms

HEADER = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|User|Submit|Eligible|Start|End|ElapsedRaw|"
          "TimelimitRaw|ExitCode|State|NNodes|NCPUS|AllocTRES|NodeList|JobName")


def line(jobidraw, jobid, submit, start, end, elapsed, state, *, nodes="gpu[001-002]", nnodes=2, gpus=16,
         name="train", user="alice", account="proja", exit_code="0:0"):
    tres = f"billing=32,cpu=32,gres/gpu:h100={gpus},gres/gpu={gpus},mem=64G,node={nnodes}"
    return (f"{jobidraw}|{jobid}|c1|h100|normal|{account}|grp|{user}|{submit}|{submit}|{start}|{end}|{elapsed}|"
            f"600|{exit_code}|{state}|{nnodes}|32|{tres}|{nodes}|{name}")


def write(tmp_path: Path, name: str, *lines: str, header: str = HEADER) -> Path:
    p = tmp_path / name
    p.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    return p


def test_requeued_runs_count_once_but_keep_their_usage(wh, tmp_path):
    # run 1 hit NODE_FAIL after 1 h and was requeued (new submit time), run 2 completed after 2 h
    p = write(tmp_path, "requeue.psv",
              line(100, 100, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "NODE_FAIL",
                   exit_code="0:0"),
              line(100, 100, "2026-10-01T01:00:00", "2026-10-01T01:05:00", "2026-10-01T03:05:00", 7200, "COMPLETED"))
    assert load_sacct(wh, p).quarantined == 0
    assert rows(wh, "SELECT state, is_superseded FROM fct_job_run ORDER BY submit_ts") == [
        ("NODE_FAIL", 1), ("COMPLETED", 0)]
    s = summary(wh, date(2026, 10, 1), date(2026, 10, 1)).row(0, named=True)
    assert s["jobs_ended"] == 1 and s["jobs_started"] == 1
    assert s["gpu_h"] == pytest.approx(16 * 3)  # both runs held 16 GPUs: 1 h + 2 h
    assert s["wait_hours"] == pytest.approx(5 / 60)  # the job's last run waited 5 min


def test_job_id_reused_after_controller_reset_is_two_jobs(wh, tmp_path):
    p = write(tmp_path, "reuse.psv",
              line(1, 1, "2025-01-05T10:00:00", "2025-01-05T10:00:00", "2025-01-05T11:00:00", 3600, "FAILED",
                   name="old", exit_code="1:0"),
              line(1, 1, "2026-10-01T10:00:00", "2026-10-01T10:00:00", "2026-10-01T12:00:00", 7200, "COMPLETED",
                   name="new"))
    load_sacct(wh, p)
    assert rows(wh, "SELECT job_name, is_superseded FROM fct_job_run ORDER BY submit_ts") == [("old", 0), ("new", 0)]


@pytest.mark.parametrize("order", ["running_first", "final_first"])
def test_running_record_is_replaced_by_its_final_state_whatever_the_load_order(wh, tmp_path, order):
    running = write(tmp_path, "day1.psv",
                    line(7, 7, "2026-10-01T22:00:00", "2026-10-01T23:00:00", "Unknown", 3600, "RUNNING"))
    final = write(tmp_path, "day2.psv",
                  line(7, 7, "2026-10-01T22:00:00", "2026-10-01T23:00:00", "2026-10-02T05:00:00", 21600, "COMPLETED"))
    for p in ([running, final] if order == "running_first" else [final, running]):
        load_sacct(wh, p)
    assert rows(wh, "SELECT state, wall_s FROM fct_job_run") == [("COMPLETED", 6 * 3600)]


def test_running_job_counts_up_to_its_last_load(wh, tmp_path):
    p = write(tmp_path, "r.psv", line(8, 8, "2026-10-01T00:00:00", "2026-10-01T20:00:00", "Unknown", 7200, "RUNNING"))
    load_sacct(wh, p)
    s = summary(wh, date(2026, 10, 1), date(2026, 10, 31)).row(0, named=True)
    assert s["gpu_h"] == pytest.approx(16 * 2) and s["jobs_started"] == 1 and s["jobs_ended"] == 0


def test_pending_array_range_is_replaced_as_tasks_start(wh, tmp_path):
    pending = write(tmp_path, "p.psv",
                    line(50, "50_[0-3%2]", "2026-10-01T00:00:00", "Unknown", "Unknown", 0, "PENDING",
                         nodes="None assigned", nnodes=1, gpus=1))
    later = write(tmp_path, "l.psv",
                  line(51, "50_0", "2026-10-01T00:00:00", "2026-10-01T00:10:00", "2026-10-01T00:20:00", 600,
                       "COMPLETED", nodes="gpu001", nnodes=1, gpus=1),
                  line(50, "50_[1-3%2]", "2026-10-01T00:00:00", "Unknown", "Unknown", 0, "PENDING",
                       nodes="None assigned", nnodes=1, gpus=1))
    load_sacct(wh, pending)
    assert rows(wh, "SELECT count() FROM fct_job_run WHERE state = 'PENDING'") == [(4,)]
    load_sacct(wh, later)
    assert rows(wh, "SELECT job_id, job_id_raw, state FROM fct_job_run ORDER BY array_task_id") == [
        ("50_0", 51, "COMPLETED"), ("50_1", 50, "PENDING"), ("50_2", 50, "PENDING"), ("50_3", 50, "PENDING")]


def test_het_job_components(wh, tmp_path):
    p = write(tmp_path, "het.psv",
              line(200, "200+0", "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "COMPLETED",
                   nodes="gpu001", nnodes=1, gpus=8),
              line(201, "200+1", "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "COMPLETED",
                   nodes="cpu01", nnodes=1, gpus=0),
              line("200+0", "200+0.batch", "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600,
                   "COMPLETED", nodes="gpu001", nnodes=1, gpus=8, user=""))
    r = load_sacct(wh, p)
    assert (r.jobs_loaded, r.steps_loaded, r.quarantined) == (2, 1, 0)
    assert rows(wh, "SELECT job_id, het_job_id, het_job_offset, gpus FROM fct_job_run ORDER BY job_id") == [
        ("200+0", 200, 0, 8), ("200+1", 200, 1, 0)]
    assert rows(wh, "SELECT job_id, step_id FROM slurm_job_step FINAL") == [("200+0", "batch")]


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_loading_twice_and_overlapping_windows_leave_identical_facts(wh, tmp_path):
    a = write(tmp_path, "a.psv", *[line(i, i, "2026-10-01T00:00:00", "2026-10-01T00:01:00", "2026-10-01T02:00:00",
                                        7140, "COMPLETED") for i in range(1, 40)])
    b = write(tmp_path, "b.psv", *[line(i, i, "2026-10-01T00:00:00", "2026-10-01T00:01:00", "2026-10-01T02:00:00",
                                        7140, "COMPLETED") for i in range(20, 60)])
    load_sacct(wh, a)
    load_sacct(wh, b)
    once, once_facts = table_checksums(wh), table_checksums(wh, ignore=("source",))
    for _ in range(2):
        load_sacct(wh, a)
        load_sacct(wh, b)
    assert table_checksums(wh) == once
    # in the other order every fact is the same; only the file that last gave jobs 20-39 (`source`) moved
    for _ in range(2):
        load_sacct(wh, b)
        load_sacct(wh, a)
    assert table_checksums(wh, ignore=("source",)) == once_facts
    assert table_checksums(wh) != once
    assert rows(wh, "SELECT count() FROM fct_job_run") == [(59,)]


def test_parsable_trailing_delimiter_and_delimiter_inside_job_name(wh, tmp_path):
    hdr = "JobID|JobName|State|Submit|Start|End|NNodes|NCPUS|AllocTRES|NodeList|"
    p = write(tmp_path, "p.txt",
              "11|a|b|c|COMPLETED|2026-10-01T00:00:00|2026-10-01T00:00:00|2026-10-01T00:00:30|1|4|cpu=4,node=1|n1|",
              "12|plain|FAILED|2026-10-01T00:00:00|2026-10-01T00:00:00|2026-10-01T00:00:30|1|4|cpu=4,node=1|n1|",
              header=hdr)
    r = load_sacct(wh, p, cluster="x")
    assert r.quarantined == 0
    assert rows(wh, "SELECT job_id, job_name, state FROM fct_job_run ORDER BY job_id") == [
        ("11", "a|b|c", "COMPLETED"), ("12", "plain", "FAILED")]


def test_bad_lines_are_quarantined_with_file_line_and_reason(wh, tmp_path):
    good = line(1, 1, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "COMPLETED")
    p = tmp_path / "bad.psv"
    p.write_bytes("\n".join([
        HEADER, good,
        "2|2|c1|h100",                                                       # truncated
        line(3, "3x", "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 1, "COMPLETED"),
        line(4, 4, "2026-13-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 1, "COMPLETED"),
        line(5, 5, "2026-10-01T00:00:00", "2026-10-01T02:00:00", "2026-10-01T01:00:00", 1, "COMPLETED"),
        line(6, 6, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 1, "COMPLETED",
             nodes="gpu[001-"),
    ]).encode() + b"\n7|7|c1|h100|\xff\xfe|" + b"\n")
    r = load_sacct(wh, p)
    assert (r.records_read, r.loaded, r.quarantined) == (7, 1, 6)
    q = dict(rows(wh, "SELECT line_no, reason FROM etl_quarantine FINAL WHERE source = {s:String}",
                  s=str(p.resolve())))
    assert q[3] == "4 fields, expected 21 (delimiter '|')"
    assert q[4] == "unparseable JobID '3x'"
    assert q[5] == "bad submit time '2026-13-01T00:00:00'"
    assert q[6] == "End before Start"
    assert q[7] == "bad NodeList 'gpu[001-'"
    assert q[8] == "invalid UTF-8"
    assert rows(wh, "SELECT job_id FROM fct_job_run") == [("1",)]


def test_timezone_of_input_and_of_periods(wh, tmp_path):
    # printed in Asia/Tokyo (UTC+9): 2026-10-01T08:00 local is 2026-09-30T23:00 UTC
    p = write(tmp_path, "tz.psv", line(9, 9, "2026-10-01T08:00:00", "2026-10-01T08:00:00", "2026-10-01T10:00:00",
                                       7200, "COMPLETED", nnodes=1, gpus=1, nodes="gpu001"))
    load_sacct(wh, p, tz="Asia/Tokyo")
    utc = summary(wh, date(2026, 9, 30), date(2026, 10, 1), period="day", tz="UTC")
    assert [(r["period_start"], round(r["gpu_h"], 6)) for r in utc.iter_rows(named=True)] == [
        (date(2026, 9, 30), 1.0), (date(2026, 10, 1), 1.0)]
    tokyo = summary(wh, date(2026, 9, 30), date(2026, 10, 1), period="day", tz="Asia/Tokyo")
    assert [(r["period_start"], round(r["gpu_h"], 6)) for r in tokyo.iter_rows(named=True)] == [
        (date(2026, 10, 1), 2.0)]


def test_projects_map_accounts_from_config(cfg, tmp_path):
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    cfg.projects = {"proja": "A"}
    w = open_warehouse(cfg)
    p = write(tmp_path, "pr.psv",
              line(1, 1, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "COMPLETED"),
              line(2, 2, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "COMPLETED",
                   account="projb"))
    load_sacct(w, p)
    got = summary(w, date(2026, 10, 1), date(2026, 10, 1), ["project"])
    assert sorted(got.get_column("project").to_list()) == ["A", "projb"]
    close_embedded()


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
@pytest.mark.embedded_only("both sides load into embedded warehouses of the test's own, whatever the form")
def test_fast_and_line_by_line_paths_give_the_same_facts(cfg, tmp_path, embedded_template):
    """A one-byte delimiter with exact field counts takes the multi-threaded read; the same records with a
    multi-byte delimiter take the line-by-line path. Same facts either way."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse
    from tests.conftest import LIVE

    text = (LIVE / "sacct.psv").read_text(encoding="utf-8")
    snow = tmp_path / "snow.txt"
    snow.write_text(text.replace("|", "☃"), encoding="utf-8")
    sums = []
    for name, path, delim in (("fast", LIVE / "sacct.psv", "|"), ("slow", snow, "☃")):
        # a copy of the session's migrated empty warehouse, as every fresh embedded one (tests/conftest.py)
        shutil.copytree(embedded_template, tmp_path / name, symlinks=True)
        cfg.dsn = f"chdb://{tmp_path / name}"
        w = open_warehouse(cfg)
        r = load_sacct(w, path, delimiter=delim, cluster="testclu", source="same")
        assert (r.records_read, r.quarantined) == (31, 0)
        sums.append(table_checksums(w))
        close_embedded()
    assert sums[0] == sums[1]


def test_quarantine_keeps_the_exact_input_line_on_the_fast_path(wh, tmp_path):
    bad = line(4, 4, "2026-10-01T00:00:00", "2026-10-01T02:00:00", "2026-10-01T01:00:00", 1, "COMPLETED", name="")
    p = write(tmp_path, "fast.psv",
              line(1, 1, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "COMPLETED"), bad)
    r = load_sacct(wh, p)
    assert (r.records_read, r.quarantined) == (2, 1)
    assert rows(wh, "SELECT line_no, reason, raw FROM etl_quarantine FINAL") == [(3, "End before Start", bad)]


def test_identical_bad_lines_in_one_read_stay_apart_and_a_reread_adds_none(wh, tmp_path):
    """Found by fuzzing in CI: the quarantine's identity is (source, text, reason, copy number in the read).
    Two different invalid-UTF-8 lines must not collapse into one (their text keeps the bytes), two identical
    garbage lines in one file are two records, and a later read of an overlapping window under the same
    source name (the nightly sacct source) adds none of them again."""
    good = line(1, 1, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "COMPLETED")
    garbage = "this is not a sacct line"
    first = tmp_path / "night1.psv"
    first.write_bytes((HEADER + "\n" + good + "\n").encode() + b"\x80\xff\n\x81\xff\n" +
                      f"{garbage}\n{garbage}\n".encode())
    r = load_sacct(wh, first, source="sacct:c1")
    assert (r.records_read, r.quarantined) == (5, 4)
    q = rows(wh, "SELECT raw, occurrence FROM etl_quarantine FINAL ORDER BY line_no")
    assert q == [("\\x80\\xff", 0), ("\\x81\\xff", 0), (garbage, 0), (garbage, 1)]
    # the next night's window overlaps: the same bad lines, at other line numbers, and one more copy
    second = tmp_path / "night2.psv"
    second.write_bytes((HEADER + "\n").encode() + f"{garbage}\n".encode() + b"\x81\xff\n" +
                       (good + "\n").encode())
    load_sacct(wh, second, source="sacct:c1")
    assert rows(wh, "SELECT count() FROM etl_quarantine FINAL")[0][0] == 4
    assert rows(wh, "SELECT count() FROM slurm_job_run FINAL")[0][0] == 1


def test_a_first_line_opening_with_a_brace_is_text_not_json(wh, tmp_path):
    """Found by fuzzing in CI: a text file whose first line starts with "{" was read as JSON, and its valid
    records were lost with the unreadable document."""
    p = tmp_path / "brace.psv"  # a headerless dump (--noheader, --fields given) led by a line of garbage
    p.write_text("{s:String};\n" + line(1, 1, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00",
                                        3600, "COMPLETED") + "\n")
    from ops_warehouse.etl.sacct_text import parse_fields

    r = load_sacct(wh, p, fields=parse_fields(HEADER.replace("|", ",")))
    assert (r.records_read, r.quarantined) == (2, 1) and rows(wh, "SELECT count() FROM slurm_job_run FINAL")[0][0] == 1
