"""The marts as ClickHouse parameterized views, for Grafana (docs/grafana.md).

Grafana's ClickHouse data source sends SQL, not our Python: to read a mart it needs the mart in the
warehouse. ``grafana_<mart>`` is the mart's own query (sql/marts/<mart>.sql, its includes inlined: the text
the report and the API run) as a parameterized view, so a panel's ``SELECT … FROM grafana_utilization(
cluster = 'ai1', from_ts = $__fromTime, …)`` is the report's figure, computed by the report's SQL. Its
parameters are the mart's own (``{cluster:String}``, ``{from_ts:DateTime('UTC')}``, …): the engine prunes
parts on the grains' time keys exactly as for the report.

Created by `ops-report grafana` (provisioning is a write, as `ops-report init` is; a report never creates
them), again whenever it runs: a view follows its mart's text of the installed version.
"""

from __future__ import annotations

import re

from ops_warehouse.migrations import Deployment, render
from ops_warehouse.sqlfiles import mart_query

PREFIX = "grafana_"
_PARAMETER = re.compile(r"\{(\w+):([^{}]+)\}")


def view_name(mart: str) -> str:
    return PREFIX + mart


def view_query(mart: str) -> str:
    return mart_query(mart)


def parameters(mart: str) -> dict[str, str]:
    """The view's parameters and their types, in the order the text first names them."""
    out: dict[str, str] = {}
    for name, kind in _PARAMETER.findall(view_query(mart)):
        out.setdefault(name, kind)
    return out


def create_views(wh, marts: list[str]) -> list[str]:
    """(Re)create ``grafana_<mart>`` for each of ``marts``; their names. On a cluster, on every node (ON
    CLUSTER), as the schema's views are."""
    dep = Deployment(mode=wh.cfg.deployment, cluster=wh.cfg.cluster_name)
    for m in marts:
        (stmt,) = render(f"CREATE OR REPLACE VIEW {view_name(m)} {{{{on_cluster}}}} AS {view_query(m)}", dep)
        wh.command(stmt)
    return [view_name(m) for m in marts]
