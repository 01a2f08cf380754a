"""sacct output of other sites and tools, with field sets, delimiters and schemas other than ours (issue 13).

Each file is in tests/data/sacct/<source>/ as published (sources, commits and licenses in tests/data/README.md).
Every expected figure is worked out here from the file's raw lines (plain string splitting below, or by hand
in the comments), never read back from the warehouse:

- tdhock-slurm/sacct-allcols.txt: every sacct field (108), tab-delimited, header; Compute Canada's Cedar.
- tdhock-slurm/sacct-manyfields.txt: a header without Submit: refused, nothing loaded.
- slyme/*.out: Harvard FAS (Slurm 14.03), headerless --parsable2, no Elapsed field, hostlist node lists.
- slurm2sql/test-data1.csv: Aalto, header, 51 fields, `CANCELLED by <uid>`, a cancelled job with End Unknown.
- sonar/sacct_output.txt: UiO's Fox (2025), headerless, 32 fields, no NNodes/NCPUS (AllocTRES only), typed
  GRES (a100, a100_80, l40s, a40), RUNNING and PENDING jobs, Start `None`, a reservation, local time.
- vcell/sacct-json-multistep.json: `sacct --json` of Slurm 23.11.10 (data_parser v0.0.40), step ids "job.step".
- vcell/sacct-multistep-running.txt: JobID|JobName|State only: refused, nothing loaded.
- hpc-cost-simulator/*/sacct-output.txt: headerless, AllocNodes instead of NNodes, no NodeList, Start `None`,
  the maintainers' `#` comment lines and an INVALID state line.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.sacct_text import parse_fields
from tests.conftest import SACCT, rows
from tests.cli_runner import cli

UTC = timezone.utc
TDHOCK = SACCT / "tdhock-slurm"
SLYME = SACCT / "slyme"
SLURM2SQL = SACCT / "slurm2sql"
SONAR = SACCT / "sonar" / "sacct_output.txt"
VCELL = SACCT / "vcell"
AWS = SACCT / "hpc-cost-simulator"

# The --format each headerless file was written with, from its project's code or notes (tests/data/README.md).
SLYME_FIELDS = ("User,JobID,JobName,State,Partition,NCPUS,NNodes,CPUTime,TotalCPU,UserCPU,SystemCPU,ReqMem,"
                "MaxRSS,Submit,Start,End,NodeList")
SONAR_FIELDS = ("JobID,JobIDRaw,User,Account,State,Start,End,AveCPU,AveDiskRead,AveDiskWrite,AveRSS,AveVMSize,"
                "ElapsedRaw,ExitCode,Layout,MaxRSS,MaxVMSize,MinCPU,ReqCPUS,ReqMem,ReqNodes,Reservation,Submit,"
                "Suspended,SystemCPU,TimelimitRaw,UserCPU,NodeList,Partition,AllocTRES,Priority,JobName")
AWS_FIELDS = ("State,JobID,ReqCPUS,ReqMem,ReqNodes,Constraints,Submit,Eligible,Start,Elapsed,Suspended,End,"
              "ExitCode,DerivedExitCode,AllocNodes,NCPUS,MaxDiskRead,MaxDiskWrite,MaxPages,MaxRSS,MaxVMSize,"
              "CPUTime,UserCPU,SystemCPU,TotalCPU")
AWS_FIELDS_PARTITION = AWS_FIELDS + ",Partition"  # from PR #36 (2022-07-31) on


@pytest.fixture
def dsn(tmp_path):
    return f"chdb://{tmp_path / 'wh'}"


# ---------------------------------------------------------------- reading the raw files, independently

def raw_records(path: Path, delimiter: str = "|", fields: str | None = None) -> list[dict]:
    """The file's records as {field: text}: header (or ``fields``), one record per non-blank line; lines that
    are comments ('#') are left out (the loader quarantines them: test_aws_*)."""
    lines = [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip() and not ln.startswith("#")]
    names = fields.split(",") if fields else lines.pop(0).split(delimiter)
    out = []
    for ln in lines:
        values = ln.split(delimiter)
        assert len(values) == len(names), (path, ln)
        out.append(dict(zip(names, values)))
    return out


def is_step(r: dict) -> bool:
    return "." in r["JobID"]


def at(text: str, tz: str = "UTC") -> datetime | None:
    """A sacct time printed in zone ``tz`` as an aware UTC datetime; None for Unknown/None/empty."""
    if text in ("", "Unknown", "None"):
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=ZoneInfo(tz)).astimezone(UTC)


def seconds(text: str) -> int:
    """sacct's [D-][HH:]MM:SS[.fff] duration, whole seconds."""
    days, _, rest = text.rpartition("-")
    parts = [float(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    h, m, s = parts
    return int((int(days) if days else 0) * 86400 + h * 3600 + m * 60 + s)


def tres(text: str, key: str) -> int:
    """The count of ``key`` (cpu, node, gres/gpu) in an AllocTRES string, 0 when absent."""
    m = re.search(rf"(?:^|,){re.escape(key)}=(\d+)", text)
    return int(m.group(1)) if m else 0


def job(wh, job_id: str) -> dict:
    r = wh.client.query("SELECT * FROM fct_job_run WHERE job_id = {j:String}", parameters={"j": job_id})
    assert len(r.result_rows) == 1, (job_id, len(r.result_rows))
    return {k: v.replace(tzinfo=UTC) if isinstance(v, datetime) and v.tzinfo is None else v
            for k, v in zip(r.column_names, r.result_rows[0])}


def steps_of(wh, job_id: str) -> dict[str, tuple]:
    return {s: tuple(rest) for s, *rest in rows(
        wh, "SELECT step_id, state, exit_code, exit_signal, elapsed_s, ntasks, ncpus FROM slurm_job_step FINAL "
            "WHERE job_id = {j:String}", j=job_id)}


def summary_json(dsn: str, day_from: str, day_to: str, tz: str = "UTC") -> dict:
    out = json.loads(cli("--warehouse", dsn, "summary", "--from", day_from, "--to", day_to, "--timezone", tz,
                         "--format", "json").stdout)
    assert len(out) == 1, out
    return out[0]


def nothing_loaded(wh) -> bool:
    return rows(wh, "SELECT (SELECT count() FROM slurm_job_run) + (SELECT count() FROM slurm_job_step)") == [(0,)]


# ---------------------------------------------------------------- tdhock/slurm (Compute Canada, Cedar)

def test_cedar_every_field_tab_delimited(wh):
    """`sacct` with all 108 fields, `--delimiter` a tab, header line, no trailing delimiter. One TIMEOUT job
    and its .batch (CANCELLED, signal 15) and .extern steps."""
    recs = raw_records(TDHOCK / "sacct-allcols.txt", "\t")
    assert len(recs) == 3 and len(recs[0]) == 108
    j = recs[0]
    r = load_sacct(wh, TDHOCK / "sacct-allcols.txt", delimiter="\t", tz="UTC")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (3, 1, 2, 0)

    got = job(wh, "32650736")
    assert (got["cluster"], got["partition"], got["user"], got["account"], got["group_name"]) == (
        j["Cluster"], j["Partition"], j["User"], j["Account"], j["Group"]) == (
        "cedar", "cpubase_bycore_b1", "icecube10", "rpp-kenclark_cpu", "icecube")
    assert got["uid"] == int(j["UID"]) == 10008310
    assert got["state"] == "TIMEOUT" and got["is_final"] == 1 and got["never_ran"] == 0
    assert (got["exit_code"], got["exit_signal"]) == (0, 0)
    # ElapsedRaw 3606 = Elapsed 01:00:06 = End 21:36:24 - Start 20:36:18
    assert got["elapsed_s"] == got["wall_s"] == int(j["ElapsedRaw"]) == seconds(j["Elapsed"]) == 3606
    assert (at(j["End"]) - at(j["Start"])).total_seconds() == 3606
    assert got["timelimit_s"] == int(j["TimelimitRaw"]) * 60 == seconds(j["Timelimit"]) == 3600
    # wait = Start - Submit = 61 s, which is also what the file's Reserved field says (00:01:01)
    assert (got["start_ts"] - got["submit_ts"]).total_seconds() == seconds(j["Reserved"]) == 61
    assert got["submit_ts"] == at("2019-12-11T20:35:17")
    assert (got["ncpus"], got["nnodes"], got["gpus"]) == (int(j["NCPUS"]), int(j["NNodes"]), 0) == (1, 1, 0)
    assert got["alloc_mem_mib"] == 7996  # AllocTRES mem=7996M (ReqMem 7996Mc is per CPU)
    assert got["nodes"] == [j["NodeList"]] == ["cdr735"]
    # CPU time: NCPUS x wall = CPUTimeRAW 3606
    assert got["ncpus"] * got["wall_s"] == int(j["CPUTimeRAW"])

    assert steps_of(wh, "32650736") == {
        # step: state, exit code, signal, elapsed, ntasks, ncpus -- from the .batch/.extern lines
        "batch": ("CANCELLED", 0, 15, 3609, 1, 1),
        "extern": ("COMPLETED", 0, 0, 3607, 1, 1),
    }
    for s in recs[1:]:
        assert steps_of(wh, "32650736")[s["JobName"]][3] == int(s["ElapsedRaw"])


def test_cedar_summary_totals(dsn):
    cli("--warehouse", dsn, "etl", "sacct", "--delimiter", "\t", "--timezone", "UTC",
        str(TDHOCK / "sacct-allcols.txt"))
    s = summary_json(dsn, "2019-12-11", "2019-12-11")
    assert (s["jobs_started"], s["jobs_ended"], s["jobs_cancelled_before_start"]) == (1, 1, 0)
    assert s["cpu_hours"] == pytest.approx(3606 / 3600)  # 1 CPU x 3606 s (= CPUTimeRAW)
    assert s["node_hours"] == pytest.approx(3606 / 3600)
    assert s["gpu_h"] == 0
    assert s["wait_hours"] == pytest.approx(61 / 3600)


def test_header_without_submit_is_refused(wh, dsn):
    """sacct-manyfields.txt: Account|User|JobID|Start|End|AllocCPUS|Elapsed|AllocTRES|...|ExitCode|State. No
    Submit (part of a job's key): the file is refused in one line naming Submit, and nothing is loaded (its
    steps loaded before, with their job quarantined)."""
    header = (TDHOCK / "sacct-manyfields.txt").read_text().split("\n")[0].split("|")
    assert "Submit" not in header and {"JobID", "State", "Start", "End"} <= set(header)
    with pytest.raises(OpsError) as e:
        load_sacct(wh, TDHOCK / "sacct-manyfields.txt")
    msg = str(e.value)
    # the missing field is named, and only it (JobID, State, Start and End are there)
    assert "refused" in msg and re.search(r"missing[^(]*\bSubmit\b", msg), msg
    assert not re.search(r"missing[^(]*\b(JobID|State|Start|End)\b", msg), msg
    assert nothing_loaded(wh)
    p = cli("--warehouse", dsn, "etl", "sacct", str(TDHOCK / "sacct-manyfields.txt"), check=False)
    assert p.returncode != 0
    err = [ln for ln in p.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and "Submit" in err[0] and "refused" in err[0], p.stderr


# ---------------------------------------------------------------- slyme (Harvard FAS, Slurm 14.03)

def test_slyme_headerless_without_elapsed(wh):
    """No Elapsed field: elapsed is End - Start. ReqMem 5150Mn (per node). NodeList hero[4515-4516]."""
    fields = parse_fields(SLYME_FIELDS)
    par = raw_records(SLYME / "sacct_single_parallel_COMPLETED_parsable.out", fields=SLYME_FIELDS)
    ser = raw_records(SLYME / "sacct_single_serial_COMPLETED_parsable.out", fields=SLYME_FIELDS)
    r1 = load_sacct(wh, SLYME / "sacct_single_parallel_COMPLETED_parsable.out", fields=fields, tz="UTC")
    r2 = load_sacct(wh, SLYME / "sacct_single_serial_COMPLETED_parsable.out", fields=fields, tz="UTC")
    assert (r1.records_read, r1.jobs_loaded, r1.steps_loaded, r1.quarantined) == (3, 1, 2, 0)
    assert (r2.records_read, r2.jobs_loaded, r2.steps_loaded, r2.quarantined) == (2, 1, 1, 0)

    p = job(wh, "77454")
    assert (p["state"], p["user"], p["partition"], p["job_name"]) == ("COMPLETED", "jab", "general",
                                                                      "cpu_user_parallel")
    assert (p["ncpus"], p["nnodes"], p["gpus"]) == (3, 2, 0)
    assert p["nodes"] == ["hero4515", "hero4516"]  # hero[4515-4516]
    # 11:51:28 -> 11:52:31 = 63 s; CPUTime 00:03:09 = 189 s = 3 CPUs x 63 s
    assert p["elapsed_s"] == p["wall_s"] == 63 == seconds(par[0]["CPUTime"]) // 3
    assert p["start_ts"] == p["submit_ts"] == at("2014-06-26T11:51:28")
    assert steps_of(wh, "77454") == {"batch": ("COMPLETED", None, None, 63, None, 1),
                                     "0": ("COMPLETED", None, None, 61, None, 1)}  # 11:51:30 -> 11:52:31
    s = job(wh, "77369")
    assert (s["ncpus"], s["nnodes"], s["nodes"]) == (1, 1, ["hero4515"])
    assert s["wall_s"] == 62 == seconds(ser[0]["CPUTime"])  # 10:18:24 -> 10:19:26
    assert (s["start_ts"] - s["submit_ts"]).total_seconds() == 1  # submitted 10:18:23
    assert rows(wh, "SELECT count() FROM fct_job_run WHERE job_id LIKE '%.%'") == [(0,)]


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_slyme_summary_totals(dsn):
    cli("--warehouse", dsn, "etl", "sacct", "--fields", SLYME_FIELDS, "--timezone", "UTC",
        str(SLYME / "sacct_single_parallel_COMPLETED_parsable.out"),
        str(SLYME / "sacct_single_serial_COMPLETED_parsable.out"))
    s = summary_json(dsn, "2014-06-26", "2014-06-26")
    assert (s["jobs_started"], s["jobs_ended"], s["jobs_cancelled_before_start"]) == (2, 2, 0)
    assert s["cpu_hours"] == pytest.approx((3 * 63 + 1 * 62) / 3600)  # = CPUTime 00:03:09 + 00:01:02
    assert s["node_hours"] == pytest.approx((2 * 63 + 1 * 62) / 3600)
    assert s["wall_hours"] == pytest.approx((63 + 62) / 3600)
    assert s["wait_hours"] == pytest.approx(1 / 3600)


# ---------------------------------------------------------------- slurm2sql (Aalto)

def test_slurm2sql_cancelled_by_uid(wh):
    recs = raw_records(SLURM2SQL / "test-data1.csv")
    assert len(recs[0]) == 51
    r = load_sacct(wh, SLURM2SQL / "test-data1.csv", tz="UTC")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (5, 2, 3, 0)
    j = job(wh, "43974388")
    assert (j["state"], j["cancelled_by_uid"], j["partition"], j["user"]) == (
        "CANCELLED", 1300204, "jupyter-long", "user1")
    assert j["timelimit_s"] == 5 * 86400  # 5-00:00:00
    # Elapsed 03:33:25 = 12805 s = End 2019-08-01T02:02:39 - Start 2019-07-31T22:29:14
    assert j["elapsed_s"] == j["wall_s"] == seconds(recs[0]["Elapsed"]) == 12805
    assert (at(recs[0]["End"]) - at(recs[0]["Start"])).total_seconds() == 12805
    assert (j["ncpus"], j["nnodes"], j["nodes"], j["never_ran"]) == (2, 1, ["pe2"], 0)
    assert (j["start_ts"] - j["submit_ts"]).total_seconds() == 1
    assert steps_of(wh, "43974388") == {
        "batch": ("CANCELLED", 0, 9, 12836, 1, 2),  # 03:33:56, ExitCode 0:9 (SIGKILL)
        "0": ("COMPLETED", 0, 0, 0, 1, 2),
    }
    k = job(wh, "43977780")
    assert (k["state"], k["cancelled_by_uid"], k["timelimit_s"], k["elapsed_s"]) == ("CANCELLED", 1300204, 60, 17)
    assert k["end_ts"] is None and k["never_ran"] == 0  # End Unknown, but it ran on pe2 from 00:35:27
    # its .batch step: COMPLETED, Start and End Unknown, Elapsed 00:00:17
    assert steps_of(wh, "43977780") == {"batch": ("COMPLETED", 0, 0, 17, 1, 1)}


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_slurm2sql_cancelled_job_with_end_unknown_counts_its_elapsed(wh, dsn):
    """Job 43977780 (interactive, CANCELLED by 1300204): Start 2019-08-01T00:35:27, End Unknown, Elapsed 17 s,
    1 CPU. It held its CPU for 17 s. (Found by this file: the job model ended a final run's usage at End
    alone, so this run counted 0 s.)"""
    load_sacct(wh, SLURM2SQL / "test-data1.csv", tz="UTC")
    k = job(wh, "43977780")
    assert k["wall_s"] == 17
    assert k["usage_end_ts"] == datetime(2019, 8, 1, 0, 35, 44, tzinfo=UTC)
    cli("--warehouse", dsn, "etl", "sacct", "--timezone", "UTC", str(SLURM2SQL / "test-data1.csv"))
    s = summary_json(dsn, "2019-07-31", "2019-08-01")
    assert s["cpu_hours"] == pytest.approx((2 * 12805 + 1 * 17) / 3600)
    assert s["jobs_ended"] == 2


# ---------------------------------------------------------------- sonar (UiO, Fox, 2025)

def sonar_expectations(tz: str = "Europe/Oslo") -> dict:
    """Per-job facts and whole-file totals from the raw lines. A job ran if it has a Start and nodes; running
    jobs (End Unknown) count up to Start + ElapsedRaw, ended ones to End."""
    recs = raw_records(SONAR, fields=SONAR_FIELDS)
    jobs = [r for r in recs if not is_step(r)]
    final = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"}
    e = {"records": len(recs), "jobs": len(jobs), "steps": len(recs) - len(jobs), "states": {},
         "started": 0, "ended": 0, "cancelled_before_start": 0, "cpu_s": 0, "gpu_s": 0, "node_s": 0, "wait_s": 0}
    for r in jobs:
        state = r["State"].split(" ")[0]
        e["states"][state] = e["states"].get(state, 0) + 1
        start, end, submit = at(r["Start"], tz), at(r["End"], tz), at(r["Submit"], tz)
        ran = start is not None and r["NodeList"] not in ("", "None assigned")
        if state in final and not ran:
            e["cancelled_before_start"] += 1
        if not ran or state == "PENDING":
            continue
        e["started"] += 1
        e["wait_s"] += (start - submit).total_seconds()
        if state in final:
            e["ended"] += 1
            held = (end - start).total_seconds()
        else:
            held = int(r["ElapsedRaw"])
        e["cpu_s"] += tres(r["AllocTRES"], "cpu") * held
        e["gpu_s"] += tres(r["AllocTRES"], "gres/gpu") * held
        e["node_s"] += tres(r["AllocTRES"], "node") * held
    return e


def test_sonar_fox_whole_file(wh):
    e = sonar_expectations()
    # by hand from the file: 301 lines, 122 jobs (49 COMPLETED, 32 RUNNING, 31 PENDING, 5 CANCELLED by a uid,
    # 3 TIMEOUT, 2 FAILED), 179 steps
    assert (e["records"], e["jobs"], e["steps"]) == (301, 122, 179)
    assert e["states"] == {"COMPLETED": 49, "RUNNING": 32, "PENDING": 31, "CANCELLED": 5, "TIMEOUT": 3, "FAILED": 2}
    r = load_sacct(wh, SONAR, fields=parse_fields(SONAR_FIELDS), tz="Europe/Oslo", cluster="fox")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (301, 122, 179, 0)
    assert dict(rows(wh, "SELECT state, count() FROM fct_job_run GROUP BY state")) == e["states"]

    # every job's CPU, GPU and node counts are AllocTRES's (the file has no NCPUS/NNodes fields)
    want = {r["JobID"]: (tres(r["AllocTRES"], "cpu"), tres(r["AllocTRES"], "gres/gpu"), tres(r["AllocTRES"], "node"))
            for r in raw_records(SONAR, fields=SONAR_FIELDS) if not is_step(r)}
    assert {j: (c, g, n) for j, c, g, n in rows(wh, "SELECT job_id, ncpus, gpus, nnodes FROM fct_job_run")} == want
    # typed GRES: gres/gpu:a100_80=4,gres/gpu=4
    g = job(wh, "1902893")
    assert (g["gpus"], g["gpu_type"], g["ncpus"], g["alloc_mem_mib"]) == (4, "a100_80", 48, 384 * 1024)
    # each GPU job's type is its typed GRES (43 jobs on gpu-10 have untyped gres/gpu=1 only: type unknown, '')
    types = {r["JobID"]: "+".join(re.findall(r"gres/gpu:([^=,]+)=", r["AllocTRES"]))
             for r in raw_records(SONAR, fields=SONAR_FIELDS) if not is_step(r) and tres(r["AllocTRES"], "gres/gpu")}
    assert set(types.values()) == {"", "a100", "a100_80", "a40", "l40s", "rtx30"}
    assert sum(1 for t in types.values() if t == "") == 43
    assert dict(rows(wh, "SELECT job_id, gpu_type FROM fct_job_run WHERE gpus > 0")) == types


def test_sonar_fox_jobs(wh):
    load_sacct(wh, SONAR, fields=parse_fields(SONAR_FIELDS), tz="Europe/Oslo", cluster="fox")
    # 1879824: RUNNING on gpu-2, submitted 2025-09-07T22:16:06 and started 2025-09-12T14:06:12 Oslo time (CEST,
    # UTC+2); ElapsedRaw 1192379 s (13 d 19:12:59) at the time sacct ran; TimelimitRaw 20160 min = 14 days
    j = job(wh, "1879824")
    assert j["state"] == "RUNNING" and j["is_final"] == 0 and j["end_ts"] is None
    assert j["submit_ts"] == datetime(2025, 9, 7, 20, 16, 6, tzinfo=UTC)
    assert j["start_ts"] == datetime(2025, 9, 12, 12, 6, 12, tzinfo=UTC)
    assert j["usage_end_ts"] == datetime(2025, 9, 26, 7, 19, 11, tzinfo=UTC)  # start + 1192379 s
    assert j["timelimit_s"] == 14 * 86400
    assert (j["gpus"], j["gpu_type"], j["ncpus"], j["nodes"], j["account"], j["user"]) == (
        1, "a100", 32, ["gpu-2"], "ac10000", "uc-10000")
    assert set(steps_of(wh, "1879824")) == {"batch", "extern"}
    assert set(steps_of(wh, "1902893")) == {"interactive", "extern"}
    # 1956908: CANCELLED by 2103426 after 79 s on c1-[9-10] (two CPU nodes)
    c = job(wh, "1956908")
    assert (c["state"], c["cancelled_by_uid"], c["nodes"], c["wall_s"], c["never_ran"]) == (
        "CANCELLED", 2103426, ["c1-9", "c1-10"], 79, 0)
    # 1956890: CANCELLED by 2101037 while pending: Start None, NodeList None assigned
    n = job(wh, "1956890")
    assert (n["cancelled_by_uid"], n["never_ran"], n["start_ts"], n["nodes"], n["wall_s"]) == (2101037, 1, None, [], 0)
    # 1903070: PENDING, Start/End Unknown, no AllocTRES
    p = job(wh, "1903070")
    assert (p["state"], p["start_ts"], p["nodes"], p["ncpus"], p["gpus"], p["timelimit_s"]) == (
        "PENDING", None, [], 0, 0, 2879 * 60)
    # the one reservation: 1956881 (llmtest-2)
    assert rows(wh, "SELECT job_id, reservation FROM fct_job_run WHERE reservation != ''") == [("1956881", "llmtest-2")]


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_sonar_fox_summary_totals(dsn):
    e = sonar_expectations()
    cli("--warehouse", dsn, "etl", "sacct", "--fields", SONAR_FIELDS, "--timezone", "Europe/Oslo",
        "--cluster", "fox", str(SONAR))
    s = summary_json(dsn, "2025-09-01", "2025-09-30", "Europe/Oslo")  # every Submit is 2025-09-07..26
    # 55 ended (49 + 3 + 2 + 1 cancelled after 79 s), 4 cancelled while pending, 32 running
    assert (e["started"], e["ended"], e["cancelled_before_start"]) == (87, 55, 4)
    assert (s["jobs_started"], s["jobs_ended"], s["jobs_cancelled_before_start"]) == (87, 55, 4)
    assert s["cpu_hours"] == pytest.approx(e["cpu_s"] / 3600)
    assert s["gpu_h"] == pytest.approx(e["gpu_s"] / 3600)
    assert s["node_hours"] == pytest.approx(e["node_s"] / 3600)
    assert s["wait_hours"] == pytest.approx(e["wait_s"] / 3600)


# ---------------------------------------------------------------- VCell (UConn Health, mantis, Slurm 23.11.10)

def test_vcell_sacct_json_2311_steps_are_named_by_their_step(wh):
    """Slurm 23.11's sacct --json names a step "<job id>.<step>" ("2710593.batch"); it loaded as step
    "2710593.batch" of job 2710593 before (fixed in etl/sacct_json.py)."""
    doc = json.loads((VCELL / "sacct-json-multistep.json").read_text())
    assert doc["meta"]["slurm"]["release"] == "23.11.10"
    (src,) = doc["jobs"]
    want_steps = {s["step"]["id"].split(".", 1)[1]: s for s in src["steps"]}
    assert len(want_steps) == 22 and {"batch", "extern", "0", "19"} <= set(want_steps)

    r = load_sacct(wh, VCELL / "sacct-json-multistep.json")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (23, 1, 22, 0)
    j = job(wh, "2710593")
    assert (j["cluster"], j["partition"], j["qos"], j["account"], j["user"], j["job_name"]) == (
        "mantis", "vcell", "vcell", "pi-loew", "vcell", "V_ALPHA_321860411_0_0")
    assert j["state"] == "RUNNING" and j["is_final"] == 0 and j["end_ts"] is None  # time.end 0
    t = src["time"]
    assert j["submit_ts"] == j["start_ts"] == datetime.fromtimestamp(1786540675, UTC) == datetime(
        2026, 8, 12, 13, 17, 55, tzinfo=UTC)
    assert j["elapsed_s"] == t["elapsed"] == 46770
    assert j["usage_end_ts"] == datetime.fromtimestamp(1786540675 + 46770, UTC)
    assert j["timelimit_s"] == t["limit"]["number"] * 60 == 6912 * 60
    # tres.allocated: cpu 20, mem 163840 (MiB), node 1, billing 20; energy -2 (not counted)
    assert (j["ncpus"], j["nnodes"], j["gpus"], j["alloc_mem_mib"], j["billing"]) == (20, 1, 0, 163840, 20)
    assert j["nodes"] == ["mantis-041"]

    got = {s: (st, el, nt, nc) for s, st, el, nt, nc in rows(
        wh, "SELECT step_id, state, elapsed_s, ntasks, ncpus FROM slurm_job_step FINAL WHERE job_id = '2710593'")}
    assert got == {k: (s["state"][0], s["time"]["elapsed"], s["tasks"]["count"],
                       next(x["count"] for x in s["tres"]["allocated"] if x["type"] == "cpu"))
                   for k, s in want_steps.items()}
    assert got["0"] == ("RUNNING", 46763, 1, 1) and got["batch"] == ("RUNNING", 46770, 1, 20)
    assert rows(wh, "SELECT start_ts FROM slurm_job_step FINAL WHERE job_id = '2710593' AND step_id = '0'") == [
        (datetime(2026, 8, 12, 13, 18, 2),)]  # 1786540682


def test_vcell_three_field_dump_is_refused(wh, dsn):
    """JobID|JobName|State: no Submit, Start or End; refused naming them, nothing loaded."""
    assert (VCELL / "sacct-multistep-running.txt").read_text().split("\n")[0] == "JobID|JobName|State"
    with pytest.raises(OpsError) as e:
        load_sacct(wh, VCELL / "sacct-multistep-running.txt")
    msg = str(e.value)
    assert "refused" in msg and all(f in msg for f in ("Submit", "Start", "End"))
    assert nothing_loaded(wh)
    p = cli("--warehouse", dsn, "etl", "sacct", str(VCELL / "sacct-multistep-running.txt"), check=False)
    assert p.returncode != 0
    err = [ln for ln in p.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and all(f in err[0] for f in ("Submit", "Start", "End")), p.stderr


# ---------------------------------------------------------------- hpc-cost-simulator (AWS, ParallelCluster)

def test_aws_cancelled_before_start_and_invalid_state(wh):
    """issues/61: a job CANCELLED by uid 32874 before it started (Start `None`, no NodeList field) and the
    maintainers' copy of the line with state INVALID (quarantined); two blank lines."""
    recs = raw_records(AWS / "issues-61" / "sacct-output.txt", fields=AWS_FIELDS_PARTITION)
    assert [r["State"] for r in recs] == ["CANCELLED by 32874", "INVALID"]
    r = load_sacct(wh, AWS / "issues-61" / "sacct-output.txt", fields=parse_fields(AWS_FIELDS_PARTITION), tz="UTC")
    assert (r.records_read, r.jobs_loaded, r.steps_loaded, r.quarantined) == (2, 1, 0, 1)
    assert rows(wh, "SELECT line_no, reason FROM etl_quarantine FINAL") == [(4, "unknown job state 'INVALID'")]
    j = job(wh, "141")
    assert (j["state"], j["cancelled_by_uid"], j["partition"], j["start_ts"], j["never_ran"], j["wall_s"]) == (
        "CANCELLED", 32874, "us-east-1a_all", None, 1, 0)
    assert j["submit_ts"] == at("2022-09-09T17:39:14") and j["end_ts"] == at("2022-09-09T17:39:37")
    assert j["eligible_ts"] == at("2022-09-09T17:41:15")  # after Submit and End, as printed
    assert j["req_mem"] == "2T"


def test_aws_four_node_job_without_nodelist(wh):
    """multi-node: job 845 ran 301 s (Start 16:17:52, End 16:22:53, Elapsed 00:05:01) on AllocNodes 4 with
    NCPUS 4 and ended OUT_OF_MEMORY (ExitCode 0:125); CPUTime 00:20:04 = 1204 s = 4 x 301. The file has no
    NodeList and no NNodes field (AllocNodes instead), and two '#' comment lines (quarantined)."""
    recs = raw_records(AWS / "multi-node" / "sacct-output.txt", fields=AWS_FIELDS)
    j0 = recs[0]
    assert seconds(j0["CPUTime"]) == int(j0["AllocNodes"]) * seconds(j0["Elapsed"]) == 1204
    r = load_sacct(wh, AWS / "multi-node" / "sacct-output.txt", fields=parse_fields(AWS_FIELDS), tz="UTC")
    assert (r.jobs_loaded, r.steps_loaded, r.quarantined) == (1, 1, 2)
    assert [n for (n,) in rows(wh, "SELECT line_no FROM etl_quarantine FINAL ORDER BY line_no")] == [2, 3]
    j = job(wh, "845")
    assert (j["state"], j["exit_code"], j["exit_signal"]) == ("OUT_OF_MEMORY", 0, 125)
    assert (j["start_ts"] - j["submit_ts"]).total_seconds() == 103  # 16:16:09 -> 16:17:52
    assert j["elapsed_s"] == 301 and j["ncpus"] == 4
    assert j["never_ran"] == 0 and j["wall_s"] == 301
    assert j["nnodes"] == 4 and j["nodes"] == []  # the node count is known, the node names are not
    assert j["ncpus"] * j["wall_s"] == seconds(j0["CPUTime"])
    assert steps_of(wh, "845") == {"batch": ("OUT_OF_MEMORY", 0, 125, 301, None, 1)}
