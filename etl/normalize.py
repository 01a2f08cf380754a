"""Named sacct string fields -> warehouse rows (job runs, job steps) and quarantined lines.

Column for column this is the contract of tables slurm_job_run / slurm_job_step (sql/migrations). Every
input row ends in exactly one of: a job run, one run per task of a pending array range, a step, or the
quarantine with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

import polars as pl
from ops_warehouse.etl import dst_fold, durations, hostlist, tres
from ops_warehouse.etl.frames import fmt, on_rows

# States whose record will not change again (the run has ended).
FINAL_STATES = [
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
    "OUT_OF_MEMORY", "REQUEUED", "REVOKED", "SPECIAL_EXIT",
]
OPEN_STATES = [
    "PENDING", "RUNNING", "SUSPENDED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "STOPPED", "SIGNALING",
    "STAGE_OUT", "COMPLETING", "CONFIGURING", "RESV_DEL_HOLD", "POWER_UP_NODE", "UPDATE_DB",
]
# Largest pending array range expanded into tasks.
MAX_ARRAY_TASKS = 1_000_000
_FINAL_BIT = 1 << 40
_U32 = 2**32 - 1
_I32 = 2**31 - 1
# Slurm keeps time limits as 32-bit minutes
_MAX_TIMELIMIT_S = (2**32 - 1) * 60

_JOBID = r"^(\d+)(?:_(\d+|\[[^\]]*\]))?(?:\+(\d+))?(?:\.(.+))?$"

RUN_SCHEMA = {
    "cluster": pl.String, "job_id": pl.String, "job_id_raw": pl.UInt64, "array_job_id": pl.UInt64,
    "array_task_id": pl.Int64, "het_job_id": pl.UInt64, "het_job_offset": pl.Int32, "job_name": pl.String,
    "user": pl.String, "uid": pl.UInt32, "account": pl.String, "group_name": pl.String,
    "partition": pl.String, "qos": pl.String, "reservation": pl.String, "state": pl.String,
    "cancelled_by_uid": pl.UInt32, "exit_code": pl.Int32, "exit_signal": pl.Int32,
    "submit_ts": pl.Datetime("ms", "UTC"), "eligible_ts": pl.Datetime("ms", "UTC"),
    "start_ts": pl.Datetime("ms", "UTC"), "end_ts": pl.Datetime("ms", "UTC"), "as_of_ts": pl.Datetime("ms", "UTC"),
    "elapsed_s": pl.UInt64, "timelimit_s": pl.UInt64, "timelimit_kind": pl.String, "nnodes": pl.UInt32,
    "ncpus": pl.UInt32, "req_cpus": pl.UInt32, "req_mem": pl.String, "alloc_mem_mib": pl.Float64,
    "gpus": pl.UInt32, "gpu_type": pl.String, "billing": pl.UInt64, "alloc_tres": pl.String,
    "req_tres": pl.String, "node_list": pl.String, "nodes": pl.List(pl.String), "is_final": pl.UInt8,
    "never_ran": pl.UInt8, "source": pl.String, "source_line": pl.UInt64, "_version": pl.UInt64,
}
STEP_SCHEMA = {
    "cluster": pl.String, "job_id": pl.String, "job_id_raw": pl.UInt64, "step_id": pl.String,
    "step_name": pl.String, "state": pl.String, "exit_code": pl.Int32, "exit_signal": pl.Int32,
    "start_ts": pl.Datetime("ms", "UTC"), "end_ts": pl.Datetime("ms", "UTC"), "elapsed_s": pl.UInt64,
    "nnodes": pl.UInt32, "ncpus": pl.UInt32, "ntasks": pl.UInt32, "gpus": pl.UInt32, "alloc_tres": pl.String,
    "node_list": pl.String, "nodes": pl.List(pl.String), "source": pl.String, "source_line": pl.UInt64,
    "_version": pl.UInt64, "total_cpu_s": pl.Float64, "max_rss_mib": pl.Float64,
}
QUARANTINE_SCHEMA = {"line_no": pl.UInt64, "reason": pl.String, "raw": pl.String}
# the working columns _runs and _steps read besides those of their schemas
_ROW_INPUTS = ("line_no", "_step", "_base", "_task", "_het", "_tl_txt", "_tl_s")


def _col(df: pl.DataFrame, name: str) -> pl.Expr:
    """A field as text, or null when the input has no such column (sacct pads nothing in parsable mode)."""
    return pl.col(name) if name in df.columns else pl.lit(None, dtype=pl.String)


def _dim(df: pl.DataFrame, name: str) -> pl.Expr:
    """A report dimension (account, user, partition, qos): its text ('' when empty), or "unknown" when the
    input has no such field at all (absent is not empty: etl/sacct_contract.py, docs/sources.md)."""
    return pl.col(name).fill_null("") if name in df.columns else pl.lit("unknown")


def _nonempty(e: pl.Expr) -> pl.Expr:
    """Empty text as null: the multi-threaded read gives null for an empty field, the line-by-line read '';
    coalescing '' kept an empty JobID over JobIDRaw on one path only (tests/test_fuzz_sacct.py)."""
    return pl.when(e != "").then(e)


def _int(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Int64, strict=False)


@dataclass(frozen=True)
class TimeWindow:
    """The times a record may hold: none before ``earliest``, none more than ``hours_ahead`` past ``now``, the
    load's clock (config [sacct] earliest, max_future_hours). A node with a bad clock printed a job dated
    2099: loaded, its hours made the grains' refresh fail (too many partitions) in that load and every later
    one, and reports picked 2099-05 as the last month; one dated a few months ahead made them report a month
    to come as complete with nothing allocated (issue 27). The times of a pending job (Start, End, Eligible)
    are the scheduler's expectations, not records: only its Submit is held to ``now``."""

    earliest: datetime
    now: datetime
    hours_ahead: float

    @classmethod
    def of(cls, cfg, now: datetime | None = None) -> TimeWindow:
        first = getattr(cfg, "sacct_earliest", date(2000, 1, 1))
        now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        return cls(datetime(first.year, first.month, first.day, tzinfo=timezone.utc), now,
                   float(getattr(cfg, "sacct_max_future_hours", 24.0)))

    @property
    def latest(self) -> datetime:
        return self.now + timedelta(hours=self.hours_ahead)


