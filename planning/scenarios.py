"""What-if scenarios (issue 18): the changes a planner asks for and the replays of a window's history under
each, with the backfill scheduler of backfill.py, one process per scenario when there are several.

A Change (planning/changes.py: nodes of a GPU model added or removed, a project's reservations resized, the
load scaled) applies to the Inputs: the window's jobs, nodes and reservations as plain frames, which
analytics/whatif.py reads from the warehouse's marts and hands back to the engine after the replays. No
warehouse and no engine here.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_all_start_methods, get_context

import numpy as np
import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.planning.backfill import NEVER, Jobs, Nodes, Replay, Reservation, Running, replay
from ops_warehouse.planning.changes import Change

NO_LIMIT_S = 10**9  # a job without a time limit
PENDING_RUNTIME_S = 86400  # a job still pending at the end of the history: it asked for its limit, or a day


@dataclass
class Inputs:
    """The window's history as arrays the scheduler takes (built once, shared by every scenario)."""
    t0: int
    t1: int
    nodes: pl.DataFrame            # node, partition, gpu_model, gpus, in_service, retired, unusable
    partitions: list[str]
    accounts: list[str]
    place: pl.DataFrame            # the jobs to place, in submission order
    running: pl.DataFrame          # jobs running at t0: node, gpus, end
    reservations: pl.DataFrame     # name, start, end, nodes, accounts, projects
    history: pl.DataFrame          # every job of the window as observed
    projects: dict[str, str] = field(default_factory=dict)


def _arrays(inp: Inputs, change: Change | None, seed: int = 0):
    """(Nodes, Jobs, Running, reservations, the node frame, the job frame) of a scenario."""
    nodes = inp.nodes
    if change is not None:
        for model, n in change.remove:
            have = nodes.filter(pl.col("gpu_model").str.to_lowercase() == model.lower())
            if have.height < n:
                raise OpsError(f"--remove {model}:{n}: the cluster has {have.height} {model} nodes")
            gone = set(have.sort("node")["node"].tail(n))
            nodes = nodes.with_columns(retired=pl.when(pl.col("node").is_in(gone)).then(inp.t0)
                                       .otherwise(pl.col("retired")))
        for model, n in change.add:
            like = nodes.filter(pl.col("gpu_model").str.to_lowercase() == model.lower())
            if like.height == 0:
                raise OpsError(f"--add {model}:{n}: the cluster has no {model} nodes to take a partition and a GPU "
                               f"count from (models: {', '.join(sorted(set(nodes['gpu_model'])))})")
            proto = like.row(0, named=True)
            new = pl.DataFrame({"node": [f"{proto['gpu_model']}-added-{i + 1:03d}" for i in range(n)]}).with_columns(
                partition=pl.lit(proto["partition"]), gpu_model=pl.lit(proto["gpu_model"]),
                gpus=pl.lit(proto["gpus"]).cast(nodes.schema["gpus"]), in_service=pl.lit(inp.t0).cast(pl.Int64),
                retired=pl.lit(NEVER).cast(pl.Int64))
            nodes = pl.concat([nodes, new.with_columns(
                [pl.lit(None).cast(nodes.schema[c]).alias(c) for c in nodes.columns if c not in new.columns])
                .select(nodes.columns)]).sort("partition", "node")
    node_idx = {n: i for i, n in enumerate(nodes["node"])}
    un = nodes.select(pl.int_range(pl.len()).alias("i"), "unusable").explode("unusable").drop_nulls("unusable")
    # each interval a (start, end) struct: its fields by position (iterating a struct gives its field names)
    nostart = un.select(pl.col("i").cast(pl.Int64), pl.col("unusable").struct[0].cast(pl.Int64),
                        pl.col("unusable").struct[1].cast(pl.Int64)).to_numpy().reshape(-1, 3).astype(np.int64)
    part_idx = {p: i for i, p in enumerate(inp.partitions)}
    N = Nodes(partition=nodes["partition"].replace_strict(part_idx, return_dtype=pl.Int64).to_numpy(),
              gpus=nodes["gpus"].to_numpy().astype(np.int64), in_service=nodes["in_service"].to_numpy(),
              retired=nodes["retired"].to_numpy(), nostart=nostart)
    jobs = inp.place
    if change is not None and change.scale_load != 1.0:
        jobs = _scale(jobs, change.scale_load, inp.t0, seed)
    acct = {a: i for i, a in enumerate(inp.accounts)}
    ran = jobs["start"].is_not_null().to_numpy()
    end = jobs["end"].fill_null(0).to_numpy().astype(np.int64)
    limit = jobs["timelimit_s"].to_numpy().astype(np.int64)
    limit = np.where(limit > 0, limit, NO_LIMIT_S)
    runtime = np.where(ran, end - jobs["start"].fill_null(0).to_numpy().astype(np.int64),
                       np.minimum(limit, PENDING_RUNTIME_S))
    cancelled = ~ran & jobs["end"].is_not_null().to_numpy()  # never ran, and its end is when it was cancelled
    J = Jobs(submit=jobs["submit"].to_numpy().astype(np.int64), gpus=jobs["gpus"].to_numpy().astype(np.int64),
             partition=jobs["part"].replace_strict(part_idx, return_dtype=pl.Int64).to_numpy(),
             runtime=np.maximum(runtime, 1).astype(np.int64), limit=limit,
             account=jobs["account_l"].replace_strict(acct, return_dtype=pl.Int64).to_numpy(),
             held_until=np.where(cancelled, end, NEVER))
    R = Running(node=np.array([node_idx[n] for n in inp.running["node"]], dtype=np.int64),
                gpus=inp.running["gpus"].to_numpy().astype(np.int64), end=inp.running["end"].to_numpy().astype(np.int64))
    sizes = dict(change.reservation) if change is not None else {}
    resv = []
    for r in inp.reservations.iter_rows(named=True):
        keep = [n for n in r["nodes"] if n in node_idx]
        for p in set(r["projects"]):
            if p in sizes:
                keep = keep[:sizes[p]]
        if not keep:
            continue
        mask = np.zeros(len(node_idx), dtype=bool)
        mask[[node_idx[n] for n in keep]] = True
        resv.append(Reservation(mask, frozenset(acct[a] for a in r["accounts"] if a in acct), r["start"], r["end"]))
    return N, J, R, tuple(resv), nodes, jobs


