"""A synthetic Slurm accounting dump: what ``sacct --parsable2`` prints for a busy GPU cluster.

For benchmarks, demos and tests that need volume without a real cluster. The file is deterministic (same
arguments and seed give a byte-identical file), written chunk by chunk in constant memory, and every
chunk is built with numpy/polars column operations (no Python loop per job).

The output has a header line and exactly the fields of
:data:`ops_warehouse.etl.sacct_text.SACCT_FORMAT`, in that order, times in UTC ``YYYY-MM-DDTHH:MM:SS``
(what ``ops-report etl sacct`` asks sacct for). The simulated cluster is shaped like the product's default:

* partitions ``h100`` (90 nodes ``h100-[001-090]``), ``h200`` (16 nodes), ``b200`` (8 nodes), each node
  with 8 GPUs and 112 CPUs; accounts ``proja`` .. ``projf``; users ``user001`` .. ``user200`` (uid
  10001 ..), each with a primary account (its Unix group) and a heavy-tailed share of the submissions;
* GPUs per job: about 47% one GPU, over 90% fewer than 8, some whole nodes, and a few large jobs
  (64 to 512 GPUs, whole nodes, capped by the partition's size) that take most of the GPU-hours;
* run times lognormal (median a few minutes; large jobs hours), waits lognormal, submissions spread
  over the period with a daily and weekly rhythm;
* states about 60% COMPLETED, 20% FAILED (ExitCode ``1:0``, ``2:0``, ``0:11``...), CANCELLED
  (``CANCELLED by <uid>``, some before they started: NodeList ``None assigned``, Start = End, ElapsedRaw
  0), TIMEOUT (elapsed = time limit), NODE_FAIL, OUT_OF_MEMORY, PREEMPTED (low QOS); jobs still running
  at the end of the period are RUNNING with End ``Unknown``, those not started yet PENDING;
* array jobs (JobID ``123_4``, JobIDRaw the task's own id), TimelimitRaw in minutes (some
  ``UNLIMITED``), ReqTRES/AllocTRES such as ``billing=16,cpu=16,gres/gpu:h100=2,gres/gpu=2,mem=256000M,
  node=1``, NodeList as hostlist expressions (``h100-017``, ``h100-[001-004]``, ``h100-[001-002,010-011]``);
* with ``steps=True`` each job that ran also has ``.batch`` and ``.extern`` step lines, and multi-node
  jobs a ``.0`` (srun) step; step lines leave User, UID, Group, GID, Partition, QOS and TimelimitRaw
  empty, as sacct does.

Nodes are not scheduled (two jobs may overlap on a node): the dump is for loading and reporting, not for
checking a scheduler. Usage::

    from datetime import datetime, timezone
    from ops_warehouse.synth import write_sacct_dump
    write_sacct_dump("sacct.psv", jobs=100_000, start=datetime(2025, 1, 1, tzinfo=timezone.utc), days=30)
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from ops_warehouse.etl.sacct_text import SACCT_FORMAT
from ops_warehouse.generate.sacct_writer import HEADER  # sacct's own spelling of the fields

FIELDS = SACCT_FORMAT.split(",")

# (name, nodes, share of submissions)
PARTITIONS = (("h100", 90, 0.70), ("h200", 16, 0.20), ("b200", 8, 0.10))
GPUS_PER_NODE = 8
CPUS_PER_NODE = 112
ACCOUNTS = tuple(f"proj{c}" for c in "abcdef")
N_USERS = 200
UID_BASE = 10000  # user001 -> 10001
GID_BASE = 20000  # proja -> 20001
FIRST_JOB_ID = 1_000_001

_TIME_FMT = "%Y-%m-%dT%H:%M:%S"
_TIMELIMITS_MIN = np.array([10, 30, 60, 120, 240, 480, 720, 1440, 2880, 4320, 10080], dtype=np.int64)
_SMALL_GPUS = (np.array([1, 2, 3, 4, 5, 6, 7, 8, 16, 32]),
               np.array([.47, .20, .03, .17, .01, .02, .01, .065, .015, .01]))
_LARGE_GPUS = (np.array([64, 128, 256, 512]), np.array([.40, .30, .20, .10]))
_NAMES = np.array([
    "bash", "interactive", "jupyter", "train", "train", "finetune", "finetune", "eval", "eval", "infer",
    "sweep", "data-prep", "tokenize", "nccl-test", "benchmark", "debug", "llama-8b-sft", "vit-l16",
    "rl-ppo", "diffusion", "train.sh", "run_experiment.py",
])
_ARRAY_NAMES = np.array(["sweep", "eval", "data-prep", "hparam", "infer-shard"])
_LARGE_NAMES = np.array(["pretrain-70b", "pretrain-8b", "moe-pretrain", "llm-train", "nccl-allreduce"])
_SRUN_NAMES = np.array(["python", "torchrun", "python3", "all_reduce_perf"])
# Job state codes.
COMPLETED, FAILED, CANCELLED, CANCELLED_EARLY, TIMEOUT, NODE_FAIL, OOM, PREEMPTED, RUNNING, PENDING = range(10)
_STATE_P = np.array([.60, .20, .07, .03, .05, .01, .02, .02])  # the first eight codes
_STATE_TXT = ["COMPLETED", "FAILED", "CANCELLED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
              "PREEMPTED", "RUNNING", "PENDING"]
# What the .batch step of a job that ended in each state says.
_BATCH_STATE = ["COMPLETED", "FAILED", "CANCELLED", "CANCELLED", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
                "CANCELLED", "RUNNING", "PENDING"]
_BATCH_EXIT = ["0:0", None, "0:15", "0:15", "0:15", "0:0", "0:125", "0:15", "0:0", "0:0"]
_FAIL_EXITS = (np.array(["1:0", "2:0", "127:0", "0:11", "255:0", "0:6"]),
               np.array([.70, .10, .05, .06, .05, .04]))


def write_sacct_dump(path, *, jobs: int, start: datetime, days: int, seed: int = 0, cluster: str = "sim",
                     steps: bool = True, chunk_jobs: int = 100_000) -> dict:
    """Write a synthetic ``sacct --parsable2`` dump of ``jobs`` jobs submitted over ``days`` days.

    ``start`` must be timezone-aware; the period is [start, start + days) and the dump is taken at its end
    (jobs still running then are RUNNING, those not started PENDING). The file depends only on the
    arguments (``chunk_jobs`` included) and ``seed``. Returns ``{"jobs", "steps", "lines", "bytes"}``:
    job records, step records, records written (not counting the header line) and the file size.
    """
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValueError("start must be timezone-aware (e.g. datetime(2025, 1, 1, tzinfo=timezone.utc))")
    if jobs < 0 or days <= 0 or chunk_jobs <= 0:
        raise ValueError("jobs must be >= 0, days and chunk_jobs > 0")
    t0 = int(start.timestamp())
    period = int(timedelta(days=days).total_seconds())
    people = _people(seed)
    out = {"jobs": 0, "steps": 0, "lines": 0, "bytes": 0}
    path = Path(path)
    with open(path, "wb") as f:
        f.write((HEADER + "\n").encode())
        n_chunks = math.ceil(jobs / chunk_jobs) if jobs else 0
        for c in range(n_chunks):
            off = c * chunk_jobs
            n = min(chunk_jobs, jobs - off)
            lo = t0 + period * off / jobs
            hi = t0 + period * (off + n) / jobs
            rng = np.random.default_rng([seed, 1, c])
            lines, n_steps = _chunk(rng, people, off, n, lo, hi, t0 + period, cluster, steps)
            pl.DataFrame({"l": lines}).write_csv(f, include_header=False, quote_style="never", separator="\x1f")
            out["jobs"] += n
            out["steps"] += n_steps
            out["lines"] += n + n_steps
        out["bytes"] = f.tell()
    return out


def _people(seed: int) -> dict:
    """Fixed per-user facts: primary account, activity weight."""
    rng = np.random.default_rng([seed, 0])
    primary = rng.integers(0, len(ACCOUNTS), N_USERS)
    weight = 1.0 / np.arange(1, N_USERS + 1) ** 1.1  # a few users submit most jobs
    weight = rng.permutation(weight)
    return {"primary": primary, "p": weight / weight.sum()}


def _fmt_range(lo: pl.Expr, hi: pl.Expr) -> pl.Expr:
    return pl.when(lo == hi).then(lo).otherwise(lo + "-" + hi)


def _submit_times(rng: np.random.Generator, g: int, lo: float, hi: float) -> np.ndarray:
    """g sorted epoch seconds in [lo, hi) with more submissions in the (UTC) afternoon and on weekdays."""
    got: list[np.ndarray] = []
    have = 0
    while have < g:
        t = rng.uniform(lo, hi, 2 * (g - have) + 16)
        hour = (t % 86400) / 3600
        weekday = ((t // 86400).astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
        accept = (0.55 + 0.45 * np.cos(2 * np.pi * (hour - 15) / 24)) * np.where(weekday >= 5, 0.6, 1.0)
        keep = t[rng.random(t.size) < accept]
        got.append(keep)
        have += keep.size
    return np.sort(np.floor(np.concatenate(got)[:g])).astype(np.int64)


def _chunk(rng: np.random.Generator, people: dict, off: int, n: int, lo: float, hi: float, t_end: int,
           cluster: str, steps: bool) -> tuple[pl.Series, int]:
    """Lines (job lines, each followed by its steps) for jobs off .. off+n-1."""
    # --- submissions: single jobs and job arrays (tasks share the submission's attributes) ---
    is_arr = rng.random(n) < 0.02
    sizes = np.where(is_arr, np.clip(rng.geometric(1 / 10, n), 2, 200), 1)
    cum = np.cumsum(sizes)
    g = int(np.searchsorted(cum, n)) + 1
    sizes = sizes[:g].copy()
    sizes[-1] -= cum[g - 1] - n
    is_arr = is_arr[:g] & (sizes > 1)
    grp = np.repeat(np.arange(g), sizes)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    task = np.arange(n) - first[grp]

    # per submission
    part = rng.choice(len(PARTITIONS), g, p=[p[2] for p in PARTITIONS])
    part_nodes = np.array([p[1] for p in PARTITIONS])[part]
    large = (rng.random(g) < 0.002) & ~is_arr
    gpus = np.where(large, rng.choice(_LARGE_GPUS[0], g, p=_LARGE_GPUS[1]),
                    rng.choice(_SMALL_GPUS[0], g, p=_SMALL_GPUS[1]))
    gpus = np.where(is_arr, rng.choice([1, 1, 1, 1, 2, 4], g), gpus)
    gpus = np.minimum(gpus, part_nodes * GPUS_PER_NODE)
    nnodes = -(-gpus // GPUS_PER_NODE)
    whole = gpus % GPUS_PER_NODE == 0
    cpg = np.where(whole, CPUS_PER_NODE // GPUS_PER_NODE, rng.choice([4, 8, 14], g, p=[.2, .3, .5]))
    cpus = gpus * cpg
    mem = gpus * np.where(whole, 240_000, rng.choice([64_000, 128_000, 240_000], g, p=[.3, .5, .2]))
    user = rng.choice(N_USERS, g, p=people["p"])
    acct = np.where(rng.random(g) < 0.85, people["primary"][user], rng.integers(0, len(ACCOUNTS), g))
    qos = np.where(large, rng.choice(3, g, p=[.5, .5, 0]), rng.choice(3, g, p=[.85, .05, .10]))  # normal/high/low
    resv = large & (rng.random(g) < 0.3)
    name = np.where(large, rng.choice(_LARGE_NAMES, g),
                    np.where(is_arr, rng.choice(_ARRAY_NAMES, g), rng.choice(_NAMES, g)))
    # typical run time of the submission, and the limit the user asked for
    typical = np.where(large, rng.lognormal(np.log(4 * 3600), 0.7, g), rng.lognormal(np.log(240), 1.5, g))
    ask = typical * rng.lognormal(np.log(4), 0.8, g) / 60
    tl_min = _TIMELIMITS_MIN[np.minimum(np.searchsorted(_TIMELIMITS_MIN, ask), len(_TIMELIMITS_MIN) - 1)]
    unlimited = rng.random(g) < 0.03
    submit_g = _submit_times(rng, g, lo, hi)

    # per job
    R = lambda a: a[grp]  # noqa: E731
    part_j, pn_j, large_j, gpus_j, nn_j, cpus_j, mem_j = map(R, (part, part_nodes, large, gpus, nnodes, cpus, mem))
    user_j, acct_j, qos_j, tl_j, unl_j, submit = map(R, (user, acct, qos, tl_min, unlimited, submit_g))
    state = rng.choice(8, n, p=_STATE_P)
    low = qos_j == 2
    state = np.where((state == PREEMPTED) & ~low, COMPLETED, state)
    state = np.where(low & (rng.random(n) < 0.2), PREEMPTED, state)
    state = np.where((state == TIMEOUT) & R(unlimited), COMPLETED, state)
    wait = np.where(large_j, rng.lognormal(np.log(2 * 3600), 1.0, n), rng.lognormal(np.log(30), 2.0, n))
    wait = np.minimum(wait, 3 * 86400).astype(np.int64)
    tl_s = np.where(unl_j, 14 * 86400, tl_j * 60)
    natural = R(typical) * rng.lognormal(0, 0.6, n)
    frac = rng.random(n)
    elapsed = np.select(
        [state == TIMEOUT, state == FAILED, np.isin(state, [CANCELLED, NODE_FAIL, OOM, PREEMPTED])],
        [tl_s + rng.integers(0, 90, n), natural * frac**2, natural * frac],
        natural,
    )
    elapsed = np.where(state == TIMEOUT, elapsed, np.minimum(elapsed, tl_s - 1))
    elapsed = np.maximum(elapsed, 1).astype(np.int64)
    start = submit + wait
    early = state == CANCELLED_EARLY
    cancel_at = submit + (wait * rng.random(n)).astype(np.int64)
    start = np.where(early, cancel_at, start)
    elapsed = np.where(early, 0, elapsed)
    end = start + elapsed
    # the dump is taken at t_end
    pending = start >= t_end
    running = ~pending & ~early & (end > t_end)
    state = np.where(pending, PENDING, np.where(running, RUNNING, state))
    elapsed = np.where(pending, 0, np.where(running, t_end - start, elapsed))
    ran = ~pending & ~early
    # nodes: one contiguous block, or (30% of multi-node jobs) two blocks with a gap
    gap = np.where((nn_j > 1) & (rng.random(n) < 0.3), rng.integers(1, 9, n), 0)
    gap = np.where(nn_j + gap > pn_j, 0, gap)
    first_len = np.where(gap > 0, rng.integers(1, np.maximum(nn_j, 2)), nn_j)
    node0 = (rng.random(n) * (pn_j - nn_j - gap + 1)).astype(np.int64) + 1
    cancel_uid = np.where(rng.random(n) < 0.85, UID_BASE + 1 + user_j, 0)
    fail_exit = rng.choice(_FAIL_EXITS[0], n, p=_FAIL_EXITS[1])
    early_nodes = np.where(rng.random(n) < 0.8, nn_j, 0)
    srun = rng.choice(_SRUN_NAMES, n)
    step0_delay = np.minimum(rng.integers(1, 8, n), elapsed)

    raw = FIRST_JOB_ID + off + np.arange(n)
    arr_j = R(is_arr)
    j = pl.DataFrame({
        "raw": raw, "arr": arr_j, "arr_id": raw - task, "task": task, "part": part_j, "acct": acct_j,
        "user": user_j, "qos": qos_j, "resv": R(resv), "name": R(name), "submit": submit, "start": start,
        "end": end, "elapsed": elapsed, "tl": tl_j, "unl": unl_j, "state": state, "gpus": gpus_j,
        "nnodes": nn_j, "cpus": cpus_j, "mem": mem_j, "node0": node0, "gap": gap, "first_len": first_len,
        "ran": ran, "pending": pending, "running": running, "early": early, "cancel_uid": cancel_uid,
        "fail_exit": fail_exit, "early_nodes": early_nodes, "srun": srun, "step0_delay": step0_delay,
        "primary": people["primary"][user_j],
    })
    return _lines(j, cluster, steps)


def _ts(e: pl.Expr) -> pl.Expr:
    return pl.from_epoch(e, "s").dt.strftime(_TIME_FMT)


def _lines(j: pl.DataFrame, cluster: str, steps: bool) -> tuple[pl.Series, int]:
    S = lambda c: pl.col(c).cast(pl.String)  # noqa: E731
    pname = pl.col("part").replace_strict(list(range(len(PARTITIONS))), [p[0] for p in PARTITIONS],
                                          return_dtype=pl.String)
    z3 = lambda e: e.cast(pl.String).str.zfill(3)  # noqa: E731
    n0, n_last = pl.col("node0"), pl.col("node0") + pl.col("nnodes") + pl.col("gap") - 1
    r1_hi = pl.col("node0") + pl.col("first_len") - 1
    r2_lo = r1_hi + 1 + pl.col("gap")
    brackets = pl.when(pl.col("gap") > 0).then(
        _fmt_range(z3(n0), z3(r1_hi)) + "," + _fmt_range(z3(r2_lo), z3(n_last))
    ).otherwise(z3(n0) + "-" + z3(n_last))
    nodelist = pl.when(pl.col("nnodes") == 1).then(pname + "-" + z3(n0)).otherwise(pname + "-[" + brackets + "]")
    jobid = pl.when(pl.col("arr")).then(S("arr_id") + "_" + S("task")).otherwise(S("raw"))
    gtype = "gres/gpu:" + pname + "="
    mem_txt = S("mem") + "M"
    tres = lambda cpu, gpu, mem, nodes: (  # noqa: E731
        "cpu=" + cpu + "," + gtype + gpu + ",gres/gpu=" + gpu + ",mem=" + mem + ",node=" + nodes)
    alloc = "billing=" + S("cpus") + "," + tres(S("cpus"), S("gpus"), mem_txt, S("nnodes"))
    state = pl.col("state")
    st_txt = state.replace_strict(list(range(10)), _STATE_TXT, return_dtype=pl.String)
    cancelled = state.is_in([CANCELLED, CANCELLED_EARLY])
    st_txt = pl.when(cancelled).then("CANCELLED by " + S("cancel_uid")).otherwise(st_txt)
    exit_txt = (pl.when(state == FAILED).then(pl.col("fail_exit"))
                .when(state == CANCELLED).then(pl.lit("0:15"))
                .when(state == OOM).then(pl.lit("0:125"))
                .otherwise(pl.lit("0:0")))
    start_txt = pl.when(pl.col("pending")).then(pl.lit("Unknown")).otherwise(_ts(pl.col("start")))
    end_txt = pl.when(pl.col("pending") | pl.col("running")).then(pl.lit("Unknown")).otherwise(_ts(pl.col("end")))
    acct = pl.col("acct").replace_strict(list(range(len(ACCOUNTS))), list(ACCOUNTS), return_dtype=pl.String)
    group = pl.col("primary").replace_strict(list(range(len(ACCOUNTS))), list(ACCOUNTS), return_dtype=pl.String)
    never = ~pl.col("ran")
    jobs = _line(j, dict(
        _k=pl.col("raw") * 4,
        jobidraw=S("raw"), jobid=jobid, cluster=pl.lit(cluster), partition=pname,
        qos=pl.col("qos").replace_strict([0, 1, 2], ["normal", "high", "low"], return_dtype=pl.String),
        account=acct, group=group, gid=(pl.col("primary") + GID_BASE + 1).cast(pl.String),
        user="user" + z3(pl.col("user") + 1), uid=(pl.col("user") + UID_BASE + 1).cast(pl.String),
        submit=_ts(pl.col("submit")), eligible=_ts(pl.col("submit")), start=start_txt, end=end_txt,
        elapsedraw=S("elapsed"),
        timelimitraw=pl.when(pl.col("unl")).then(pl.lit("UNLIMITED")).otherwise(S("tl")),
        exitcode=exit_txt, state=st_txt,
        nnodes=pl.when(pl.col("early")).then(S("early_nodes")).otherwise(S("nnodes")),
        ncpus=S("cpus"), reqcpus=S("cpus"), reqmem=mem_txt,
        reqtres="billing=" + S("cpus") + ",cpu=" + S("cpus") + ",gres/gpu=" + S("gpus") + ",mem=" + mem_txt
        + ",node=" + S("nnodes"),
        alloctres=pl.when(never).then(pl.lit("")).otherwise(alloc),
        nodelist=pl.when(never).then(pl.lit("None assigned")).otherwise(nodelist),
        reservation=pl.when(pl.col("resv")).then(pl.lit("big_run")).otherwise(pl.lit("")),
        jobname=pl.col("name"),
    ))
    frames = [jobs]
    n_steps = 0
    if steps:
        r = j.filter(pl.col("ran"))
        blank = {f: pl.lit("") for f in ("partition", "qos", "group", "gid", "user", "uid", "timelimitraw",
                                          "reqtres", "reservation")}
        bstate = state.replace_strict(list(range(10)), _BATCH_STATE, return_dtype=pl.String)
        bexit = pl.when(state == FAILED).then(pl.col("fail_exit")).otherwise(
            state.replace_strict(list(range(10)), [e or "" for e in _BATCH_EXIT], return_dtype=pl.String))
        per_node = lambda c: (pl.col(c) // pl.col("nnodes")).cast(pl.String)  # noqa: E731
        common = dict(cluster=pl.lit(cluster), account=acct, submit=start_txt, eligible=start_txt, start=start_txt,
                      end=end_txt, elapsedraw=S("elapsed"), reqmem=mem_txt, **blank)
        batch = _line(r, dict(
            _k=pl.col("raw") * 4 + 1, jobidraw=S("raw") + ".batch", jobid=jobid + ".batch",
            exitcode=bexit, state=bstate, nnodes=pl.lit("1"), ncpus=per_node("cpus"), reqcpus=per_node("cpus"),
            alloctres=tres(per_node("cpus"), per_node("gpus"), per_node("mem") + "M", pl.lit("1")),
            nodelist=pname + "-" + z3(n0), jobname=pl.lit("batch"), **common,
        ))
        extern = _line(r, dict(
            _k=pl.col("raw") * 4 + 2, jobidraw=S("raw") + ".extern", jobid=jobid + ".extern",
            exitcode=pl.lit("0:0"),
            state=pl.when(state == RUNNING).then(pl.lit("RUNNING")).otherwise(pl.lit("COMPLETED")),
            nnodes=S("nnodes"), ncpus=S("cpus"), reqcpus=S("cpus"), alloctres=alloc, nodelist=nodelist,
            jobname=pl.lit("extern"), **common,
        ))
        m = r.filter(pl.col("nnodes") > 1)
        s0_start = pl.col("start") + pl.col("step0_delay")
        s0_start_txt = _ts(s0_start)
        step0 = _line(m, dict(
            _k=pl.col("raw") * 4 + 3, jobidraw=S("raw") + ".0", jobid=jobid + ".0",
            exitcode=bexit,
            state=pl.when(state == TIMEOUT).then(pl.lit("CANCELLED")).otherwise(bstate),
            nnodes=S("nnodes"), ncpus=S("cpus"), reqcpus=S("cpus"),
            alloctres=tres(S("cpus"), S("gpus"), mem_txt, S("nnodes")), nodelist=nodelist,
            jobname=pl.col("srun"),
            **{**common, "submit": s0_start_txt, "eligible": s0_start_txt, "start": s0_start_txt,
               "elapsedraw": (pl.col("elapsed") - pl.col("step0_delay")).cast(pl.String)},
        ))
        n_steps = batch.height + extern.height + step0.height
        frames += [batch, extern, step0]
    lines = pl.concat(frames).sort("_k").get_column("l")
    return lines, n_steps


def _line(df: pl.DataFrame, fields: dict[str, pl.Expr]) -> pl.DataFrame:
    """(_k order key, l the sacct line) from one expression per field."""
    assert set(fields) == {"_k", *FIELDS}, set(fields) ^ {"_k", *FIELDS}
    return df.select(_k=fields["_k"], l=pl.concat_str([fields[f] for f in FIELDS], separator="|"))
