"""The suite's content checksums (tests/conftest.py: table_checksums) see every row. The idempotency, rerun and
SIGKILL tests compare them before and after; issue 49 found each row hashed with cityHash64(col, col, ...),
which is NULL when any column is NULL, and sum() skips NULLs: every job run of a site whose sacct has no UID
(uid, cancelled_by_uid, exit_signal NULL) was compared by count only. Here a real sacct export is loaded and
a run altered, or one run doubled and another lost (the count unchanged): the checksums must differ."""

from __future__ import annotations

from ops_warehouse.etl.sacct_load import load_sacct
from tests.conftest import REPO, table_checksums

PSV = REPO / "tests/data/sacct/slurm-22.05-live/sacct.psv"  # 15 runs (JobIDRaw 1-11, 13-16) and their steps


def _loaded(wh) -> dict[str, tuple]:
    load_sacct(wh, PSV, refresh=False)
    before = table_checksums(wh)
    assert before["slurm_job_run"][0] == 15  # the file's lines whose JobIDRaw has no '.'
    # every run has a NULL column (the file has no UID field): the hash the old checksum summed was NULL
    assert wh.query_rows("SELECT countIf(uid IS NULL) FROM slurm_job_run FINAL")[0][0] == 15
    return before


def test_an_altered_run_with_null_columns_changes_the_checksum(wh):
    before = _loaded(wh)
    # job 3 FAILED; a misread that stored it COMPLETED replaces it (a later _version wins under FINAL)
    wh.command("INSERT INTO slurm_job_run SELECT * REPLACE ('COMPLETED' AS state, _version + 1 AS _version) "
               "FROM slurm_job_run FINAL WHERE job_id = '3'")
    assert wh.query_rows("SELECT state FROM slurm_job_run FINAL WHERE job_id = '3'") == [("COMPLETED",)]
    after = table_checksums(wh)
    assert after["slurm_job_run"][0] == 15
    assert after["slurm_job_run"] != before["slurm_job_run"]


def test_a_doubled_run_and_a_lost_one_change_the_checksum(wh):
    before = _loaded(wh)
    # job 5 doubled an hour later (a time misread: a key of its own), job 7 lost: still 15 runs
    wh.command("INSERT INTO slurm_job_run SELECT * REPLACE (submit_ts + 3600 AS submit_ts) "
               "FROM slurm_job_run FINAL WHERE job_id = '5'")
    wh.command("ALTER TABLE slurm_job_run DELETE WHERE job_id = '7' SETTINGS mutations_sync = 2")
    assert wh.query_rows("SELECT count() FROM slurm_job_run FINAL WHERE job_id = '5'")[0][0] == 2
    after = table_checksums(wh)
    assert after["slurm_job_run"][0] == 15
    assert after["slurm_job_run"] != before["slurm_job_run"]


def test_a_null_and_a_zero_hash_apart(wh):
    """NULL is not a value's default: a run whose UID became 0 where sacct gave none is a change."""
    before = _loaded(wh)
    wh.command("INSERT INTO slurm_job_run SELECT * REPLACE (0 AS uid, _version + 1 AS _version) "
               "FROM slurm_job_run FINAL WHERE job_id = '1'")
    assert table_checksums(wh)["slurm_job_run"] != before["slurm_job_run"]
