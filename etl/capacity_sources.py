"""Capacity sources: the node inventory, node state events and reservations, from the text Slurm prints.

- inventory: a site CSV (``node,gpu_model,gpus,partition,rack,in_service_date[,cpus,retired_date]``, the
  generator's ``inventory.csv``), ``scontrol show node`` output (blank-line separated or ``-o``, one node a
  line; GPUs and model from ``Gres=gpu:MODEL:N``, the rack from a ``rack*`` feature) or slurmrestd's
  ``/slurm/v0.0.4x/nodes`` response (etl/slurmrestd_json.py);
- events: ``sacctmgr list event --parsable2`` (``Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User``;
  add ``Event=Node`` to leave out cluster-level rows, which are skipped here anyway);
- reservations: ``scontrol show reservation`` output (either layout) or slurmrestd's
  ``/slurm/v0.0.4x/reservations`` response.

A form given to the wrong option (a reservations response to --inventory, node text to --reservations) is
refused in one line that names the option that takes it.

These are small (hundreds of nodes, thousands of events): parsed with plain string handling, loaded through
the same staged-Parquet path as everything else. A record that cannot be read is a one-line error naming
the file and the record: capacity numbers built on a guessed node would be wrong for every report.
"""

from __future__ import annotations

import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.dsn import redact
from ops_warehouse.etl import dst_fold
from ops_warehouse.etl import slurmrestd_json as rest
from ops_warehouse.etl import slurmrestd_source as rest_source
from ops_warehouse.etl.grains import refresh_history
from ops_warehouse.etl.hostlist import expand_one as expand_hostlist
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load
from ops_warehouse.etl.staging import load_frames
from ops_warehouse.input_files import check_readable

TS = pl.Datetime("us", "UTC")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_U16, _U32 = 2**16 - 1, 2**32 - 1


def _read_text(path: Path) -> str:
    """The file as text; bytes that are not UTF-8 are the one-line error naming the line (they were replaced
    by U+FFFD and loaded as part of a node name; tests/test_fuzz_capacity.py)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise OpsError(f"{path}: line {line} is not UTF-8 text") from None


def _nodes(expr: str, where: str) -> list[str]:
    """A hostlist, or the one-line error naming the record (a bad one raised ValueError past the loader;
    found by tests/test_fuzz_capacity.py)."""
    try:
        return list(expand_hostlist(expr))
    except ValueError:
        raise OpsError(f"{where}: cannot read node list {expr[:200]!r}") from None


def _count(value: str, what: str, top: int) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if not 0 <= n <= top:
        raise OpsError(f"{what} {value[:100]!r} is not a count")
    return n


# a record's first key, in either layout of scontrol: blank lines between records, or `-o` (one a line)
_RECORD_START = re.compile(r"(NodeName|ReservationName)=")
# a reason runs to its "[user@time]" (what scontrol appends when one was set), else to the end of its line
_REASON = re.compile(r"(?<!\S)Reason=(.*?\[[^\]\s@]*@[^\]\s]*\]|.*$)")


def _blocks(text: str) -> list[dict[str, str]]:
    """scontrol's ``Key=Value`` records: one per blank-line separated block, or one per line of ``scontrol -o``
    (a line that starts with NodeName= or ReservationName= starts a record). Values hold no spaces except the
    Reason, which runs to its ``[user@time]`` or the end of its line."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        if "=" not in block:  # "No reservations in the system"
            continue
        rec: dict[str, str] | None = None
        for line in block.splitlines():
            line = line.strip()
            if not line:
                continue
            if rec is None or _RECORD_START.match(line):
                rec = {}
                out.append(rec)
            m = _REASON.search(line)
            if m:
                rec["Reason"] = m.group(1).strip()
                line = line[:m.start()] + line[m.end():]
            # a key starts a token: tried at every offset of a long word, \w+ backtracks quadratically (a 90 kB
            # line of the fuzz corpus took 27 s)
            for k, v in re.findall(r"(?<!\S)(\w+)=(\S*)", line):
                rec.setdefault(k, v)
    return out


