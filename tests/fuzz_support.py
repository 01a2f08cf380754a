"""What the fuzz test modules share: a scratch warehouse per module, emptied between examples, and the
figures each module counts (printed at its end; docs/reliability.md quotes them)."""

from __future__ import annotations

from collections import Counter

from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse


def scratch_warehouse(tmp_path_factory, name: str):
    """Generator for a module-scoped fixture: (warehouse, its folder), closed at the end."""
    d = tmp_path_factory.mktemp(name)
    w = open_warehouse(Config(dsn=f"chdb://{d / 'wh'}"))
    yield w, d
    close_embedded()


def empty(w, tables: tuple[str, ...]) -> None:
    """Truncate ``tables``: each example starts from nothing."""
    for t in tables:
        w.command(f"TRUNCATE TABLE {t}")


def print_figures(label: str, figures: Counter):
    """Generator for a module-scoped autouse fixture: the module's counts, printed when it ends."""
    yield
    print(f"\nFUZZ FIGURES ({label}):")
    for k, v in sorted(figures.items()):
        print(f"  {k}: {v}")
