"""A synthetic Slurm accounting dump: what ``sacct --parsable2`` prints for a busy GPU cluster.

For benchmarks, demos and tests that need volume without a real cluster. The file is deterministic (same
arguments and seed give a byte-identical file), written chunk by chunk in constant memory, and every
chunk is built with numpy/polars column operations (no Python loop per job). Each chunk is a frame of
runs in the shape of the scheduled generator's ``History.runs``, printed by the same writer
(:func:`ops_warehouse.generate.sacct_writer.write_sacct_chunks`): the two differ in how the runs are made
(drawn independently here, scheduled there), not in how sacct is written.

The output has a header line and exactly the fields of
:data:`ops_warehouse.etl.sacct_contract.SACCT_FORMAT`, in that order, times in UTC ``YYYY-MM-DDTHH:MM:SS``
(what ``ops-report etl sacct`` asks sacct for). The simulated cluster is shaped like the product's default:

* partitions ``h100`` (90 nodes ``h100-[001-090]``), ``h200`` (16 nodes), ``b200`` (8 nodes), each node
  with 8 GPUs and 112 CPUs; accounts ``proja`` .. ``projf``; users ``user001`` .. ``user200`` (uid
  10001 ..), each with a primary account (its Unix group) and a heavy-tailed share of the submissions;
* GPUs per job: about 47% one GPU, over 90% fewer than 8, some whole nodes, and a few large jobs
  (64 to 512 GPUs, whole nodes, capped by the partition's size) that take most of the GPU-hours;
* run times lognormal (median a few minutes; large jobs hours), waits lognormal, submissions spread
  over the period with a daily and weekly rhythm;
* states about 60% COMPLETED, 20% FAILED (ExitCode ``1:0``, ``2:0``, ``0:11``...), CANCELLED
  (``CANCELLED by <uid>``, the owner's or 0, some before they started: NodeList ``None assigned``, Start
  = End, ElapsedRaw 0), TIMEOUT (elapsed = time limit), NODE_FAIL, OUT_OF_MEMORY, PREEMPTED (low QOS); jobs
  still running at the end of the period are RUNNING with End ``Unknown``, those not started yet PENDING;
* array jobs (JobID ``123_4``, JobIDRaw the task's own id), TimelimitRaw in minutes (some
  ``UNLIMITED``), ReqTRES/AllocTRES such as ``billing=16,cpu=16,gres/gpu:h100=2,gres/gpu=2,mem=256000M,
  node=1``, NodeList as hostlist expressions (``h100-017``, ``h100-[001-004]``, ``h100-[001-002,010-011]``);
* with ``steps=True`` each job that ran also has ``.batch`` and ``.extern`` step lines, and multi-node
  jobs a ``.0`` (srun) step; step lines leave User, UID, Group, GID, Partition, QOS, TimelimitRaw,
  ReqTRES and Reservation empty, as sacct does (the step lines are those of
  :func:`~ops_warehouse.generate.sacct_writer.sacct_lines`).

Nodes are not scheduled (two jobs may overlap on a node): the dump is for loading and reporting, not for
checking a scheduler. Usage::

    from datetime import datetime, timezone
    from ops_warehouse.generate.volume import write_sacct_dump
    write_sacct_dump("sacct.psv", jobs=100_000, start=datetime(2025, 1, 1, tzinfo=timezone.utc), days=30)
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import polars as pl
from ops_warehouse.generate.sacct_writer import write_sacct_chunks

# (name, nodes, share of submissions)
PARTITIONS = (("h100", 90, 0.70), ("h200", 16, 0.20), ("b200", 8, 0.10))
GPUS_PER_NODE = 8
CPUS_PER_NODE = 112
ACCOUNTS = tuple(f"proj{c}" for c in "abcdef")
N_USERS = 200
UID_BASE = 10000  # user001 -> 10001
GID_BASE = 20000  # proja -> 20001
FIRST_JOB_ID = 1_000_001

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
# Job state codes.
COMPLETED, FAILED, CANCELLED, CANCELLED_EARLY, TIMEOUT, NODE_FAIL, OOM, PREEMPTED = range(8)
_STATE_P = np.array([.60, .20, .07, .03, .05, .01, .02, .02])
# The final state of each code (what sacct shows once the job has ended; the writer shows RUNNING/PENDING
# for jobs that had not ended/started at the end of the period).
_STATE_TXT = ["COMPLETED", "FAILED", "CANCELLED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
              "PREEMPTED"]
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

    def chunks():
        for c in range(math.ceil(jobs / chunk_jobs) if jobs else 0):
            off = c * chunk_jobs
            n = min(chunk_jobs, jobs - off)
            lo = t0 + period * off / jobs
            hi = t0 + period * (off + n) / jobs
            yield _chunk(np.random.default_rng([seed, 1, c]), people, off, n, lo, hi)

    # every job submitted in the period has its line (submit < t0 + period = as_of); the rest are steps
    lines, size = write_sacct_chunks(path, chunks(), cluster=cluster, as_of=t0 + period, steps=steps)
    return {"jobs": jobs, "steps": lines - jobs, "lines": lines, "bytes": size}


def _people(seed: int) -> dict:
    """Fixed per-user facts: primary account, activity weight."""
    rng = np.random.default_rng([seed, 0])
    primary = rng.integers(0, len(ACCOUNTS), N_USERS)
    weight = 1.0 / np.arange(1, N_USERS + 1) ** 1.1  # a few users submit most jobs
    weight = rng.permutation(weight)
    return {"primary": primary, "p": weight / weight.sum()}


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


def _chunk(rng: np.random.Generator, people: dict, off: int, n: int, lo: float, hi: float) -> pl.DataFrame:
    """The runs frame (columns as sacct_writer.sacct_lines takes them) of jobs off .. off+n-1."""
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
    R = lambda a: a[grp]
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
    early = state == CANCELLED_EARLY  # cancelled while pending: no start, ended at cancel_at
    end = np.where(early, submit + (wait * rng.random(n)).astype(np.int64), start + elapsed)
    # nodes: one contiguous block, or (30% of multi-node jobs) two blocks with a gap
    gap = np.where((nn_j > 1) & (rng.random(n) < 0.3), rng.integers(1, 9, n), 0)
    gap = np.where(nn_j + gap > pn_j, 0, gap)
    first_len = np.where(gap > 0, rng.integers(1, np.maximum(nn_j, 2)), nn_j)
    node0 = (rng.random(n) * (pn_j - nn_j - gap + 1)).astype(np.int64) + 1
    # node numbers as partition * 1000 + n; the blocks [lo1, hi1) and [lo2, hi2) (empty unless a gap)
    lo1 = part_j * 1000 + node0
    hi1 = np.where(early, lo1, lo1 + first_len)
    lo2 = lo1 + first_len + gap
    hi2 = np.where(early, lo2, lo1 + nn_j + gap)
    cancel_uid = np.where(rng.random(n) < 0.85, UID_BASE + 1 + user_j, 0)
    fail_exit = rng.choice(_FAIL_EXITS[0], n, p=_FAIL_EXITS[1])

    raw = FIRST_JOB_ID + off + np.arange(n)
    j = pl.DataFrame({
        "raw": raw, "arr": R(is_arr), "arr_id": raw - task, "task": task, "part": part_j, "acct": acct_j,
        "user": user_j, "qos": qos_j, "resv": R(resv), "name": R(name), "submit": submit, "start": start,
        "end": end, "tl": tl_j, "unl": unl_j, "state": state, "gpus": gpus_j, "cpus": cpus_j, "mem": mem_j,
        "lo1": lo1, "hi1": hi1, "lo2": lo2, "hi2": hi2, "early": early, "cancel_uid": cancel_uid,
        "fail_exit": fail_exit, "primary": people["primary"][user_j],
    })
    S = lambda c: pl.col(c).cast(pl.String)
    z3 = lambda e: e.cast(pl.String).str.zfill(3)
    names = lambda c, values: pl.col(c).replace_strict(list(range(len(values))), list(values),
                                                        return_dtype=pl.String)
    prefixes = [p[0] + "-" for p in PARTITIONS]
    node_name = (pl.element() // 1000).replace_strict(list(range(len(PARTITIONS))), prefixes,
                                                       return_dtype=pl.String) + z3(pl.element() % 1000)
    state = pl.col("state")
    return j.select(
        run_idx=pl.col("raw"), job_id_raw=pl.col("raw"),
        job_id=pl.when(pl.col("arr")).then(S("arr_id") + "_" + S("task")).otherwise(S("raw")),
        array_job_id=pl.when(pl.col("arr")).then(pl.col("arr_id")).otherwise(0),
        name=pl.col("name"), user="user" + z3(pl.col("user") + 1), uid=pl.col("user") + UID_BASE + 1,
        account=names("acct", ACCOUNTS), group=names("primary", ACCOUNTS), gid=pl.col("primary") + GID_BASE + 1,
        partition=names("part", [p[0] for p in PARTITIONS]), qos=names("qos", ("normal", "high", "low")),
        submit=pl.col("submit"), start=pl.when(pl.col("early")).then(None).otherwise(pl.col("start")),
        end=pl.col("end"), state=names("state", _STATE_TXT),
        exit=(pl.when(state == FAILED).then(pl.col("fail_exit"))
              .when(state == CANCELLED).then(pl.lit("0:15"))
              .when(state == OOM).then(pl.lit("0:125"))
              .otherwise(pl.lit("0:0"))),
        gpus=pl.col("gpus"), cpus=pl.col("cpus"), mem_mib=pl.col("mem"),
        timelimit_min=pl.when(pl.col("unl")).then(None).otherwise(pl.col("tl")),
        nodes=pl.concat_list(pl.int_ranges("lo1", "hi1"), pl.int_ranges("lo2", "hi2")).list.eval(node_name),
        reservation=pl.when(pl.col("resv")).then(pl.lit("big_run")).otherwise(pl.lit("")),
        cancelled_by=pl.col("cancel_uid"),
    )
