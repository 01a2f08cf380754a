"""job_run's refresh in ranges of job ids (etl/grains.py _job_ranges): a load spanning months forms its runs a
bounded number at a time (one statement over a 1 M-job first load held 1.0 GB of the engine's memory), and
the runs come out as the hand-worked figures say, a requeued job's runs formed together."""

from __future__ import annotations

from pathlib import Path

from ops_warehouse.etl import grains
from ops_warehouse.etl.sacct_load import load_sacct
from tests.conftest import rows
from tests.handles import on_every_handle

HEADER = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|User|Submit|Eligible|Start|End|ElapsedRaw|"
          "TimelimitRaw|ExitCode|State|NNodes|NCPUS|AllocTRES|NodeList|JobName")


def _line(job, submit, start, end, elapsed, state):
    tres = "billing=32,cpu=32,gres/gpu:h100=8,gres/gpu=8,mem=64G,node=1"
    return (f"{job}|{job}|c1|h100|normal|proja|grp|alice|{submit}|{submit}|{start}|{end}|{elapsed}|600|0:0|"
            f"{state}|1|32|{tres}|gpu001|train")


# seven runs of five jobs over October to December 2026; jobs 100 and 200 requeued after a NODE_FAIL (200 across
# the month's end), so each has a superseded first run
RUNS = [
    _line(100, "2026-10-01T00:00:00", "2026-10-01T00:00:00", "2026-10-01T01:00:00", 3600, "NODE_FAIL"),
    _line(100, "2026-10-01T01:00:00", "2026-10-01T01:05:00", "2026-10-01T03:05:00", 7200, "COMPLETED"),
    _line(101, "2026-10-15T00:00:00", "2026-10-15T00:00:00", "2026-10-15T00:30:00", 1800, "COMPLETED"),
    _line(102, "2026-11-10T00:00:00", "2026-11-10T00:00:00", "2026-11-10T05:00:00", 18000, "FAILED"),
    _line(103, "2026-12-01T00:00:00", "2026-12-01T00:00:00", "2026-12-01T00:00:20", 20, "COMPLETED"),
    _line(200, "2026-10-31T22:00:00", "2026-10-31T22:00:00", "2026-10-31T23:30:00", 5400, "NODE_FAIL"),
    _line(200, "2026-10-31T23:30:00", "2026-11-01T00:00:00", "2026-11-01T10:00:00", 36000, "COMPLETED"),
]


def test_a_load_spanning_months_forms_job_run_in_bounded_ranges_of_ids(wh, tmp_path: Path, monkeypatch):
    p = tmp_path / "months.psv"
    p.write_text("\n".join([HEADER, *RUNS]) + "\n", encoding="utf-8")
    monkeypatch.setattr(grains, "_PIECE_RUNS", 2, raising=False)
    pieces: list[tuple[str, str]] = []

    def recording(h) -> None:
        real = h.command

        def command(sql, params=None, *a, **k):
            if params and "job_lo" in params:
                pieces.append((params["job_lo"], params["job_hi"]))
            return real(sql, params, *a, **k)

        h.command = command

    on_every_handle(wh, recording)  # (the ranges run two at once, each on its own handle)
    assert load_sacct(wh, p).quarantined == 0

    # the runs in id order: 100, 100, 101, 102, 103, 200, 200: a range starts at every second run's id
    assert sorted(pieces) == [("", "101"), ("101", "103"), ("103", "200"), ("200", "")]
    assert rows(wh, "SELECT job_id, state, is_superseded, wall_s, wall_time_bin FROM fct_job_run "
                    "ORDER BY job_id, submit_ts") == [
        ("100", "NODE_FAIL", 1, 3600, "1 - 5hr"),
        ("100", "COMPLETED", 0, 7200, "1 - 5hr"),
        ("101", "COMPLETED", 0, 1800, "30 - 60min"),
        ("102", "FAILED", 0, 18000, "5 - 10hr"),
        ("103", "COMPLETED", 0, 20, "1 - 30s"),
        ("200", "NODE_FAIL", 1, 5400, "1 - 5hr"),
        ("200", "COMPLETED", 0, 36000, "10 - 18hr"),
    ]
    # a later load of one new job: one range, the load's own ids (the nightly path: no cut, no look for ranges;
    # '~' sorts after every character of an id)
    pieces.clear()
    q = tmp_path / "late.psv"
    q.write_text(HEADER + "\n" + _line(300, "2026-12-02T00:00:00", "2026-12-02T00:00:00", "2026-12-02T01:00:00",
                                       3600, "COMPLETED") + "\n", encoding="utf-8")
    assert load_sacct(wh, q).jobs_loaded == 1
    assert pieces == [("300", "300~")]
    assert rows(wh, "SELECT count(), countIf(is_superseded = 1) FROM fct_job_run") == [(8, 2)]
    # job 102 requeued: its new run alone in the file; the range of its id re-forms the job's earlier run too,
    # which the new one (same user and name, submitted 30 min after the FAILED run ended) supersedes
    pieces.clear()
    r = tmp_path / "requeue.psv"
    r.write_text(HEADER + "\n" + _line(102, "2026-11-10T05:30:00", "2026-11-10T05:31:00", "2026-11-10T06:31:00",
                                       3600, "COMPLETED") + "\n", encoding="utf-8")
    assert load_sacct(wh, r).jobs_loaded == 1
    assert pieces == [("102", "102~")]
    assert rows(wh, "SELECT state, is_superseded FROM fct_job_run WHERE job_id = '102' ORDER BY submit_ts") == [
        ("FAILED", 1), ("COMPLETED", 0)]
    assert rows(wh, "SELECT count(), countIf(is_superseded = 1) FROM fct_job_run") == [(9, 3)]


