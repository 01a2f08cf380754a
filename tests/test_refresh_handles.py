"""A refresh's steps over two engine handles at once (etl/concurrent_steps.py, issue 50 item 4, round 8: job_run's
ranges of ids, a first load's merges): a step starts only once the steps it reads have ended, the others run
beside it. (job_run's ranges over two handles, their rows worked by hand: tests/test_job_run_pieces.py.)"""

from __future__ import annotations

import threading
import time

import pytest

from ops_warehouse.etl import concurrent_steps

pytestmark = pytest.mark.both_forms


def test_a_step_starts_once_the_steps_it_reads_have_ended_and_the_others_run_beside_it(wh):
    """Six steps of 0.3 s (the engine's sleep), steps 2 and 3 after 0, step 4 after 1 and 2, step 5 after 4:
    each starts after its prerequisites ended, two handles run them, and steps that need none of each other
    overlap. A failing step's error is raised, and the step that needs it never runs."""
    after = [set(), set(), {0}, {0}, {1, 2}, {4}]
    seen: dict[int, tuple[float, float, int]] = {}
    lock = threading.Lock()

    def run(handle, i: int) -> None:
        t = time.monotonic()
        handle.query_rows("SELECT sleep(0.3)")
        with lock:
            seen[i] = (t, time.monotonic(), id(handle))

    concurrent_steps.run_steps(wh, list(range(6)), after, run, handles=2)
    assert sorted(seen) == list(range(6))
    for i, needs in enumerate(after):
        assert all(seen[j][1] <= seen[i][0] for j in needs), (i, seen)
    assert len({h for _, _, h in seen.values()}) == 2
    # (0 and 1 are ready at once, as are 2 and 3 once 0 has ended)
    assert any(seen[i][0] < seen[j][1] and seen[j][0] < seen[i][1] for i in seen for j in seen if i < j), seen

    ran: list[int] = []

    def failing(handle, i: int) -> None:
        if i == 1:
            handle.command("SELECT no_such_function()")
        handle.query_rows("SELECT sleep(0.3)" if i == 0 else "SELECT 1")
        ran.append(i)

    with pytest.raises(Exception, match="no_such_function"):
        concurrent_steps.run_steps(wh, [0, 1, 2], [set(), set(), {1}], failing, handles=2)
    assert 2 not in ran
