"""What users submit: one row per job, drawn vectorized from distributions calibrated to published traces.

Shapes (targets checked by tests/test_generate_calibration.py): over 40% of jobs on one GPU and over 90% on
fewer than 8, under 10% of GPU-hours; jobs of 256+ GPUs over half of the GPU-hours; run times lognormal
with a median of minutes for small jobs and many hours for large ones; outcomes by count and by GPU time in
the range of the LLM clusters of AcmeTrace (Seren, Kalos) and Helios (tests/data/published/).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl
from ops_warehouse.generate.model import ClusterSpec

# GPUs per job and their probabilities.
GPU_COUNTS = np.array([1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 256, 512])
GPU_P = np.array([.48, .18, .03, .17, .02, .02, .01, .05, .015, .01, .007, .0045, .005, .0025])
# Account shares of submissions; proja is the big customer.
ACCOUNT_P = np.array([.30, .25, .15, .12, .10, .08])
USERS_PER_ACCOUNT = 25
# Intended outcome for jobs that are not cut short by a node failure (which makes NODE_FAIL).
OUTCOMES = np.array(["COMPLETED", "FAILED", "CANCELLED", "OUT_OF_MEMORY", "PREEMPTED", "CANCELLED_PENDING"])
SMALL_OUTCOME_P = np.array([.56, .32, .06, .025, .01, .025])
LARGE_OUTCOME_P = np.array([.30, .22, .45, .0, .03, .0])  # LLM runs: mostly stopped by their owners
TIMELIMITS_MIN = np.array([60, 120, 240, 480, 720, 1440, 2880, 4320])
FAIL_EXITS = np.array(["1:0", "1:0", "1:0", "2:0", "127:0", "0:11", "255:0", "0:6"])
NAMES_SMALL = np.array(["bash", "jupyter", "eval", "infer", "sweep", "data-prep", "tokenize", "debug",
                        "finetune", "sft-8b", "vit-l16", "rl-ppo", "diffusion", "train.sh", "run.py", "aàb-日本"])
IDLE_JOB_P = 0.03  # of jobs under 64 GPUs: held idle all along
# Efficiency cases (issue 52 item 5), each drawn by chance from its own child generator: a run of 8-32 GPUs
# with one GPU idle all along while the others work (a data-loader bug, a rank that never started); a busy
# run using 2-8 % of its GPUs' memory (a small model on a large GPU); a CPU-bound run (GPUs 10-28 % busy,
# CPUs 85-98 %: preprocessing on the CPUs feeding the GPUs); in each account one user whose runs are mostly
# idle (IDLE_USER_SHARE of their runs under 64 GPUs): the account's heaviest user of such runs (GPUs x drawn
# run time) after its busiest submitter (rank 0 by the zipf draw: making the account's main user idle would
# be another site), an interactive user who leaves allocations idle, as Job Defense Shield's lists show
IDLE_GPU_OF_N_P = 0.01  # of the runs of 8-32 GPUs
# of the busy runs under 64 GPUs drawn to run an hour or more (a run of minutes is no efficiency case: Job
# Defense Shield's alerts skip runs under an hour too)
LOW_GPU_MEMORY_P = 0.02
CPU_BOUND_P = 0.02
CASE_MIN_RUNTIME_S = 3600
IDLE_USER_SHARE = 0.8
# an idle user's planted runs are sessions left open (a notebook, an interactive shell), held 65 minutes to
# 2 hours unless drawn longer, so that idle_gpu_jobs' rule (an hour or more) sees those not cut short, as Job
# Defense Shield would. Longer sessions (1.5-8 h) were tried: the site's 256+-GPU share of GPU-hours fell
# under tests/test_generate_calibration.py's 0.5 and the 65-256-GPU runs' median wait over the published 7,374 s
IDLE_SESSION_MIN_S, IDLE_SESSION_MAX_S = 3900, 7200
# what every other run's CPUs and memory do: a GPU job's CPUs mostly wait on the GPUs (2-62 % busy), its
# memory a share of what it asked for (2-92 %)
PLANTS = ("idle_gpu_of_n", "low_gpu_memory", "cpu_bound", "idle_user")
# the drawn job's columns the runs frame carries (schedule.py: truth/runs.parquet and the sacct lines), and
# those its GPU allocations need (plant_idle_gpu)
RUN_PLANT_COLUMNS = ("cpu_eff", "mem_eff", "plant")
ALLOC_PLANT_COLUMNS = ("idle_gpu_rank", "idle_gpu_util")
PLANT_COLUMNS = RUN_PLANT_COLUMNS + ALLOC_PLANT_COLUMNS
NAMES_LARGE = np.array(["llm-train", "nccl-allreduce", "eval-harness", "sft-70b", "pretrain-8b"])
# Training campaigns: a share of the submissions of 128 GPUs or more is a pretraining run of days, carried across time limits,
# crashes, hangs, node failures and preemptions by requeues and resubmissions (schedule.py); its name is one of
# the team's few ("pretrain-8b" is also an independent test run's name) and its owner any of the account's users
CAMPAIGN_P = 0.04  # of the 128+ GPU submissions (about ten a month on the demo's cluster: more push the large
#                    runs' waits past the published ones, tests/test_generate_calibration.py)
NAMES_CAMPAIGN = np.array(["pretrain-70b", "pretrain-8b", "moe-pretrain"])
CAMPAIGN_WORK_MEDIAN_S = 18 * 3600  # the work a campaign has to do, lognormal, 12 h to 6 days
CAMPAIGN_TIMELIMIT_MIN = 2880  # each run asks for the partition's maximum, two days


def draw_jobs(spec: ClusterSpec, start: datetime, days: int, jobs_per_day: int, rng: np.random.Generator,
              campaign_p: float = CAMPAIGN_P) -> pl.DataFrame:
    """Submitted jobs, sorted by submit time (epoch seconds); ``campaign_p`` of the large ones are training
    campaigns (a site of pretraining teams has more)."""
    n = int(days * jobs_per_day)
    t0 = int(start.timestamp())
    # daily rhythm: more submissions in working hours
    hour_w = np.array([3, 2, 2, 2, 2, 3, 4, 6, 9, 11, 12, 12, 11, 12, 12, 12, 11, 10, 8, 7, 6, 5, 4, 3], float)
    day = rng.integers(0, days, n)
    hour = rng.choice(24, n, p=hour_w / hour_w.sum())
    submit = t0 + day * 86400 + hour * 3600 + rng.integers(0, 3600, n)
    submit.sort()
    gpus = rng.choice(GPU_COUNTS, n, p=GPU_P / GPU_P.sum())
    large = gpus >= 64
    acct = rng.choice(len(spec.accounts), n, p=ACCOUNT_P / ACCOUNT_P.sum())
    user = acct * USERS_PER_ACCOUNT + np.minimum(rng.zipf(1.6, n) - 1, USERS_PER_ACCOUNT - 1)
    # run time the job would take if nothing stopped it
    med = np.where(gpus < 8, 150.0, np.where(gpus == 8, 1800.0, np.where(gpus >= 256, 4 * 3600.0, np.where(large, 3 * 3600.0, 5 * 3600.0))))
    sigma = np.where(gpus < 8, 1.7, np.where(large, 0.9, 1.3))
    runtime = np.clip(np.exp(np.log(med) + sigma * rng.standard_normal(n)), 5, 14 * 86400).astype(np.int64)
    # users ask for a limit above what they expect; some guess too low (TIMEOUT)
    tl_margin = rng.uniform(0.7, 3.0, n)
    timelimit = _timelimit_min(runtime, tl_margin)
    unlimited = rng.random(n) < 0.03
    outcome = np.where(large, rng.choice(OUTCOMES, n, p=LARGE_OUTCOME_P), rng.choice(OUTCOMES, n, p=SMALL_OUTCOME_P))
    # failures and OOMs come early, cancellations any time
    cut = np.where(np.isin(outcome, ["FAILED", "OUT_OF_MEMORY"]), rng.uniform(0.02, 0.6, n),
                   np.where(outcome == "CANCELLED", rng.uniform(0.1, 0.9, n),
                            np.where(outcome == "PREEMPTED", rng.uniform(0.2, 0.8, n), 1.0)))
    # arrays: a share of small jobs are tasks of an array submitted together
    arr = (gpus <= 2) & (rng.random(n) < 0.15)
    names = np.where(large, rng.choice(NAMES_LARGE, n), rng.choice(NAMES_SMALL, n))
    # campaigns, from a child generator (every other draw stays what it was): multi-day work, the longest limit,
    # a pretraining name, an owner anywhere in the team (not the account's busiest user alone), checkpoints
    c_rng = rng.spawn(1)[0]
    campaign = (gpus >= 128) & (c_rng.random(n) < campaign_p)
    c_work = np.clip(np.exp(np.log(CAMPAIGN_WORK_MEDIAN_S) + 0.6 * c_rng.standard_normal(n)), 12 * 3600, 6 * 86400)
    runtime = np.where(campaign, c_work.astype(np.int64), runtime)
    timelimit = np.where(campaign, CAMPAIGN_TIMELIMIT_MIN, timelimit)
    unlimited = unlimited & ~campaign
    names = np.where(campaign, c_rng.choice(NAMES_CAMPAIGN, n), names)
    user = np.where(campaign, acct * USERS_PER_ACCOUNT + c_rng.integers(0, USERS_PER_ACCOUNT, n), user)
    outcome = np.where(campaign, "COMPLETED", outcome)
    cut = np.where(campaign, 1.0, cut)
    # one in 40 large runs hangs in NCCL until the watchdog kills it; large runs checkpoint
    hang = large & (rng.random(n) < 0.08) & (outcome != "COMPLETED") & ~campaign  # (a campaign's: per run)
    # idle-GPU jobs (what Princeton's Job Defense Shield lists): a forgotten notebook, a job waiting on data or
    # on a license, holding its GPUs at 0-3 % for its whole run. Drawn from a child generator, so every other
    # draw of the site (jobs, schedule, failures, telemetry) is what it was before they were planted
    idle_rng = rng.spawn(1)[0]
    idle = ~large & (idle_rng.random(n) < IDLE_JOB_P)
    idle_util = idle_rng.uniform(0.0, 3.0, n)
    # (drawn in the order they always were: the site's stream of draws is unchanged)
    fail_exit = rng.choice(FAIL_EXITS, n)
    cancel_wait_s = rng.exponential(1800, n).astype(np.int64)
    util = np.where(idle, idle_util, np.where(large, rng.uniform(88, 99, n), rng.beta(4, 2, n) * 100))
    sm = np.where(idle, idle_util / 300, np.where(large, rng.uniform(0.45, 0.8, n), rng.beta(2, 3, n)))
    tensor = np.where(idle, 0.0, np.where(large, rng.uniform(0.3, 0.6, n), rng.beta(1.5, 4, n)))
    dram = np.where(idle, idle_util / 300, np.where(large, rng.uniform(0.3, 0.6, n), rng.beta(2, 4, n)))
    fb = np.where(large, rng.uniform(0.75, 0.95, n), rng.uniform(0.1, 0.9, n))
    eff = _efficiency_plants(spec, rng.spawn(1)[0], gpus, large, idle, user, acct, campaign, runtime,
                             idle_util, util, sm, tensor, dram, fb)
    # an idle user's planted runs are sessions held an hour or two (the plant's own draw), asking a limit for that
    runtime = eff["runtime_s"]
    timelimit = np.where(eff["plant"] == "idle_user", _timelimit_min(runtime, tl_margin), timelimit)
    return pl.DataFrame({
        "submit": submit, "gpus": gpus.astype(np.int32), "account_idx": acct.astype(np.int32),
        "user_idx": user.astype(np.int32), "runtime_s": runtime, "timelimit_min": timelimit.astype(np.int64),
        "unlimited": unlimited, "outcome": outcome, "cut": cut, "array": arr, "name": names, "hang": hang,
        "fail_exit": fail_exit, "cancel_wait_s": cancel_wait_s,
        "util": eff["util"], "sm_active": eff["sm"], "tensor_active": eff["tensor"], "dram_active": eff["dram"],
        "idle": eff["idle"], "fb_used_frac": eff["fb"],
        **{c: eff[c] for c in PLANT_COLUMNS},
        "ckpt_period_s": np.where(gpus >= 16, rng.choice([1800, 3600, 7200], n), 0).astype(np.int64),
        "campaign": campaign,
        "qos": np.where(rng.random(n) < 0.1, "low", np.where(large, "high", "normal")),
    })


def _timelimit_min(runtime_s, margin):
    """The limit a user asks for a run expected to take ``runtime_s``: the next of TIMELIMITS_MIN above it
    times ``margin`` (some guess too low: TIMEOUT)."""
    need_min = runtime_s / 60 * margin
    return TIMELIMITS_MIN[np.minimum(np.searchsorted(TIMELIMITS_MIN, need_min), len(TIMELIMITS_MIN) - 1)]


def _efficiency_plants(spec: ClusterSpec, e_rng: np.random.Generator, gpus, large, idle, user, acct, campaign,
                       runtime_s, idle_util, util, sm, tensor, dram, fb) -> dict:
    """Every job's CPU and memory efficiency and the planted efficiency cases (PLANTS), from ``e_rng`` alone
    (a child of the site's generator: the site's other draws stay what they were); each draw is of one value
    per job, whatever is planted, so one case's share moves no other case. Returns the job's activity columns
    with the plants applied, ``plant`` (the kind, "" for none; kinds exclusive), ``idle_gpu_rank`` (the idle
    GPU's place among the run's GPUs in (node, gpu) order, -1 for none) and ``idle_gpu_util``."""
    n = len(gpus)
    cpu_eff = 0.02 + 0.6 * e_rng.beta(2, 4, n)
    mem_eff = 0.02 + 0.9 * e_rng.beta(2, 3, n)
    # the idle user of each account: its heaviest user of runs under 64 GPUs but its busiest submitter
    n_acct = len(spec.accounts)
    small_gpu_s = np.bincount(user, weights=np.where(large, 0.0, gpus * runtime_s.astype(float)),
                              minlength=n_acct * USERS_PER_ACCOUNT).reshape(n_acct, USERS_PER_ACCOUNT)
    idle_user_of = np.arange(n_acct) * USERS_PER_ACCOUNT + 1 + small_gpu_s[:, 1:].argmax(axis=1)
    u_draw, g_draw, m_draw, c_draw = (e_rng.random(n) for _ in range(4))
    rank_draw = e_rng.random(n)
    others_util = e_rng.uniform(55.0, 95.0, n)
    others_sm = e_rng.uniform(0.35, 0.7, n)
    low_fb = e_rng.uniform(0.02, 0.08, n)
    busy_util = e_rng.uniform(50.0, 95.0, n)
    cb_util = e_rng.uniform(10.0, 28.0, n)
    cb_sm = e_rng.uniform(0.04, 0.15, n)
    cb_cpu = e_rng.uniform(0.85, 0.98, n)
    # (drawn after the others, so each earlier draw stays what it was)
    session_s = e_rng.uniform(IDLE_SESSION_MIN_S, IDLE_SESSION_MAX_S, n).astype(np.int64)
    small = ~large & ~campaign
    idle_user = small & (user == idle_user_of[acct]) & (idle | (u_draw < IDLE_USER_SHARE))
    idle = idle | idle_user
    free = small & ~idle
    idle_gpu = free & (gpus >= 8) & (gpus <= 32) & (g_draw < IDLE_GPU_OF_N_P)
    long = free & ~idle_gpu & (runtime_s >= CASE_MIN_RUNTIME_S)
    low_mem = long & (m_draw < LOW_GPU_MEMORY_P)
    cpu_bound = long & ~low_mem & (c_draw < CPU_BOUND_P)
    busy = idle_gpu | low_mem
    return {
        "idle": idle,
        "util": np.where(idle_user, idle_util, np.where(idle_gpu, others_util, np.where(
            low_mem, busy_util, np.where(cpu_bound, cb_util, util)))),
        "sm": np.where(idle_user, idle_util / 300, np.where(idle_gpu, others_sm, np.where(
            low_mem, np.maximum(sm, 0.3), np.where(cpu_bound, cb_sm, sm)))),
        "tensor": np.where(idle_user, 0.0, np.where(cpu_bound, cb_sm / 4, np.where(busy, np.maximum(tensor, 0.1),
                                                                                   tensor))),
        "dram": np.where(idle_user, idle_util / 300, np.where(cpu_bound, cb_sm / 2, dram)),
        "fb": np.where(low_mem, low_fb, fb),
        "cpu_eff": np.where(cpu_bound, cb_cpu, cpu_eff),
        "mem_eff": mem_eff,
        "plant": np.select([idle_user, idle_gpu, low_mem, cpu_bound],
                           ["idle_user", "idle_gpu_of_n", "low_gpu_memory", "cpu_bound"], ""),
        "idle_gpu_rank": np.where(idle_gpu, (rank_draw * gpus).astype(np.int64), -1).astype(np.int32),
        "idle_gpu_util": idle_util,
        "runtime_s": np.where(idle_user, np.maximum(runtime_s, session_s), runtime_s),
    }


def plant_idle_gpu(alloc: pl.DataFrame) -> pl.DataFrame:
    """GPU allocations (``run_idx``, ``n`` the node's index, ``gpu``, the run's activity columns and
    ALLOC_PLANT_COLUMNS) with the idle GPU of each ``idle_gpu_of_n`` run planted: the ``idle_gpu_rank``-th of
    the run's GPUs in (node, gpu) order holds 0-3 % util, ~0 activity and under 1 % of its memory (a CUDA
    context) all along, the run's other GPUs as drawn. Row order unchanged."""
    rank = ((pl.col("n") * 4096 + pl.col("gpu")).rank("ordinal").over("run_idx") - 1).cast(pl.Int64)
    hit = rank == pl.col("idle_gpu_rank")
    u = pl.col("idle_gpu_util")
    return alloc.with_columns(
        util=pl.when(hit).then(u).otherwise("util"),
        sm_active=pl.when(hit).then(u / 300).otherwise("sm_active"),
        tensor_active=pl.when(hit).then(0.0).otherwise("tensor_active"),
        dram_active=pl.when(hit).then(u / 300).otherwise("dram_active"),
        fb_used_frac=pl.when(hit).then(u / 300).otherwise("fb_used_frac"),
    )