def test_an_upgrade_of_the_job_run_model_rebuilds_in_the_same_bounded_ranges(wh, tmp_path: Path, monkeypatch):
    """A new version whose job-run model differs (sql/intermediate/fct_job_run.sql) re-forms every run in ranges
    of ids, as a load does: the upgrade itself writes nothing into job_run. (Its file ended with an INSERT of
    every run, which the upgrade ran as a changed file's statement: one statement over the whole history, its
    memory growing with it, and every row written a second time before the ranged rebuild wrote it again.)"""
    import shutil

    from ops_warehouse import sql as sql_package
    from ops_warehouse.grain_versions import fingerprints, stale_grains
    from ops_warehouse.migrations import apply_migrations

    p = tmp_path / "jobs.psv"
    p.write_text("\n".join([HEADER, *RUNS[:5]]) + "\n", encoding="utf-8")
    assert load_sacct(wh, p).quarantined == 0
    # the next version: the model's shortest wall-time bin renamed (no run here falls in it)
    root = tmp_path / "sql"
    shutil.copytree(Path(sql_package.__file__).parent, root)
    model = root / "intermediate" / "fct_job_run.sql"
    text = model.read_text(encoding="utf-8")
    assert "'0 - 1s'" in text
    model.write_text(text.replace("'0 - 1s'", "'0 - 1 s'"), encoding="utf-8")

    monkeypatch.setattr(grains, "_PIECE_RUNS", 2, raising=False)
    writes: list[tuple[str, str]] = []

    def recording(h) -> None:
        real = h.command

        def command(sql, params=None, *a, **k):
            if "INSERT INTO job_run" in sql:  # each write of job_run, by its range of ids ('', '' : every id)
                writes.append(((params or {}).get("job_lo", ""), (params or {}).get("job_hi", "")))
            return real(sql, params, *a, **k)

        h.command = command

    on_every_handle(wh, recording)
    recorded = dict(rows(wh, "SELECT name, checksum FROM schema_migrations FINAL"))
    assert apply_migrations(wh, root) == ["fct_job_run.sql"]
    assert writes == []  # the upgrade wrote no run
    wh.stale_grains = stale_grains(recorded, fingerprints(root))
    assert "job_run" in wh.stale_grains
    grains.rebuild_stale(wh)
    # the five runs in id order, 100, 100, 101, 102, 103: a range starts at every second run's id
    assert sorted(writes) == [("", "101"), ("101", "103"), ("103", "")]
    # each run held once, merged: no second copy left for the reports' FINAL to fold
    assert rows(wh, "SELECT count(), uniqExact(job_id, submit_ts) FROM job_run") == [(5, 5)]
