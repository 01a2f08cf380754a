"""What a sacct input must hold, checked on its field list (text) or its jobs' keys (``--json``) before any
row is read, and what the loader does when an optional field is absent (docs/sources.md, "Input contract").

- Required: JobID (or JobIDRaw), State, Submit, Start and End. Without one of them no record of the file
  can be a job: the JobID and Submit are the job's key (a requeued run or a reused id differs by Submit),
  State says whether it ran and whether it is final, Start and End are when it held its resources. A file
  without one is refused in one line naming what is missing, and nothing of it is loaded (before, a dump
  without State quarantined every line one by one and exited 0; one without Submit loaded the steps of jobs
  that were all quarantined).
- Optional: absent is not empty. A field missing from the file is never read as a value (a missing NodeList
  was taken for "None assigned", and jobs that ran for hours loaded as never run); each has a stated
  default (``defaults``), which the load's summary line names once.
- Steps load with their job only (``StepParents``): a step whose job line was not loaded from the same input
  before it is quarantined.
"""

from __future__ import annotations

import polars as pl
from ops_warehouse.errors import OpsError

# field (lower case) -> its name as sacct's --format spells it
NAMES = {
    "jobid": "JobID", "jobidraw": "JobIDRaw", "state": "State", "submit": "Submit", "start": "Start",
    "end": "End", "cluster": "Cluster", "account": "Account", "user": "User", "partition": "Partition",
    "qos": "QOS", "alloctres": "AllocTRES", "ncpus": "NCPUS", "nnodes": "NNodes", "nodelist": "NodeList",
    "elapsed": "Elapsed", "elapsedraw": "ElapsedRaw",
}
# each entry: the fields any one of which will do
REQUIRED = (("jobid", "jobidraw"), ("state",), ("submit",), ("start",), ("end",))
# sacct --json: the keys of a job object standing for them
JSON_REQUIRED = (("job_id",), ("state",), ("time", "submission"), ("time", "start"), ("time", "end"))
# text field -> the key path of a sacct --json job it is read from (sacct_json._job_row)
JSON_KEYS = {
    "cluster": ("cluster",), "partition": ("partition",), "qos": ("qos",), "account": ("account",),
    "group": ("group",), "user": ("user",), "eligible": ("time", "eligible"), "elapsedraw": ("time", "elapsed"),
    "timelimitraw": ("time", "limit"), "exitcode": ("exit_code",), "nnodes": ("allocation_nodes",),
    "ncpus": ("tres", "allocated"), "alloctres": ("tres", "allocated"), "reqtres": ("tres", "requested"),
    "reqcpus": ("required", "CPUs"), "reqmem": ("required", "memory"), "nodelist": ("nodes",),
    "reservation": ("reservation",), "jobname": ("name",),
}
# The fields ops-report asks sacct for when it runs it.
SACCT_FORMAT = (
    "jobidraw,jobid,cluster,partition,qos,account,group,gid,user,uid,submit,eligible,start,end,elapsedraw,"
    "timelimitraw,exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqtres,alloctres,nodelist,reservation,jobname,"
    "totalcpu,maxrss"
)
# text fields whose absence gives a report dimension the value "unknown"
UNKNOWN_IF_ABSENT = ("account", "user", "partition", "qos")


def hint() -> str:
    """The sacct command whose output has every field the loader reads."""
    return f"sacct --allusers --duplicates --parsable2 --format={SACCT_FORMAT}"


class Refused(OpsError):
    """The input lacks a field every job record needs: nothing of it is loaded."""


def missing_fields(fields: list[str]) -> list[str]:
    """The required fields (as sacct spells them) that ``fields`` lacks."""
    have = set(fields)
    return [" or ".join(NAMES[f] for f in alts) for alts in REQUIRED if not have.intersection(alts)]


def check_fields(fields: list[str], where: str) -> None:
    """Refuse a text input whose header (or --fields list) lacks a required field."""
    missing = missing_fields(fields)
    if missing:
        raise Refused(f"{where}: refused, missing sacct field{'s' if len(missing) > 1 else ''} "
                      f"{', '.join(missing)} (every job record needs JobID or JobIDRaw, State, Submit, Start and "
                      f"End); nothing was loaded; export with: {hint()}")


def _has(job: dict, path: tuple[str, ...]) -> bool:
    """The job has the key path; a value of the wrong type on the way (``"time": "x"``) counts as present:
    that is one malformed job, quarantined as such, not a field the document lacks."""
    o = job
    for k in path:
        if not isinstance(o, dict):
            return True
        if k not in o:
            return False
        o = o[k]
    return True


def _readable_id(job) -> bool:
    v = job.get("job_id")
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64


