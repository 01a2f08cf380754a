"""``sacct --json`` (Slurm 21.08 – 23.11 schemas) -> the same named string fields as the text reader.

Schema differences handled: numbers that became ``{set, infinite, number}`` objects (22.05 -> 23.02),
``state.current`` and exit-code ``status`` that became lists (23.11), step ids as strings or objects.
Known 22.05 bugs, taken as they are (see docs/sources.md): exit codes of failed jobs printed as SUCCESS/0,
the reservation name printed as a garbage integer (dropped), unlimited time limits as null (UNLIMITED).
Jobs are turned into rows one by one here: the decoder has already built one Python dict per job, so this
pass costs the same order as parsing; bulk history comes through the text path.

A document is read from its file a piece at a time (``iter_jobs``: the decoder on one job at a time), so the
memory a load holds is a chunk of jobs, not the document (issue 50: ``path.read_text`` held all of it, and
``json.loads`` a Python dict per job of it). It is read twice: once to check it (well-formed to its end,
and the input contract over all its jobs), once to build the chunks; a broken document loads nothing.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

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


# a chunk of a streamed document: jobs up to 8 M characters of JSON (a job of sacct --json is 2-8 kB: 1,000
# to 4,000 jobs, ~0.1 GB of Python objects), or 20,000 jobs at most (each job with its steps, a few rows)
CHUNK_CHARS = 8 << 20
CHUNK_JOBS = 20_000
_READ_CHARS = 1 << 20
_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


class _Stream:
    """A JSON text read from a file a piece at a time: ``buf[pos:]`` is what is not yet consumed."""

    def __init__(self, f):
        self.f = f
        self.dec = codecs.getincrementaldecoder("utf-8-sig")()  # -sig: skips a byte order mark
        self.buf, self.pos, self.eof = "", 0, False
        # where buf starts in the document: characters and lines before it, and where its line began (an
        # error names its place in the document, as json.loads names it)
        self.base, self.lines, self.line_start = 0, 0, 0

    def more(self, chars: int) -> None:
        data = self.f.read(chars)
        n = self.buf.count("\n", 0, self.pos)
        if n:
            self.lines += n
            self.line_start = self.base + self.buf.rindex("\n", 0, self.pos) + 1
        self.base += self.pos
        self.buf = self.buf[self.pos:] + self.dec.decode(data, final=not data)
        self.pos, self.eof = 0, not data

    def error(self, e: json.JSONDecodeError | str) -> ValueError:
        """json.loads's message for an error here: what, and its line, column and character in the document."""
        if isinstance(e, str):
            e = json.JSONDecodeError(e, self.buf, self.pos)
        at = self.base + e.pos
        line = self.lines + self.buf.count("\n", 0, e.pos) + 1
        k = self.buf.rfind("\n", 0, e.pos)
        col = e.pos - k if k >= 0 else at - self.line_start + 1
        return ValueError(f"{e.msg}: line {line} column {col} (char {at})")

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the text)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos:self.pos + 1]
            self.more(_READ_CHARS)

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise self.error(f"Expecting {chars[0]!r} delimiter")
        self.pos += 1
        return c

    def value(self):
        """The next JSON value, decoded whole. A value that runs past what was read reads more (twice as
        much each time, so a huge value costs a few decodes, not one per piece); one that ends exactly where
        the text read ends may go on (a number) and is decoded again with more."""
        self.peek()
        chars = _READ_CHARS
        while True:
            try:
                v, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self.eof:
                    raise self.error(e) from None
                v, end = None, -1
            except RecursionError:  # deeply nested arrays (tests/test_fuzz_sacct.py)
                raise ValueError("nested too deeply to be sacct --json output") from None
            if end >= 0 and (end < len(self.buf) or self.eof):
                self.pos = end
                return v
            self.more(chars)
            chars *= 2


def iter_jobs(path: Path, at: list[int] | None = None) -> Iterator:
    """The elements of a ``sacct --json`` document's ``jobs`` list, one at a time, read from the file as they
    are needed; the rest of the document (meta, errors, warnings) is decoded and dropped. ``at``, when given,
    holds the number of characters read through the job last yielded (``at[0]``). Raises ValueError
    (UnicodeDecodeError for bytes that are not UTF-8) where json.loads would refuse the document, or when it
    has no ``jobs`` list."""
    with open(path, "rb") as f:
        s = _Stream(f)
        if s.peek() != "{":  # (not decoded further: a top-level list may be as large as the file)
            raise ValueError("not sacct --json output (no 'jobs' list)")
        s.expect("{")
        seen_jobs = False
        if s.peek() == "}":
            s.expect("}")
        else:
            while True:
                if s.peek() != '"':
                    raise s.error("Expecting property name enclosed in double quotes")
                key = s.value()
                s.expect(":")
                if key == "jobs" and s.peek() == "[":
                    if seen_jobs:  # json.loads keeps the last of two; two lists are not sacct's output
                        raise ValueError("two 'jobs' lists in one document")
                    seen_jobs = True
                    s.expect("[")
                    if s.peek() == "]":
                        s.expect("]")
                    else:
                        while True:
                            job = s.value()
                            if at is not None:
                                at[0] = s.base + s.pos
                            yield job
                            if s.expect(",]") == "]":
                                break
                else:
                    s.value()
                    if key == "jobs":  # (json.loads keeps the last: this one, which is no list)
                        seen_jobs = False
                if s.expect(",}") == "}":
                    break
        if s.peek():
            raise s.error("Extra data")
        if not seen_jobs:
            raise ValueError("not sacct --json output (no 'jobs' list)")


def check_file(path: Path) -> list[str]:
    """Read a ``sacct --json`` file through once: raises ValueError (or UnicodeDecodeError) if it is not a
    well-formed document, sacct_contract.Refused if it lacks what every job needs; else returns the text
    fields none of its jobs has (left out of its records, as absent from a text dump)."""
    seen = sacct_contract.JsonKeys()
    for job in iter_jobs(path):
        seen.add(job)
    return seen.absent()


def read_json_file(path: Path) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """(records, quarantine) per chunk (``CHUNK_CHARS``, ``CHUNK_JOBS``) of a ``sacct --json`` file, each job
    with its steps in one chunk, after ``check_file`` found it whole; memory is a chunk's, whatever the file's
    size."""
    absent = check_file(path)
    at = [0]
    first, start, batch = 1, 0, []
    for job in iter_jobs(path, at):
        batch.append(job)
        if len(batch) >= CHUNK_JOBS or at[0] - start >= CHUNK_CHARS:
            yield _frames(batch, first, absent)
            first, start, batch = first + len(batch), at[0], []
    if batch:
        yield _frames(batch, first, absent)


def read_json(text: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(records, quarantine) for one ``sacct --json`` document held as text; raises ValueError if it is not one."""
    try:
        doc = json.loads(text)
    except RecursionError:  # deeply nested arrays: json.loads raised this past the loader (tests/test_fuzz_sacct.py)
        raise ValueError("nested too deeply to be sacct --json output") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ValueError("not sacct --json output (no 'jobs' list)")
    # the input contract, on the document's keys before any row is built (etl/sacct_contract.py): raises
    # Refused when no job has a required key; the fields no job has are left out, as absent from a text dump
    absent = sacct_contract.check_json(doc["jobs"])
    return _frames(doc["jobs"], 1, absent)


def _frames(jobs: Iterable, first: int, absent: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(records, quarantine) of jobs numbered from ``first`` (a job's number is its records' line_no)."""
    rows, bad = [], []
    for i, job in enumerate(jobs, start=first):
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
