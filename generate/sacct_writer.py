"""Simulated runs -> what `sacct --parsable2 --duplicates` prints, as of a given time, for a window.

The one sacct writer of the package: the scheduled generator (``generate.generate``) and the volume dump
for benchmarks (``generate.volume.write_sacct_dump``) both hand it a frame of runs (the columns of
``History.runs``, see :func:`sacct_lines`) and it prints the job and step lines.

The nightly cron runs sacct for the day just ended; a job still running then shows RUNNING with End
Unknown, and the next nights' extracts show it again until it ends. ``sacct_text(..., as_of, window)``
reproduces that: runs that were pending or running in the window, each in the state it had at ``as_of``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import polars as pl
from ops_warehouse.etl.sacct_contract import SACCT_FORMAT

HEADER_NAMES = {
    "jobidraw": "JobIDRaw", "jobid": "JobID", "cluster": "Cluster", "partition": "Partition", "qos": "QOS",
    "account": "Account", "group": "Group", "gid": "GID", "user": "User", "uid": "UID", "submit": "Submit",
    "eligible": "Eligible", "start": "Start", "end": "End", "elapsedraw": "ElapsedRaw",
    "timelimitraw": "TimelimitRaw", "exitcode": "ExitCode", "state": "State", "nnodes": "NNodes",
    "ncpus": "NCPUS", "reqcpus": "ReqCPUS", "reqmem": "ReqMem", "reqtres": "ReqTRES", "alloctres": "AllocTRES",
    "nodelist": "NodeList", "reservation": "Reservation", "jobname": "JobName", "totalcpu": "TotalCPU",
    "maxrss": "MaxRSS",
}
# what the loader asks sacct for, and the CPU time and peak memory of each step, from which CPU and memory
# efficiency are computed (issue 52: TotalCPU / (NCPUS x elapsed), the steps' largest MaxRSS / ReqMem)
FIELDS = SACCT_FORMAT.split(",") + [f for f in ("totalcpu", "maxrss") if f not in SACCT_FORMAT.split(",")]
HEADER = "|".join(HEADER_NAMES[f] for f in FIELDS)
_NUM = re.compile(r"^(.*?)(\d+)$")


@lru_cache(maxsize=None)
def compress_hostlist(nodes: tuple[str, ...]) -> str:
    """['h100-001', 'h100-002', 'h100-004'] -> 'h100-[001-002,004]' (one prefix; others comma-joined)."""
    if len(nodes) == 1:
        return nodes[0]
    groups: dict[tuple[str, int], list[int]] = {}
    plain = []
    for n in nodes:
        m = _NUM.match(n)
        if not m:
            plain.append(n)
            continue
        groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    parts = []
    for (prefix, width), nums in groups.items():
        nums.sort()
        ranges, lo = [], nums[0]
        for a, b in zip(nums, nums[1:] + [None]):
            if b != a + 1:
                ranges.append(f"{lo:0{width}d}" if lo == a else f"{lo:0{width}d}-{a:0{width}d}")
                lo = b
        parts.append(f"{prefix}{ranges[0]}" if len(nums) == 1 else f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts + plain)


def _ts(e: pl.Expr) -> pl.Expr:
    return pl.from_epoch(e, "s").dt.strftime("%Y-%m-%dT%H:%M:%S")


def _cpu_time(s: pl.Expr) -> pl.Expr:
    """Seconds as sacct prints TotalCPU: ``MM:SS.mmm`` under an hour, ``HH:MM:SS``, ``D-HH:MM:SS`` from a day."""
    two = lambda e: e.cast(pl.String).str.zfill(2)  # noqa: E731
    hms = two(s % 86400 // 3600) + ":" + two(s % 3600 // 60) + ":" + two(s % 60)
    return (pl.when(s < 3600).then(two(s // 60) + ":" + two(s % 60) + ".000")
            .when(s < 86400).then(hms).otherwise((s // 86400).cast(pl.String) + "-" + hms))


def sacct_lines(runs: pl.DataFrame, *, cluster: str, as_of: int, cpus_per_gpu: int | None = None,
                mem_per_gpu_mib: int | None = None, window: tuple[int, int] | None = None,
                steps: bool = True) -> pl.DataFrame:
    """The sacct --parsable2 lines (one column ``line``, no header) of the runs, in their state at ``as_of``.

    ``runs`` has the columns of ``History.runs`` (generate/schedule.py): run_idx (output order), job_id_raw,
    job_id (``123_4`` for an array task), array_job_id (0 if none), name, user, uid, account, gid,
    partition (also the GPU type in the TRES), qos, submit, start, end (epoch s; start null if the job never
    started, end null if it had not ended), state (the final one), exit, gpus, timelimit_min (null:
    UNLIMITED), nodes (list of node names; empty if it never ran) and reservation. Optional columns override
    what is otherwise derived: cpus and mem_mib per run (else gpus × ``cpus_per_gpu`` / ``mem_per_gpu_mib``),
    group (else the account) and cancelled_by (the uid in ``CANCELLED by``; else the job's own uid).
    Each run that ran also gets ``.batch`` and ``.extern`` step lines, and a multi-node one ``.0``. With
    ``cpu_eff`` and ``mem_eff`` columns (generate/workload.py) an ended run's TotalCPU is cpu_eff x CPUs x
    elapsed (whole seconds), all of it in the step that did the work (``.batch``, or ``.0`` on several
    nodes; the job line the sum of its steps) and that step's MaxRSS mem_eff x ReqMem (KiB); a run not ended
    shows 00:00:00 and no MaxRSS, as sacct does before its steps end; without them both are blank.
    """
    r = runs.filter(pl.col("submit") <= as_of)
    if window is not None:
        w0, w1 = window
        # sacct without --state: jobs eligible (pending) or running at some time in the window
        r = r.filter(pl.col("submit") < w1, pl.coalesce(pl.col("end"), pl.lit(2**62)) >= w0)
    started = pl.col("start").is_not_null() & (pl.col("start") <= as_of)
    ended = pl.col("end").is_not_null() & (pl.col("end") <= as_of)
    ran = started & (pl.col("nodes").list.len() > 0)
    r = r.with_columns(
        _started=started, _ended=ended, _ran=ran,
        # a job cancelled while pending ended without starting: its final state too
        _state=pl.when(ended).then(pl.col("state")).when(started).then(pl.lit("RUNNING")).otherwise(pl.lit("PENDING")),
    )
    # hostlist expressions, compressed once per distinct node list (a few thousand, not one per run)
    lists = r.select(pl.col("nodes").unique())
    lists = lists.with_columns(_nodelist=pl.Series(
        [compress_hostlist(tuple(x)) if len(x) else "None assigned" for x in lists.get_column("nodes").to_list()],
        dtype=pl.String))
    r = r.join(lists, on="nodes", how="left")
    S = lambda c: pl.col(c).cast(pl.String)  # noqa: E731
    nnodes = pl.col("nodes").list.len()
    nnodes_req = (pl.col("gpus") + 7) // 8
    if ("cpus" not in r.columns and cpus_per_gpu is None) or ("mem_mib" not in r.columns and mem_per_gpu_mib is None):
        raise ValueError("runs without cpus/mem_mib columns need cpus_per_gpu and mem_per_gpu_mib")
    cpus = pl.col("cpus") if "cpus" in r.columns else pl.col("gpus") * cpus_per_gpu
    mem = (pl.col("mem_mib") if "mem_mib" in r.columns else pl.col("gpus") * mem_per_gpu_mib).cast(pl.String) + "M"
    gtype = pl.col("partition")
    alloc = ("billing=" + S("_cpus") + ",cpu=" + S("_cpus") + ",gres/gpu:" + gtype + "=" + S("gpus")
             + ",gres/gpu=" + S("gpus") + ",mem=" + mem + ",node=" + nnodes.cast(pl.String))
    req = ("billing=" + S("_cpus") + ",cpu=" + S("_cpus") + ",gres/gpu=" + S("gpus") + ",mem=" + mem
           + ",node=" + nnodes_req.cast(pl.String))
    end_shown = pl.when(pl.col("_ended")).then(pl.col("end")).otherwise(None)
    elapsed = pl.when(pl.col("_ended") & pl.col("_started")).then(pl.col("end") - pl.col("start")) \
        .when(pl.col("_started")).then(as_of - pl.col("start")).otherwise(0)
    cancelled_by = S("cancelled_by") if "cancelled_by" in r.columns else S("uid")
    state_txt = pl.when(pl.col("_state") == "CANCELLED").then("CANCELLED by " + cancelled_by).otherwise("_state")
    r = r.with_columns(_cpus=cpus, _elapsed=elapsed, _end=end_shown)
    if "cpu_eff" in r.columns and "mem_eff" in r.columns:
        done = pl.col("_ended") & pl.col("_started")
        mem_mib = pl.col("mem_mib") if "mem_mib" in r.columns else pl.col("gpus") * mem_per_gpu_mib
        mem_kib = mem_mib.cast(pl.Int64) * 1024  # (Int32 GPUs x MiB x 1024 overflows from 9 GPUs)
        r = r.with_columns(
            _cpu=pl.when(done).then(_cpu_time((pl.col("cpu_eff") * pl.col("_cpus") * pl.col("_elapsed"))
                                              .round(0).cast(pl.Int64))).otherwise(pl.lit("00:00:00")),
            _rss=pl.when(done).then((pl.col("mem_eff") * mem_kib).round(0).cast(pl.Int64).cast(pl.String) + "K")
            .otherwise(pl.lit("")),
            _idle_cpu=pl.when(done).then(pl.lit("00:00.000")).otherwise(pl.lit("00:00:00")),
            _idle_rss=pl.when(done).then(pl.lit("0")).otherwise(pl.lit("")))
    else:
        r = r.with_columns(_cpu=pl.lit(""), _rss=pl.lit(""), _idle_cpu=pl.lit(""), _idle_rss=pl.lit(""))
    jobid = pl.when(pl.col("array_job_id") > 0).then(pl.col("job_id")).otherwise(S("job_id_raw"))
    start_txt = pl.when(pl.col("_started")).then(_ts(pl.col("start")))
    # sacct prints Start = End for a job cancelled while pending
    start_txt = pl.when(pl.col("start").is_null() & pl.col("_ended")).then(_ts(pl.col("end"))) \
        .otherwise(start_txt).fill_null("Unknown")
    end_txt = pl.when(pl.col("_ended")).then(_ts(pl.col("end"))).otherwise(pl.lit("Unknown"))
    job = dict(
        jobidraw=S("job_id_raw"), jobid=jobid, cluster=pl.lit(cluster), partition=pl.col("partition"),
        qos=pl.col("qos"), account=pl.col("account"),
        group=pl.col("group") if "group" in r.columns else pl.col("account"), gid=S("gid"), user=pl.col("user"),
        uid=S("uid"), submit=_ts(pl.col("submit")), eligible=_ts(pl.col("submit")), start=start_txt, end=end_txt,
        elapsedraw=S("_elapsed"),
        timelimitraw=pl.when(pl.col("timelimit_min").is_null()).then(pl.lit("UNLIMITED")).otherwise(S("timelimit_min")),
        exitcode=pl.when(pl.col("_ended")).then(pl.col("exit")).otherwise(pl.lit("0:0")), state=state_txt,
        nnodes=pl.when(pl.col("_ran")).then(nnodes).otherwise(nnodes_req).cast(pl.String),
        ncpus=S("_cpus"), reqcpus=S("_cpus"), reqmem=mem, reqtres=req,
        alloctres=pl.when(pl.col("_ran")).then(alloc).otherwise(pl.lit("")),
        nodelist=pl.when(pl.col("_ran")).then(pl.col("_nodelist")).otherwise(pl.lit("None assigned")),
        reservation=pl.col("reservation"), jobname=pl.col("name"), totalcpu=pl.col("_cpu"), maxrss=pl.lit(""),
    )
    def line(d: dict) -> pl.Expr:
        return pl.concat_str([d[f] for f in FIELDS], separator="|").alias("line")

    frames = [r.select(pl.col("run_idx").alias("_k"), pl.lit(0).alias("_s"), line(job))]
    if steps:
        s = r.filter(pl.col("_ran"))
        blank = {f: pl.lit("") for f in ("partition", "qos", "group", "gid", "user", "uid", "timelimitraw",
                                          "reqtres", "reservation")}
        step_state = pl.when(~pl.col("_ended")).then(pl.lit("RUNNING")) \
            .when(pl.col("_state").is_in(["TIMEOUT", "PREEMPTED"])).then(pl.lit("CANCELLED")) \
            .otherwise(pl.col("_state"))
        base = {**job, **blank, "submit": start_txt, "eligible": start_txt}
        first = pl.col("nodes").list.first()
        per_node_cpus = (pl.col("_cpus") // nnodes).cast(pl.String)
        per_node_gpus = (pl.col("gpus") // nnodes).cast(pl.String)
        # the batch step runs on the first node with that node's share
        batch = {**base, "jobidraw": S("job_id_raw") + ".batch", "jobid": jobid + ".batch", "jobname": pl.lit("batch"),
                 "state": step_state, "nnodes": pl.lit("1"), "ncpus": per_node_cpus, "reqcpus": per_node_cpus,
                 "alloctres": "cpu=" + per_node_cpus + ",gres/gpu:" + gtype + "=" + per_node_gpus + ",gres/gpu="
                              + per_node_gpus + ",mem=" + mem + ",node=1",
                 "nodelist": first,
                 "totalcpu": pl.when(nnodes > 1).then(pl.col("_idle_cpu")).otherwise(pl.col("_cpu")),
                 "maxrss": pl.when(nnodes > 1).then(pl.col("_idle_rss")).otherwise(pl.col("_rss"))}
        extern = {**base, "jobidraw": S("job_id_raw") + ".extern", "jobid": jobid + ".extern",
                  "jobname": pl.lit("extern"), "exitcode": pl.lit("0:0"),
                  "state": pl.when(pl.col("_ended")).then(pl.lit("COMPLETED")).otherwise(pl.lit("RUNNING")),
                  "totalcpu": pl.col("_idle_cpu"), "maxrss": pl.col("_idle_rss")}
        frames.append(s.select(pl.col("run_idx").alias("_k"), pl.lit(1).alias("_s"),
                               line(batch)))
        frames.append(s.select(pl.col("run_idx").alias("_k"), pl.lit(2).alias("_s"),
                               line(extern)))
        m = s.filter(nnodes > 1)
        srun = {**base, "jobidraw": S("job_id_raw") + ".0", "jobid": jobid + ".0", "jobname": pl.lit("python"),
                "state": step_state, "totalcpu": pl.col("_cpu"), "maxrss": pl.col("_rss")}
        frames.append(m.select(pl.col("run_idx").alias("_k"), pl.lit(3).alias("_s"),
                               line(srun)))
    return pl.concat(frames).sort("_k", "_s").select("line")


def sacct_text(runs: pl.DataFrame, **kw) -> str:
    """sacct --parsable2 output (with header) for the runs, in their state at ``as_of`` (epoch s)."""
    body = "\n".join(sacct_lines(runs, **kw).get_column("line").to_list())
    return HEADER + "\n" + body + ("\n" if body else "")


def write_sacct(path, runs: pl.DataFrame | pl.LazyFrame, *, chunk_runs: int = 25_000, **kw) -> int:
    """The sacct text of many runs, written chunk by chunk straight from polars (memory stays at one chunk).
    Returns the file size."""
    lazy = runs.lazy()
    n = lazy.select(pl.len()).collect().item()
    return write_sacct_chunks(path, (lazy.slice(k, chunk_runs).collect() for k in range(0, n, chunk_runs)), **kw)[1]


def write_sacct_chunks(path, chunks: Iterable[pl.DataFrame], **kw) -> tuple[int, int]:
    """The header, then :func:`sacct_lines` of each frame of runs in turn (``kw`` as for it); the frames may be
    made one at a time by a generator, so memory stays at one chunk. Returns (lines written, file size)."""
    lines = 0
    with open(path, "wb") as f:
        f.write((HEADER + "\n").encode())
        for runs in chunks:
            # sacct does not quote: neither do we (job names may hold anything but the delimiter and newlines)
            text = sacct_lines(runs, **kw)
            text.write_csv(f, include_header=False, quote_style="never")
            lines += text.height
        return lines, f.tell()
