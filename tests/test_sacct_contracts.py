"""The input contract of the sacct loader (etl/sacct_contract.py, docs/sources.md "Input contract"), on inputs
made by cutting fields out of the REAL exports in tests/data/sacct:

- a file without a field every job record needs is refused in one line naming exactly what is missing,
  through the CLI with a non-zero exit, and nothing of it reaches any table;
- a field that is merely absent is never read as a value: without NodeList the jobs that ran keep their
  usage (worked out here from the raw lines), without NNodes the node list gives the count;
- optional fields absent load with the defaults the summary line states once;
- steps never load without their job record (absent or quarantined job line, across chunk boundaries,
  and in sacct --json).
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.etl import sacct_text
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.sacct_text import XDMOD_FIELDS, parse_fields
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import LIVE, XDMOD, rows

XD = XDMOD_FIELDS.split(",")
LIVE_HEADER, LIVE_BODY = (LIVE / "sacct.psv").read_text("utf-8").split("\n", 1)
LIVE_LINES = [ln for ln in LIVE_BODY.split("\n") if ln.strip()]
LIVE_NAMES = LIVE_HEADER.split("|")
TABLES = ("slurm_job_run", "slurm_job_step", "etl_quarantine")


def cut_live(tmp_path: Path, drop: set[str], name: str = "cut.psv", lines: list[str] | None = None) -> Path:
    """The live 22.05 --parsable2 dump (header and records) without the fields named in ``drop``."""
    keep = [i for i, n in enumerate(LIVE_NAMES) if n.lower() not in {d.lower() for d in drop}]
    out = []
    for ln in [LIVE_HEADER, *(LIVE_LINES if lines is None else lines)]:
        parts = ln.split("|")
        assert len(parts) == len(LIVE_NAMES)  # no job name of this dump holds the delimiter
        out.append("|".join(parts[i] for i in keep))
    p = tmp_path / name
    p.write_text("\n".join(out) + "\n", "utf-8")
    return p


def phillips() -> list[dict]:
    """Open XDMoD's headerless phillips.log as field dicts (JobName last: maxsplit keeps it whole)."""
    text = (XDMOD / "phillips.log").read_text("utf-8")
    return [dict(zip(XD, ln.split("|", len(XD) - 1))) for ln in text.split("\n") if ln.strip()]


def cut_phillips(tmp_path: Path, drop: set[str]) -> tuple[Path, str]:
    """phillips.log without the fields in ``drop``: (file, its --fields list)."""
    keep = [f for f in XD if f not in drop]
    p = tmp_path / "phillips-cut.log"
    p.write_text("\n".join("|".join(r[f] for f in keep) for r in phillips()) + "\n", "utf-8")
    return p, ",".join(keep)


def counts(w) -> dict[str, int]:
    return {t: rows(w, f"SELECT count() FROM {t}")[0][0] for t in TABLES}


def warehouse_counts(dsn_path: Path) -> dict[str, int]:
    w = open_warehouse(Config(dsn=f"chdb://{dsn_path}"))
    try:
        return counts(w)
    finally:
        close_embedded()


def ops(*args):
    from tests.cli_runner import cli

    return cli(*args, check=False)


def refusal(p) -> str:
    """The one stderr line of a refused load; the missing fields it names."""
    assert p.returncode == 2, p.stdout + p.stderr  # the CLI's exit status for an OpsError (cli/main.py)
    assert "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
    assert p.stderr.startswith("ops-report: error: ") and "refused" in p.stderr and "nothing was loaded" in p.stderr
    assert "--format=" in p.stderr  # says which sacct --format to use
    m = re.search(r"missing sacct fields? (.+?) \(every job record", p.stderr) or re.search(
        r"no job of this sacct --json document has (.+?) \(every job record", p.stderr)
    assert m, p.stderr
    return m.group(1)