def _form(text: str) -> str:
    """Which form a file's text is, read from its start: "slurmrestd" (any JSON: the response says what it
    holds), "scontrol nodes", "scontrol reservations", "sacctmgr events", "sacct" (a sacct header line), or
    "" (a CSV, or something else)."""
    head = text.lstrip()[:4096]
    if rest.is_json(head):
        return "slurmrestd"
    if head.startswith("NodeName="):
        return "scontrol nodes"
    if head.startswith("ReservationName=") or head.startswith("No reservations in the system"):
        return "scontrol reservations"
    first = head.splitlines()[0] if head else ""
    if "|" in first and "NodeName" in first and "TimeStart" in first:
        return "sacctmgr events"
    if re.search(r"(?i)(^|\|)jobid(raw)?(\||$)", first):
        return "sacct"
    return ""


def capacity_form_of(path: Path) -> str:
    """The capacity form a file holds, read from its first 4 KiB, or "": for the loads of other kinds, which
    refuse it naming `etl capacity` and its option (``option_for``)."""
    with open(path, "rb") as f:
        head = f.read(4096).decode("utf-8", errors="replace")
    form = _form(head)
    if form == "sacct":
        return ""
    if form == "slurmrestd":  # the response's list comes first in what slurmrestd writes
        m = re.match(r'\s*\{\s*"(nodes|reservations)"\s*:', head)
        return f"slurmrestd:{m.group(1)}" if m else ""
    return form


def option_for(form: str) -> str:
    return _OPTION.get(form, "")


# which option of `ops-report etl capacity` takes each form
_OPTION = {"scontrol nodes": "--inventory", "scontrol reservations": "--reservations",
           "sacctmgr events": "--events", "slurmrestd:nodes": "--inventory",
           "slurmrestd:reservations": "--reservations", "sacct": "`ops-report etl sacct`"}
_DESCRIBE = {"scontrol nodes": "`scontrol show node` output", "scontrol reservations":
             "`scontrol show reservation` output", "sacctmgr events": "`sacctmgr list event` output",
             "slurmrestd:nodes": "slurmrestd's nodes response", "slurmrestd:reservations":
             "slurmrestd's reservations response", "sacct": "sacct output"}


def describe(form: str) -> str:
    return _DESCRIBE.get(form, form)


def _refuse_other_form(path: Path, form: str, option: str) -> None:
    """A form the option does not take: one line naming the option that does."""
    if form and _OPTION.get(form, option) != option:
        raise OpsError(f"{path.name}: {describe(form)}, which {option} does not take: give it to {_OPTION[form]}")


def _rest_records(path: Path, text: str, want: str) -> tuple[list[dict[str, str]], str]:
    """A slurmrestd response's records as scontrol's (``want``: nodes or reservations), and the source label."""
    kind, doc = rest.response(text, path.name)
    if kind != want:
        if kind in rest.CAPACITY:
            _refuse_other_form(path, f"slurmrestd:{kind}", _OPTION[f"slurmrestd:{want}"])
        raise OpsError(f"{path.name}: {rest.OTHER_RESPONSES[kind]}")
    parser = rest.data_parser(doc)
    label = f"slurmrestd:{path.name}" + (f" ({parser})" if parser else "")
    if want == "nodes":
        return rest.node_records(doc, path.name), label
    return rest.reservation_records(doc, path.name), label


def zone(tz: str) -> ZoneInfo:
    """The zone Slurm's text times are in (the config's `timezone`, as for sacct: scontrol and sacctmgr print
    local times, in the zone of the host that ran them), refused in one line when it is not one."""
    try:
        return ZoneInfo(tz)
    except Exception:
        raise OpsError(f"timezone {tz!r}: not a time zone (an IANA name such as UTC or Europe/Berlin)") from None


def _ts(value: str | None, what: str, tz: ZoneInfo | None = None) -> datetime | None:
    """A text time: one without an offset is a local time of ``tz`` (default UTC), as scontrol and sacctmgr
    print them; one with an offset (slurmrestd's, converted from epoch seconds) is that instant."""
    if value in (None, "", "Unknown", "None", "(null)", "N/A"):
        return None
    try:
        # a trailing Z: Python 3.11 reads it, 3.10 does not
        d = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
        d = d.replace(tzinfo=tz or timezone.utc) if d.tzinfo is None else d
        d = d.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise OpsError(f"{what}: cannot read time {value!r}") from None
    if not 1970 <= d.year <= 2105:  # the warehouse's DateTime (to 2106) would wrap it silently
        raise OpsError(f"{what}: time {value!r} is out of range")
    return d