def check_json(jobs: list) -> list[str]:
    """For a ``sacct --json`` document: refuse it when none of its jobs has a required key, else return the
    text fields none of its jobs has (absent from the document, as a column missing from a text dump).

    Decided over the document's job objects with a readable job id: a key that only some jobs lack is
    those jobs' fault (each is quarantined or loads with an empty value, as before); a document whose
    jobs are all unreadable has nothing to decide on and each job is quarantined."""
    seen = JsonKeys()
    for job in jobs:
        seen.add(job)
    return seen.absent()


class JsonKeys:
    """``check_json`` one job at a time, for a document read as a stream (etl/sacct_json.py): what it keeps is
    which keys were seen, not the jobs."""

    def __init__(self):
        self.objs = self.with_id = self.good = False
        self.required = [p for p in JSON_REQUIRED[1:]]  # not seen yet in a job with a readable id
        self.optional = dict(JSON_KEYS)

    def add(self, job) -> None:
        if not isinstance(job, dict):
            return
        self.objs = True
        self.with_id = self.with_id or "job_id" in job
        if not _readable_id(job):
            return
        self.good = True
        if self.required:
            self.required = [p for p in self.required if not _has(job, p)]
        if self.optional:
            self.optional = {f: p for f, p in self.optional.items() if not _has(job, p)}

    def absent(self) -> list[str]:
        """The text fields no job has; raises Refused when no job has a required key."""
        if self.objs and not self.with_id:
            missing = ["job_id"]
        elif not self.good:
            return []
        else:
            missing = [".".join(p) for p in self.required]
            if not missing:
                return list(self.optional)
        raise Refused(f"refused, no job of this sacct --json document has {', '.join(missing)} (every job record "
                      "needs job_id, state and time.submission, time.start, time.end); nothing was loaded; export "
                      f"with sacct --json (Slurm 21.08 or later) or: {hint()}")


def defaults(columns: list[str], cluster: str, json: bool = False) -> list[str]:
    """What the load fills in for optional fields the input lacks, one phrase each, for its summary line
    (normalize applies the same rules)."""
    have = set(columns)
    if not have & {"jobid", "jobidraw"}:
        return []  # no records (an unreadable document)

    def field(f: str) -> str:
        return ".".join(JSON_KEYS[f]) if json else NAMES[f]

    out = []
    if "cluster" not in have:
        out.append(f"cluster={cluster} (no {field('cluster')} field)")
    out += [f"{f}=unknown (no {field(f)} field)" for f in UNKNOWN_IF_ABSENT if f not in have]
    if "alloctres" not in have:
        out.append(f"gpus=0 (no {field('alloctres')} field)")
        if "ncpus" not in have:
            out.append(f"ncpus=0 (no {'NCPUS or ' if not json else ''}{field('alloctres')} field)")
    if "nnodes" not in have and "alloctres" not in have:
        out.append(f"nnodes from the node list (no {field('nnodes')} field)" if "nodelist" in have
                   else f"nnodes=0 (no {field('nnodes')}, {field('alloctres')} or {field('nodelist')} field)")
    if "nodelist" not in have:
        out.append(f"nodes unknown, ran = has a Start (no {field('nodelist')} field)")
    if not have & {"elapsed", "elapsedraw"}:
        out.append(f"elapsed=End-Start (no {field('elapsedraw') if json else 'Elapsed'} field)")
    return out


class StepParents:
    """Steps load with their job only. A step (``123.batch``) loads when a job line of the same cluster and
    JobID was loaded from the same input before it (sacct prints each job's line, then its steps; with
    --duplicates each run of a requeued job is followed by its own steps); otherwise it is quarantined.
    The jobs of the last chunk read are remembered (and those whose steps it held), so a job's steps may
    run on across chunk boundaries; memory stays one chunk's job keys."""

    REASON = "step of a job not loaded from this input (its job line is absent or quarantined)"
    _KEY = ["cluster", "job_id"]

    def __init__(self):
        self.carry = pl.DataFrame(schema={"cluster": pl.String, "job_id": pl.String})

    def split(self, runs: pl.DataFrame, steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(steps that load, line numbers of the orphans) for one chunk's normalized runs and steps."""
        first = runs.group_by(self._KEY).agg(_first=pl.col("source_line").min())
        if steps.height:
            flagged = (
                steps.join(first, on=self._KEY, how="left", nulls_equal=True)
                .join(self.carry.with_columns(_carried=pl.lit(True)), on=self._KEY, how="left", nulls_equal=True)
                .with_columns(_ok=(pl.col("_first") <= pl.col("source_line")).fill_null(False)
                              | pl.col("_carried").fill_null(False))
            )
            ok = flagged.filter(pl.col("_ok")).select(steps.columns)
            orphans = flagged.filter(~pl.col("_ok")).select(line_no=pl.col("source_line"))
        else:
            ok, orphans = steps, pl.DataFrame(schema={"line_no": pl.UInt64})
        self.carry = pl.concat([first.select(self._KEY), ok.select(self._KEY)]).unique()
        return ok, orphans
