"""What Grafana's ClickHouse data source sends for a panel's SQL: its macros expanded as the plugin expands
them (grafana/clickhouse-datasource, pkg/macros/macros.go at 1d04063, Apache-2.0; checked against the
plugin's own cases in pkg/macros/macros_test.go: tests/test_grafana.py), after Grafana has put in the
dashboard's template variables (``${cluster}``).

Used to run every panel's query on a warehouse without a Grafana server (none is installable here) and by
bench/bench_grafana.py; Grafana itself does this expansion when it runs.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from ops_warehouse.errors import OpsError

_NAME = re.compile(r"\$__(\w+)")


def _dt(t: datetime) -> str:
    return f"toDateTime({int(t.timestamp())})"


def _dt_ms(t: datetime) -> str:
    return f"fromUnixTimestamp64Milli({int(round(t.timestamp() * 1000))})"


def _date(t: datetime) -> str:
    return f"toDate('{t.astimezone(timezone.utc):%Y-%m-%d}')"


def _args(sql: str, start: int) -> tuple[list[str], int]:
    """The comma-separated arguments of a macro call whose '(' is at ``start`` (nested parentheses kept
    whole), and the index after its ')'."""
    depth, args, cur = 0, [], ""
    for i in range(start, len(sql)):
        ch = sql[i]
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(cur.strip())
                return ([] if args == [""] else args), i + 1
        elif ch == "," and depth == 1:
            args.append(cur.strip())
            cur = ""
            continue
        cur += ch
    raise OpsError(f"unclosed macro call in: {sql[start - 20:start + 20]!r}")


def _one(name: str, args: list[str], t0: datetime, t1: datetime, interval_s: float) -> str | None:
    def want(n: int) -> None:
        if len(args) != n:
            raise OpsError(f"$__{name} expected {n} argument(s), received {len(args)}")

    if name in ("fromTime", "toTime", "fromTime_ms", "toTime_ms", "interval_s"):
        return {"fromTime": _dt(t0), "toTime": _dt(t1), "fromTime_ms": _dt_ms(t0), "toTime_ms": _dt_ms(t1),
                "interval_s": str(int(max(interval_s, 1)))}[name]
    if name in ("timeFilter", "timeFilter_ms", "dateFilter", "timeFrom", "timeTo", "timeInterval",
                "timeInterval_ms"):
        want(1)
        c = args[0]
        return {"timeFilter": f"{c} >= {_dt(t0)} AND {c} <= {_dt(t1)}",
                "timeFilter_ms": f"{c} >= {_dt_ms(t0)} AND {c} <= {_dt_ms(t1)}",
                "dateFilter": f"{c} >= {_date(t0)} AND {c} <= {_date(t1)}",
                "timeFrom": f"{c} >= {_dt(t0)}", "timeTo": f"{c} <= {_dt(t1)}",
                "timeInterval": f"toStartOfInterval(toDateTime({c}), INTERVAL {int(max(interval_s, 1))} second)",
                "timeInterval_ms": f"toStartOfInterval(toDateTime64({c}, 3), INTERVAL "
                                   f"{int(max(interval_s * 1000, 1))} millisecond)"}[name]
    if name in ("dateTimeFilter", "dt"):
        want(2)
        d, c = args
        return (f"({d} >= {_date(t0)} AND {d} <= {_date(t1)}) AND ({c} >= {_dt(t0)} AND {c} <= {_dt(t1)})")
    return None  # unknown macros are left as they are (the plugin does the same)


def expand(sql: str, t0: datetime, t1: datetime, interval_s: float = 60,
           variables: dict[str, str] | None = None) -> str:
    """``sql`` as the data source sends it for the range [t0, t1] and the panel's interval: Grafana's
    template variables (``${name}``, ``$name``) first, then the plugin's macros."""
    for k, v in (variables or {}).items():
        sql = sql.replace("${" + k + "}", v)
        sql = re.sub(r"\$" + re.escape(k) + r"\b", lambda _: v, sql)
    out, i = [], 0
    for m in _NAME.finditer(sql):
        if m.start() < i:
            continue
        name = m.group(1)
        end = m.end()
        args: list[str] = []
        if end < len(sql) and sql[end] == "(":
            args, end = _args(sql, end)
            args = [expand(a, t0, t1, interval_s) for a in args]  # a macro inside an argument: innermost first
        text = _one(name, args, t0, t1, interval_s)
        out.append(sql[i:m.start()])
        out.append(sql[m.start():end] if text is None else text)
        i = end
    out.append(sql[i:])
    return "".join(out)
