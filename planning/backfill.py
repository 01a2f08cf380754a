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
Everything is numpy over node arrays; the event loop is sequential by nature, and what a pass
reads that has not changed since the last (a partition's free GPUs and their counts, a blocked job's shadow) is
kept from pass to pass while it holds, with the same schedule as working it out again. No warehouse here.
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
        # and until when its job may run (start + time limit); 0 on a ghost GPU (below), which no plan waits for
        self.due = np.zeros((n_nodes, G), dtype=np.int64)
        for n in np.flatnonzero(nodes.gpus < G):
            self.busy[n, nodes.gpus[n]:] = NEVER  # a node with fewer GPUs than the widest: the rest never free
        self.ghost = self.busy == NEVER  # (and never in the way of a plan)
        self._ghosts = bool(self.ghost.any())
        self.n_parts = int(nodes.partition.max()) + 1 if n_nodes else 0
        self.part_nodes = [np.flatnonzero(nodes.partition == p) for p in range(self.n_parts)]
        # what the hot path reads of each partition's nodes: a slice where they are contiguous (a view, where
        # an index array copies), and what never changes of them, cut out once
        self._sl = [slice(int(pn[0]), int(pn[-1]) + 1) if len(pn) and pn[-1] - pn[0] + 1 == len(pn) else pn
                    for pn in self.part_nodes]
        self._resv_nodes = [[r.nodes[sl] for r in reservations] for sl in self._sl]
        self._resv_open = [[~r.nodes[sl] for r in reservations] for sl in self._sl]
        self._in_service = [nodes.in_service[sl] for sl in self._sl]
        self._retired = [nodes.retired[sl] if (nodes.retired[sl] < NEVER).any() else None for sl in self._sl]
        self.completions: list[int] = []
        if running is not None:
            for n, g, e in zip(running.node, running.gpus, running.end):
                free = np.argsort(self.busy[n] > t0, kind="stable")[:min(int(g), G)]
                self.busy[n, free] = e
                self.due[n, free] = np.where(self.ghost[n, free], 0, e)
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
        # and what a pass reads of each job before anything else, worked out once when it is added: its queue
        # (partition, multi-node or not: one int), GPUs a node and nodes it needs, and its partition (-1: it
        # never starts, held or of no partition here)
        self._qkey: list[int] = []
        self._need: list[int] = []
        self._width: list[int] = []
        self._part: list[int] = []
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
        # partition -> (job, until, its plan): the last shadow planned there with no shadow before it, which a
        # plan for the same job gives again before ``until`` unless a job starts there (_plan_shadow)
        self._plans: dict[int, tuple[int, int, tuple[int, np.ndarray, int]]] = {}
        # partition -> [GPUs free on each of its nodes, nodes with >= x GPUs free and available at [x] (None:
        # to count again), until, the same counts among the nodes open to a job kept off by some reservations
        # and shadows (_try_start)]: kept from pass to pass until the first of: one of its jobs ends (a GPU
        # busy at the count is free), a node comes, goes or is down or back (self._changes); a start here
        # takes its GPUs off and the counts again (_free_at)
        self._free: dict[int, list] = {}

    def add(self, submit: int, gpus: int, partition: int, limit: int, account: int, *, held_until: int = NEVER,
            key: int = 0) -> int:
        j = len(self.submit)
        self.submit.append(int(submit)), self.key.append(int(key)), self.gpus.append(int(gpus))
        self.partition.append(int(partition)), self.limit.append(int(limit)), self.account.append(int(account))
        self.held.append(held_until < NEVER), self.start.append(-1)
        self._shape(j, j + 1)
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
        self._shape(n0, len(self.submit))
        for j in np.flatnonzero(held):
            heapq.heappush(self._cancels, (int(jobs.held_until[j]), n0 + int(j)))
        self._queued = len(self.submit)

    def _shape(self, a: int, b: int) -> None:
        """The pass's per-job lists (see __init__) of jobs ``a`` .. ``b - 1``."""
        G = self.G
        for j in range(a, b):
            p, g = self.partition[j], self.gpus[j]
            self._qkey.append(2 * p + (g > G))
            self._need.append(min(g, G))
            self._width.append(max(1, -(-g // G)))
            self._part.append(p if 0 <= p < self.n_parts and not self.held[j] else -1)

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

    def _free_at(self, p: int, t: int) -> list:
        """Partition ``p``'s entry of self._free at ``t`` (after self._available(t))."""
        fs = self._free.get(p)
        if fs is None or t >= fs[2]:
            busy = self.busy[self._sl[p]]
            free = (busy <= t).sum(axis=1)
            fs = self._free[p] = [free, None, min(int(np.where(busy > t, busy, NEVER).min(initial=NEVER)),
                                                  self._avail[1]), {}]
        if fs[1] is None:
            f = np.where(self._avail[2][0][self._sl[p]], fs[0], 0)
            fs[1] = np.bincount(f, minlength=self.G + 1)[::-1].cumsum()[::-1].tolist()
        return fs

    def _try_start(self, j: int, t: int, fs: list, avail: np.ndarray, on_start: OnStart) -> bool:
        """Start job ``j`` at ``t`` if it can (``fs``: its partition's entry of self._free). The caller has
        seen that it may start at all (not held, a partition of these nodes) and that its partition has
        enough nodes with enough GPUs free (fs's counts)."""
        p = self.partition[j]
        k, per_node = self._width[j], self._need[j]
        # which reservations keep it off (other accounts', that it would overlap) and which shadows (a blocked
        # job's nodes, unless it is done by its time limit before that job starts): all that decides, beside
        # its shape, whether it fits, so the nodes open to it and how many have x GPUs free are counted once
        # for every job kept off by the same ones while fs holds (a shadow by its nodes' array, which the
        # entry keeps: an id is not reused while its object lives)
        span, acct = min(self.limit[j], THREE_DAYS_S), self.account[j]
        off = tuple(t < r.end and t + span > r.start and acct not in r.accounts for r in self.reservations)
        shadows = self.shadow.get(p)
        end_by = t + self.limit[j]
        holds = tuple(hold for when, hold, owner in shadows if owner != j and end_by > when) if shadows else ()
        if per_node and not holds and not any(off):
            ok = avail[self._sl[p]]  # open: every available node, whose counts the caller read (fs[1])
        else:
            key = (off, tuple(map(id, holds)))
            got = fs[3].get(key)
            if got is None:
                ok = avail[self._sl[p]].copy()
                for open_, hit in zip(self._resv_open[p], off):
                    if hit:
                        ok &= open_
                for hold in holds:
                    ok &= ~hold
                # open nodes with >= x GPUs free at [x] (free + 1 counted: x = 0 counts the open nodes only)
                got = fs[3][key] = (np.bincount(np.where(ok, fs[0] + 1, 0), minlength=self.G + 2)[::-1]
                                    .cumsum()[::-1][1:].tolist(), ok, holds)
            if got[0][per_node] < k:
                return False
            ok = got[1]
        free_c = fs[0]
        idx = np.flatnonzero(ok & (free_c >= per_node))
        if k == 1:  # the fullest node that fits (the first of them), its first free GPUs
            idx = idx[np.argmin(free_c[idx]):][:1]
            chosen = self.part_nodes[p][idx]
            gsel = np.flatnonzero(self.busy[chosen[0]] <= t)[None, :per_node]
        else:  # the first free nodes, whole (per_node is every GPU of a node: all free)
            idx = idx[:k]
            chosen = self.part_nodes[p][idx]
            gsel = np.argsort(self.busy[chosen] > t, axis=1, kind="stable")[:, :per_node]
        end = int(on_start(j, t, chosen, gsel))
        at = chosen[:, None], gsel
        self.busy[at] = end
        due = max(end, t + self.limit[j])
        self.due[at] = np.where(self.ghost[at], 0, due) if self._ghosts else due
        free_c[idx] -= per_node
        fs[1], fs[2], fs[3] = None, min(fs[2], end), {}
        self._plans.pop(p, None)
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
        if not shadows:
            kept = self._plans.get(p)
            if kept is not None and kept[0] == j and t < kept[1]:
                shadows.append(kept[2])
                return
        sl = self._sl[p]
        # when each node is free for it: its GPUs' jobs ended, in service, back from a down or drained spell,
        # and past a reservation of other accounts that it would overlap
        busy = self.busy[sl]
        if self.plan_by == "end":  # when its running jobs end, as they will
            until = np.where(self.ghost[sl], t, busy).max(axis=1)
        else:
            # or by their time limits, as Slurm plans: a GPU busy past t is free at its job's due time (due >=
            # busy: both are written at a start), the others and the ghosts (due 0) at t, which the maximum
            # below takes anyway (the same as the GPU-by-GPU max(due, busy) or t, in two operations)
            until = np.where(busy > t, self.due[sl], 0).max(axis=1)
        free_at = np.maximum(np.maximum(until, self._in_service[p]), t)
        free_at = np.maximum(free_at, self._available(t)[1][sl])
        span = min(self.limit[j], THREE_DAYS_S)
        for r, in_r in zip(self.reservations, self._resv_nodes[p]):
            if self.account[j] not in r.accounts:
                hit = in_r & (free_at < r.end) & (free_at + span > r.start)
                free_at = np.where(hit, r.end, free_at)
        for _, hold, _ in shadows:
            free_at = np.where(hold, NEVER, free_at)  # held for a job before it
        retired = self._retired[p]  # (None: none of these nodes retires)
        free_at = np.minimum(free_at, NEVER) if retired is None else np.where(
            (free_at >= NEVER) | (retired <= free_at), NEVER, free_at)
        order = np.argsort(free_at, kind="stable")[:k]
        if len(order) < k or free_at[order[-1]] >= NEVER:
            no_room[p] = k  # it can never start on the nodes left: it holds nothing, nor does a larger one
            return
        hold = np.zeros(len(free_at), dtype=bool)
        hold[order] = True
        when = int(free_at[order[-1]])
        plan = (when, hold, j)
        if not shadows and when > t:
            # Kept for the passes to come (the demo's month planned the same shadow again in 37.6 k of 38.6 k
            # plans). Until a job starts in the partition (its GPUs' busy and due times unchanged), none of its
            # jobs ends (no GPU busy past t is free before ``until``), no node comes, goes, or is back from a
            # down or drained spell (the next of self._changes) and no reservation that keeps this job off
            # begins or ends for it (its free_at tests flip): every node free for it at t ("free_at" t) is so
            # at any later t' too, free_at t' instead of t, and every other node's free_at is the same and
            # later than t'. The stable order is the same, and the last node taken (free_at ``when`` > t) is
            # not one of the first kind: the same nodes and the same time.
            until = min(self._avail[1], int(np.where(busy > t, busy, NEVER).min()))
            for r in self.reservations:
                if self.account[j] not in r.accounts:
                    until = min(until, r.end if t < r.end else NEVER,
                                r.start - span + 1 if t + span <= r.start else NEVER)
            self._plans[p] = (j, until, plan)
        shadows.append(plan)

    def _pass(self, t: int, queue: list[int], on_start: OnStart, replan: bool) -> list[int]:
        self.passes += 1
        if replan:
            self.shadow.clear()
        avail = self._available(t)[0]
        counts: dict = {}
        no_room: dict = {}
        waiting = []
        tried: dict[int, int] = {}
        limit = self.bf_max_job_part
        qkey, need, width, part, shadow = self._qkey, self._need, self._width, self._part, self.shadow
        tries = 0
        for j in queue:
            key = qkey[j]
            n = tried.get(key, 0)
            if n >= limit:
                waiting.append(j)
                continue
            tried[key] = n + 1
            tries += 1
            p = part[j]
            if p < 0:  # held, or of no partition here: tried, never started, never a shadow
                waiting.append(j)
                continue
            # most jobs tried fail here, on their partition's nodes with enough GPUs free, an upper bound of
            # what may take them (issue 51: per job, this was a call with its numpy reads, 78 % of the tries
            # of the demo's month; the counts are kept while they hold, _free_at)
            fs = counts.get(p)
            if fs is None or fs[1] is None:
                fs = counts[p] = self._free_at(p, t)
            if fs[1][need[j]] >= width[j] and self._try_start(j, t, fs, avail, on_start):
                continue
            if width[j] > 1 and len(shadow.get(p, ())) < SHADOWS_PER_PARTITION:
                self._plan_shadow(j, t, no_room)
            waiting.append(j)
        self.tries += tries
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
