"""One backfill scheduler, two users: the cluster generator places its simulated jobs with it
(generate/schedule.py), and what-if capacity planning replays a warehouse's job history with it
(analytics/whatif.py). Because both run this one policy, replaying a generated month reproduces the
generator's schedule from the accounting alone (tests/test_whatif_calibration.py measures how closely).

Policy (Slurm's main scheduler and backfill, simplified):
- priority is submission order (first in, first out; ties by the caller's key, the job id); a job may start
  when its partition has ``k`` nodes with ``per_node`` GPUs free (k = ⌈gpus ÷ GPUs a node⌉, per_node =
  min(gpus, GPUs a node)) that are available: in service, not retired, not down or drained, and not reserved
  for other accounts;
- single-node jobs pack onto the fullest node that fits; multi-node jobs take the first free nodes;
- EASY backfill: the first multi-node job of a partition that cannot start (SHADOWS_PER_PARTITION of them,
  in priority order, each apart from the nodes of those before) holds the nodes that will be free first (its
  shadow) from the time the last of them is, by the running jobs' time limits (``plan_by="limit"``, as Slurm
  plans; ``"end"``: by when they will end, which a scheduler cannot know, kept to measure what the difference
  does); a later job may use those nodes only when its time limit ends before that time. Time limits, as
  Slurm's backfill uses them: a run time is what a job turns out to take (a replay of the accounting knows
  it, but not for a run that a node failure or its owner cut short);
- when resources free up, the whole queue is tried in priority order and the shadows are planned anew (as
  Slurm's backfill cycle does); when only new jobs arrived, only they are tried. At most ``bf_max_job_part``
  jobs of each (partition, multi-node or not) queue are tried in a pass (Slurm's bf_max_job_part);
- a reservation's nodes start only its accounts' jobs while it lasts, and another account's job only when
  its time limit (at most three days counted) ends before the reservation starts;
- a held job (held, then cancelled in the queue) takes its turn among the jobs tried but never starts and
  never holds a shadow; it leaves the queue when it is cancelled.

How long a started job runs is the caller's: ``on_start`` returns its end (the generator draws it, with the
node failures and slow nodes of the nodes it got; the replay returns the observed run time). A caller may add
jobs while the scheduler runs (the generator's requeued runs); they join the queue at their submit time.
Everything is numpy over node arrays; the event loop is sequential by nature. No warehouse here.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

THREE_DAYS_S = 3 * 86400
NEVER = np.iinfo(np.int64).max // 4
SHADOWS_PER_PARTITION = 1  # blocked multi-node jobs planned per partition (EASY backfill: 1; 8 gave the
# generated month the same waits in twice the time)


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
    """Jobs to place, sorted by (submit, key): submit time, GPUs, partition index, run time and time limit
    (seconds), account index, and ``held_until``: a job that never ran (held, then cancelled in the queue)
    waits in the queue until then and never starts; NEVER for every other job."""
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


# on_start(job, t, nodes chosen (indices), GPUs chosen on each (rows of GPU indices)) -> the job's end
OnStart = Callable[[int, int, np.ndarray, np.ndarray], int]


class Scheduler:
    """The policy above over one cluster. Add jobs (``add``; in (submit, key) order before ``run``, any order
    while it runs), then ``run`` until a horizon; ``start`` holds each job's start (-1: never started)."""

    def __init__(self, nodes: Nodes, *, t0: int, reservations: tuple[Reservation, ...] = (),
                 running: Running | None = None, bf_max_job_part: int = 60, plan_by: str = "limit"):
        n_nodes = len(nodes.gpus)
        G = int(nodes.gpus.max()) if n_nodes else 8
        self.nodes, self.G, self.t0 = nodes, G, t0
        self.reservations = reservations
        self.bf_max_job_part = bf_max_job_part
        if plan_by not in ("limit", "end"):
            raise ValueError(f"plan_by {plan_by!r}: 'limit' or 'end'")
        self.plan_by = plan_by
        self.busy = np.full((n_nodes, G), t0 - 1, dtype=np.int64)  # each GPU busy until
        self.due = np.zeros((n_nodes, G), dtype=np.int64)  # and until when its job may run (start + time limit)
        for n in np.flatnonzero(nodes.gpus < G):
            self.busy[n, nodes.gpus[n]:] = NEVER  # a node with fewer GPUs than the widest: the rest never free
        self.ghost = self.busy == NEVER  # (and never in the way of a plan)
        self.n_parts = int(nodes.partition.max()) + 1 if n_nodes else 0
        self.part_nodes = [np.flatnonzero(nodes.partition == p) for p in range(self.n_parts)]
        self.completions: list[int] = []
        if running is not None:
            for n, g, e in zip(running.node, running.gpus, running.end):
                free = np.argsort(self.busy[n] > t0, kind="stable")[:min(int(g), G)]
                self.busy[n, free] = e
                self.due[n, free] = e
                self.completions.append(int(e))
        heapq.heapify(self.completions)
        # the job table: Python lists, read one job at a time on the hot path
        self.submit: list[int] = []
        self.key: list[int] = []
        self.gpus: list[int] = []
        self.partition: list[int] = []
        self.limit: list[int] = []
        self.account: list[int] = []
        self.held: list[bool] = []
        self.start: list[int] = []
        self._queued = 0          # jobs added before run: they arrive in index order
        self._later: list = []    # (submit, key, job) added while running
        self._cancels: list = []  # (held until, job)
        self._running = False
        # partition -> [(time, nodes held, job)]: the blocked multi-node jobs' plans, in priority order
        self.shadow: dict[int, list[tuple[int, np.ndarray, int]]] = {}
        self.passes = 0
        self.tries = 0
        # the times at which a node comes into service, retires, or goes down or drained and back
        self._changes = np.unique(np.concatenate([nodes.in_service, nodes.retired, nodes.nostart[:, 1],
                                                  nodes.nostart[:, 2]]).astype(np.int64))
        self._avail: tuple[int, int, tuple[np.ndarray, np.ndarray]] | None = None

    def add(self, submit: int, gpus: int, partition: int, limit: int, account: int, *, held_until: int = NEVER,
            key: int = 0) -> int:
        j = len(self.submit)
        self.submit.append(int(submit)), self.key.append(int(key)), self.gpus.append(int(gpus))
        self.partition.append(int(partition)), self.limit.append(int(limit)), self.account.append(int(account))
        self.held.append(held_until < NEVER), self.start.append(-1)
        if held_until < NEVER:
            heapq.heappush(self._cancels, (int(held_until), j))
        if self._running:
            heapq.heappush(self._later, (int(submit), int(key), j))
        else:
            self._queued = j + 1
        return j

    def add_jobs(self, jobs: Jobs, keys: np.ndarray | None = None) -> None:
        """Many jobs at once, sorted by (submit, key)."""
        for c in ("submit", "gpus", "partition", "limit", "account"):
            getattr(self, c).extend(getattr(jobs, c).astype(np.int64).tolist())
        n0 = len(self.key)
        self.key.extend(keys.tolist() if keys is not None else [0] * len(jobs.submit))
        held = jobs.held_until < NEVER
        self.held.extend(held.tolist())
        self.start.extend([-1] * len(jobs.submit))
        for j in np.flatnonzero(held):
            heapq.heappush(self._cancels, (int(jobs.held_until[j]), n0 + int(j)))
        self._queued = len(self.submit)

    # --- one pass
    def _available(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes a job may start on at ``t``, and until when each node down or drained at ``t`` stays so (0
        for the others); read only, kept until the next time a node comes or goes."""
        if self._avail is not None and self._avail[0] <= t < self._avail[1]:
            return self._avail[2]
        nodes = self.nodes
        ok = (nodes.in_service <= t) & (t < nodes.retired)
        out_until = np.zeros(len(nodes.gpus), dtype=np.int64)
        ns = nodes.nostart
        if len(ns):
            m = (ns[:, 1] <= t) & (t < ns[:, 2])
            ok[ns[m, 0]] = False
            np.maximum.at(out_until, ns[m, 0], ns[m, 2])
        later = self._changes[np.searchsorted(self._changes, t, side="right"):]
        self._avail = (t, int(later[0]) if len(later) else NEVER, (ok, out_until))
        return ok, out_until

    def _try_start(self, j: int, t: int, free: np.ndarray, avail: np.ndarray, summary: dict, failed: dict,
                   on_start: OnStart) -> bool:
        """Start job ``j`` at ``t`` if it can (``summary`` and ``failed``: per partition, what this pass knows
        of it until a job starts there: nodes with at least x GPUs free; the shapes that found no room)."""
        p, g = self.partition[j], self.gpus[j]
        if p < 0 or p >= self.n_parts or self.held[j]:
            return False
        G = self.G
        k, per_node = max(1, -(-g // G)), min(g, G)
        s = summary.get(p)
        if s is None:
            pn = self.part_nodes[p]
            f = np.where(avail[pn], free[pn], 0)
            s = summary[p] = np.bincount(f, minlength=G + 1)[::-1].cumsum()[::-1]  # nodes with >= x free
        if s[per_node] < k:
            return False
        # which reservations keep it off (other accounts', that it would overlap) and which shadows (a blocked
        # job's nodes, unless it is done by its time limit before that job starts): with its shape, all that
        # decides whether it fits, so a shape that found no room finds none again until a job starts here
        span, acct = min(self.limit[j], THREE_DAYS_S), self.account[j]
        off = tuple(t < r.end and t + span > r.start and acct not in r.accounts for r in self.reservations)
        shadows = self.shadow.get(p)
        end_by = t + self.limit[j]
        blocked = tuple(owner != j and end_by > when for when, _, owner in shadows) if shadows else ()
        shape = (per_node, k, off, blocked)
        seen = failed.setdefault(p, set())
        if shape in seen:
            return False
        cand = self.part_nodes[p]
        free_c = free[cand]
        ok = (free_c >= per_node) & avail[cand]
        for r, hit in zip(self.reservations, off):
            if hit:
                ok &= ~r.nodes[cand]
        for (_, hold, _), hit in zip(shadows or (), blocked):
            if hit:
                ok &= ~hold
        idx = np.flatnonzero(ok)
        if len(idx) < k:
            seen.add(shape)
            return False
        idx = idx[np.argsort(free_c[idx], kind="stable")][:k] if k == 1 else idx[:k]
        chosen = cand[idx]
        gsel = np.argsort(self.busy[chosen] > t, axis=1, kind="stable")[:, :per_node]
        end = int(on_start(j, t, chosen, gsel))
        self.busy[chosen[:, None], gsel] = end
        self.due[chosen[:, None], gsel] = max(end, t + self.limit[j])
        free[chosen] -= per_node
        summary.pop(p, None)
        failed.pop(p, None)
        heapq.heappush(self.completions, end)
        self.start[j] = t
        if shadows:
            shadows[:] = [x for x in shadows if x[2] != j]
        return True

    def _plan_shadow(self, j: int, t: int, no_room: dict) -> None:
        """Plan multi-node job ``j``'s shadow, if its partition has room for one (``no_room``: per partition,
        the fewest nodes a plan of this pass found no room for)."""
        p, g = self.partition[j], self.gpus[j]
        if self.held[j] or p < 0 or p >= self.n_parts:
            return
        shadows = self.shadow.setdefault(p, [])
        k = -(-g // self.G)
        if len(shadows) >= SHADOWS_PER_PARTITION or k >= no_room.get(p, NEVER):
            return
        nodes, cand = self.nodes, self.part_nodes[p]
        # when each node is free for it: its GPUs' jobs ended, in service, back from a down or drained spell,
        # and past a reservation of other accounts that it would overlap
        busy = self.busy[cand]
        # when its running jobs end: as they will (plan_by "end"), or by their time limits, as Slurm plans
        until = busy if self.plan_by == "end" else np.where(busy > t, np.maximum(self.due[cand], busy), t)
        until = np.where(self.ghost[cand], t, until)
        free_at = np.maximum(until.max(axis=1), np.maximum(nodes.in_service[cand], t))
        free_at = np.maximum(free_at, self._available(t)[1][cand])
        span = min(self.limit[j], THREE_DAYS_S)
        for r in self.reservations:
            if self.account[j] not in r.accounts:
                hit = r.nodes[cand] & (free_at < r.end) & (free_at + span > r.start)
                free_at = np.where(hit, r.end, free_at)
        for _, hold, _ in shadows:
            free_at = np.where(hold, NEVER, free_at)  # held for a job before it
        free_at = np.where((free_at >= NEVER) | (nodes.retired[cand] <= free_at), NEVER, free_at)
        order = np.argsort(free_at, kind="stable")[:k]
        if len(order) < k or free_at[order[-1]] >= NEVER:
            no_room[p] = k  # it can never start on the nodes left: it holds nothing, nor does a larger one
            return
        hold = np.zeros(len(cand), dtype=bool)
        hold[order] = True
        shadows.append((int(free_at[order[-1]]), hold, j))

    def _pass(self, t: int, queue: list[int], on_start: OnStart, replan: bool) -> list[int]:
        self.passes += 1
        if replan:
            self.shadow.clear()
        free = (self.busy <= t).sum(axis=1)
        avail = self._available(t)[0]
        summary: dict = {}
        failed: dict = {}
        no_room: dict = {}
        waiting = []
        tried: dict[tuple[int, bool], int] = {}
        limit, G = self.bf_max_job_part, self.G
        for j in queue:
            key = (self.partition[j], self.gpus[j] > G)
            n = tried.get(key, 0)
            if n >= limit:
                waiting.append(j)
                continue
            tried[key] = n + 1
            self.tries += 1
            if not self._try_start(j, t, free, avail, summary, failed, on_start):
                if self.gpus[j] > G and len(self.shadow.get(key[0], ())) < SHADOWS_PER_PARTITION:
                    self._plan_shadow(j, t, no_room)
                waiting.append(j)
        return waiting

    # --- the event loop
    def run(self, horizon: int, on_start: OnStart) -> None:
        """Place the jobs from t0 (jobs submitted before it are queued at it) until ``horizon``: at every
        submission or end, a pass (see the policy above)."""
        self._running = True
        submit, n_static = self.submit, self._queued
        pending: list[int] = []
        ai = 0
        while ai < n_static and submit[ai] <= self.t0:
            ai += 1
        first = True
        while True:
            t_arr = min(submit[ai] if ai < n_static else NEVER, self._later[0][0] if self._later else NEVER)
            t_done = self.completions[0] if self.completions else NEVER
            t = self.t0 if first else min(t_arr, t_done)
            if t >= horizon or t >= NEVER:
                break
            freed = False
            while self.completions and self.completions[0] <= t:
                heapq.heappop(self.completions)
                freed = True
            new = list(range(0, ai)) if first else []
            while ai < n_static and submit[ai] <= t:
                new.append(ai)
                ai += 1
            if self._later and self._later[0][0] <= t:
                while self._later and self._later[0][0] <= t:
                    new.append(heapq.heappop(self._later)[2])
                new.sort(key=lambda j: (submit[j], self.key[j]))
            if self._cancels and self._cancels[0][0] <= t:
                # jobs cancelled while they waited leave the queue
                gone = set()
                while self._cancels and self._cancels[0][0] <= t:
                    gone.add(heapq.heappop(self._cancels)[1])
                pending[:] = [j for j in pending if j not in gone]
                new = [j for j in new if j not in gone]
            if first or freed:
                pending[:] = self._pass(t, pending + new, on_start, replan=True)
            elif new:
                pending.extend(self._pass(t, new, on_start, replan=False))
            first = False
        self._running = False


def replay(nodes: Nodes, jobs: Jobs, *, t0: int, horizon: int, running: Running | None = None,
           reservations: tuple[Reservation, ...] = (), bf_max_job_part: int = 60,
           keys: np.ndarray | None = None, plan_by: str = "limit") -> Replay:
    """Place ``jobs`` (each running for its ``runtime``) from ``t0`` until ``horizon``."""
    s = Scheduler(nodes, t0=t0, reservations=reservations, running=running, bf_max_job_part=bf_max_job_part,
                  plan_by=plan_by)
    s.add_jobs(jobs, keys)
    runtime = jobs.runtime.astype(np.int64).tolist()
    s.run(horizon, lambda j, t, chosen, gsel: t + runtime[j])
    return Replay(start=np.array(s.start, dtype=np.int64), events=s.passes, tries=s.tries)