# --------------------------------------------------------------------------------------- required fields
@pytest.mark.parametrize("drop,missing", [
    ({"State"}, "State"),                 # every line was quarantined one by one, exit 0
    ({"Submit"}, "Submit"),               # the steps loaded, their jobs all quarantined
    ({"Start", "End", "ElapsedRaw"}, "Start, End"),
])
def test_text_dump_without_a_required_field_is_refused_whole(tmp_path, drop, missing):
    p = cut_live(tmp_path, drop)
    wh = tmp_path / "wh"
    got = refusal(ops("--warehouse", f"chdb://{wh}", "etl", "sacct", "--cluster", "testclu", str(p)))
    assert got == missing
    assert warehouse_counts(wh) == {t: 0 for t in TABLES}


def test_headerless_fields_list_without_required_fields_is_refused(tmp_path):
    """The same contract on --fields (Open XDMoD's headerless format, cut)."""
    p, fields = cut_phillips(tmp_path, {"jobid", "jobidraw", "submit"})
    wh = tmp_path / "wh"
    got = refusal(ops("--warehouse", f"chdb://{wh}", "etl", "sacct", "--fields", fields, str(p)))
    assert got == "JobID or JobIDRaw, Submit"
    assert warehouse_counts(wh) == {t: 0 for t in TABLES}


def _live_json() -> dict:
    return json.loads((LIVE / "sacct.json").read_text("utf-8"))


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_json_document_without_required_keys_is_refused_but_one_bad_job_is_quarantined(tmp_path):
    doc = _live_json()
    for job in doc["jobs"]:
        del job["state"]
        del job["time"]
    p = tmp_path / "nostate.json"
    p.write_text(json.dumps(doc), "utf-8")
    wh = tmp_path / "wh"
    got = refusal(ops("--warehouse", f"chdb://{wh}", "etl", "sacct", "--cluster", "testclu", str(p)))
    assert got == "state, time.submission, time.start, time.end"
    assert warehouse_counts(wh) == {t: 0 for t in TABLES}
    # one job without them among good ones is that job's fault: quarantined, the others load
    doc = _live_json()
    n_steps = len(doc["jobs"][2]["steps"])
    del doc["jobs"][2]["state"]
    one = tmp_path / "one.json"
    one.write_text(json.dumps(doc), "utf-8")
    w = open_warehouse(Config(dsn=f"chdb://{tmp_path / 'wh2'}"))
    try:
        r = load_sacct(w, one, cluster="testclu")
        assert (r.jobs_loaded, r.steps_loaded, r.quarantined) == (14, 16 - n_steps, 1 + n_steps)
    finally:
        close_embedded()