def _span(start: str | None, end: str | None, what: str, tz: ZoneInfo) -> tuple[datetime | None, datetime | None]:
    """A record's (start, end) in UTC. A local time in the autumn DST fold takes its later instant only where
    the earlier one would end the record before it starts (a drain from 01:50 EDT to 01:10 EST); a record
    that ends before it starts under every reading is refused: stored, a node got a fault of 0 hours and
    swap points, a reservation was missing from the report (etl/dst_fold.py)."""
    first, last = _ts(start, what), _ts(end, what)  # checked as text (read as UTC: only the form matters)
    local = [None if v is None else datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith("Z") else v)
             for v in (start if first else None, end if last else None)]
    got = dst_fold.span(local[0], local[1], tz)
    if got is None:
        raise OpsError(f"{what}: ends before it starts (start {start}, end {end}, read in {tz.key}); nothing "
                       "of the file was loaded")
    for d, v in zip(got, (start, end)):
        if d is not None and not 1970 <= d.year <= 2105:
            raise OpsError(f"{what}: time {v!r} is out of range")
    return got


def read_inventory(path: str | Path, cluster: str) -> pl.DataFrame:
    """A site inventory CSV, ``scontrol show node`` text or slurmrestd's nodes response -> node_inventory rows."""
    path = Path(path)
    check_readable(path)
    text = _read_text(path)
    form = _form(text)
    if form == "slurmrestd":
        records, label = _rest_records(path, text, "nodes")
        return _scontrol_nodes(records, cluster, label)
    if form == "scontrol nodes":
        return _scontrol_nodes(_blocks(text), cluster, f"scontrol:{path.name}")
    _refuse_other_form(path, form, "--inventory")
    try:
        df = pl.read_csv(text.encode(), infer_schema_length=0)
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as e:  # empty, ragged: raised past the loader before
        raise OpsError(f"{path}: not an inventory CSV ({(str(e).splitlines() or [type(e).__name__])[0][:200]})") \
            from None
    need = {"node", "gpu_model", "gpus", "partition"}
    if need - set(df.columns):
        raise OpsError(f"{path}: inventory needs columns {', '.join(sorted(need))}; "
                       f"missing {', '.join(sorted(need - set(df.columns)))}")
    bad = df.filter(pl.col("gpus").cast(pl.Int64, strict=False).is_null())
    if bad.height:
        raise OpsError(f"{path}: node {bad['node'][0]}: gpus {bad['gpus'][0]!r} is not a number")
    # numbers and days a column cannot hold (strict casts raised past the loader; tests/test_fuzz_capacity.py)
    for col, top in (("gpus", _U16), ("cpus", _U32)):
        if col in df.columns:
            bad = df.filter(pl.col(col).is_not_null()
                            & ~pl.col(col).cast(pl.Int64, strict=False).is_between(0, top).fill_null(False))
            if bad.height:
                raise OpsError(f"{path}: node {bad['node'][0]}: {col} {bad[col][0]!r} is not a count")
    for col in ("in_service_date", "retired_date"):
        if col in df.columns:
            day_ = pl.col(col).str.to_datetime(time_zone="UTC", time_unit="us", strict=False)
            bad = df.filter(pl.col(col).is_not_null() & (pl.col(col) != "")
                            & ~day_.dt.year().is_between(1970, 2105).fill_null(False))
            if bad.height:
                raise OpsError(f"{path}: node {bad['node'][0]}: {col} {bad[col][0]!r} is not a date")
    for col in ("node", "partition"):
        if df.get_column(col).is_null().any():
            raise OpsError(f"{path}: row {df.get_column(col).is_null().arg_true()[0] + 2}: no {col}")

    def day(col: str) -> pl.Expr:
        if col not in df.columns:
            return pl.lit(None, dtype=TS)
        return pl.col(col).str.to_datetime(time_zone="UTC", time_unit="us", strict=False)

    return df.select(
        pl.lit(cluster).alias("cluster"), "node", pl.col("gpu_model").fill_null(""), pl.col("gpus").cast(pl.UInt16),
        (pl.col("cpus").cast(pl.UInt32).fill_null(0) if "cpus" in df.columns else pl.lit(0, dtype=pl.UInt32)).alias("cpus"),
        "partition", (pl.col("rack") if "rack" in df.columns else pl.lit("")).fill_null("").alias("rack"),
        day("in_service_date").fill_null(pl.lit(_EPOCH, dtype=TS)).alias("in_service_ts"),
        day("retired_date").alias("retired_ts"),
        pl.lit(f"inventory:{path.name}").alias("source"),
        (pl.col("state").fill_null("") if "state" in df.columns else pl.lit("")).alias("state"),
        # every partition the node is in (a;b), else its one
        (pl.when(pl.col("partitions").fill_null("").str.strip_chars() != "")
         .then(pl.col("partitions").str.split(";").list.eval(pl.element().str.strip_chars())
               .list.eval(pl.element().filter(pl.element() != "")))
         .otherwise(pl.concat_list(pl.col("partition")))
         if "partitions" in df.columns else pl.concat_list(pl.col("partition"))).alias("partitions"),
    )


