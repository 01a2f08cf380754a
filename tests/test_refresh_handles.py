"""A refresh's steps over two engine handles at once (etl/concurrent_steps.py, issue 50 item 4, round 8): a step
starts only once the steps it reads have ended, the others run beside it, and the grains hold the rows the
one-after-the-other order gives.

The site of the second test is tests/test_sample_step_attribution.py's hand-built day (cluster t2, one 8-GPU
H100 node n1, 5-minute samples of 2026-10-05 labelled with the job holding each GPU), whose figures per hour
(allocated, observed, busy GPU-minutes) are worked out there by hand from the raw lines
(tests/test_grains_one_refresh.py: EXPECTED_GPU_MIN)."""

from __future__ import annotations

import threading
import time

import pytest

from ops_warehouse.etl import concurrent_steps, grains
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.conftest import table_checksums
from tests.test_grains_one_refresh import _expected, _hours
from tests.test_hung_and_idle_jobs import DAY
from tests.test_sample_step_attribution import _sacct, _telemetry

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


@pytest.fixture
def site(tmp_path, cfg):
    cfg.projects = {"proja": "A"}
    _sacct(tmp_path / "sacct.psv")
    (tmp_path / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                            "n1,h100,8,gpu,r1,2025-01-01\n")
    _telemetry(tmp_path / "telemetry", True)
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(cfg)
    load_capacity(wh, inventory=tmp_path / "inventory.csv", cluster="t2")
    assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
    load_parquet_dir(wh, tmp_path / "telemetry", DAY, DAY, cluster="t2")
    yield wh
    wh.close()


GRAIN_TABLES = ("run_sample_hour", "capacity_node_hour", "run_node_hour", "run_telemetry")


def test_a_refresh_over_two_handles_gives_the_rows_of_one(site, monkeypatch):
    """The history (October 1 to the hour after the as-of time, 2026-10-05 19:04) refreshed into emptied grains:
    in one piece, run_telemetry (it reads none of the other models' tables) runs on one handle beside
    run_sample_hour, capacity_node_hour and run_node_hour on the other, each of these after the one before it has
    ended; cut a day at a time (``_PIECE_NODE_H`` = 1: pieces cut for memory), the pieces one after the other on
    one handle. Either way the grains hold the hand-worked figures and every row the one-handle order writes."""
    wh = site
    events: list[tuple[str, object, float, float, int]] = []
    real = grains._run_file

    def recording(h, name: str, params: dict) -> None:  # each file's statements for a piece, on its handle
        t = time.monotonic()
        real(h, name, params)
        events.append((name, params["from_ts"], t, time.monotonic(), id(h)))

    def emptied() -> None:  # (so that a step run before what it reads would find nothing there)
        for t in GRAIN_TABLES:
            wh.command(f"TRUNCATE TABLE {t}")

    def grain_rows() -> dict:
        return {t: v for t, v in table_checksums(wh).items() if t in GRAIN_TABLES}

    monkeypatch.setattr(concurrent_steps, "HANDLES", 1)
    emptied()
    grains.refresh_history(wh)
    one = grain_rows()
    assert _hours(wh) == _expected()

    monkeypatch.setattr(concurrent_steps, "HANDLES", 2)
    monkeypatch.setattr(grains, "_run_file", recording)
    emptied()
    grains.refresh_history(wh)
    assert _hours(wh) == _expected()
    assert grain_rows() == one
    ran = {e[0]: e[2:] for e in events}
    assert sorted(ran) == sorted(GRAIN_TABLES)  # one piece: each file once
    chain = ("run_sample_hour", "capacity_node_hour", "run_node_hour")
    assert all(ran[a][1] <= ran[b][0] for a, b in zip(chain, chain[1:])), ran
    assert len({ran[m][2] for m in chain}) == 1 and ran["run_telemetry"][2] != ran[chain[0]][2]

    events.clear()
    monkeypatch.setattr(grains, "_PIECE_NODE_H", 1)  # as if every day of it were a 4,000-node machine's
    emptied()
    grains.refresh_history(wh)
    assert _hours(wh) == _expected()
    assert grain_rows() == one
    assert len({e[1] for e in events}) == 5 and len({e[4] for e in events}) == 1
    # one after the other, in the order of main's loop: each piece's files, the pieces in time order
    assert [e[:2] for e in events] == sorted((e[:2] for e in events), key=lambda k: (k[1], list(GRAIN_TABLES).index(k[0])))