# ------------------------------------------------------------------------------- absent is not empty
def _elapsed_s(text: str) -> int:
    days, _, hms = text.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def _ts(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def test_dump_without_nodelist_loads_the_jobs_that_ran_with_their_cpu_hours(wh, tmp_path):
    """phillips.log without NodeList, Account, User and Cluster: jobs that ran for days loaded as
    cancelled before start with 0 CPU-hours (the missing column was read as "None assigned")."""
    recs = phillips()
    # worked out from the raw lines: a finished job with Start and End that ran a non-zero Elapsed used
    # NCPUS x (End - Start); jobs cancelled while pending print NodeList "None assigned"
    ran = [r for r in recs if _ts(r["start"]) and _ts(r["end"]) and _elapsed_s(r["elapsed"]) > 0]
    want_cpu_s = sum(int(r["ncpus"]) * (_ts(r["end"]) - _ts(r["start"])).total_seconds() for r in ran)
    want_never = sum(r["nodelist"] == "None assigned" for r in recs)
    assert (len(recs), len(ran), want_never) == (4285, 4024, 239)
    assert round(want_cpu_s / 3600, 2) == 11_767.99

    p, fields = cut_phillips(tmp_path, {"nodelist", "account", "user", "cluster"})
    r = load_sacct(wh, p, fields=parse_fields(fields), cluster="cut")
    assert (r.records_read, r.jobs_loaded, r.quarantined) == (4285, 4285, 0)
    got = rows(wh, "SELECT sum(ncpus * wall_s), countIf(never_ran = 1), countIf(never_ran = 0 AND wall_s > 0) "
                   "FROM fct_job_run")[0]
    assert got[0] == pytest.approx(want_cpu_s) and got[1:] == (want_never, len(ran))
    j = rows(wh, "SELECT never_ran, wall_s, ncpus, account, user, cluster, nodes FROM fct_job_run "
                 "WHERE job_id = '163485'")
    assert j == [(0, 912426, 12, "unknown", "unknown", "cut", [])]  # ran 10-13:27:06 on 12 CPUs
    assert r.defaults == ["cluster=cut (no Cluster field)", "account=unknown (no Account field)",
                          "user=unknown (no User field)", "nodes unknown, ran = has a Start (no NodeList field)"]
    # the same job by job as the whole file (NodeList, Account, ... present) says
    load_sacct(wh, XDMOD / "phillips.log", fields=parse_fields(XDMOD_FIELDS))
    diff = rows(wh, "SELECT count() FROM (SELECT job_id, submit_ts, uniqExact(never_ran) AS n, "
                    "uniqExact(wall_s) AS w FROM fct_job_run GROUP BY job_id, submit_ts HAVING n > 1 OR w > 1)")
    assert diff == [(0,)] and rows(wh, "SELECT count() FROM fct_job_run") == [(2 * 4285,)]


def test_live_dump_without_nodelist_nnodes_alloctres_account(wh, tmp_path):
    """The 22.05 cluster's dump cut: never_ran as the NodeList says for every job (job 11 was cancelled
    as it started: 0 s, killed by signal 15, it ran), NNodes from the node list, GPUs 0 stated."""
    full = {r[0]: r[1:] for r in _load_rows(wh, LIVE / "sacct.psv", "full")}
    cut = {r[0]: r[1:] for r in _load_rows(wh, cut_live(tmp_path, {"NodeList"}), "nonodes")}
    assert len(full) == 15 and cut == full  # (never_ran, wall_s, nnodes, ncpus, gpus)
    p = cut_live(tmp_path, {"NNodes", "AllocTRES", "Account"}, "nonnodes.psv")
    r = load_sacct(wh, p, cluster="nonnodes")
    nn = dict(rows(wh, "SELECT job_id, nnodes FROM slurm_job_run FINAL WHERE cluster = 'nonnodes'"))
    want = {job_id: v[2] for job_id, v in full.items()}  # NNodes of the whole dump
    assert nn == want and nn["6"] == 2  # gpu[002-003]
    assert rows(wh, "SELECT DISTINCT gpus, account FROM slurm_job_run FINAL WHERE cluster = 'nonnodes'") == [
        (0, "unknown")]
    assert r.defaults == ["cluster=nonnodes (no Cluster field)", "account=unknown (no Account field)",
                          "gpus=0 (no AllocTRES field)", "nnodes from the node list (no NNodes field)"]


def _load_rows(wh, path: Path, cluster: str):
    load_sacct(wh, path, cluster=cluster)
    return rows(wh, "SELECT job_id, never_ran, wall_s, nnodes, ncpus, gpus FROM fct_job_run "
                    "WHERE cluster = {c:String}", c=cluster)


def test_json_without_nodes_and_account_keys(wh, tmp_path):
    doc = _live_json()
    for job in doc["jobs"]:
        del job["nodes"], job["account"]
    p = tmp_path / "nonodes.json"
    p.write_text(json.dumps(doc), "utf-8")
    r = load_sacct(wh, p, cluster="testclu")
    got = rows(wh, "SELECT job_id, never_ran, wall_s, account FROM fct_job_run ORDER BY job_id")
    load_sacct(wh, LIVE / "sacct.psv", cluster="psv")
    # as the --parsable2 dump of the same jobs (with NodeList) says; job 11 (cancelled as it started, 0 s)
    # ran: its exit signal 15 is read from 22.05's {"signal_id": 15} (it read 0 before)
    want = rows(wh, "SELECT job_id, never_ran, wall_s, 'unknown' FROM fct_job_run WHERE cluster = 'psv' "
                    "ORDER BY job_id")
    assert len(got) == 15 and got == want
    assert r.defaults == ["account=unknown (no account field)", "nodes unknown, ran = has a Start (no nodes field)"]


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_defaults_are_stated_once_in_the_cli_summary_line(tmp_path):
    p = cut_live(tmp_path, {"Account", "User", "Partition", "AllocTRES"})
    out = ops("--warehouse", f"chdb://{tmp_path / 'wh'}", "etl", "sacct", "--cluster", "c9", str(p))
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith(str(p)))
    assert "read 31, loaded 31 (15 job runs, 16 steps), quarantined 0" in line
    assert line.endswith("; defaults: cluster=c9 (no Cluster field), account=unknown (no Account field), "
                         "user=unknown (no User field), partition=unknown (no Partition field), "
                         "gpus=0 (no AllocTRES field)")
    assert out.stdout.count("defaults:") == 1
    full = ops("--warehouse", f"chdb://{tmp_path / 'wh'}", "etl", "sacct", "--cluster", "c9",
               "--fields", "xdmod", str(XDMOD / "phillips.log"))
    assert full.returncode == 0 and "defaults" not in full.stdout  # nothing absent, nothing said