PENDING_STATES = ["PENDING", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"]


def _checks(window: TimeWindow | None = None) -> list[tuple[pl.Expr, pl.Expr]]:
    """(condition, reason) pairs; the first that holds names why a record is quarantined."""
    # an array task or het offset too big for its column read as null, which made the record its parent
    # job's (123_99999999999999999999 loaded as job 123); found by tests/test_fuzz_sacct.py
    task_bad = (pl.col("_arr").is_not_null() & ~pl.col("_arr").str.starts_with("[")
                & pl.col("_arr").cast(pl.Int64, strict=False).is_null())
    het_bad = pl.col("_het_txt").is_not_null() & pl.col("_het").is_null()
    checks = [
        (pl.col("_jobid").is_null() | (pl.col("_jobid") == ""), pl.lit("no JobID")),
        (pl.col("_base").is_null() | task_bad | het_bad, fmt("unparseable JobID '{}'", pl.col("_jobid"))),
        (pl.col("state").is_null(), fmt("no job state in '{}'", pl.col("_jobid"))),
        (~pl.col("state").is_in(FINAL_STATES + OPEN_STATES) & pl.col("_step").is_null(),
         fmt("unknown job state '{}'", pl.col("state"))),
    ]
    for name in ("submit", "eligible", "start", "end"):
        raw_col, ts_col = pl.col(f"_{name}"), pl.col(f"{name}_ts")
        checks.append((~durations.time_missing(raw_col) & ts_col.is_null(),
                       fmt("bad {} time '{}'", pl.lit(name), raw_col)))
        # the warehouse's DateTime ends in February 2106: a later time (2200 was allowed) was stored wrapped
        checks.append((ts_col.dt.year().is_between(1990, 2105).not_(),
                       fmt("{} time out of range '{}'", pl.lit(name), raw_col)))
        if window is not None:
            checks.append((ts_col < pl.lit(window.earliest, dtype=pl.Datetime("ms", "UTC")),
                           fmt("{} time before {} '{}'", pl.lit(name), pl.lit(f"{window.earliest:%Y-%m-%d}"), raw_col)))
            ahead = ts_col > pl.lit(window.latest, dtype=pl.Datetime("ms", "UTC"))
            if name != "submit":
                ahead = ahead & ~pl.col("state").fill_null("").is_in(PENDING_STATES)
            checks.append((ahead, fmt("{} time more than {} h past the load's clock '{}'", pl.lit(name),
                                      pl.lit(f"{window.hours_ahead:g}"), raw_col)))
    checks += [
        (pl.col("submit_ts").is_null() & pl.col("_step").is_null(), pl.lit("no Submit time (part of the job key)")),
        ((pl.col("_elapsed") > 50 * 365 * 86400) | (pl.col("_elapsed") < 0),
         fmt("absurd elapsed '{}'", pl.col("_elapsed"))),
        (pl.col("nnodes_txt").is_not_null() & (pl.col("nnodes_txt") != "")
         & _int(pl.col("nnodes_txt")).is_between(0, 10_000_000).not_().fill_null(True),
         fmt("bad NNodes '{}'", pl.col("nnodes_txt"))),
        (pl.col("ncpus_txt").is_not_null() & (pl.col("ncpus_txt") != "")
         & _int(pl.col("ncpus_txt")).is_between(0, 1_000_000_000).not_().fill_null(True),
         fmt("bad NCPUS '{}'", pl.col("ncpus_txt"))),
        # Numbers a column cannot hold used to load as NULL (or 0) without a word; found by
        # tests/test_fuzz_sacct.py. Empty fields stay NULL as before.
        (_given(pl.col("_elapsed_txt")) & pl.col("_elapsed").is_null(),
         fmt("bad Elapsed '{}'", pl.col("_elapsed_txt"))),
        (_given(pl.col("_tl_txt")) & ~pl.col("_tl_txt").is_in(durations.NO_LIMIT)
         & pl.col("_tl_s").is_between(0, _MAX_TIMELIMIT_S).not_().fill_null(True),
         fmt("bad Timelimit '{}'", pl.col("_tl_txt"))),
        (_given(pl.col("_exit_txt")) & (pl.col("exit_code").is_between(-_I32 - 1, _I32).not_().fill_null(True)
                                        | pl.col("exit_signal").is_between(-_I32 - 1, _I32).not_().fill_null(False)),
         fmt("bad ExitCode '{}'", pl.col("_exit_txt"))),
        (_given(pl.col("_uid_txt")) & pl.col("uid").is_between(0, _U32).not_().fill_null(True),
         fmt("bad UID '{}'", pl.col("_uid_txt"))),
        (_given(pl.col("_reqcpus_txt")) & pl.col("req_cpus").is_between(0, _U32).not_().fill_null(True),
         fmt("bad ReqCPUS '{}'", pl.col("_reqcpus_txt"))),
        (pl.col("gpus").is_null() | pl.col("_tres_bad")
         | pl.col("nnodes").is_between(0, 10_000_000).not_() | pl.col("ncpus").is_between(0, 1_000_000_000).not_(),
         fmt("bad AllocTRES '{}'", pl.col("alloc_tres"))),
        (pl.col("_ambiguous").is_not_null(), fmt("ambiguous local time '{}'", pl.col("_ambiguous"))),
        (pl.col("end_ts") < pl.col("start_ts"), pl.lit("End before Start")),
        # a job cannot start before it was submitted (a node's clock, a hand-edited line): loaded, it made
        # its wait negative (issue 27). A step's Submit is not its own (docs/sources.md): jobs only; a pending
        # job's Start is an expectation, dropped (_runs)
        ((pl.col("start_ts") < pl.col("submit_ts")) & pl.col("_step").is_null()
         & ~pl.col("state").fill_null("").is_in(PENDING_STATES), pl.lit("Start before Submit")),
    ]
    return checks


def _given(e: pl.Expr) -> pl.Expr:
    return e.is_not_null() & (e != "")


def normalize(records: pl.DataFrame, *, tz: str, cluster: str, source: str, raw: pl.Expr | None = None,
              window: TimeWindow | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(runs, steps, quarantine) for one chunk of named string fields.

    ``raw`` gives a record's input line (default: the ``raw`` column); it is evaluated for quarantined
    records only. ``window``: the times a record may hold (TimeWindow; None: any the warehouse can)."""
    df = records
    raw = pl.col("raw") if raw is None else raw
    c = lambda name: _col(df, name)  # noqa: E731
    state_txt = c("state").fill_null("")
    # split_exact(":", 1) read "1:2:3" as 1:2; a third part sends the text to the regex path (and the quarantine)
    exit_parts = c("exitcode").str.split_exact(":", 2)
    t = df.select(
        "line_no",
        _jobid=pl.coalesce(_nonempty(c("jobid")), c("jobidraw")),
        _jobidraw=c("jobidraw"),
        cluster=pl.when(c("cluster").fill_null("") != "").then(c("cluster")).otherwise(pl.lit(cluster)),
        job_name=c("jobname").fill_null(""),
        user=_dim(df, "user"),
        uid=_int(c("uid")),
        _uid_txt=c("uid"),
        account=_dim(df, "account"),
        group_name=c("group").fill_null(""),
        partition=_dim(df, "partition"),
        qos=_dim(df, "qos"),
        reservation=c("reservation").fill_null(""),
        state=pl.when(state_txt != "").then(state_txt.str.split_exact(" ", 1).struct.field("field_0")),
        cancelled_by_uid=_int(state_txt.str.strip_prefix("CANCELLED by ")),
        exit_code=_int(exit_parts.struct.field("field_0")),
        exit_signal=pl.when(exit_parts.struct.field("field_2").is_null()).then(_int(exit_parts.struct.field("field_1"))),
        _exit_txt=c("exitcode"),
        _submit=c("submit"), _eligible=c("eligible"), _start=c("start"), _end=c("end"),
        _elapsed_txt=pl.coalesce(_nonempty(c("elapsedraw")), c("elapsed")),
        _tl_txt=pl.coalesce(_nonempty(c("timelimitraw")), c("timelimit")),
        nnodes_txt=c("nnodes"), ncpus_txt=c("ncpus"),
        req_cpus=_int(c("reqcpus")),
        _reqcpus_txt=c("reqcpus"),
        req_mem=c("reqmem").fill_null(""),
        alloc_tres=c("alloctres").fill_null(""),
        req_tres=c("reqtres").fill_null(""),
        node_list=c("nodelist").fill_null(""),
        ntasks=_int(c("ntasks")),
        # the steps' CPU time and largest task RSS (sql/migrations/0022): null where the input lacks them
        total_cpu_s=durations.duration_s(c("totalcpu")),
        max_rss_mib=tres.size_mib(c("maxrss")),
    )
    # exit codes that are not "N:M" (rare): regex path
    t = on_rows(t, pl.col("_exit_txt").is_not_null() & pl.col("exit_signal").is_null(), lambda s: s.with_columns(
        exit_code=_int(pl.col("_exit_txt").str.extract(r"^(-?\d+)(?::-?\d+)?$", 1)),
        exit_signal=_int(pl.col("_exit_txt").str.extract(r"^-?\d+:(-?\d+)$", 1)),
    ))
    m = pl.col("_jobid").str.extract_groups(_JOBID)
    t = t.with_columns(
        _base=m.struct.field("1").cast(pl.UInt64, strict=False),
        _arr=m.struct.field("2"),
        _het=m.struct.field("3").cast(pl.Int32, strict=False),
        _het_txt=m.struct.field("3"),
        _step=m.struct.field("4"),
        _raw_id=pl.col("_jobidraw").str.split_exact(".", 1).struct.field("field_0").cast(pl.UInt64, strict=False),
        submit_ts=durations.parse_time(pl.col("_submit"), tz),
        eligible_ts=durations.parse_time(pl.col("_eligible"), tz),
        start_ts=durations.parse_time(pl.col("_start"), tz),
        end_ts=durations.parse_time(pl.col("_end"), tz),
        # ElapsedRaw is plain seconds; Elapsed text takes the regex path below
        _elapsed=pl.col("_elapsed_txt").cast(pl.Float64, strict=False),
    )
    t = on_rows(t, pl.col("_elapsed").is_null() & pl.col("_elapsed_txt").is_not_null(), lambda s: s.with_columns(
        _elapsed=durations.duration_s(pl.col("_elapsed_txt"), 1)))
    # a time in the autumn DST fold: the instant the record's order and ElapsedRaw say (etl/dst_fold.py)
    t = dst_fold.sacct_readings(t, tz, PENDING_STATES)
    # TimelimitRaw is minutes; text forms (D-HH:MM:SS) take the regex path
    tl = pl.col("_tl_txt")
    t = t.with_columns(_tl_s=tl.cast(pl.Float64, strict=False) * 60)
    t = on_rows(t, pl.col("_tl_s").is_null() & _given(tl) & ~tl.is_in(durations.NO_LIMIT),
                lambda s: s.with_columns(_tl_s=durations.duration_s(tl, 60)))
    # counts: the text's, else the TRES's; a GPU count beyond any GPU count reads null (quarantined). With
    # no NNodes field at all, the node list's length comes next (below, once it is expanded)
    alloc = pl.col("alloc_tres")
    nodes_from_list = "nnodes" not in df.columns and "nodelist" in df.columns
    t = t.with_columns(nnodes=_int(pl.col("nnodes_txt")), ncpus=_int(pl.col("ncpus_txt")),
                       gpus=tres.gpus_simple(alloc), _tres_bad=pl.lit(False))
    t = on_rows(t, pl.col("nnodes").is_null() | pl.col("ncpus").is_null(), lambda s: s.with_columns(
        nnodes=pl.coalesce("nnodes", tres.count(alloc, "node"), *([] if nodes_from_list else [pl.lit(0)])),
        ncpus=pl.coalesce("ncpus", tres.count(alloc, "cpu"), pl.lit(0)),
        _tres_bad=(pl.col("nnodes").is_null() & tres.count_unreadable(alloc, "node"))
        | (pl.col("ncpus").is_null() & tres.count_unreadable(alloc, "cpu"))))
    t = on_rows(t, pl.col("gpus").is_null(), lambda s: s.with_columns(gpus=tres.gpus(alloc)))

    checks = _checks(window)
    bad = pl.any_horizontal([cond.fill_null(False) for cond, _ in checks])
    t = t.with_columns(_bad=bad)
    # node lists (also a validity check), expanded once per distinct expression
    lists = t.select(pl.col("node_list").unique()).filter(pl.col("node_list").str.contains(r"[\[,]"))
    t = t.with_columns(
        nodes=pl.when(pl.col("node_list").is_in(["", "None assigned", "(null)"]))
        .then(pl.lit([], dtype=pl.List(pl.String))).otherwise(pl.concat_list(pl.col("node_list"))),
        hostlist_ok=pl.lit(True),
    )
    if lists.height:
        expanded = hostlist.expand(lists.with_row_index("_i"), "node_list", "_i")
        expanded = lists.with_row_index("_i").join(expanded, on="_i").drop("_i")
        t = t.join(expanded, on="node_list", how="left", suffix="_x").with_columns(
            nodes=pl.coalesce("nodes_x", "nodes"), hostlist_ok=pl.coalesce("hostlist_ok_x", "hostlist_ok"),
        ).drop("nodes_x", "hostlist_ok_x")
    t = t.with_columns(_bad=pl.col("_bad") | ~pl.col("hostlist_ok"))
    if nodes_from_list:
        t = t.with_columns(nnodes=pl.coalesce("nnodes", pl.col("nodes").list.len(), pl.lit(0)))
    # pending array ranges 123_[1-3,7%2] -> one row per task
    t = t.with_columns(_reason=pl.lit(None, dtype=pl.String), _task=pl.lit(None, dtype=pl.Int64))
    ranged = pl.col("_arr").str.starts_with("[").fill_null(False)
    t = t.with_columns(_task=pl.when(~ranged).then(pl.col("_arr").cast(pl.Int64, strict=False)))

    def reasons(s: pl.DataFrame) -> pl.DataFrame:
        reason = pl.lit(None, dtype=pl.String)
        for cond, why in reversed(checks):
            reason = pl.when(cond.fill_null(False)).then(why).otherwise(reason)
        reason = pl.coalesce(reason, pl.when(~pl.col("hostlist_ok")).then(
            fmt("bad NodeList '{}'", pl.col("node_list"))))
        return s.with_columns(_reason=reason)

    t = on_rows(t, pl.col("_bad"), reasons)
    t = on_rows(t, ranged & pl.col("_reason").is_null(), _expand_array_ranges)
    failed = pl.col("_reason").is_not_null()
    quarantine = t.filter(failed).select("line_no", pl.col("_reason").alias("reason"))
    if quarantine.height:
        lines = df.filter(pl.col("line_no").is_in(quarantine.get_column("line_no").implode()))
        lines = lines.select("line_no", raw.alias("raw")).unique("line_no", keep="first")
        quarantine = quarantine.join(lines, on="line_no", how="left")
    else:
        quarantine = quarantine.with_columns(raw=pl.lit(None, dtype=pl.String))
    quarantine = quarantine.select("line_no", "reason", "raw").cast(QUARANTINE_SCHEMA)
    t = t.filter(~failed)

    job_id = (
        pl.col("_base").cast(pl.String)
        + pl.when(pl.col("_task").is_not_null()).then(pl.lit("_") + pl.col("_task").cast(pl.String)).otherwise(pl.lit(""))
        + pl.when(pl.col("_het").is_not_null()).then(pl.lit("+") + pl.col("_het").cast(pl.String)).otherwise(pl.lit(""))
    )
    t = t.with_columns(
        job_id=job_id,
        job_id_raw=pl.when(ranged).then(pl.col("_base")).otherwise(pl.coalesce("_raw_id", "_base")),
        elapsed_s=pl.col("_elapsed").fill_null(
            (pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds()
        ).fill_null(0).clip(0).cast(pl.UInt64),
    )
    # several GPU types: lists
    multi = alloc.str.count_matches("gres/gpu:", literal=True) > 1
    is_step = pl.col("_step").is_not_null()
    # only what the rows are made of goes on: the two filters below copied every column of the checks' text
    # (a third of normalize's time on the bench's dump, issue 50)
    t = t.select([c for c in t.columns if c in RUN_SCHEMA or c in STEP_SCHEMA or c in _ROW_INPUTS])
    steps = _steps(t.filter(is_step), source)
    runs = t.filter(~is_step).with_columns(
        array_job_id=pl.when(pl.col("_task").is_not_null()).then(pl.col("_base")).otherwise(0).cast(pl.UInt64),
        array_task_id=pl.col("_task").fill_null(-1),
        het_job_id=pl.when(pl.col("_het").is_not_null()).then(pl.col("_base")).otherwise(0).cast(pl.UInt64),
        het_job_offset=pl.col("_het").fill_null(-1),
        gpu_type=tres.gpu_type_simple(alloc),
        alloc_mem_mib=tres.mem_mib(alloc),
        billing=tres.count(alloc, "billing"),
    )
    runs = on_rows(runs, multi, lambda s: s.with_columns(gpu_type=tres.gpu_type(alloc)))
    runs = _runs(runs, source, has_nodelist="nodelist" in df.columns)
    return runs, steps, quarantine


def _expand_array_ranges(t: pl.DataFrame) -> pl.DataFrame:
    """Rows whose JobID is a pending range (``123_[1-3,7%2]``) -> one row per task (or a reason)."""
    parts = (
        t.with_row_index("_r")
        .with_columns(_part=pl.col("_arr").str.strip_chars("[]").str.replace(r"%\d+$", "").str.split(","))
        .explode("_part")
        .with_columns(
            _lo=pl.col("_part").str.extract(r"^(\d+)(?:-\d+)?$", 1).cast(pl.Int64, strict=False),
            _hi_txt=pl.col("_part").str.extract(r"^\d+(?:-(\d+))?$", 1),
        )
        .with_columns(_hi=pl.coalesce(pl.col("_hi_txt").cast(pl.Int64, strict=False), "_lo"))
    )
    # A bound beyond Int64 read as null (123_[0-99999999999999999999] became task 0 alone), and parts each
    # under the limit could overflow the sum and reach int_ranges (a panic); found by tests/test_fuzz_sacct.py
    bad = parts.group_by("_r").agg(
        _n=(pl.col("_hi") - pl.col("_lo") + 1).sum(),
        _bad=(pl.col("_lo").is_null() | (pl.col("_hi") < pl.col("_lo"))
              | (pl.col("_hi_txt").is_not_null() & pl.col("_hi_txt").cast(pl.Int64, strict=False).is_null())
              | (pl.col("_hi") - pl.col("_lo") >= MAX_ARRAY_TASKS)).any(),
    ).filter((pl.col("_n") > MAX_ARRAY_TASKS) | pl.col("_bad")).get_column("_r")
    parts = parts.with_columns(
        _reason=pl.when(pl.col("_r").is_in(bad.implode()))
        .then(fmt("bad array range '{}'", pl.col("_arr"))).otherwise(pl.col("_reason"))
    )
    parts = parts.with_columns(
        _task=pl.when(pl.col("_reason").is_null()).then(pl.int_ranges(pl.col("_lo"), pl.col("_hi") + 1))
        .otherwise(pl.concat_list(pl.lit(None, dtype=pl.Int64)))
    ).explode("_task")
    # a task listed twice in overlapping ranges is still one task
    return parts.unique(subset=["_r", "_task"], keep="first", maintain_order=True)


def _runs(t: pl.DataFrame, source: str, has_nodelist: bool = True) -> pl.DataFrame:
    final = pl.col("state").is_in(FINAL_STATES)
    started = pl.col("start_ts").is_not_null()
    if has_nodelist:
        # no nodes allocated ("None assigned"): a job that ended never ran (sacct prints a Start for a job
        # cancelled while pending: the time it was cancelled)
        never = final & (pl.col("node_list").is_in(["", "None assigned"]) | ~started)
    else:
        # No NodeList field: the nodes are unknown, not none (a missing column was taken for "None assigned"
        # and jobs that ran for hours loaded as never run). A job ran when it has a Start, except one
        # CANCELLED at zero Elapsed with no signal in its ExitCode: how sacct prints a job cancelled while
        # pending (Start = End = the cancel time, 0:0; newer Slurm prints Start None). A job cancelled as it
        # started was killed by a signal (0:15). On the real dumps in tests/data this gives the same jobs as
        # the NodeList does (tests/test_sacct_contracts.py).
        never = final & (~started | ((pl.col("state") == "CANCELLED") & (pl.col("elapsed_s") == 0)
                                     & (pl.col("exit_signal").fill_null(0) == 0)))
    # A pending job has no nodes yet; sacct may print the requested ones.
    open_pending = pl.col("state").is_in(PENDING_STATES)
    as_of = (
        pl.when(final).then(pl.coalesce("end_ts", pl.col("start_ts") + pl.duration(seconds=pl.col("elapsed_s")), "submit_ts"))
        .when(started & ~open_pending).then(pl.col("start_ts") + pl.duration(seconds=pl.col("elapsed_s")))
        .otherwise("submit_ts")
    )
    tl = pl.col("_tl_txt")
    out = t.with_columns(
        is_final=final.cast(pl.UInt8),
        never_ran=never.cast(pl.UInt8),
        start_ts=pl.when(open_pending).then(None).otherwise(pl.col("start_ts")),
        nodes=pl.when(open_pending).then(pl.lit([], dtype=pl.List(pl.String))).otherwise(pl.col("nodes")),
        as_of_ts=as_of,
        timelimit_s=pl.col("_tl_s").cast(pl.UInt64, strict=False),  # see normalize
        timelimit_kind=pl.when(tl.is_in(durations.NO_LIMIT)).then(tl).otherwise(pl.lit("")),
        source=pl.lit(source),
        source_line=pl.col("line_no"),
    ).with_columns(
        _version=(pl.col("is_final").cast(pl.UInt64) * _FINAL_BIT
                  + pl.col("as_of_ts").dt.epoch("s").cast(pl.UInt64)),
    )
    return out.select([pl.col(c).cast(d, strict=False) for c, d in RUN_SCHEMA.items()])


def _steps(t: pl.DataFrame, source: str) -> pl.DataFrame:
    out = t.with_columns(
        step_id=pl.col("_step"),
        step_name=pl.col("job_name"),
        start_ts=pl.coalesce("start_ts", "submit_ts", pl.lit(0).cast(pl.Datetime("ms", "UTC"))),
        source=pl.lit(source),
        source_line=pl.col("line_no"),
        _version=(pl.col("state").is_in(FINAL_STATES).cast(pl.UInt64) * _FINAL_BIT
                  + pl.coalesce("end_ts", "start_ts", "submit_ts").dt.epoch("s").fill_null(0).cast(pl.UInt64)),
    )
    return out.select([pl.col(c).cast(d, strict=False) for c, d in STEP_SCHEMA.items()])
