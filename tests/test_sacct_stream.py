"""A sacct load holds a chunk of its input, not the input (issue 50): ``sacct --json`` is read as a stream,
and the bad lines already quarantined are remembered by a hash, not their text.

The document here is the real Slurm 22.05 ``sacct --json`` output of tests/data (15 jobs, 16 steps, counted
below from the document itself) repeated with other job ids; what the load wrote is checked against those
counts, and the Python memory it held against the document's size.
"""

from __future__ import annotations

import copy
import json
import tracemalloc

import polars as pl
import pytest

from ops_warehouse.etl import sacct_json, sacct_text
from ops_warehouse.etl.quarantine import CopyCounter
from ops_warehouse.etl.sacct_load import load_sacct
from tests.conftest import LIVE, rows
from tests.test_sacct_semantics import line, write

COPIES = 100


def _repeated(tmp_path, copies: int = COPIES):
    doc = json.loads((LIVE / "sacct.json").read_text("utf-8"))
    jobs = doc["jobs"]
    n_jobs, n_steps = len(jobs), sum(len(j.get("steps") or []) for j in jobs)
    out = []
    for k in range(copies):
        for j in jobs:
            j = copy.deepcopy(j)
            j["job_id"] += 1000 * k  # (an array task's parent too: each copy is jobs of its own)
            if j["array"]["job_id"]:
                j["array"]["job_id"] += 1000 * k
            out.append(j)
    doc["jobs"] = out
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc, indent=2), "utf-8")
    return path, n_jobs, n_steps


@pytest.mark.slow  # (13 s on 2 shared cores: 30 chunks, traced)
def test_json_document_loads_a_chunk_at_a_time(wh, tmp_path, monkeypatch):
    """1,500 jobs in chunks of 50: every job and step of every copy loads, and the Python memory the load
    holds is a fraction of the document's (before: the whole text and a dict per job, 8x the file's size)."""
    path, n_jobs, n_steps = _repeated(tmp_path)
    assert (n_jobs, n_steps) == (15, 16)
    size = path.stat().st_size
    assert size > 10e6
    monkeypatch.setattr(sacct_json, "CHUNK_JOBS", 50, raising=False)
    monkeypatch.setattr(sacct_json, "_READ_CHARS", 1 << 18, raising=False)
    tracemalloc.start()
    try:
        r = load_sacct(wh, path, tz="UTC", cluster="live", source="big", refresh=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (r.jobs_loaded, r.steps_loaded, r.quarantined) == (COPIES * n_jobs, COPIES * n_steps, 0)
    assert rows(wh, "SELECT count(), uniqExact(job_id) FROM slurm_job_run FINAL WHERE source = 'big'") == [
        (COPIES * n_jobs, COPIES * n_jobs)]
    assert rows(wh, "SELECT count() FROM slurm_job_step FINAL WHERE source = 'big'") == [(COPIES * n_steps,)]
    assert peak < size / 2, f"the load held {peak / 1e6:.1f} MB of Python objects for a {size / 1e6:.1f} MB file"


def test_json_document_broken_at_its_end_loads_nothing(wh, tmp_path, monkeypatch):
    """The chunks before a syntax error near the end are not loaded: the document is checked whole first."""
    path, _, _ = _repeated(tmp_path, copies=20)
    text = path.read_text("utf-8")
    path.write_text(text[:-40], "utf-8")  # the last job's closing braces cut off
    monkeypatch.setattr(sacct_json, "CHUNK_JOBS", 10, raising=False)
    r = load_sacct(wh, path, tz="UTC", cluster="live", source="cut", refresh=False)
    assert (r.jobs_loaded, r.steps_loaded, r.quarantined) == (0, 0, 1)
    assert rows(wh, "SELECT count() FROM slurm_job_run WHERE source = 'cut'") == [(0,)]
    (reason,), = rows(wh, "SELECT reason FROM etl_quarantine WHERE source = 'cut'")
    # json.loads's own words for the whole text: the error's place is the document's, not a piece's
    try:
        json.loads(text[:-40])
    except ValueError as e:
        assert reason == f"unreadable sacct --json: {e}"


def _bad(raws: list[str], reason: str = "r") -> pl.DataFrame:
    return pl.DataFrame({"line_no": list(range(len(raws))), "reason": [reason] * len(raws), "raw": raws},
                        schema={"line_no": pl.UInt64, "reason": pl.String, "raw": pl.String})


def test_copies_of_a_bad_line_are_numbered_across_chunks():
    c = CopyCounter()
    assert c.number(_bad(["a", "b", "a"])).get_column("occurrence").to_list() == [0, 0, 1]
    assert c.number(_bad(["a", "b", "c"])).get_column("occurrence").to_list() == [2, 1, 0]
    assert c.number(_bad(["a"], reason="s")).get_column("occurrence").to_list() == [0]  # another reason
    assert c.number(_bad(["a", "s"])).get_column("occurrence").to_list() == [3, 0]


def test_numbering_bad_lines_keeps_no_copy_of_their_text():
    """20,000 distinct bad lines of 500 bytes (10 MB) read in 4 chunks: what is kept to number the next chunk's
    copies is not their text (before: all of it, so a file of bad lines grew the load's memory with its size)."""
    c = CopyCounter()
    for k in range(4):
        c.number(_bad([f"{k:02d}{i:06d}" + "x" * 492 for i in range(5000)]))
    assert c.seen.height == 20000
    assert c.seen.estimated_size() < 1e6, c.seen.estimated_size()


def test_a_failed_reload_puts_back_a_job_it_wrote_in_two_chunks(wh, tmp_path, monkeypatch):
    """Job 101 loaded RUNNING (alice), then a reload read in 1 kB chunks gives it COMPLETED (bob) in its first
    chunk and again in a later one, and is refused at a header further down that lacks Submit, Start and End.
    What is put back is alice's RUNNING record: the later chunk's copy-aside must not take the row the reload's
    own first chunk wrote for the one it replaced (the earlier chunks' keys it looks at are now only those the
    chunk has too, issue 50)."""
    monkeypatch.setattr(sacct_text, "CHUNK_BYTES", 1024)
    t0, t1, t2 = "2026-10-01T00:00:00", "2026-10-01T01:00:00", "2026-10-01T05:00:00"
    first = write(tmp_path, "first.psv", line(101, 101, t0, t1, "Unknown", 3600, "RUNNING", user="alice"))
    load_sacct(wh, first, tz="UTC", source="s", refresh=False)
    job = line(101, 101, t0, t1, t2, 14400, "COMPLETED", user="bob")
    others = [line(200 + i, 200 + i, t0, t1, t2, 14400, "COMPLETED") for i in range(24)]
    # (the chunks after the second copy are inserted before the refused header is read)
    again = write(tmp_path, "again.psv", job, *others[:12], job, *others[12:], "JobID|State", "300|COMPLETED")
    assert again.stat().st_size > 4 * 1024
    with pytest.raises(Exception, match="missing sacct fields Submit, Start, End"):
        load_sacct(wh, again, tz="UTC", source="s", refresh=False)
    assert rows(wh, "SELECT job_id, user, state FROM slurm_job_run FINAL ORDER BY job_id") == [
        ("101", "alice", "RUNNING")]
