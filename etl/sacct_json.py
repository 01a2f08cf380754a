"""``sacct --json`` (Slurm 21.08 – 23.11 schemas) -> the same named string fields as the text reader.

Schema differences handled: numbers that became ``{set, infinite, number}`` objects (22.05 -> 23.02),
``state.current`` and exit-code ``status`` that became lists (23.11), step ids as strings or objects.
Known 22.05 bugs, taken as they are (see docs/sources.md): exit codes of failed jobs printed as SUCCESS/0,
the reservation name printed as a garbage integer (dropped), unlimited time limits as null (UNLIMITED).
Jobs are turned into rows one by one here: json.load has already built one Python dict per job, so this
pass costs the same order as parsing; bulk history comes through the text path.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
from ops_warehouse.etl import sacct_contract

FIELDS = [
    "jobid", "jobidraw", "cluster", "partition", "qos", "account", "group", "user", "submit", "eligible",
    "start", "end", "elapsedraw", "timelimitraw", "exitcode", "state", "nnodes", "ncpus", "reqcpus",
    "reqmem", "reqtres", "alloctres", "nodelist", "reservation", "jobname", "ntasks",
]


def _num(v):
    """21.08/22.05 plain numbers, 23.x {set, infinite, number}; None when unset."""
    if isinstance(v, dict):
        if v.get("infinite"):
            return "inf"
        return v.get("number") if v.get("set", True) else None
    return v


def _text(v) -> str:
    """A field that must be text (or a number printed as one). A list or object there used to reach the
    frame builder and fail the whole file; now the job is quarantined as malformed (tests/test_fuzz_sacct.py)."""
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise TypeError(f"expected text, got {type(v).__name__}")
    return str(v)


def _id(v) -> int:
    """A job id: an integer from 0. A float id (1.5) read as job 1 step 5 before, and a negative one was
    dropped for the array id without a word (tests/test_fuzz_sacct.py)."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**64:
        raise TypeError(f"job id must be an integer, not {v!r}"[:200])
    return v


