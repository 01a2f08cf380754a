"""A backfill scheduler that replays a job history on a cluster: the policy of the cluster generator's
(generate/schedule.py), on given jobs and nodes, for what-if capacity planning (analytics/whatif.py).

Policy (the generator's, so that replaying a generated month reproduces it):
- priority is submission order (first in, first out); a job may start when its partition has ``k`` nodes
  with ``per_node`` GPUs free (k = ⌈gpus ÷ GPUs a node⌉, per_node = min(gpus, GPUs a node)), available (in
  service, not down or drained, not reserved for others);
- single-node jobs pack onto the fullest node that fits; multi-node jobs take the first free nodes;
- EASY backfill: the oldest multi-node job that cannot start holds the nodes that free up first for the time
  they do (its shadow); a later job may use them only when it ends before (by its run time or its time
  limit, the shorter: the generator knows run times, and so does a replay of observed ones);
- when resources free up, the whole queue is tried in priority order, at most ``bf_max_job_part`` jobs of
  each (partition, multi-node or not) queue (Slurm's bf_max_job_part); when only new jobs arrived, only they;
- a reservation's nodes start only its accounts' jobs while it lasts, and another account's job only when it
  ends before the reservation starts (its time limit, at most three days, counted);
- a job's run time is the observed one: a node failure in the replay does not end a job, and nothing is
  requeued (each observed run is a job of its own, submitted when it was).

Everything is numpy over node arrays; the event loop is sequential by nature. No warehouse here: the caller
(analytics/whatif.py) reads the jobs and nodes and writes what comes back.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

THREE_DAYS_S = 3 * 86400
NEVER = np.iinfo(np.int64).max // 4


@dataclass
class Nodes:
    """The nodes, one entry each: partition index, GPUs, in-service interval, and intervals in which no job may
    start (down, drained): ``nostart`` rows (node index, start, end)."""
    partition: np.ndarray   # int
    gpus: np.ndarray        # int
    in_service: np.ndarray  # epoch s
    retired: np.ndarray     # epoch s (NEVER: still in service)
    nostart: np.ndarray     # (n, 3) int64


@dataclass
class Reservation:
    nodes: np.ndarray       # bool mask over the nodes
    accounts: frozenset     # account indices allowed
    start: int
    end: int


@dataclass
class Jobs:
    """The jobs to place, sorted by submission: submit time, GPUs, partition index, run time and time limit
    (seconds), account index, and ``held_until``: a job that never ran (held, then cancelled in the queue)
    waits in the queue until then and never starts (it still takes its turn among the jobs tried); NEVER for
    every other job."""
    submit: np.ndarray
    gpus: np.ndarray
    partition: np.ndarray
    runtime: np.ndarray
    limit: np.ndarray
    account: np.ndarray
    held_until: np.ndarray


@dataclass
class Running:
    """Jobs already running when the replay starts: node indices (one row per node held), GPUs on it, end."""
    node: np.ndarray
    gpus: np.ndarray
    end: np.ndarray


@dataclass
class Replay:
    start: np.ndarray   # epoch s; -1: did not start before the horizon
    events: int         # scheduling passes run
    tries: int          # jobs tried in them


def replay(nodes: Nodes, jobs: Jobs, *, t0: int, horizon: int, running: Running | None = None,
           reservations: tuple[Reservation, ...] = (), bf_max_job_part: int = 60) -> Replay:
    """Place ``jobs`` from ``t0`` (jobs submitted before it are queued at it) until ``horizon``."""
    n_nodes = len(nodes.gpus)
    G = int(nodes.gpus.max()) if n_nodes else 8
    busy = np.full((n_nodes, G), t0 - 1, dtype=np.int64)
    # nodes with fewer GPUs than the widest: their missing GPUs are never free
    for n in np.flatnonzero(nodes.gpus < G):
        busy[n, nodes.gpus[n]:] = NEVER
    n_parts = int(nodes.partition.max()) + 1 if n_nodes else 0
    part_nodes = [np.flatnonzero(nodes.partition == p) for p in range(n_parts)]
    completions: list[int] = []
    if running is not None:
        for n, g, e in zip(running.node, running.gpus, running.end):
            free = np.argsort(busy[n] > t0, kind="stable")[:min(int(g), G)]
            busy[n, free] = e
            completions.append(int(e))
    heapq.heapify(completions)
    ns = nodes.nostart
    n_jobs = len(jobs.submit)
    start = np.full(n_jobs, -1, dtype=np.int64)
    per_node_of = np.minimum(jobs.gpus, G).astype(np.int64)
    k_of = np.maximum(1, -(-jobs.gpus.astype(np.int64) // G))
    multi = jobs.gpus > G
    span = np.minimum(jobs.limit, jobs.runtime)  # how long a job holds what it takes, for the shadow test
    resv_limit = np.minimum(jobs.limit, THREE_DAYS_S)
    shadow: dict[int, tuple[int, np.ndarray, int]] = {}
    counters = [0, 0]

    def available(t: int) -> np.ndarray:
        ok = (nodes.in_service <= t) & (t < nodes.retired)
        if len(ns):
            m = (ns[:, 1] <= t) & (t < ns[:, 2])
            ok[ns[m, 0]] = False
        return ok

    held = jobs.held_until < NEVER

    def try_start(i: int, t: int, free: np.ndarray, avail: np.ndarray, summary: dict) -> bool:
        p, per_node, k = int(jobs.partition[i]), int(per_node_of[i]), int(k_of[i])
        if p >= n_parts or held[i]:
            return False
        key = p
        if key not in summary:
            f = np.where(avail[part_nodes[p]], free[part_nodes[p]], 0)
            summary[key] = np.bincount(f, minlength=G + 1)[::-1].cumsum()[::-1]
        if summary[key][per_node] < k:
            return False
        cand = part_nodes[p]
        ok = (free[cand] >= per_node) & avail[cand]
        for r in reservations:
            if r.start - resv_limit[i] < t < r.end and int(jobs.account[i]) not in r.accounts:
                ok &= ~r.nodes[cand]
        sh = shadow.get(p)
        if sh is not None and sh[2] != i and t + span[i] > sh[0]:
            ok &= ~sh[1]
        idx = np.flatnonzero(ok)
        if len(idx) < k:
            return False
        idx = idx[np.argsort(free[cand][idx], kind="stable")][:k] if k == 1 else idx[:k]
        chosen = cand[idx]
        end = t + int(jobs.runtime[i])
        gsel = np.argsort(busy[chosen] > t, axis=1, kind="stable")[:, :per_node]
        busy[chosen[:, None], gsel] = end
        free[chosen] -= per_node
        summary.pop(key, None)
        heapq.heappush(completions, end)
        start[i] = t
        if sh is not None and sh[2] == i:
            del shadow[p]
        return True

    def set_shadow(i: int, t: int) -> None:
        p = int(jobs.partition[i])
        if not multi[i] or held[i] or p in shadow or p >= n_parts:
            return
        cand = part_nodes[p]
        # a reservation's nodes free up for another account's job when the reservation ends
        earliest = np.full(len(cand), t, dtype=np.int64)
        for r in reservations:
            if t < r.end and int(jobs.account[i]) not in r.accounts:
                earliest = np.where(r.nodes[cand], np.maximum(earliest, r.end), earliest)
        node_free = busy[cand].max(axis=1)
        node_free = np.maximum(np.maximum(node_free, earliest), nodes.in_service[cand])
        node_free = np.where((node_free >= NEVER) | (nodes.retired[cand] <= node_free), NEVER, node_free)
        order = np.argsort(node_free, kind="stable")[:int(k_of[i])]
        if node_free[order[-1]] >= NEVER:
            return  # it can never start here (more nodes than the partition will have): it holds nothing
        hold = np.zeros(len(cand), dtype=bool)
        hold[order] = True
        shadow[p] = (int(node_free[order[-1]]), hold, i)

    def schedule(t: int, queue: list[int]) -> list[int]:
        counters[0] += 1
        free = (busy <= t).sum(axis=1)
        avail = available(t)
        summary: dict = {}
        waiting = []
        tried: dict[tuple[int, bool], int] = {}
        for i in queue:
            key = (int(jobs.partition[i]), bool(multi[i]))
            n = tried.get(key, 0)
            if n >= bf_max_job_part:
                waiting.append(i)
                continue
            tried[key] = n + 1
            counters[1] += 1
            if not try_start(i, t, free, avail, summary):
                set_shadow(i, t)
                waiting.append(i)
        return waiting

    pending: list[int] = []
    ai = 0
    # everything submitted by t0 is queued at t0
    while ai < n_jobs and jobs.submit[ai] <= t0:
        ai += 1
    first = True
    while True:
        t_arr = int(jobs.submit[ai]) if ai < n_jobs else NEVER
        t_done = completions[0] if completions else NEVER
        t = t0 if first else min(t_arr, t_done)
        if t >= horizon or t >= NEVER:
            break
        freed = False
        while completions and completions[0] <= t:
            heapq.heappop(completions)
            freed = True
        new = list(range(0, ai)) if first else []
        while ai < n_jobs and jobs.submit[ai] <= t:
            new.append(ai)
            ai += 1
        if held.any():  # jobs cancelled while they waited leave the queue
            pending[:] = [i for i in pending if jobs.held_until[i] > t]
        if first or freed:
            pending[:] = schedule(t, pending + new)
        elif new:
            pending.extend(schedule(t, new))
        first = False
    return Replay(start=start, events=counters[0], tries=counters[1])