def _scontrol_nodes(records: list[dict[str, str]], cluster: str, source: str) -> pl.DataFrame:
    rows = []
    for rec in records:
        node = rec.get("NodeName")
        if not node:  # skipped before: a node record cut or garbled above its NodeName
            raise OpsError(f"{source}: a record without NodeName= ({' '.join(list(rec)[:3])} ...)")
        models: dict[str, int] = {}  # GPUs of each model, in Gres order
        named = ""  # the last model named, kept for a node whose Gres lists none of it (gpu:h100:0)
        for g in rec.get("Gres", "").split(","):
            m = re.match(r"gpu(?::([^:(]+))?:(\d+)", g)
            if re.match(r"gpu(:|$)", g) and not m:  # read as no GPUs before (gpu:h100:eight)
                raise OpsError(f"{source}: node {node}: cannot read Gres {g[:100]!r}")
            if m:
                n = _count(m.group(2), f"{source}: node {node}: Gres gpu count", _U16)
                named = m.group(1) or named
                if n:
                    models[m.group(1) or ""] = models.get(m.group(1) or "", 0) + n
        # one row per GPU model (gpu:h100:2,gpu:h200:4: 2 h100 and 4 h200, each counted under its model; read
        # as 6 h200 once, then refused); a node without GPUs keeps one row, model '' and 0 GPUs
        if sum(models.values()) > _U16:
            raise OpsError(f"{source}: node {node}: {sum(models.values())} GPUs is not a count")
        feats = rec.get("AvailableFeatures", "").split(",")
        rack = next((f for f in feats if f.lower().startswith("rack")), "")
        cpus = _count(rec.get("CPUTot", "0") or "0", f"{source}: node {node}: CPUTot", _U32)
        partitions = [p for p in rec.get("Partitions", "").split(",") if p]
        for model, gpus in (models or {named: 0}).items():
            rows.append({"cluster": cluster, "node": node, "gpu_model": model, "gpus": gpus,
                         "cpus": cpus, "partition": partitions[0] if partitions else "",
                         "rack": rack, "in_service_ts": _EPOCH, "retired_ts": None, "source": source,
                         "state": rec.get("State", ""), "partitions": partitions})
    if not rows:
        raise OpsError(f"{source}: no NodeName= records")
    return pl.DataFrame(rows, schema={"cluster": pl.String, "node": pl.String, "gpu_model": pl.String,
                                      "gpus": pl.UInt16, "cpus": pl.UInt32, "partition": pl.String,
                                      "rack": pl.String, "in_service_ts": TS, "retired_ts": TS, "source": pl.String,
                                      "state": pl.String, "partitions": pl.List(pl.String)})


def _event_state(state: str) -> str:
    """Slurm prints compound states (``DOWN*``, ``IDLE+DRAIN``, ``MIXED+DRAIN``): what matters for capacity is
    whether the node was down or drained."""
    s = state.upper()
    if "DOWN" in s or ("FAIL" in s and "DRAIN" not in s):
        return "DOWN"
    if "DRAIN" in s or "FAIL" in s:
        return "DRAIN"
    if "MAINT" in s:
        return "MAINT"
    return s.split("+")[0].rstrip("*~#$@%!") or "UNKNOWN"


