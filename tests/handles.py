"""What a test that records the statements a refresh sends needs: the refresh runs its steps over two engine
handles at once (etl/concurrent_steps.py), the warehouse's own and one it opens, so a recording on the
warehouse's client alone would see some of them."""

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
