"""slurmrestd's JSON responses, saved to files: ``/slurm/v0.0.4x/nodes`` and ``/slurm/v0.0.4x/reservations``
(data_parser v0.0.40 through v0.0.44: Slurm 23.11 to 25.11), read into the records ``scontrol show node`` and
``scontrol show reservation`` give (etl/capacity_sources.py makes the rows of either), so that a node or a
reservation means the same whichever form it came in.

Field names have held from v0.0.40 to v0.0.44 for what the warehouse reads (a node's ``name``, ``gres``,
``partitions``, ``cpus``, ``features``, ``state``; a reservation's ``name``, ``start_time``, ``end_time``,
``node_list``, ``partition``, ``accounts``, ``users``, ``flags``); times are epoch seconds, as a plain
number (v0.0.38 and before) or as ``{"set": true, "infinite": false, "number": N}`` (v0.0.39 on).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from ops_warehouse.errors import OpsError

# the responses the capacity load reads (etl/capacity_sources.py names the option that takes each)
CAPACITY = ("nodes", "reservations")
OTHER_RESPONSES = {"jobs": "a jobs response (/slurm or /slurmdb …/jobs): not a capacity source",
                   "partitions": "a partitions response: give the nodes response (/slurm/v0.0.4x/nodes) to --inventory"}


def is_json(text: str) -> bool:
    return text.lstrip().startswith("{")


def response(text: str, where: str) -> tuple[str, dict]:
    """(what it holds: "nodes", "reservations", ..., the document) of a slurmrestd response's text."""
    try:
        doc = json.loads(text)
    except RecursionError:  # nested deeper than Python's parser goes: no response of slurmrestd's is
        raise OpsError(f"{where}: JSON nested too deep to be a slurmrestd response") from None
    except ValueError as e:
        raise OpsError(f"{where}: not JSON a slurmrestd response holds ({str(e)[:120]})") from None
    if not isinstance(doc, dict):
        raise OpsError(f"{where}: not a slurmrestd response (a JSON object with nodes or reservations)")
    for key in (*CAPACITY, *OTHER_RESPONSES):
        if isinstance(doc.get(key), list):
            return key, doc
    errors = [e.get("description") or e.get("error") for e in doc.get("errors") or [] if isinstance(e, dict)]
    if errors:  # what slurmrestd answered instead (an expired token, a plugin missing)
        raise OpsError(f"{where}: slurmrestd answered an error: {str(errors[0])[:200]}")
    raise OpsError(f"{where}: a JSON object without nodes or reservations: not a slurmrestd nodes or "
                   "reservations response")


def data_parser(doc: dict) -> str:
    """The response's data_parser version (``v0.0.44``), or "" where its meta does not say."""
    plugin = (doc.get("meta") or {}).get("plugin") or {}
    return str(plugin.get("data_parser", "")).removeprefix("data_parser/")


def _epoch(value, what: str):
    """A time field: None where unset or infinite (a reservation without an end)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value in (None, 0):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OpsError(f"{what}: time {str(value)[:40]!r} is not epoch seconds")
    if not 0 < value < 4_291_747_200:  # the warehouse's DateTime reaches 2106
        raise OpsError(f"{what}: time {value!r} is out of range")
    return datetime.fromtimestamp(value, timezone.utc).isoformat()


def _names(value) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def node_records(doc: dict, where: str) -> list[dict[str, str]]:
    """The nodes as ``scontrol show node`` records (NodeName, Gres, Partitions, CPUTot, AvailableFeatures,
    State, Reason)."""
    out = []
    for k, n in enumerate(doc["nodes"]):
        if not isinstance(n, dict) or not n.get("name"):
            raise OpsError(f"{where}: node {k + 1} of the response has no name")
        out.append({"NodeName": str(n["name"]), "Gres": _names(n.get("gres")),
                    "Partitions": _names(n.get("partitions")), "CPUTot": str(n.get("cpus", 0)),
                    "AvailableFeatures": _names(n.get("features")), "State": "+".join(n.get("state") or []),
                    "Reason": str(n.get("reason") or "")})
    return out


def reservation_records(doc: dict, where: str) -> list[dict[str, str]]:
    """The reservations as ``scontrol show reservation`` records (times as ISO 8601 in UTC)."""
    out = []
    for k, r in enumerate(doc["reservations"]):
        if not isinstance(r, dict) or not r.get("name"):
            raise OpsError(f"{where}: reservation {k + 1} of the response has no name")
        what = f"{where} reservation {r['name']}"
        rec = {"ReservationName": str(r["name"]), "Nodes": _names(r.get("node_list")),
               "PartitionName": _names(r.get("partition")), "Accounts": _names(r.get("accounts")),
               "Users": _names(r.get("users")), "Flags": _names(r.get("flags"))}
        for key, field in (("StartTime", "start_time"), ("EndTime", "end_time")):
            t = _epoch(r.get(field), what)
            if t is not None:
                rec[key] = t
        out.append(rec)
    return out