def _ts(v) -> str:
    v = _num(v)
    if not v or v == "inf":
        return "Unknown"
    return datetime.fromtimestamp(int(v), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _first(v):
    if isinstance(v, list):
        return v[0] if v else ""
    return v or ""


def _tres(items) -> str:
    out = []
    for t in items or []:
        kind, name, count = t.get("type"), t.get("name"), _num(t.get("count"))
        if count is None or (isinstance(count, (int, float)) and count < 0) or kind in ("energy", None):
            continue
        if kind == "mem":
            out.append(f"mem={count}M")
        elif name:
            out.append(f"{kind}/{name}={count}")
        else:
            out.append(f"{kind}={count}")
    return ",".join(out)


def _exit(ec) -> str:
    if not isinstance(ec, dict):
        return ""
    rc = _num(ec.get("return_code"))
    sig = ec.get("signal") or {}
    # 23.11: {"id": {number}, "name"}; 21.08/22.05: {"signal_id": N, "name"} (it read 0 there: a job killed
    # by SIGTERM loaded as 0:0, unlike its --parsable2 line's 0:15)
    sig_id = _num(sig.get("id", sig.get("signal_id"))) if isinstance(sig, dict) else None
    return f"{rc if rc is not None else 0}:{sig_id or 0}"


def _display_id(job) -> str:
    jid = _id(job.get("job_id"))
    arr = job.get("array") or {}
    task = _num(arr.get("task_id"))
    if arr.get("job_id") and task is not None and task != "inf":
        return f"{_id(arr['job_id'])}_{_id(task)}"
    if arr.get("job_id") and arr.get("task"):
        return f"{_id(arr['job_id'])}_[{_text(arr['task'])}]"
    het = job.get("het") or {}
    off = _num(het.get("job_offset"))
    if het.get("job_id") and off is not None:
        return f"{_id(het['job_id'])}+{_id(off)}"
    return str(jid)


def _job_row(job) -> dict:
    t = job.get("time") or {}
    limit = _num(t.get("limit"))
    tres = job.get("tres") or {}
    req = job.get("required") or {}
    resv = (job.get("reservation") or {}).get("name")
    alloc = _tres(tres.get("allocated"))
    cpus = next((_num(x.get("count")) for x in tres.get("allocated") or [] if x.get("type") == "cpu"), None)
    return {
        "jobid": _display_id(job),
        "jobidraw": str(job.get("job_id", "")),
        "cluster": _text(job.get("cluster")),
        "partition": _text(job.get("partition")),
        "qos": _text(job.get("qos")),
        "account": _text(job.get("account")),
        "group": _text(job.get("group")),
        "user": _text(job.get("user")),
        "submit": _ts(t.get("submission")),
        "eligible": _ts(t.get("eligible")),
        "start": _ts(t.get("start")),
        "end": _ts(t.get("end")),
        "elapsedraw": str(t.get("elapsed", "")),
        "timelimitraw": "UNLIMITED" if limit in (None, "inf") else str(limit),
        "exitcode": _exit(job.get("exit_code")),
        "state": _text(_first((job.get("state") or {}).get("current"))),
        "nnodes": _text(job.get("allocation_nodes")),
        "ncpus": str(cpus if cpus is not None else ""),
        "reqcpus": str(_num(req.get("CPUs")) or ""),
        "reqmem": str(_num(req.get("memory")) or ""),
        "reqtres": _tres(tres.get("requested")),
        "alloctres": alloc,
        "nodelist": _text(job.get("nodes")),
        # 22.05 prints the name as an integer: not a name
        "reservation": resv if isinstance(resv, str) else "",
        "jobname": _text(job.get("name")),
        "ntasks": "",
    }


def _step_rows(job, parent: dict) -> list[dict]:
    rows = []
    for st in job.get("steps") or []:
        sid = st.get("step") or {}
        step_id = sid.get("id")
        if isinstance(step_id, dict):  # 23.x: {"job_id": .., "step_id": ..}
            step_id = step_id.get("step_id")
        elif isinstance(step_id, str) and "." in step_id:
            # 23.11+ (data_parser v0.0.40 on): "<job id>.<step>", e.g. "2710593.batch"; it was stored as
            # step "2710593.batch" of job 2710593 (tests/test_sacct_other_sites.py, vcell's mantis capture)
            step_id = step_id.split(".", 1)[1]
        t = st.get("time") or {}
        nodes = st.get("nodes") or {}
        alloc = _tres((st.get("tres") or {}).get("allocated"))
        rows.append({
            **{k: "" for k in FIELDS},
            "jobid": f"{parent['jobid']}.{step_id}",
            "jobidraw": f"{parent['jobidraw']}.{step_id}",
            "cluster": parent["cluster"],
            "account": parent["account"],
            "jobname": _text(sid.get("name")),
            "state": _text(_first(st.get("state"))),
            "exitcode": _exit(st.get("exit_code")),
            "submit": _ts(t.get("start")),
            "start": _ts(t.get("start")),
            "end": _ts(t.get("end")),
            "elapsedraw": str(t.get("elapsed", "")),
            "nnodes": str(nodes.get("count", "")),
            "alloctres": alloc,
            "nodelist": _text(nodes.get("range")) or ",".join(_text(n) for n in nodes.get("list") or []),
            "ntasks": str((st.get("tasks") or {}).get("count", "")),
        })
    return rows


def read_json(text: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(records, quarantine) for one ``sacct --json`` document; raises ValueError if it is not one."""
    try:
        doc = json.loads(text)
    except RecursionError:  # deeply nested arrays: json.loads raised this past the loader (tests/test_fuzz_sacct.py)
        raise ValueError("nested too deeply to be sacct --json output") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ValueError("not sacct --json output (no 'jobs' list)")
    # the input contract, on the document's keys before any row is built (etl/sacct_contract.py): raises
    # Refused when no job has a required key; the fields no job has are left out, as absent from a text dump
    absent = sacct_contract.check_json(doc["jobs"])
    rows, bad = [], []
    for i, job in enumerate(doc["jobs"], start=1):
        raw = json.dumps(job, ensure_ascii=False)[:4000]
        try:
            row = _job_row(job)
            steps = _step_rows(job, row)
        except (AttributeError, TypeError, ValueError, KeyError, OverflowError, OSError) as e:
            bad.append({"line_no": i, "reason": f"job #{i}: malformed ({type(e).__name__}: {e})", "raw": raw})
            continue
        for r in [row, *steps]:
            r["line_no"], r["raw"] = i, raw
            rows.append(r)
    schema = {"line_no": pl.UInt64, "raw": pl.String, **{f: pl.String for f in FIELDS}}
    records = pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
    records = records.drop(absent)
    quarantine = pl.DataFrame(bad, schema={"line_no": pl.UInt64, "reason": pl.String, "raw": pl.String})
    return records, quarantine
