"""The backfill scheduler (planning/backfill.py) keeps a blocked job's shadow from pass to pass while nothing it
depends on changes (issue 51: the demo month planned the same shadow again in 37.6 k of its 38.6 k plans).
A reservation that starts to matter for the blocked job is such a change though no job ends and no node comes or
goes: here the shadow must move off the reserved node, and a job of the reservation's own account then starts
on it. Worked by hand; the times are seconds from t0 = 0.

Partition 0: nodes 0, 1, 2 (8 GPUs each); partition 1: node 3. Reservation R holds node 0 for account 1 over
[10,000, 100,000). Running at 0: node 1 until 50,000, node 2 until 60,000, node 3 (partition 1) until 6,000.

- B (account 0, 16 GPUs: two whole nodes, limit 5,000 s), submitted at 0, cannot start (node 0 alone is free).
  Its shadow at 0: R does not touch it (0 + 5,000 <= 10,000), node 0 is free now and node 1 first after it:
  nodes {0, 1} from 50,000.
- At 6,000 node 3's job ends (another partition): every queue is tried again and B's shadow planned anew.
  Now B's 5,000 s would overlap R (6,000 + 5,000 > 10,000): node 0 is free for B only when R ends (100,000),
  so B's shadow is nodes {1, 2} from 60,000.
- C (account 1, 8 GPUs, limit 60,000 s, runs 1,000 s), submitted at 7,000: it would still run at 60,000, so
  it may not use B's nodes; node 0 is free and open to account 1: C starts at 7,000 on node 0. (Had B kept
  its shadow of 0, nodes {0, 1} from 50,000, C could not have started until node 0 was no longer held.)
- B starts when two nodes are free and open to it: at 50,000 node 1 is free but node 0 is R's until 100,000;
  at 60,000 node 2 too: B starts at 60,000 on nodes 1 and 2.
"""

from __future__ import annotations

import numpy as np
from ops_warehouse.planning.backfill import NEVER, Jobs, Nodes, Reservation, Running, Scheduler


def _scheduler() -> Scheduler:
    nodes = Nodes(partition=np.array([0, 0, 0, 1]), gpus=np.full(4, 8), in_service=np.zeros(4, np.int64),
                  retired=np.full(4, NEVER, np.int64), nostart=np.zeros((0, 3), np.int64))
    running = Running(node=np.array([1, 2, 3]), gpus=np.array([8, 8, 8]), end=np.array([50_000, 60_000, 6_000]))
    resv = (Reservation(nodes=np.array([True, False, False, False]), accounts=frozenset({1}), start=10_000,
                        end=100_000),)
    return Scheduler(nodes, t0=0, reservations=resv, running=running)


def test_a_reservation_that_begins_to_matter_moves_the_kept_shadow():
    s = _scheduler()
    jobs = Jobs(submit=np.array([0, 7_000]), gpus=np.array([16, 8]), partition=np.array([0, 0]),
                runtime=np.array([4_000, 1_000]), limit=np.array([5_000, 60_000]), account=np.array([0, 1]),
                held_until=np.full(2, NEVER))
    s.add_jobs(jobs, keys=np.array([1, 2]))
    runtime = jobs.runtime.tolist()
    placed = {}

    def on_start(j, t, chosen, gsel):
        placed[j] = (t, sorted(chosen.tolist()), gsel.tolist())
        return t + runtime[j]

    s.run(200_000, on_start)
    assert placed[1] == (7_000, [0], [[0, 1, 2, 3, 4, 5, 6, 7]])
    assert placed[0] == (60_000, [1, 2], [[0, 1, 2, 3, 4, 5, 6, 7]] * 2)
    assert s.start == [60_000, 7_000]


def test_a_partition_without_nodes_starts_nothing_and_stops_nothing():
    """Partition 1 has no node (nodes are in 0 and 2): its jobs are tried and never start; the job of partition 0
    starts when it is submitted, on node 0. (The counts kept per partition read an empty node range here.)"""
    nodes = Nodes(partition=np.array([0, 2]), gpus=np.full(2, 8), in_service=np.zeros(2, np.int64),
                  retired=np.full(2, NEVER, np.int64), nostart=np.zeros((0, 3), np.int64))
    s = Scheduler(nodes, t0=0)
    s.add_jobs(Jobs(submit=np.array([0, 10, 20]), gpus=np.array([8, 4, 16]), partition=np.array([1, 0, 1]),
                    runtime=np.full(3, 100), limit=np.full(3, 200), account=np.zeros(3, np.int64),
                    held_until=np.full(3, NEVER)), keys=np.array([1, 2, 3]))
    placed = {}

    def on_start(j, t, chosen, gsel):
        placed[j] = (t, chosen.tolist(), gsel.tolist())
        return t + 100

    s.run(1_000, on_start)
    assert placed == {1: (10, [0], [[0, 1, 2, 3]])}
    assert s.start == [-1, 10, -1]
