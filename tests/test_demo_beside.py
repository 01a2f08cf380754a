"""The demo's generator beside its backfill (cli/demo.py ``_Beside``): the loading thread waits for exactly
the telemetry days it needs, and a generator that fails stops the demo with its own error instead of leaving
the loads waiting for days that never come."""

from __future__ import annotations

import threading

import pytest

from ops_warehouse.cli.demo import _Beside


def test_the_loads_wait_for_the_days_they_need_and_no_longer():
    go = [threading.Event() for _ in range(3)]
    waited = []

    def run(progress):
        for k in range(3):  # day k + 1 written once the test lets it
            go[k].wait(5)
            progress(k + 1, 3)
        return "history"

    g = _Beside(run)
    t = threading.Thread(target=lambda: (g.wait(2), waited.append(2)))
    t.start()
    go[0].set()
    t.join(0.3)
    assert waited == []  # 1 day of 2 written: still waiting
    go[1].set()
    t.join(5)
    assert waited == [2]
    go[2].set()
    assert g.join() == "history" and g.seconds > 0


def test_a_failing_generator_stops_the_loads_with_its_error():
    def run(progress):
        progress(1, 3)
        raise OSError("No space left on device: telemetry/dcgm/2026-10-02.parquet")

    g = _Beside(run)
    raised = []

    def load():
        try:
            g.wait(2)  # never written: the error, not a wait for ever
        except OSError as e:
            raised.append(e)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive() and "No space left" in str(raised[0])
    with pytest.raises(OSError, match="No space left"):
        g.join()