def read_events(path: str | Path, default_cluster: str, tz: str = "UTC") -> pl.DataFrame:
    """``sacctmgr list event --parsable2`` (header line; ``|`` separated) -> node_event rows; its times are
    local times of ``tz``."""
    path = Path(path)
    local = zone(tz)
    check_readable(path)
    text = _read_text(path)
    form = _form(text)
    if form == "slurmrestd":
        kind = rest.response(text, path.name)[0]
        _refuse_other_form(path, f"slurmrestd:{kind}", "--events")
        raise OpsError(f"{path.name}: a slurmrestd response; node events come from `sacctmgr list event "
                       "--parsable2` (or `etl slurmdbd`), which slurmrestd does not serve")
    _refuse_other_form(path, form, "--events")
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not lines or "NodeName" not in lines[0][1] or "TimeStart" not in lines[0][1]:
        raise OpsError(f"{path}: not `sacctmgr list event --parsable2` output (its header names NodeName and "
                       "TimeStart)")
    head = lines[0][1].rstrip("|").split("|")
    rows = []
    for n, line in lines[1:]:
        parts = line.split("|")
        if len(parts) == len(head) + 1 and parts[-1] == "":  # --parsable: a delimiter after the last field
            parts = parts[:-1]
        if len(parts) > len(head) and "Reason" in head:  # a reason holding the delimiter, as sacctmgr prints it
            r, extra = head.index("Reason"), len(parts) - len(head)
            parts = parts[:r] + ["|".join(parts[r:r + extra + 1])] + parts[r + extra + 1:]
        if len(parts) != len(head):  # a cut line read its missing TimeEnd as "still open" before
            raise OpsError(f"{path.name} line {n}: {len(parts)} fields, expected {len(head)}")
        rec = dict(zip(head, parts))
        node = rec.get("NodeName", "")
        if not node:  # a cluster-level event (TRES change, controller restart): not about a node
            continue
        where = f"{path.name} line {n}"
        if _ts(rec.get("TimeStart"), where) is None:
            raise OpsError(f"{where}: event without a start time")
        start, end = _span(rec.get("TimeStart"), rec.get("TimeEnd"), f"{where}: node {node} event", local)
        for one in _nodes(node, where):
            rows.append({"cluster": rec.get("Cluster") or default_cluster, "node": one, "start_ts": start,
                         "end_ts": end, "state": _event_state(rec.get("State", "")),
                         "reason": rec.get("Reason", ""), "user": rec.get("User", ""),
                         "source": f"sacctmgr:{path.name}"})
    return pl.DataFrame(rows, schema={"cluster": pl.String, "node": pl.String, "start_ts": TS, "end_ts": TS,
                                      "state": pl.String, "reason": pl.String, "user": pl.String,
                                      "source": pl.String})


def read_reservations(path: str | Path, cluster: str, tz: str = "UTC") -> pl.DataFrame:
    """``scontrol show reservation`` text (its times local times of ``tz``) or slurmrestd's reservations
    response (epoch seconds) -> reservation rows."""
    path = Path(path)
    local = zone(tz)
    check_readable(path)
    text = _read_text(path)
    form = _form(text)
    _refuse_other_form(path, "" if form == "slurmrestd" else form, "--reservations")
    records, label = _rest_records(path, text, "reservations") if form == "slurmrestd" else \
        (_blocks(text), f"scontrol:{path.name}")
    rows = []
    for rec in records:
        name = rec.get("ReservationName")
        if not name:  # skipped before, as a record cut above its name would have been
            raise OpsError(f"{path.name}: a record without ReservationName= ({' '.join(list(rec)[:3])} ...)")
        where = f"{path.name} reservation {name}"
        if _ts(rec.get("StartTime"), where) is None or _ts(rec.get("EndTime"), where) is None:
            raise OpsError(f"{where}: needs StartTime and EndTime")
        start, end = _span(rec.get("StartTime"), rec.get("EndTime"), where, local)

        def names(key: str) -> list[str]:
            v = rec.get(key, "")
            return [] if v in ("", "(null)") else [x.lower() if key == "Accounts" else x for x in v.split(",")]

        nodes = rec.get("Nodes", "")
        rows.append({"cluster": cluster, "name": name, "start_ts": start, "end_ts": end,
                     "nodes": [] if nodes in ("", "(null)") else _nodes(nodes, where),
                     "partition": "" if rec.get("PartitionName") in (None, "(null)") else rec["PartitionName"],
                     "accounts": names("Accounts"), "users": names("Users"),
                     "flags": rec.get("Flags", ""), "source": label})
    return pl.DataFrame(rows, schema={"cluster": pl.String, "name": pl.String, "start_ts": TS, "end_ts": TS,
                                      "nodes": pl.List(pl.String), "partition": pl.String,
                                      "accounts": pl.List(pl.String), "users": pl.List(pl.String),
                                      "flags": pl.String, "source": pl.String})


def _capacity_source(a: dict) -> str:
    parts = [f"{k}={a[k]}" for k in ("inventory", "events", "reservations") if a.get(k)]
    if a.get("slurmrestd"):
        parts.append(f"slurmrestd={redact(a['slurmrestd'])}")
    return " ".join(parts) or "nothing"