def _scale(jobs: pl.DataFrame, factor: float, t0: int, seed: int) -> pl.DataFrame:
    """The jobs submitted from t0 on, × factor: each copied once for every whole step above 1 (and a random share
    for the fraction), a copy submitted 1-60 minutes after its original; under 1, a random share dropped."""
    rng = np.random.default_rng(seed)
    mine = jobs.filter(pl.col("submit") >= t0)
    before = jobs.filter(pl.col("submit") < t0)
    whole, frac = int(factor), factor - int(factor)
    keep = rng.random(mine.height) < (frac if factor < 1 else 1.0)
    out = [before, mine.filter(pl.Series(keep))] if factor < 1 else [before, mine]
    copies = max(whole - 1, 0) + (1 if factor > 1 and frac > 0 else 0)
    for c in range(copies):
        take = np.ones(mine.height, bool) if c < whole - 1 else rng.random(mine.height) < frac
        shift = rng.integers(60, 3600, mine.height)
        d = pl.Series(shift[take])
        # the copy as observed, moved later by its shift: the same run time (or the same cancelled wait)
        out.append(mine.filter(pl.Series(take)).with_columns(
            submit=pl.col("submit") + d, start=pl.col("start") + d, end=pl.col("end") + d,
            job_id=pl.col("job_id") + f"+{c + 1}"))
    return pl.concat(out).sort("submit", "job_id_raw", "job_id")


def _run(args) -> Replay:
    nodes, jobs, running, resv, t0, t1, keys, plan_by = args
    return replay(nodes, jobs, t0=t0, horizon=t1, running=running, reservations=resv, keys=keys, plan_by=plan_by)


def replay_scenarios(inp: Inputs, changes: list[Change], *, processes: int = 0, plan_by: str = "limit"
                     ) -> dict[str, tuple]:
    """{label: (node frame, job frame, Replay)} for the unchanged replay ('replay') and every change, in
    parallel processes when there are several (``processes`` 0: one per scenario, at most the CPUs);
    ``plan_by``: the scheduler's backfill plans (planning/backfill.py)."""
    scen = [("replay", None)] + [(c.label, c) for c in changes]
    built = {label: _arrays(inp, c) for label, c in scen}
    args = [(b[0], b[1], b[2], b[3], inp.t0, inp.t1, b[5]["job_id_raw"].to_numpy().astype(np.int64), plan_by)
            for b in built.values()]
    n = processes or min(len(args), os.cpu_count() or 1)
    if n > 1 and len(args) > 1 and "fork" in get_all_start_methods():
        # forked, as the report's charts are: a child only runs the scheduler (numpy), never the engine whose
        # threads the parent holds; spawn would run the caller's script again in each child (a notebook's or
        # a script without a __main__ guard, which would then wait for the warehouse the parent holds)
        with ProcessPoolExecutor(max_workers=n, mp_context=get_context("fork")) as ex:
            results = list(ex.map(_run, args))
    else:
        results = [_run(a) for a in args]
    return {label: (b[4], b[5], r) for (label, b), r in zip(built.items(), results)}
