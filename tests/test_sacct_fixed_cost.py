"""A small sacct load's fixed cost (issue 50 item 1, round 5): what a nightly file of one chunk asks of the
engine besides its rows. Each test loads a few hand-written lines, counts the statements the load sends, and
checks the facts left in the warehouse against the lines themselves."""

from __future__ import annotations

from datetime import datetime

import pytest

from ops_warehouse.etl import sacct_load
from ops_warehouse.etl.grains import one_refresh
from ops_warehouse.etl.sacct_load import load_sacct
from tests.conftest import rows
from tests.test_sacct_semantics import line, write

T0, T1, T2 = "2026-10-01T00:00:00", "2026-10-01T01:00:00", "2026-10-01T05:00:00"


@pytest.fixture
def statements(wh, monkeypatch):
    """Every statement the warehouse's client is sent (commands and queries), in order."""
    sent: list[str] = []
    cls = type(wh.client)
    for name in ("command", "query"):
        orig = getattr(cls, name)

        def spy(self, sql, *a, _orig=orig, **k):
            sent.append(" ".join(str(sql).split()))
            return _orig(self, sql, *a, **k)
        monkeypatch.setattr(cls, name, spy)
    return sent


def test_a_one_chunk_reload_makes_no_scratch_table_and_is_taken_back_when_it_fails(wh, tmp_path, monkeypatch,
                                                                                 statements):
    """Job 101 loaded RUNNING (alice) with its batch step; a nightly re-read of one chunk says COMPLETED (bob) at
    05:00, its step COMPLETED: the rows it replaces go aside to a file of the load's own, its keys read from the
    chunk's own key file (before, it made, filled and dropped four scratch tables, two of keys and two of rows,
    8 of the 34 statements of a nightly file). A third read says FAILED (carol) and fails in the grains'
    refresh: what is put back is the second read, bob's COMPLETED run ending at 05:00 and its COMPLETED step."""
    first = write(tmp_path, "first.psv", line(101, 101, T0, T1, "Unknown", 3600, "RUNNING"),
                  line("101.batch", "101.batch", T1, T1, "Unknown", 3600, "RUNNING", nodes="gpu001", nnodes=1))
    load_sacct(wh, first, tz="UTC", source="nightly")
    again = write(tmp_path, "again.psv", line(101, 101, T0, T1, T2, 14400, "COMPLETED", user="bob"),
                  line("101.batch", "101.batch", T1, T1, T2, 14400, "COMPLETED", nodes="gpu001", nnodes=1))
    statements.clear()
    load_sacct(wh, again, tz="UTC", source="nightly")
    assert [s for s in statements if s.startswith(("CREATE TABLE etl_undo_", "DROP TABLE IF EXISTS etl_undo_"))] == []
    done = [("101", "bob", "COMPLETED", datetime(2026, 10, 1, 5))]
    assert rows(wh, "SELECT job_id, user, state, end_ts FROM slurm_job_run FINAL") == done

    third = write(tmp_path, "third.psv", line(101, 101, T0, T1, T2, 14400, "FAILED", user="carol", exit_code="1:0"),
                  line("101.batch", "101.batch", T1, T1, T2, 14400, "FAILED", nodes="gpu001", nnodes=1))

    def refresh_fails(*a, **k):
        raise RuntimeError("refresh failed")
    monkeypatch.setattr(sacct_load, "refresh_after_jobs", refresh_fails)
    with pytest.raises(RuntimeError, match="refresh failed"):
        load_sacct(wh, third, tz="UTC", source="nightly")
    assert rows(wh, "SELECT job_id, user, state, end_ts FROM slurm_job_run FINAL") == done
    assert rows(wh, "SELECT job_id, step_id, state, end_ts FROM slurm_job_step FINAL") == [
        ("101", "batch", "COMPLETED", datetime(2026, 10, 1, 5))]
    # a failed read of a new job only, in the month held: it replaced nothing, and nothing of it stays
    fourth = write(tmp_path, "fourth.psv", line(103, 103, T1, T1, T2, 14400, "COMPLETED", user="dave"))
    with pytest.raises(RuntimeError, match="refresh failed"):
        load_sacct(wh, fourth, tz="UTC", source="nightly")
    assert rows(wh, "SELECT job_id, user, state, end_ts FROM slurm_job_run FINAL") == done
    assert rows(wh, "SELECT count() FROM system.tables WHERE database = currentDatabase() "
                    "AND startsWith(name, 'etl_undo_')") == [(0,)]