def _capacity_counts(c: dict) -> tuple[int, int, int]:
    return sum(c.values()), sum(c.values()), 0


@logged_load("capacity", _capacity_source, _capacity_counts)
def load_capacity(wh, *, inventory: str | Path | None = None, events: str | Path | None = None,
                  reservations: str | Path | None = None, cluster: str | None = None,
                  tz: str | None = None, slurmrestd: str | None = None) -> dict:
    """Load whichever sources are given; returns rows per table. Reloading the same files changes nothing.
    Text times are local times of ``tz`` (default: the config's `timezone`, which sacct's text follows too:
    a site in Europe or Japan prints every Slurm time in its zone)."""
    tz = tz or wh.cfg.timezone
    zone(tz)  # refused before anything is read
    if slurmrestd:
        # the nodes and reservations slurmrestd serves, saved and read as saved responses are (a file given for
        # either takes its place)
        jwt = rest_source.token()
        with tempfile.TemporaryDirectory(prefix="ops-slurmrestd-") as d:
            if not inventory:
                inventory = rest_source.fetch(slurmrestd, "nodes", Path(d), jwt)[0]
            if not reservations:
                reservations = rest_source.fetch(slurmrestd, "reservations", Path(d), jwt)[0]
            return _load_capacity(wh, inventory, events, reservations, cluster, tz)
    return _load_capacity(wh, inventory, events, reservations, cluster, tz)


def _load_capacity(wh, inventory, events, reservations, cluster, tz) -> dict:

    cluster = cluster_for_rows(wh, cluster)
    loaded_at = datetime.now(timezone.utc)
    loaded_at = loaded_at.replace(microsecond=loaded_at.microsecond // 1000 * 1000)  # as the column holds it
    now = pl.lit(loaded_at, dtype=pl.Datetime("ms", "UTC")).alias("loaded_at")
    frames = {}
    if inventory:
        frames["node_inventory"] = read_inventory(inventory, cluster).with_columns(now)
    if events:
        frames["node_event"] = read_events(events, cluster, tz).with_columns(now)
    if reservations:
        frames["reservation"] = read_reservations(reservations, cluster, tz).with_columns(now)
    load_frames(wh, frames)
    if inventory and frames["node_inventory"].height:
        _forget_other_models(wh, loaded_at)
    # the inventory, events and reservations change every hour they cover: the loaded history's hours (none
    # when nothing was read: a file without a record, or the wrong file)
    if any(f.height for f in frames.values()):
        refresh_history(wh, changed=tuple(frames))  # their readers only: the runs' samples are as they were
    return {t: f.height for t, f in frames.items()}


def _forget_other_models(wh, loaded_at: datetime) -> None:
    """A node's GPU models as its latest load lists them: the inventory is keyed by (node, GPU model), so a node
    loaded again with another model (a GPU swap, a Gres corrected) would keep its old model's row beside the
    new one, and both would count as capacity. The rows an earlier load wrote for the nodes this load lists
    are deleted, and so are the capacity grain's rows of a (node, model) the inventory no longer holds (the
    refresh after the load writes the new model's)."""
    params = {"at": loaded_at}
    loaded = ("(cluster, node) IN (SELECT cluster, node FROM node_inventory "
              "WHERE loaded_at = {at:DateTime64(3, 'UTC')})")
    _delete(wh, "node_inventory", f"loaded_at < {{at:DateTime64(3, 'UTC')}} AND {loaded}", params)
    # on a cluster the grid's rows are in each shard's capacity_node_hour_local (the inventory is replicated
    # whole: a delete on one replica reaches the others)
    grid = (f"capacity_node_hour_local ON CLUSTER '{wh.cfg.cluster_name}'"
            if getattr(wh.cfg, "deployment", "single") == "cluster" else "")
    _delete(wh, "capacity_node_hour", "(cluster, node, gpu_model) NOT IN "
            "(SELECT cluster, node, gpu_model FROM node_inventory)", target=grid)


def _delete(wh, table: str, where: str, params: dict | None = None, target: str = "") -> None:
    """A lightweight DELETE, where it has rows to delete (a mutation costs a tenth of a second even without)."""
    if wh.query_rows(f"SELECT count() FROM {table} WHERE {where}", params)[0][0]:
        wh.command(f"DELETE FROM {target or table} WHERE {where}", params)
