"""A month of a GPU cluster, simulated: inventory, failures, a reservation, and jobs placed on nodes.

Jobs are placed by planning/backfill.py, the scheduler what-if replays run (one policy: FIFO with EASY
backfill by time limits, reservations, down and drained nodes), so GPU allocations never overlap and
telemetry drawn from them is coherent, and a replay of the accounting gives this schedule back. Node
failures are drawn first (Poisson per node, a few "lemon" nodes at a much higher rate) with an Xid just
before; a job running on a node when it fails ends NODE_FAIL and is often requeued (a new run of the same job
id, submitted when the failed run ended). Drains (high ECC rate, thermal, maintenance) stop new jobs starting
on a node. One project holds a reservation of a quarter of the largest partition for part of the period. A
run's end is decided when it starts (its drawn run time cut by its outcome, slowed on the straggler, ended by
a node failure); the scheduler only sees that end. The placement loop is a discrete-event simulation,
sequential by nature; everything around it is vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
from ops_warehouse.generate.model import (
    GPU_ALLOC_SCHEMA,
    GPU_MODELS,
    INVENTORY_SCHEMA,
    NODE_EVENT_SCHEMA,
    THROTTLE_SCHEMA,
    TS,
    XID_SCHEMA,
    ClusterSpec,
)
from ops_warehouse.generate.workload import (
    ALLOC_PLANT_COLUMNS,
    CAMPAIGN_P,
    GPU_COUNTS,
    RUN_PLANT_COLUMNS,
    draw_jobs,
    plant_idle_gpu,
)
from ops_warehouse.planning.backfill import NEVER, Nodes, Reservation, Scheduler

FAILURES_PER_1000_NODE_DAYS = 4.0
LEMON_FACTOR = 25.0
FATAL_XIDS = {79: "GPU has fallen off the bus", 48: "double-bit ECC error", 95: "uncontained ECC error",
              74: "NVLink error"}
DRAIN_XIDS = {92: "high single-bit ECC error rate", 64: "ECC row remapping failure"}
REQUEUE_SHARE = 0.6
# campaigns (workload.py's CAMPAIGN_P): the job's own crashes come at random, one in CAMPAIGN_MTBF_S of a
# 256-GPU run's time (more often the larger it is: research runs crash more often than their hardware fails;
# OPT-175B's logbook has over a hundred restarts in two months on 992 GPUs); HANG_SHARE of them a hang in NCCL that the watchdog ends; a
# run is preempted (and requeued: PreemptMode=REQUEUE) in PREEMPT_P of the runs; ABANDON_P of the campaigns are
# stopped by their owners part way. After an interruption the campaign goes on by a resubmission of the same
# name and size (a new job id) RESUBMIT_MEDIAN_S after the end (lognormal, from half a minute to RESUBMIT_MAX_S:
# a watcher script, an afternotok job, an engineer on call), or by Slurm's requeue after a node failure
CAMPAIGN_MTBF_S = 12 * 3600
HANG_SHARE = 0.4
PREEMPT_P = 0.05
ABANDON_P = 0.15
RESUBMIT_MEDIAN_S = 600
RESUBMIT_MAX_S = 4 * 3600
# a campaign's restarted run's GPUs are quiet while it loads its checkpoint and data, compiles and joins NCCL
# (not planted on the requeues of other jobs: there it broke the what-if replay's exact reproduction of the
# schedule, tests/test_whatif_calibration.py, for a reason not yet found)
STARTUP_S = (180, 900)
WATCHDOG_S = 1800  # NCCL watchdog kills a hung job after this long
CKPT_WRITE_S = 120  # a checkpoint of a run on whole nodes (8 GPUs x 12 GB at 0.5 GB/s, capped: telemetry.py)
CHUNK_RUNS = 50_000
NO_LIMIT_S = 10**9  # a job without a time limit
LARGE_PARTITION_P = {64: (0.7, 0.3, 0.0)}  # where runs of these GPU counts go, of three partitions
RESERVED_SHARE = 4  # the reservation holds 1/RESERVED_SHARE of the first partition's nodes


@dataclass
class History:
    spec: ClusterSpec
    start: datetime
    end: datetime
    inventory: pl.DataFrame
    runs: pl.DataFrame | pl.LazyFrame  # one row per job run (sacct --duplicates); lazy when spilled to disk
    gpu_alloc: pl.DataFrame | pl.LazyFrame
    node_events: pl.DataFrame
    xids: pl.DataFrame
    throttle: pl.DataFrame
    reservations: pl.DataFrame
    lemons: list[str]
    straggler: str


def _inventory(spec: ClusterSpec, t0: int, rng: np.random.Generator) -> pl.DataFrame:
    rows = []
    for p in spec.partitions:
        m = GPU_MODELS[p.gpu_model]
        # the newest partition came into service a few days into the period
        in_service = t0 + 5 * 86400 if p is spec.partitions[-1] else t0 - 400 * 86400
        for i in range(p.nodes):
            u = rng.integers(0, 256, (spec.gpus_per_node, 16), dtype=np.uint8)
            uuids = ["GPU-{}-{}-{}-{}-{}".format(*(bytes(x).hex()[a:b] for a, b in
                                                   ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))) for x in u]
            rows.append({"node": f"{p.node_prefix}{i + 1:03d}", "partition": p.name, "gpu_model": p.gpu_model,
                         "model_name": m.model_name, "gpus": spec.gpus_per_node,
                         "rack": f"{p.name}-r{i // p.rack_size + 1:02d}",
                         "in_service_ts": datetime.fromtimestamp(in_service, timezone.utc), "gpu_uuids": uuids})
    return pl.DataFrame(rows, schema=INVENTORY_SCHEMA)


def simulate(spec: ClusterSpec | None = None, *, start: datetime, days: int, jobs_per_day: int = 800,
             seed: int = 0, reservation_days: tuple[int, int] = (10, 17), spill_dir: Path | None = None,
             faults: bool = True, campaign_share: float = CAMPAIGN_P) -> History:
    """Simulate the period. With ``spill_dir`` the runs and GPU allocations go to Parquet there as they are
    made (memory stays flat in the number of jobs) and come back as lazy frames. ``faults=False``: a healthy
    cluster (no node failures, lemons, straggler or hot GPUs; the planned maintenance drain and the jobs' own
    failures and hangs stay): what a swap list must leave empty. ``campaign_share``: of the large submissions,
    the training campaigns (workload.py's CAMPAIGN_P)."""
    spec = spec or ClusterSpec()
    rng = np.random.default_rng(seed)
    t0 = int(start.timestamp())
    t_end = t0 + days * 86400
    inv = _inventory(spec, t0, rng)
    nodes = inv.get_column("node").to_list()
    n_nodes, G = len(nodes), spec.gpus_per_node
    part_of = np.array([spec.partitions.index(next(p for p in spec.partitions if p.name == x))
                        for x in inv.get_column("partition")])
    part_nodes = [np.flatnonzero(part_of == i) for i in range(len(spec.partitions))]
    in_service = np.array([int(x.timestamp()) for x in inv.get_column("in_service_ts")])

    # --- node trouble, drawn before any job: failures (down), drains, thermal throttling, a straggler
    big = part_nodes[0]
    # two lemons and a straggler, all different nodes where the partition is big enough
    lemons = [int(x) for x in rng.choice(big, min(2, max(len(big) - 1, 0)), replace=False)]
    rest = np.setdiff1d(big, lemons)
    straggler = int(rng.choice(rest if len(rest) else big))
    rate = np.full(n_nodes, FAILURES_PER_1000_NODE_DAYS / 1000 / 86400 if faults else 0.0)
    rate[lemons] *= LEMON_FACTOR
    ev_node, ev_start, ev_end, ev_state, ev_reason = [], [], [], [], []
    x_node, x_gpu, x_ts, x_code = [], [], [], []
    for n in range(n_nodes):
        t = max(t0, in_service[n])
        while rate[n] > 0:
            t += int(rng.exponential(1 / rate[n]))
            if t >= t_end:
                break
            if rng.random() < 0.75:
                code = int(rng.choice(list(FATAL_XIDS)))
                state, reason, repair = "down", f"Xid {code}: {FATAL_XIDS[code]}", rng.uniform(2, 36) * 3600
            else:
                code = int(rng.choice(list(DRAIN_XIDS)))
                state, reason, repair = "drain", f"Xid {code}: {DRAIN_XIDS[code]}", rng.uniform(4, 48) * 3600
            ev_node.append(n), ev_start.append(t), ev_end.append(int(t + repair)), ev_state.append(state)
            ev_reason.append(reason)
            x_node.append(n), x_gpu.append(int(rng.integers(0, G))), x_ts.append(t - 5), x_code.append(code)
            t += int(repair)
    # planned maintenance: a rack drained for a morning mid-period
    for n in big[8:12]:
        ms = t0 + (days // 2) * 86400 + 6 * 3600
        ev_node.append(int(n)), ev_start.append(ms), ev_end.append(ms + 6 * 3600), ev_state.append("drain")
        ev_reason.append("maintenance: firmware update")
    # a few hot GPUs throttle every afternoon; one node gets drained for it at the end of the first week
    hot = [(int(rng.choice(big)), int(rng.integers(0, G))) for _ in range(3)] if faults else []
    th_node, th_gpu, th_s, th_e = [], [], [], []
    for n, g in hot:
        for d in range(days):
            th_node.append(n), th_gpu.append(g)
            th_s.append(t0 + d * 86400 + 12 * 3600), th_e.append(t0 + d * 86400 + 18 * 3600)
    if hot:
        ev_node.append(hot[0][0]), ev_start.append(t0 + 7 * 86400 + 18 * 3600)
        ev_end.append(t0 + 8 * 86400 + 10 * 3600), ev_state.append("drain"), ev_reason.append("thermal: GPU over temp")

    ev = sorted(zip(ev_node, ev_start, ev_end, ev_state, ev_reason), key=lambda e: (e[1], e[0]))
    # (node, start, end) of each down or drained spell: no job starts on the node then
    nostart = np.array([(n, s, e) for n, s, e, _, _ in ev], dtype=np.int64).reshape(-1, 3)
    down_at = {}  # node -> sorted failure times (they kill running jobs)
    for n, s, _, st, _ in ev:
        if st == "down":
            down_at.setdefault(n, []).append(s)

    # --- the reservation: for part of the period the first account holds a quarter of the first partition's
    # nodes for its hero runs; the rest stays open to every account (a reservation of half the partition for
    # a week left half of it idle while other accounts' large runs queued for the other half: waits of days)
    owner = 0
    rs, re_ = t0 + reservation_days[0] * 86400, t0 + reservation_days[1] * 86400
    resv_name = f"{spec.accounts[owner]}_{spec.partitions[0].name}"
    resv_nodes = big[: -(-len(big) // RESERVED_SHARE)]
    in_resv_node = np.isin(np.arange(n_nodes), resv_nodes)

    jobs = draw_jobs(spec, start, days, jobs_per_day, rng, campaign_p=campaign_share)
    n_jobs = jobs.height
    J = {c: jobs.get_column(c).to_numpy(writable=True) for c in jobs.columns}
    # partition: by capacity; mid-size runs (8-32 GPUs) favour the newer partitions, whose GPUs would
    # otherwise only see small jobs; large runs (64+) need the largest one; nothing goes to a partition
    # before it is in service; while the owner holds its reservation, the other accounts send their runs under
    # 64 GPUs elsewhere
    n_parts = len(spec.partitions)
    cap = np.array([p.nodes for p in spec.partitions], float)
    part = rng.choice(n_parts, n_jobs, p=cap / cap.sum())
    mid = (J["gpus"] >= 8) & (J["gpus"] <= 32)
    part = np.where(mid, rng.choice(n_parts, n_jobs, p=[0.4, 0.3, 0.3] if n_parts == 3 else cap / cap.sum()), part)
    # large runs need the largest partition, except a share of the 64-GPU runs, which the H200 partition holds
    part = np.where(J["gpus"] >= 64, 0, part)
    if n_parts == 3:
        for g, share in LARGE_PARTITION_P.items():
            part = np.where(J["gpus"] == g, rng.choice(n_parts, n_jobs, p=share), part)
    late = in_service[part_nodes[-1][0]]
    part = np.where((part == n_parts - 1) & (J["submit"] < late), 0, part)
    in_resv = (J["submit"] >= rs - 3 * 86400) & (J["submit"] < re_) & (J["account_idx"] != owner)
    others = np.where(J["submit"] >= late, rng.choice([1, 2], n_jobs, p=[2 / 3, 1 / 3]), 1)
    part = np.where(in_resv & (part == 0) & (J["gpus"] < 64), others, part)
    # no run may take more than half the first partition (the shared QOS's limit, as sites set it, so that no
    # single run drains it), except the hero runs of the reservation's owner submitted while it holds its nodes
    qos_max = max(int(GPU_COUNTS[GPU_COUNTS * 2 <= len(big) * G].max(initial=G)), G)
    # (a quarter larger than the QOS allows, on its reserved nodes and the open ones)
    hero = (J["account_idx"] == owner) & (J["submit"] >= rs) & (J["submit"] < re_)
    hero_gpus = (qos_max + qos_max // 4) // G * G
    J["gpus"] = np.where(hero, np.minimum(J["gpus"], hero_gpus), np.minimum(J["gpus"], qos_max)).astype(J["gpus"].dtype)
    # a job larger than its partition goes to the first (largest) partition; on a small (scaled-down)
    # cluster a job larger than even that is cut to it: Slurm refuses a job no partition can hold at submit
    # time, and one left in the queue would block every multi-node job behind it
    part = np.where(J["gpus"] > np.array([p.nodes for p in spec.partitions])[part] * G, 0, part)
    J["gpus"] = np.minimum(J["gpus"], spec.partitions[0].nodes * G).astype(J["gpus"].dtype)

    slow = np.ones(n_nodes)
    if faults:
        slow[straggler] = 0.7

    raw_id = np.arange(1_000_001, 1_000_001 + n_jobs, dtype=np.int64)
    array_of = np.full(n_jobs, -1, dtype=np.int64)
    task_of = np.full(n_jobs, -1, dtype=np.int64)
    # arrays: array-flagged jobs of one user submitted within a minute of the first form one array, submitted
    # together (each task's submit time is the array's, as sacct shows it)
    arr_open: dict[int, list[int]] = {}
    for i in np.flatnonzero(J["array"]):
        u = int(J["user_idx"][i])
        a = arr_open.get(u)
        if a and J["submit"][i] - a[1] < 60:
            array_of[i], task_of[i] = a[0], a[2] + 1
            J["submit"][i] = a[1]
            a[2] += 1
        else:
            array_of[i], task_of[i] = raw_id[i], 0
            arr_open[u] = [int(raw_id[i]), int(J["submit"][i]), 0]
    arrival = np.argsort(J["submit"], kind="stable")  # by submit time, then job id

    out: list[dict] = []
    alloc_rows = []
    # finished run records go to compact frames every CHUNK_RUNS runs: Python dicts per run are what made
    # the memory grow with the number of jobs
    chunks: list[tuple[pl.DataFrame, pl.DataFrame]] = []
    flushed = [0]

    def flush() -> None:
        if out:
            c = _chunk(spec, nodes, J, raw_id, array_of, task_of, out, alloc_rows, slow, flushed[0])
            if spill_dir is not None:
                Path(spill_dir).mkdir(parents=True, exist_ok=True)
                c[0].write_parquet(Path(spill_dir) / f"runs-{len(chunks):05d}.parquet")
                c[1].write_parquet(Path(spill_dir) / f"gpu_alloc-{len(chunks):05d}.parquet")
                c = (None, None)
            chunks.append(c)
            flushed[0] += len(out)
            out.clear()
            alloc_rows.clear()

    # placement: the one scheduling policy of planning/backfill.py (what-if replays run it too)
    sched = Scheduler(
        Nodes(partition=part_of.astype(np.int64), gpus=np.full(n_nodes, G, dtype=np.int64),
              in_service=in_service.astype(np.int64), retired=np.full(n_nodes, NEVER, dtype=np.int64),
              nostart=nostart),
        t0=t0, reservations=(Reservation(in_resv_node, frozenset({owner}), rs, re_),))
    limit_of = np.where(J["unlimited"], NO_LIMIT_S, J["timelimit_min"] * 60).astype(np.int64)
    held = J["outcome"] == "CANCELLED_PENDING"  # held (a dependency that never resolves) until cancelled
    cancel_at = J["submit"] + J["cancel_wait_s"]
    run_job: list[int] = []     # scheduler job -> drawn job
    run_no_of: list[int] = []   # its run number (requeues: 1, 2, ...)
    run_left: list[int] = []    # run time left (-1: the drawn one)
    run_raw: list[int] = []     # its job id (a resubmission's is new)
    run_camp: list[int] = []    # the job id of its campaign's first run
    next_id = [int(raw_id[-1]) + 1 if n_jobs else 1_000_001]
    # a campaign's owner stops it once this much of its work is done (never: above 1)
    abandon_at = np.where(rng.random(n_jobs) < ABANDON_P, rng.uniform(0.1, 0.9, n_jobs), 2.0)
    # what a run's start reads of its job, as Python lists: a numpy scalar a read (and its arithmetic) was
    # most of on_start's time, once a run (the same values: float64 either way)
    L = {c: J[c].tolist() for c in ("runtime_s", "ckpt_period_s", "account_idx", "campaign", "gpus", "outcome",
                                    "cut", "hang", "fail_exit")}
    part_l, limit_l, abandon_l = part.tolist(), limit_of.tolist(), abandon_at.tolist()
    slow_l, in_resv_l = slow.tolist(), in_resv_node.tolist()
    for i in arrival.tolist():
        sched.add(J["submit"][i], J["gpus"][i], part[i], limit_of[i], J["account_idx"][i], key=raw_id[i],
                  held_until=int(cancel_at[i]) if held[i] else NEVER)
        run_job.append(i), run_no_of.append(0), run_left.append(-1)
        run_raw.append(int(raw_id[i])), run_camp.append(int(raw_id[i]))

    def add_run(i: int, submit: int, run_no: int, left: int, raw: int, camp: int, p: int, limit_s: int,
                acct: int) -> None:
        sched.add(submit, J["gpus"][i], p, limit_s, acct, key=raw)
        run_job.append(i), run_no_of.append(run_no), run_left.append(left)
        run_raw.append(raw), run_camp.append(camp)

    def on_start(s: int, t: int, chosen: np.ndarray, gsel: np.ndarray) -> int:
        """A run starts on ``chosen``: how it ends (its outcome, a node failure, the slow node), recorded."""
        i, run_no, remaining = run_job[s], run_no_of[s], run_left[s]
        ch = chosen.tolist()
        limit_s = limit_l[i]
        runtime = L["runtime_s"][i] if remaining < 0 else remaining
        period = L["ckpt_period_s"][i]
        p, acct = part_l[i], L["account_idx"][i]
        rate = min(slow_l[n] for n in ch)
        campaign = L["campaign"][i]
        startup = int(rng.integers(*STARTUP_S)) if run_no > 0 and campaign else 0
        hang_from = None
        if campaign:
            # work done at startup + rate × time; ends at the first of: done, time limit, a crash or hang, a
            # node failure, a preemption, its owner stopping it
            work = L["runtime_s"][i]
            ends = {"COMPLETED": t + startup + int(np.ceil(runtime / rate)), "TIMEOUT": t + limit_s,
                    "FAILED": t + startup + int(rng.exponential(CAMPAIGN_MTBF_S * 256 / max(L["gpus"][i], 1)))}
            if rng.random() < PREEMPT_P:
                ends["PREEMPTED"] = t + int(rng.uniform(0.1, 0.9) * min(limit_s, ends["COMPLETED"] - t))
            stop_left = work - abandon_l[i] * work  # the work left when its owner stops it
            if runtime > stop_left > 0:
                ends["CANCELLED"] = t + startup + int(np.ceil((runtime - stop_left) / rate))
            state = min(ends, key=lambda k: (ends[k], k != "COMPLETED"))
            end_t = max(ends[state], t + 1)
            if state == "FAILED" and rng.random() < HANG_SHARE and end_t - t > WATCHDOG_S + startup:
                hang_from = end_t - WATCHDOG_S
        else:
            outcome = str(L["outcome"][i]) if run_no == 0 else "COMPLETED"
            dur = int(min(runtime * (L["cut"][i] if run_no == 0 else 1.0), limit_s))
            dur = max(dur, 1)
            if rate < 1:
                dur = int(min(dur / rate, limit_s))
            end_t = t + dur  # (no start-up planted here: dur is within the limit)
            state = outcome
            if run_no == 0 and L["cut"][i] >= 1.0 and runtime > limit_s:
                state = "TIMEOUT"
        failed_at = min((f for n in ch for f in down_at.get(n, []) if t < f < end_t), default=None)
        if failed_at is not None:
            end_t, state, hang_from = failed_at, "NODE_FAIL", None
        if not campaign and L["hang"][i] and state in ("FAILED", "CANCELLED", "TIMEOUT") \
                and end_t - t > 2 * WATCHDOG_S:
            hang_from, state = end_t - WATCHDOG_S, "FAILED"
        exit_code = {"FAILED": "0:6" if hang_from else str(L["fail_exit"][i]), "OUT_OF_MEMORY": "0:125",
                     "TIMEOUT": "0:0"}.get(state, "0:0")
        # what the run keeps: the work up to its last checkpoint written whole (one every period from its start,
        # none during a hang), all of it when it completed; the rest of its time is lost (the truth's lost_s),
        # its start-up apart when a checkpoint kept the work after it
        worked_to = hang_from if hang_from is not None else end_t
        n_ckpt = _checkpoints(worked_to - t, period)
        if state == "COMPLETED":
            lost_s, kept_s = 0, max(end_t - t - startup, 0)
        elif n_ckpt > 0 and n_ckpt * period > startup:
            lost_s, kept_s = end_t - (t + n_ckpt * period), n_ckpt * period - startup
        else:
            lost_s, kept_s = end_t - t, 0
        out.append({"i": i, "run": run_no, "submit": sched.submit[s], "partition": spec.partitions[p].name,
                    "start": t, "end": end_t, "state": state, "exit": exit_code,
                    "nodes": [nodes[n] for n in sorted(ch)], "hang_from": hang_from,
                    "reservation": resv_name if (acct == owner and rs <= t < re_ and any(in_resv_l[n] for n in ch))
                    else "", "raw": run_raw[s], "campaign": run_camp[s], "lost_s": lost_s,
                    "startup_s": startup if state == "COMPLETED" or kept_s > 0 else 0,
                    "busy_from": min(t + startup, end_t)})
        alloc_rows.append((flushed[0] + len(out) - 1, chosen, gsel))
        left = max(runtime - int(kept_s * rate), 60)
        if campaign and state not in ("COMPLETED", "CANCELLED"):
            if state in ("NODE_FAIL", "PREEMPTED") and (state == "PREEMPTED" or rng.random() < REQUEUE_SHARE):
                add_run(i, end_t, run_no + 1, left, run_raw[s], run_camp[s], p, limit_s, acct)  # Slurm's requeue
            else:
                delay = int(np.clip(np.exp(np.log(RESUBMIT_MEDIAN_S) + rng.standard_normal()), 30, RESUBMIT_MAX_S))
                add_run(i, end_t + delay, run_no + 1, left, next_id[0], run_camp[s], p, limit_s, acct)
                next_id[0] += 1
        elif not campaign and state == "NODE_FAIL" and rng.random() < REQUEUE_SHARE:
            # the requeued run starts again from the run's last complete checkpoint (from the beginning
            # without one): the work since then is done twice, as the campaigns mart measures it
            add_run(i, end_t, run_no + 1, left, run_raw[s], run_camp[s], p, limit_s, acct)
        if len(out) >= CHUNK_RUNS:
            flush()
        return end_t

    sched.run(t_end, on_start)
    # what never started: cancelled in the queue by the period's end, else still pending
    for s in np.flatnonzero(np.array(sched.start) < 0).tolist():
        i = run_job[s]
        c = int(cancel_at[i]) if (held[i] and run_no_of[s] == 0) else None
        out.append({"i": i, "run": run_no_of[s], "submit": sched.submit[s], "partition": spec.partitions[int(part[i])].name,
                    "start": None, "end": c if c is not None and c < t_end else None,
                    "state": "CANCELLED" if c is not None and c < t_end else "PENDING", "exit": "0:0",
                    "nodes": [], "hang_from": None, "reservation": "", "raw": run_raw[s], "campaign": run_camp[s],
                    "lost_s": 0, "startup_s": 0})
    flush()
    if spill_dir is not None and chunks:
        runs = pl.scan_parquet(Path(spill_dir) / "runs-*.parquet")
        gpu_alloc = pl.scan_parquet(Path(spill_dir) / "gpu_alloc-*.parquet")
    else:
        runs = pl.concat([c[0] for c in chunks]) if chunks else _chunk(spec, nodes, J, raw_id, array_of, task_of,
                                                                       [], [], slow, 0)[0]
        gpu_alloc = pl.concat([c[1] for c in chunks]) if chunks else pl.DataFrame(schema=GPU_ALLOC_SCHEMA)
    h = _frames(spec, start, t0, t_end, inv, nodes, runs, gpu_alloc,
                   (ev, x_node, x_gpu, x_ts, x_code), (th_node, th_gpu, th_s, th_e),
                   (resv_name, spec.accounts[owner], spec.partitions[0], [nodes[n] for n in resv_nodes], rs, re_),
                   lemons, straggler)
    if not faults:
        h.lemons, h.straggler = [], ""
    return h


def _checkpoints(elapsed_s: int, ckpt_period_s: int) -> int:
    """Checkpoints a run that worked ``elapsed_s`` wrote whole (one every ``ckpt_period_s`` from its start, each
    taking CKPT_WRITE_S), 0 without."""
    if ckpt_period_s <= 0:
        return 0
    return max(0, (elapsed_s - CKPT_WRITE_S) // ckpt_period_s)


def _dt(v) -> datetime | None:
    return None if v is None else datetime.fromtimestamp(int(v), timezone.utc)


_RUNS_SCHEMA = {
    "job_id_raw": pl.Int64, "job_id": pl.String, "array_job_id": pl.Int64, "run": pl.Int32, "name": pl.String,
    "user": pl.String, "uid": pl.Int64, "account": pl.String, "gid": pl.Int64, "partition": pl.String,
    "qos": pl.String, "submit": pl.Int64, "start": pl.Int64, "end": pl.Int64, "state": pl.String,
    "exit": pl.String, "gpus": pl.Int32, "timelimit_min": pl.Int64, "nodes": pl.List(pl.String),
    "reservation": pl.String, "hang_from": pl.Int64, "ckpt_period_s": pl.Int64,
    "campaign": pl.Int64, "planted_campaign": pl.Boolean, "lost_s": pl.Int64, "startup_s": pl.Int64,
    "busy_from": pl.Int64,
}
_RUNS_SCHEMA_PLANTS = {"cpu_eff": pl.Float64, "mem_eff": pl.Float64, "plant": pl.String}


def _chunk(spec, nodes, J, raw_id, array_of, task_of, out, alloc_rows, slow, offset: int
           ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, gpu_alloc) frames of run records ``out`` (run_idx numbered from ``offset``): the records' own
    fields a column at a time, the drawn job's by one gather of each column (a dict a run, built field by
    field from numpy scalars, was most of this function's time)."""
    n = len(out)
    i = np.fromiter((r["i"] for r in out), np.int64, n)
    field = lambda k, d=None: [r.get(k, d) for r in out]  # noqa: E731
    raw = np.array([r["raw"] if "raw" in r else raw_id[r["i"]] for r in out], dtype=np.int64)
    arr_of, task = np.asarray(array_of)[i], np.asarray(task_of)[i]
    is_arr = arr_of >= 0
    users = pl.Series([f"user{u + 1:03d}" for u in range(len(spec.accounts) * 25)])
    user_idx = np.asarray(J["user_idx"])[i].astype(np.int64)
    acct_idx = np.asarray(J["account_idx"])[i].astype(np.int64)
    unlimited = np.asarray(J["unlimited"])[i].astype(bool)
    camp = field("campaign")
    runs = pl.DataFrame({
        "job_id_raw": raw,
        "job_id": np.where(is_arr, np.char.add(np.char.add(arr_of.astype(str), "_"), task.astype(str)),
                           raw.astype(str)).astype(object) if n else [],
        "array_job_id": np.where(is_arr, arr_of, 0),
        "run": field("run"), "name": np.asarray(J["name"])[i].astype(str).astype(object),
        "user": users.gather(user_idx) if n else [], "uid": 10001 + user_idx,
        "account": pl.Series(spec.accounts).gather(acct_idx) if n else [], "gid": 20001 + acct_idx,
        "partition": field("partition"), "qos": np.asarray(J["qos"])[i].astype(str).astype(object),
        "submit": field("submit"), "start": field("start"), "end": field("end"), "state": field("state"),
        "exit": field("exit"), "gpus": np.asarray(J["gpus"])[i].astype(np.int64),
        "timelimit_min": pl.Series(np.asarray(J["timelimit_min"])[i].astype(np.int64)).set(pl.Series(unlimited), None)
        if n else [],
        "nodes": _name_lists(field("nodes")), "reservation": field("reservation"), "hang_from": field("hang_from"),
        "ckpt_period_s": np.asarray(J["ckpt_period_s"])[i].astype(np.int64),
        # the truth of goodput: the campaign (its first run's job id), the run's work lost at its end and
        # its start-up (a restart's quiet GPUs, when it kept work after it), in seconds
        "campaign": [raw[k] if c is None else c for k, c in enumerate(camp)],
        "planted_campaign": np.asarray(J["campaign"])[i].astype(bool),
        "lost_s": field("lost_s", 0), "startup_s": field("startup_s", 0),
        "busy_from": field("busy_from"),  # its GPUs quiet from start to here (a restart's start-up)
    }, schema_overrides={"nodes": pl.List(pl.String)}, strict=False).select(
        [pl.col(c).cast(t) for c, t in _RUNS_SCHEMA.items()]).hstack(
        # the planted efficiency cases and every run's CPU and memory efficiency (workload.py)
        [pl.Series(c, np.asarray(J[c])[i], _RUNS_SCHEMA_PLANTS[c]) for c in RUN_PLANT_COLUMNS]
    ).with_row_index("run_idx", offset=offset)
    # GPU allocations: one row per (run, node, GPU)
    per_node = [(ri, n, gs) for ri, chosen, gsel in alloc_rows for n, gs in zip(chosen, gsel)]
    lens = np.fromiter((len(gs) for _, _, gs in per_node), np.int64, len(per_node))
    per = pl.DataFrame({
        "run_idx": np.repeat(np.fromiter((ri for ri, _, _ in per_node), np.int64, len(per_node)), lens).astype(np.uint32),
        "n": np.repeat(np.fromiter((n for _, n, _ in per_node), np.int64, len(per_node)), lens),
        "gpu": (np.concatenate([np.asarray(gs, np.int64) for _, _, gs in per_node]) if per_node
                else np.zeros(0, np.int64)).astype(np.int32)})
    J_run = runs.select("run_idx", "job_id", "start", "end", "hang_from", "busy_from", "gpus")
    prof = pl.DataFrame({c: J[c][i] for c in ("util", "sm_active", "tensor_active", "dram_active",
                                               "fb_used_frac", "ckpt_period_s", *ALLOC_PLANT_COLUMNS)}).with_row_index(
        "run_idx", offset=offset)
    node_names = pl.Series(nodes)
    gpu_alloc = (
        plant_idle_gpu(per.join(J_run, on="run_idx").join(prof, on="run_idx"))
        .with_columns(
            node=node_names.gather(per.get_column("n")).alias("node") if per.height else pl.lit(None, pl.String),
            start_ts=pl.from_epoch("start", "s").dt.replace_time_zone("UTC"),
            end_ts=pl.from_epoch("end", "s").dt.replace_time_zone("UTC"),
            hang_from_ts=pl.from_epoch("hang_from", "s").dt.replace_time_zone("UTC"),
            busy_from_ts=pl.from_epoch("busy_from", "s").dt.replace_time_zone("UTC"),
            gpu_util=pl.col("util"),
            power_frac=(0.35 + 0.65 * (0.6 * pl.col("sm_active") + 0.4 * pl.col("tensor_active"))).clip(0, 1),
            # checkpoints: a few GB per GPU each time
            ckpt_bytes=pl.when(pl.col("ckpt_period_s") > 0).then(pl.col("gpus").cast(pl.Float64).clip(0, 8) * 12e9)
            .otherwise(0.0),
            slowdown=pl.Series(slow).gather(per.get_column("n")) if per.height else pl.lit(1.0),
        )
        .select([pl.col(c).cast(t) for c, t in GPU_ALLOC_SCHEMA.items()])
    )
    return runs, gpu_alloc


def _name_lists(lists: list[list[str]]) -> pl.Series:
    """A List(String) column of Python lists of names, made from their concatenation and offsets: polars making
    it list by list (a Series a run) was a tenth of the simulation's CPU (issue 51 item 3, round 11)."""
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, lists), np.int64, len(lists)), out=offsets[1:])
    return pl.Series(pa.LargeListArray.from_arrays(
        pa.array(offsets), pa.array(list(chain.from_iterable(lists)), pa.large_string())))


def _frames(spec, start, t0, t_end, inv, nodes, runs, gpu_alloc, events, throttle, resv, lemons, straggler
            ) -> History:
    ev, x_node, x_gpu, x_ts, x_code = events
    node_events = pl.DataFrame({
        "node": [nodes[e[0]] for e in ev], "start_ts": [_dt(e[1]) for e in ev], "end_ts": [_dt(e[2]) for e in ev],
        "state": [e[3] for e in ev], "reason": [e[4] for e in ev]}, schema=NODE_EVENT_SCHEMA)
    xids = pl.DataFrame({"node": [nodes[n] for n in x_node], "gpu": x_gpu, "ts": [_dt(t) for t in x_ts],
                         "xid": x_code}, schema=XID_SCHEMA)
    # application faults: Xid 31 (GPU memory page fault) on a GPU of some failed jobs, at their end
    fails = gpu_alloc.lazy().join(runs.lazy().filter(pl.col("state") == "FAILED").select("job_id", "run_idx"),
                                  on="job_id").filter((pl.col("gpu") == 0) & (pl.col("run_idx") % 5 == 0)).collect()
    xids = pl.concat([xids, fails.select("node", "gpu", (pl.col("end_ts") - pl.duration(seconds=2)).alias("ts"),
                                         pl.lit(31, pl.Int32).alias("xid"))]).sort("ts", "node", "gpu")
    th_node, th_gpu, th_s, th_e = throttle
    throttle_df = pl.DataFrame({"node": [nodes[n] for n in th_node], "gpu": th_gpu,
                                "start_ts": [_dt(t) for t in th_s], "end_ts": [_dt(t) for t in th_e]},
                               schema=THROTTLE_SCHEMA)
    name, acct, p, resv_nodes, rs, re_ = resv
    reservations = pl.DataFrame({
        "name": [name], "accounts": [acct], "partition": [p.name],
        "nodes": [resv_nodes], "start_ts": [_dt(rs)], "end_ts": [_dt(re_)],
    }, schema={"name": pl.String, "accounts": pl.String, "partition": pl.String, "nodes": pl.List(pl.String),
               "start_ts": TS, "end_ts": TS})
    return History(spec, start, datetime.fromtimestamp(t_end, timezone.utc), inv, runs, gpu_alloc, node_events,
                   xids, throttle_df, reservations, [nodes[n] for n in lemons], nodes[straggler])
