"""ops-warehouse: an offline analytics warehouse for GPU supercomputers.

The package root is core/, the base every layer stands on: errors, config, the warehouse connection, the
SQL files and the migrations runner, progress. The layers above it each have their folder (README's layout
table): etl/ (sources -> normalize -> stage -> load, nightly), analytics/ (periods, marts, the API, the
monthly report, exports), reports/ (rendering plain data), generate/ (the synthetic site), cli/.

The one public entry point for analysts is :func:`connect` (ops_warehouse.analytics.api.connect).
"""

from __future__ import annotations

from ops_warehouse.analytics.api import Connection, connect
from ops_warehouse.errors import OpsError

__version__ = "0.1.0"
__all__ = ["Connection", "OpsError", "connect", "__version__"]
