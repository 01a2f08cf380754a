"""Xids from the kernel log, where sites see them: the driver's
``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., GPU has fallen off the bus.`` lines, from journald exports
(``journalctl -k -o json``, ``-o short-iso``), syslog files (``/var/log/messages``, ``kern.log``: the
traditional ``Jun 10 03:09:55 host kernel: ...`` form, which has no year, or rsyslog's RFC 3339 one) and
VictoriaLogs (etl/victorialogs_source.py), into ``xid_event`` beside the DCGM_FI_DEV_XID_ERRORS gauge's rows.

Why both: the gauge holds only the last Xid, at the scrape step, and a fatal Xid (79, 48, 95, 74) takes the
node down before it is sampled again, so the gauge misses the failures that matter most; the kernel log has
every Xid at the driver's own time. Which GPU: the line names it by PCI bus id only, and dcgm-exporter's
``pci_bus_id`` label gives the GPU index (table ``gpu_pci``, written by the telemetry loads); a line whose bus
id no GPU of the node is known by is quarantined with that reason, and reloading the log after the
telemetry places it. One Xid seen by both the gauge and the kernel log counts once, at the kernel's time
(``functions/xid_same_event.sql``; the statements are sql/staging/xid_event_kernel*.sql and
xid_event_gauge_twins.sql).

Parsing is polars on whole columns: a log is cut into lines, only the lines holding ``NVRM: Xid`` are
decoded (a node's journal is mostly other lines), then one regular expression per field. The driver's
variants: with or without ``pid=..., name=...`` (``pid='<unknown>', name=<unknown>``), a kernel timestamp
``[82659.755847]`` before it (syslog), bus ids with another domain (``PCI:0019:01:00`` on Grace systems), codes
of three digits. Lines of one GPU, code and second are one event (a graphics exception is several lines).
Only the kernel's own lines count (``kernel:`` in text forms, ``_TRANSPORT``/``SYSLOG_IDENTIFIER`` kernel in
journald's fields), not a service that echoes them. Reloading a file replaces its rows.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl import dst_fold
from ops_warehouse.etl.frames import fmt
from ops_warehouse.etl.openmetrics_source import QUARANTINE_SCHEMA, clip_raw, quarantine
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load
from ops_warehouse.etl.staging import staged
from ops_warehouse.input_files import check_readable
from ops_warehouse.sqlfiles import split_statements, sql_text

FORMATS = ("auto", "json", "short-iso", "syslog")
MARKER = "NVRM: Xid"
# the bus id as the driver prints it (domain:bus:device; an older driver wrote no "PCI:"), then the code
_PCI = r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\)"
_CODE = r"NVRM: Xid (?:\([^)]*\))?:\s*(\d+)(?:[,.:;\s]|$)"
# journalctl -o short-iso and rsyslog's RFC 3339 form: 2025-05-15T08:57:36-0500 host ident: message
_ISO_LINE = (r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}))\s+(?P<host>\S+)\s+"
             r"(?P<ident>[^\s:\[]+)(?:\[\d+\])?:\s(?P<msg>.*)$")
# journalctl's short form and traditional syslog: Jun 10 03:09:55 host ident: message (no year, local time)
_BSD_LINE = (r"^(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+(?P<hms>\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s+(?P<host>\S+)\s+"
             r"(?P<ident>[^\s:\[]+)(?:\[\d+\])?:\s(?P<msg>.*)$")
_BSD_TIME = r"^([A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2})"
_MONTHS = {m: k for k, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                       "Dec"), start=1)}
# journald's fields that say where, when and what (journalctl -o json)
_JOURNAL_FIELDS = {"__REALTIME_TIMESTAMP": pl.String, "_HOSTNAME": pl.String, "MESSAGE": pl.String,
                   "_TRANSPORT": pl.String, "SYSLOG_IDENTIFIER": pl.String}
# a VictoriaLogs entry: _time, _msg and the entry's fields; the host is journald's _HOSTNAME (native journald
# ingestion, or an OpenTelemetry collector's journald receiver), else a resource attribute or syslog field
VICTORIALOGS_HOST_FIELDS = ("_HOSTNAME", "host.name", "hostname", "host")
_VL_FIELDS = {"_time": pl.String, "_msg": pl.String, "_TRANSPORT": pl.String, "SYSLOG_IDENTIFIER": pl.String,
              **{f: pl.String for f in VICTORIALOGS_HOST_FIELDS}}
# the Xid lines of one source, with the host and the UTC time each was logged at
LINES_SCHEMA = {"line_no": pl.UInt64, "host": pl.String, "ts": pl.Datetime("us", "UTC"), "message": pl.String,
                "raw": pl.String}
# what the load stages (sql/staging/xid_event_kernel.sql reads it)
ROWS_SCHEMA = {"source": pl.String, "line_no": pl.UInt64, "host": pl.String, "pci_bus_id": pl.String,
               "ts": pl.Datetime("us", "UTC"), "xid": pl.UInt32, "raw": pl.String}
_BAD = {"line_no": pl.UInt64, "reason": pl.String, "raw": pl.String}


def _candidates(data: bytes) -> pl.DataFrame:
    """(line_no, raw) of the lines that hold the driver's marker, numbered from 1 as in the file. Only those few
    are decoded, a line that is not UTF-8 with replacement characters (the driver's own text is ASCII)."""
    df = (pl.DataFrame({"raw": pl.Series(data.split(b"\n"), dtype=pl.Binary)}).with_row_index("line_no", offset=1)
          .filter(pl.col("raw").bin.contains(MARKER.encode())))
    text = pl.Series("raw", [b.decode("utf-8", "replace") for b in df.get_column("raw")], dtype=pl.String)
    return pl.DataFrame({"line_no": df.get_column("line_no").cast(pl.UInt64), "raw": text.str.strip_chars_end("\r")})


def _kernel_only(lines: pl.DataFrame) -> pl.DataFrame:
    """The kernel's own lines: a service that echoes the driver's line (a health checker's log) is not a second
    Xid. A line whose source does not say (no identifier, no journald transport) counts."""
    ident, transport = pl.col("ident"), pl.col("transport")
    return lines.filter((ident.is_null() | (ident == "kernel")) & (transport.is_null() | (transport == "kernel")))


def _split_unreadable(out: pl.DataFrame, reason: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the kernel's lines with a time and a host, the lines without either: to the quarantine with ``reason``)."""
    ok = pl.col("ts").is_not_null() & pl.col("host").is_not_null() & (pl.col("host") != "")
    bad = out.filter(~ok).select("line_no", pl.lit(reason).alias("reason"), "raw")
    return _kernel_only(out.filter(ok)).select(list(LINES_SCHEMA)).cast(LINES_SCHEMA), bad.cast(_BAD)


def parse_text(data: bytes, *, year: int | None = None, tz: str = "UTC") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Xid lines of journalctl's short-iso (or short) output or a syslog file: (lines, bad). ``year`` and ``tz``
    are for the traditional form (``Jun 10 03:09:55 host kernel: ...``), which has neither; a month before the
    previous line's is the next year (a log across New Year). An ISO line carries its own offset."""
    c = _candidates(data)
    iso = c.get_column("raw").str.extract_groups(_ISO_LINE).struct.unnest()
    bsd = c.get_column("raw").str.extract_groups(_BSD_LINE).struct.unnest()
    is_iso = iso.get_column("ts").is_not_null()
    if year is None and (bsd.get_column("mon").is_not_null() & ~is_iso).any():
        raise OpsError("syslog lines without a year (Jun 10 03:09:55 host kernel: ...): give --year, the year of "
                       "the file's first line (and --tz, the zone the host's clock was in, if not UTC)")
    month = bsd.get_column("mon").replace_strict(_MONTHS, default=None, return_dtype=pl.Int32)
    rollover = (month < month.forward_fill().shift(1)).fill_null(False).cast(pl.Int32).cum_sum()
    bsd_local = (pl.concat_str([(pl.lit(year or 1970) + rollover).cast(pl.String), bsd.get_column("mon"),
                                 bsd.get_column("day"), bsd.get_column("hms")], separator=" ", ignore_nulls=False)
                 .str.to_datetime("%Y %b %d %H:%M:%S%.f", strict=False, time_unit="us"))
    # a time in the autumn DST fold is placed by the host's line order (etl/dst_fold.py); one that cannot be
    # is quarantined rather than merged with the other pass's Xid of the same minute
    placed = dst_fold.log_readings(
        pl.DataFrame({"host": bsd.get_column("host"), "local": pl.select(bsd_local).to_series(),
                      "boot_s": bsd.get_column("msg").str.extract(r"^\[\s*(\d+\.\d+)\]", 1).cast(pl.Float64)}),
        "local", tz, boot_s="boot_s")
    bsd_ts = placed.get_column("ts")
    fold_bad = (placed.get_column("ambiguous") & ~is_iso).alias("fold_bad")
    iso_ts = (iso.get_column("ts").str.replace(",", ".", literal=True).str.replace(r"Z$", "+00:00")
              .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us", time_zone="UTC"))
    pick = {k: pl.when(is_iso).then(iso.get_column(k)).otherwise(bsd.get_column(k)) for k in ("host", "ident", "msg")}
    out = c.with_columns(pl.select(pl.when(is_iso).then(iso_ts).otherwise(bsd_ts)).to_series().alias("ts"),
                         pl.select(pick["host"]).to_series().alias("host"),
                         pl.select(pick["ident"]).to_series().alias("ident"),
                         pl.select(pick["msg"]).to_series().alias("message"),
                         pl.lit(None, pl.String).alias("transport"), fold_bad)
    ambiguous = _kernel_only(out.filter(pl.col("fold_bad"))).select(
        "line_no", fmt("ambiguous local time '{}' (the DST fold of {}: the host's line order does not say "
                       "which pass)", pl.col("raw").str.extract(_BSD_TIME, 1), pl.lit(tz)).alias("reason"),
        "raw")
    good, bad = _split_unreadable(out.filter(~pl.col("fold_bad")), "not a journalctl or syslog line with a time and "
                                  "a host (dmesg's [seconds since boot] is no wall-clock time)")
    return good, pl.concat([bad, ambiguous.cast(_BAD)])


def _decode_json(c: pl.DataFrame, fields: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The candidate lines' JSON objects as columns ``fields`` (all lines in one pass; line by line, the bad ones
    to the quarantine, when one is not a JSON object of text fields)."""
    try:
        dec = c.with_columns(pl.col("raw").str.json_decode(pl.Struct(fields)).alias("doc"))
        if dec.get_column("doc").null_count() == 0:
            return dec.select("line_no", "raw", pl.col("doc").struct.unnest()), pl.DataFrame(schema=_BAD)
    except Exception:  # polars raises several kinds on a bad line; the line path below names it
        pass
    rows, bad = [], []
    for n, raw in c.select("line_no", "raw").iter_rows():  # the Xid lines only: a handful
        try:
            doc = json.loads(raw)
        except ValueError as e:
            bad.append((n, f"not JSON ({getattr(e, 'msg', e)})", clip_raw(raw)))
            continue
        if not isinstance(doc, dict):
            bad.append((n, "not a JSON object", clip_raw(raw)))
            continue
        vals = {k: doc.get(k) for k in fields}
        if any(v is not None and not isinstance(v, (str, int)) for v in vals.values()):
            bad.append((n, "a field that is not text (journald writes a message that is not UTF-8 as an array "
                           "of numbers)", clip_raw(raw)))
            continue
        rows.append({"line_no": n, "raw": raw, **{k: None if v is None else str(v) for k, v in vals.items()}})
    return (pl.DataFrame(rows, schema={"line_no": pl.UInt64, "raw": pl.String, **fields}),
            pl.DataFrame(bad, schema=_BAD, orient="row"))


def parse_journal_json(data: bytes) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Xid lines of ``journalctl -o json`` (one object a line; -k or the whole journal: only the kernel's
    entries count): (lines, bad)."""
    d, bad = _decode_json(_candidates(data), _JOURNAL_FIELDS)
    out = d.select(
        "line_no", pl.col("_HOSTNAME").alias("host"),
        pl.from_epoch(pl.col("__REALTIME_TIMESTAMP").cast(pl.Int64, strict=False), "us")
        .dt.replace_time_zone("UTC").alias("ts"),
        pl.col("SYSLOG_IDENTIFIER").alias("ident"), pl.col("_TRANSPORT").alias("transport"),
        pl.col("MESSAGE").alias("message"), "raw")
    good, unreadable = _split_unreadable(out, "a journal entry without __REALTIME_TIMESTAMP or _HOSTNAME")
    return good, pl.concat([bad, unreadable])


def parse_victorialogs(data: bytes) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Xid lines of a VictoriaLogs ``/select/logsql/query`` answer (JSON lines: ``_time`` in RFC 3339, ``_msg``,
    the entry's other fields): (lines, bad)."""
    d, bad = _decode_json(_candidates(data), _VL_FIELDS)
    out = d.select(
        "line_no", pl.coalesce([pl.col(f).replace("", None) for f in VICTORIALOGS_HOST_FIELDS]).alias("host"),
        pl.col("_time").str.replace(r"Z$", "+00:00").str.to_datetime(
            "%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us", time_zone="UTC").alias("ts"),
        pl.col("SYSLOG_IDENTIFIER").alias("ident"), pl.col("_TRANSPORT").alias("transport"),
        pl.col("_msg").alias("message"), "raw")
    good, unreadable = _split_unreadable(out, "a VictoriaLogs entry without _time or a host field ("
                                              + ", ".join(VICTORIALOGS_HOST_FIELDS) + ")")
    return good, pl.concat([bad, unreadable])


def xid_rows(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows as staged: ROWS_SCHEMA; bad: line_no, reason, raw) of parsed Xid lines: a line must name the GPU's
    bus id and the code."""
    x = lines.with_columns(pl.col("message").str.extract(_PCI, 1).alias("pci_bus_id"),
                           pl.col("message").str.extract(_CODE, 1).cast(pl.UInt32, strict=False).alias("xid"))
    bad = x.filter(pl.col("message").str.contains(MARKER, literal=True)
                   & (pl.col("pci_bus_id").is_null() | pl.col("xid").is_null())).select(
        "line_no",
        pl.when(pl.col("pci_bus_id").is_null()).then(pl.lit("an NVRM Xid line without the GPU's PCI bus id"))
        .otherwise(pl.lit("an NVRM Xid line without an Xid code")).alias("reason"), "raw")
    rows = x.filter(pl.col("pci_bus_id").is_not_null(), pl.col("xid").is_not_null()).select(
        pl.lit(source).alias("source"), "line_no", "host", "pci_bus_id", "ts", "xid", "raw")
    return rows.cast(ROWS_SCHEMA), bad.cast(_BAD)


def read_file(path: Path, fmt: str = "auto", *, year: int | None = None, tz: str = "UTC"
              ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One kernel log file -> (rows, bad) (xid_rows). ``auto``: JSON when it starts with an object, else text
    (short-iso and syslog lines are told apart line by line)."""
    if fmt not in FORMATS:
        raise OpsError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    check_readable(path)
    data = Path(path).read_bytes()
    if fmt == "auto":
        fmt = "json" if data.lstrip()[:1] == b"{" else "syslog"
    lines, bad = parse_journal_json(data) if fmt == "json" else parse_text(data, year=year, tz=tz)
    rows, bad_xid = xid_rows(lines, f"kernel:file:{Path(path).resolve()}")
    return rows, pl.concat([bad, bad_xid])


def _statement(name: str, relation: str) -> str:
    (sql,) = split_statements(sql_text(f"staging/{name}.sql"))
    return sql.replace("{{input}}", relation).rstrip().rstrip(";")


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class _Staged:
    """The staged rows as a relation the engine reads: the Parquet file itself in process; a scratch table on a
    server (which cannot see this machine's files)."""

    def __init__(self, wh, path: Path):
        self.wh, self.table = wh, None
        self.name = f"file({_lit(str(Path(path).resolve()))}, Parquet)"
        if not wh.embedded:
            self.table = self.name = f"_stage_kernel_{uuid.uuid4().hex}"
            wh.command(f"CREATE TABLE {self.table} (source String, line_no UInt64, host String, pci_bus_id String, "
                       "ts DateTime64(6, 'UTC'), xid UInt32, raw String) ENGINE = MergeTree ORDER BY tuple()")
            wh.load_parquet(self.table, path)

    def drop(self) -> None:
        if self.table:
            self.wh.command(f"DROP TABLE IF EXISTS {self.table}")


def quarantine_source(source: str) -> str:
    """What the quarantine calls a source: a file by its path, as the other file loads do."""
    return source.removeprefix("kernel:").removeprefix("file:")


def insert_rows(wh, rows: pl.DataFrame, bad: dict[str, pl.DataFrame], cluster: str,
                window: tuple[datetime, datetime] | None = None) -> dict:
    """Staged Xid rows (xid_rows; several sources at once) -> xid_event; the lines no GPU is known for and
    ``bad`` ({quarantine source: bad lines}) to the quarantine; the gauge's rows of the same Xids deleted.
    ``window``: only rows in it (a VictoriaLogs query's), else the rows' own span. Returns {lines, xid_events
    (of these sources in the window, after the load), gauge_rows_replaced, quarantined}."""
    bad = {src: b for src, b in bad.items() if b.height}
    counts = {"lines": rows.height + sum(b.height for b in bad.values()), "xid_events": 0,
              "gauge_rows_replaced": 0, "quarantined": 0}
    if rows.height:
        if window is None:
            window = (rows.get_column("ts").min().replace(microsecond=0),
                      rows.get_column("ts").max().replace(microsecond=0) + timedelta(seconds=1))
        params = {"cluster": cluster, "from_ts": window[0], "to_ts": window[1]}
        sources = rows.get_column("source").unique().sort().to_list()
        unplaced: dict[str, list[tuple]] = {}
        with staged(wh) as stage:
            p = stage / "kernel-xid.parquet"
            rows.write_parquet(p, compression="uncompressed", statistics=False)
            rel = _Staged(wh, p)
            try:
                wh.command(_statement("xid_event_kernel", rel.name), params)
                raw = {(src, n): r for src, n, r in rows.select("source", "line_no", "raw").iter_rows()}
                for source, n, node, pci in wh.query_rows(_statement("xid_event_kernel_unplaced", rel.name), params):
                    unplaced.setdefault(quarantine_source(source), []).append(
                        (int(n), f"no GPU of {node} is known by PCI bus id {pci} (load the node's dcgm-exporter "
                                 "telemetry, with its pci_bus_id label, first)", raw.get((source, n))))
            finally:
                rel.drop()
        for key, q in unplaced.items():
            q = pl.DataFrame(q, schema=_BAD, orient="row")
            bad[key] = pl.concat([bad[key], q]) if key in bad else q
        twins = wh.query_rows(_statement("xid_event_gauge_twins", ""), params)
        for k in range(0, len(twins), 500):  # an Xid is rare: a few rows, in statements of bounded size
            keys = ", ".join(f"({_lit(n)}, {int(g)}, {int(t)}, {int(x)})" for n, g, t, x in twins[k:k + 500])
            wh.command("DELETE FROM xid_event WHERE cluster = {cluster:String} AND NOT startsWith(source, 'kernel:') "
                       f"AND (node, gpu, toUInt32(ts), xid) IN ({keys})", {"cluster": cluster})
        counts["gauge_rows_replaced"] = len(twins)
        counts["xid_events"] = int(wh.query_rows(
            "SELECT count() FROM xid_event FINAL WHERE cluster = {cluster:String} AND source IN {s:Array(String)} "
            "AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')}", {**params, "s": sources})[0][0])
    for src, q in bad.items():
        quarantine(wh, src, q.with_columns(pl.col("raw").fill_null("")).cast(QUARANTINE_SCHEMA))
        counts["quarantined"] += q.height
    return counts


def _counts(c: dict) -> tuple[int, int, int]:
    return c["lines"], c["xid_events"], c["quarantined"]


@logged_load("kernel-log", lambda a: "kernel:" + ",".join(Path(p).name for p in a["paths"][:3])
             + ("…" if len(a["paths"]) > 3 else ""), _counts)
def load_kernel_log(wh, paths: list[Path], *, fmt: str = "auto", year: int | None = None, tz: str = "UTC",
                    cluster: str | None = None) -> dict:
    """Load the Xids of kernel log files (journalctl -o json or short-iso, syslog); idempotent: reloading a file
    replaces its rows. Returns insert_rows' counts."""
    cluster = cluster_for_rows(wh, cluster)
    parts, bad = [], {}
    for p in paths:
        rows, b = read_file(Path(p), fmt, year=year, tz=tz)
        parts.append(rows)
        bad[str(Path(p).resolve())] = b
    rows = pl.concat(parts) if parts else pl.DataFrame(schema=ROWS_SCHEMA)
    return insert_rows(wh, rows, bad, cluster)