# ----------------------------------------------------------------------------------- no orphan steps
def test_steps_of_an_absent_or_quarantined_job_line_are_quarantined(wh, tmp_path):
    lines = [ln for ln in LIVE_LINES if not ln.startswith("6|")]  # job 6's line cut: 6.batch and 6.0 orphans
    bad = lines.index(next(ln for ln in lines if ln.startswith("2|")))
    lines[bad] = lines[bad].replace("2026-11-29T22:28:18", "2026-13-29T22:28:18", 1)  # job 2: a bad Submit
    p = tmp_path / "orphans.psv"
    p.write_text("\n".join([LIVE_HEADER, *lines]) + "\n", "utf-8")
    r = load_sacct(wh, p, cluster="testclu")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (30, 13, 13, 4)
    q = rows(wh, "SELECT splitByChar('|', raw)[2], reason FROM etl_quarantine FINAL ORDER BY line_no")
    orphan = "step of a job not loaded from this input (its job line is absent or quarantined)"
    assert q == [("2", "bad submit time '2026-13-29T22:28:18'"), ("2.batch", orphan), ("6.batch", orphan),
                 ("6.0", orphan)]
    assert rows(wh, "SELECT count() FROM slurm_job_step FINAL WHERE job_id IN ('2', '6')") == [(0,)]
    # no step in the warehouse lacks its job
    assert rows(wh, "SELECT count() FROM (SELECT cluster, job_id FROM slurm_job_step FINAL) AS s LEFT ANTI JOIN "
                    "(SELECT DISTINCT cluster, job_id FROM slurm_job_run FINAL) AS j USING (cluster, job_id)") == [(0,)]


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_steps_follow_their_job_across_chunk_boundaries(wh, tmp_path, monkeypatch):
    """Chunks of ~one line: every step is read in another chunk than its job line (job 6's second step two
    chunks later); they load, while the orphans of a cut job line do not."""
    monkeypatch.setattr(sacct_text, "read_text", functools.partial(sacct_text.read_text, chunk_bytes=64))
    r = load_sacct(wh, LIVE / "sacct.psv", cluster="testclu")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (31, 15, 16, 0)
    p = tmp_path / "no6.psv"
    p.write_text("\n".join([LIVE_HEADER, *[ln for ln in LIVE_LINES if not ln.startswith("6|")]]) + "\n")
    r = load_sacct(wh, p, cluster="other")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (30, 14, 14, 2)


def test_json_steps_of_a_quarantined_job_do_not_load(wh, tmp_path):
    doc = _live_json()
    job = doc["jobs"][5]
    n_steps = len(job["steps"])
    assert n_steps == 2
    job["state"]["current"] = "NOT_A_STATE"  # the job record is quarantined by normalize, its steps read fine
    p = tmp_path / "badstate.json"
    p.write_text(json.dumps(doc), "utf-8")
    r = load_sacct(wh, p, cluster="testclu")
    assert (r.jobs_loaded, r.steps_loaded, r.quarantined) == (14, 14, 3)
    assert rows(wh, "SELECT count() FROM slurm_job_step FINAL WHERE job_id = {j:String}",
                j=str(job["job_id"])) == [(0,)]
