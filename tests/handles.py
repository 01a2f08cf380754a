"""What a test that records the statements a load or a refresh sends needs: the refresh runs its steps over
two engine handles at once (etl/concurrent_steps.py), the warehouse's own and one it opens, and a telemetry load
stages its next day on a handle of its own, so a recording on the warehouse's client alone would see some."""

from __future__ import annotations

from typing import Callable


def on_every_handle(wh, patch: Callable[[object], None]) -> None:
    """``patch(handle)`` on ``wh`` now, and on every handle ``wh.another_handle()`` opens from now on."""
    patch(wh)
    real = wh.another_handle

    def another():
        h = real()
        patch(h)
        return h

    wh.another_handle = another


def statements_on_every_client(wh, monkeypatch) -> set[str]:
    """Every statement the engine is given from here on, on any handle (a telemetry load stages the next day
    on a second one: etl/telemetry_load.py), as a set (a statement sent through two of the client's methods is
    one read), but a DESCRIBE: it reads a file's footer (its schema), not its rows. Patched on the client's
    class, so every handle's client is seen."""
    seen: set[str] = set()
    cls = type(wh.client)
    for name in ("command", "query", "query_arrow", "raw_query"):
        f = getattr(cls, name)

        def wrap(self, sql, *a, _f=f, **k):
            if not sql.startswith("DESCRIBE"):
                seen.add(sql)
            return _f(self, sql, *a, **k)

        monkeypatch.setattr(cls, name, wrap)
    return seen