def test_loads_inside_one_refresh_merge_job_run_once_at_its_end(wh, tmp_path, statements):
    """Two nightly files in one block: job 101 RUNNING since 01:00, then COMPLETED at 05:00 (4 h), and job 102
    started at 02:00, COMPLETED at 05:00 (3 h). No load of the block merges job_run's or as_of_by_cluster's
    parts (before, each load did: OPTIMIZE of the month's partition after every file, 0.06 s of the 0.6 s a
    demo night's file cost); the block's end does, once: one part a partition, and the runs as the lines say."""
    a = write(tmp_path, "a.psv", line(101, 101, T0, T1, "Unknown", 3600, "RUNNING"))
    b = write(tmp_path, "b.psv", line(101, 101, T0, T1, T2, 14400, "COMPLETED"),
              line(102, 102, T1, "2026-10-01T02:00:00", T2, 10800, "COMPLETED", user="bob"))
    with one_refresh(wh):
        load_sacct(wh, a, tz="UTC", source="nightly/a")
        load_sacct(wh, b, tz="UTC", source="nightly/b")
        inside = [s for s in statements if s.startswith(("OPTIMIZE TABLE job_run", "OPTIMIZE TABLE as_of_by_cluster"))]
    assert inside == []
    assert rows(wh, "SELECT table, max(n) FROM (SELECT table, partition_id, count() AS n FROM system.parts "
                    "WHERE database = currentDatabase() AND active AND table IN ('job_run', 'as_of_by_cluster') "
                    "GROUP BY table, partition_id) GROUP BY table ORDER BY table") == [("as_of_by_cluster", 1),
                                                                                       ("job_run", 1)]
    assert rows(wh, "SELECT job_id, user, state, wall_s FROM fct_job_run ORDER BY job_id") == [
        ("101", "alice", "COMPLETED", 14400), ("102", "bob", "COMPLETED", 10800)]
    assert rows(wh, "SELECT cluster, as_of_ts FROM as_of_by_cluster FINAL") == [("c1", datetime(2026, 10, 1, 5))]


def test_a_load_looks_once_before_it_writes_and_drops_what_a_killed_load_left(wh, tmp_path, statements):
    """What a load looks up before it writes (the scratch tables left behind, the months that hold rows, whether
    its source has quarantined lines) is one statement (three before, round 8). A scratch table of a process of
    this host that no longer exists (a load killed with SIGKILL) is dropped by it; one of a process alive (a
    load under way) is left."""
    import os
    import subprocess

    from ops_warehouse.etl import undo

    dead = subprocess.Popen(["true"])
    dead.wait()  # (its pid names no process now)
    killed = f"etl_undo_{undo._host()}_{dead.pid}_0badf00d_keys_slurm_job_run"
    other = f"etl_undo_{undo._host()}_{os.getpid()}_0badf00d_keys_slurm_job_run"
    for name in (killed, other):
        wh.command(f"CREATE TABLE {name} (job_id String) ENGINE = MergeTree ORDER BY job_id")
    statements.clear()
    load_sacct(wh, write(tmp_path, "a.psv", line(101, 101, T0, T1, T2, 14400, "COMPLETED")), tz="UTC", source="a")
    first = next(i for i, s in enumerate(statements) if s.startswith("INSERT"))
    looks = [s for s in statements[:first] if "system.tables" in s or "system.parts" in s or "etl_quarantine" in s]
    assert len(looks) == 1, looks
    assert rows(wh, "SELECT name FROM system.tables WHERE database = currentDatabase() "
                    "AND startsWith(name, 'etl_undo_') ORDER BY name") == [(other,)]
    assert rows(wh, "SELECT job_id, state, wall_s FROM fct_job_run") == [("101", "COMPLETED", 14400)]


def test_a_staged_file_goes_in_with_its_settings_in_the_statement(wh, tmp_path, statements):
    """A staged Parquet file is inserted with optimize_on_insert = 0 (the tables are read with FINAL: collapsing
    a block's duplicates on insert only costs time) in the statement's own SETTINGS clause: both rows of one key
    in one file are stored (the engine's default, 1, keeps one), FINAL shows the later, and the session's
    setting is as it was. (Given to the client instead, chDB's backend read it back from system.settings, set
    it and set it back: three more engine calls an insert.)"""
    import polars as pl

    p = tmp_path / "marks.parquet"
    pl.DataFrame({"source": ["x", "x"], "watermark_ts": [datetime(2026, 10, 1), datetime(2026, 10, 2)],
                  "updated_at": [datetime(2026, 10, 1), datetime(2026, 10, 2)]}).with_columns(
        pl.col("watermark_ts").dt.replace_time_zone("UTC"),
        pl.col("updated_at").dt.replace_time_zone("UTC").dt.cast_time_unit("ms")).write_parquet(p)
    statements.clear()
    wh.load_parquet("etl_watermark", p)
    if wh.embedded:
        assert len(statements) == 1 and statements[0].endswith("SETTINGS optimize_on_insert = 0"), statements
    assert rows(wh, "SELECT count() FROM etl_watermark WHERE source = 'x'") == [(2,)]
    assert rows(wh, "SELECT watermark_ts FROM etl_watermark FINAL WHERE source = 'x'") == [(datetime(2026, 10, 2),)]
    assert rows(wh, "SELECT value FROM system.settings WHERE name = 'optimize_on_insert'") == [("1",)]
