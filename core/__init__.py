"""ops-warehouse: an offline analytics warehouse for GPU supercomputers.

The package root is core/, the base every layer stands on: errors, config, the warehouse connection, the
SQL files and the migrations runner, progress. The layers above it each have their folder (README's layout
table): etl/ (sources -> normalize -> stage -> load, nightly), analytics/ (periods, marts, the API, the
monthly report, exports), reports/ (rendering plain data), generate/ (the synthetic site), cli/.

The one public entry point for analysts is :func:`connect` (ops_warehouse.analytics.api.connect). The root
imports nothing of its own but the errors: ``connect`` and ``Connection`` are looked up on first use (PEP 562),
so that ``import ops_warehouse.errors`` (every module does) does not import the API, the warehouse and the
engine's client with it.
"""

from __future__ import annotations

from ops_warehouse.errors import OpsError

__version__ = "0.1.0"
__all__ = ["Connection", "OpsError", "connect", "__version__"]


def __getattr__(name: str):
    if name in ("connect", "Connection"):
        from ops_warehouse.analytics import api  # on first use: the root stays light (PEP 562)

        return getattr(api, name)
    raise AttributeError(f"module 'ops_warehouse' has no attribute {name!r}")
