"""Steps of a refresh run over several engine handles at once, each when the steps it reads are done.

A grain's refresh is a list of statements. Run one after the other on 2 cores, the engine kept one of them idle
for most of a first load's: job_run's ranges of job ids and the partitions' merges each run on one thread (the
sacct load of 250,000 jobs: 0.97 cores over its refresh; 1 M jobs: 14.4 -> 10.3 s with them two at once,
docs/benchmarks.md, "Issue 50", round 8). Steps that read none of each other's output run at once on two handles
(``Warehouse.another_handle``: its own session, so a step's temporary tables stay its own), each taking the first
step in the given order whose prerequisites are done: the rows are those of the steps in order.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

# the handles a refresh runs its steps on at once: the 2 cores the product is sized for (more would share them)
HANDLES = 2


def run_steps(wh, steps: Sequence, after: Sequence[set[int]], run: Callable[[object, object], None],
              handles: int | None = None) -> None:
    """``run(handle, step)`` for every step, ``steps[i]`` once every step of ``after[i]`` (indices of earlier
    steps) has ended, on ``wh`` and up to ``handles - 1`` more handles (default ``HANDLES``), opened only where
    two steps could run at once and closed at the end. The first error stops the others from starting new
    steps and is raised once they have ended."""
    n = len(steps)
    handles = HANDLES if handles is None else handles
    if handles < 2 or not _any_apart(after):
        for step in steps:
            run(wh, step)
        return
    done, taken, failed = [False] * n, [False] * n, []
    cond = threading.Condition()

    def next_step() -> int | None:
        """The first step not taken whose prerequisites are done (None: every step taken, or a failure);
        waits while the steps left wait for others."""
        with cond:
            while True:
                if failed or all(taken):
                    return None
                i = next((i for i in range(n) if not taken[i] and all(done[j] for j in after[i])), None)
                if i is not None:
                    taken[i] = True
                    return i
                cond.wait()

    def work(handle) -> None:
        while (i := next_step()) is not None:
            try:
                run(handle, steps[i])
            except BaseException as e:  # raised again by the caller's thread
                with cond:
                    failed.append(e)
                    cond.notify_all()
                return
            with cond:
                done[i] = True
                cond.notify_all()

    others = [wh.another_handle() for _ in range(handles - 1)]
    try:
        threads = [threading.Thread(target=work, args=(h,), name=f"refresh-{k}") for k, h in enumerate(others, 1)]
        for t in threads:
            t.start()
        work(wh)
        for t in threads:
            t.join()
    finally:
        for h in others:
            h.close()
    if failed:
        raise failed[0]


def _any_apart(after: Sequence[set[int]]) -> bool:
    """Whether two of the steps could run at once: some step needs not every step before it, directly or
    through the steps it needs (a chain, each step after the one before, runs on one handle)."""
    reach: list[set[int]] = []
    for i, a in enumerate(after):
        r = set(a)
        for j in a:
            r |= reach[j]
        reach.append(r)
        if len(r) < i:
            return True
    return False
