"""Prometheus text / OpenMetrics files parsed and pivoted by the engine (the embedded warehouse): the fast
path of etl/openmetrics_source.py, same rows, same quarantine, memory that does not grow with the file.

Why: the polars parse (a regex per line, then 19 label regexes, then a pivot of the long frame) ran at
2-7 k GPU rows/s and held the whole file several times over (2.6 GB for a 2-hour window of 128 nodes).
Here the engine reads the file itself (``file(path, LineAsString)``) and cuts each line with plain string
functions into its series (``metric{labels}``), value and timestamp; the label block is parsed once per
distinct series (15 k series for 7 M lines), in Python with the exact rules of the polars parse; the
engine then pivots the lines into the exporter-shaped rows (one GPU at one time with all its metrics)
joined with that series table, writes them as staged Parquet, and etl/telemetry_insert.py inserts them.

What a line needs for the fast path: ``series value`` or ``series value timestamp`` separated by single
spaces, a value and timestamp the engine reads as numbers, a timestamp in range. Every other line (a tab,
trailing blanks, a bad value, invalid UTF-8, not a sample at all), and the lines of a series whose label
block the exact pattern rejects, whose ``gpu`` label is not an index, or whose value its integer column
cannot hold, go through the polars parse (openmetrics_source.parse_lines / split_bad_samples): quarantined
with the same reasons and line numbers, or taken back as samples. Which sample of a GPU row wins is the
polars rule: the series with the fewest Kubernetes workload labels, then the latest line; repeated samples
of one series at one time are found in the pivot (a bit per series of the row) and quarantined as before.
"""

from __future__ import annotations

import base64
from datetime import datetime
from pathlib import Path

import polars as pl
from ops_warehouse.etl.lustre_jobs import JOB_LABELS, JOB_METRICS, job_frame
from ops_warehouse.etl.metric_catalog import Metric
from ops_warehouse.etl.openmetrics_lines import (
    NODE_SERIES_LABELS,
    QUARANTINE_SCHEMA,
    SERIES_PATTERN,
    TS_MS_MAX,
    UINT32_COLUMNS,
    clip_raw,
    fallback_ms,
    is_openmetrics,
    label_columns,
    node_labels,
    parse_lines,
    pods_count,
    split_bad_samples,
    superseded,
)
from ops_warehouse.etl.telemetry_insert import ExporterFiles, insert_window

# The engine's cut of a line: the series ends at the first '} ' when there is a label block, else at the first
# space; then ' value' or ' value timestamp'. A cut inside a quoted label value leaves a series the exact
# pattern rejects (its quote is open), so that line goes to the polars parse. A CRLF line's CR is cut from its
# short tail, not from a copy of the line. (Finding the last '}' with reverse(), or copying each line without
# its CR, made the scan 2-3x slower; key, value and time of a line that is not st 0 mean nothing.)
# st: 0 a plain sample, 1 for the polars parse, 2 invalid UTF-8.
# The lines are written in parts by a hash of their time (every sample of one time in one part): each range of the
# pivot reads its part, not every line again (round 1 cut the pivot by time range, and each range read all the
# lines: 4 reads of 7 M lines for a 2-hour window at 15 s).
_SCAN = """
INSERT INTO FUNCTION file({out:String}, Native) PARTITION BY cityHash64(ts_ms) % {parts:UInt64}
SELECT f, line_no, key, cityHash64(key) AS h, v, ts_ms, st FROM (
    SELECT toUInt16({f:UInt16}) AS f, _row_number + 1 AS line_no,
           if(position(line, '{') = 0, position(line, ' '), position(line, '} ') + 1) AS ke,
           toLowCardinality(substring(line, 1, ke - 1)) AS key, substring(line, ke) AS tail,
           splitByChar(' ', if(endsWith(tail, '\\r'), substring(tail, 1, length(tail) - 1), tail)) AS t,
           toFloat64OrNull(t[2]) AS v0, toFloat64OrNull(t[3]) * {scale:Float64} AS tsf,
           ifNull(v0, 0) AS v, toInt64(if(length(t) = 3, if(tsf >= 0 AND tsf <= {ts_max:Float64}, tsf, 0),
                                             {fallback:Int64})) AS ts_ms,  -- no inf or NaN into toInt64
           toUInt8(multiIf(NOT isValidUTF8(line), 2,
                   ke > 1 AND t[1] = '' AND length(t) IN (2, 3) AND v0 IS NOT NULL
                   AND (length(t) = 2 OR (tsf >= 0 AND tsf <= {ts_max:Float64})), 0, 1)) AS st
    FROM file({path:String}, LineAsString)
    WHERE NOT (startsWith(line, '#') AND isValidUTF8(line))
)
"""
# read the text with pread, not mmap: the mapped file's pages count in the process's memory (a 1.3 GB
# window peaked at 1.8 GB in the scan; 0.9 GB with pread)
_READ = {"storage_file_read_method": "pread"}
_LINES = ("file({lines:String}, Native, 'f UInt16, line_no UInt64, key LowCardinality(String), h UInt64, "
          "v Float64, ts_ms Int64, st UInt8')")  # named: an empty file has no structure to read
# a line the pivot takes: a plain sample of a series the exact pattern takes, a value its column can hold
_GOOD = ("st = 0 AND key NOT IN {bad_keys:Array(String)} AND NOT (key IN {int_keys:Array(String)} AND NOT "
         "(isFinite(v) AND v = floor(v) AND v >= 0 AND v <= 4294967295))")  # split_bad_samples' count test
# the pivot's order of a GPU row's candidate samples: fewest workload labels, then the latest line
_ORDER = "bitShiftLeft(toUInt64(s._pods), 44) + (17592186044415 - (bitShiftLeft(toUInt64(l.f), 36) + l.line_no))"
_MAX_BITS = 64  # a row's series told apart by a bit each in the pivot's repeat check
# text per part of the lines, so per pivot query: its GROUP BY holds their rows (~0.1 GB per million lines),
# whatever the window; 192 MB is 1.1 M lines of dcgm-exporter's (~180 bytes), 3 M of short node lines (~60)
_PART_BYTES = 192 << 20


def _q(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def _tail_lines(path: Path, size: int = 1 << 16) -> list[str]:
    """The file's last lines, enough of them to hold its last line that is not blank (OpenMetrics' # EOF)."""
    n = path.stat().st_size
    with open(path, "rb") as fh:
        while True:
            fh.seek(max(0, n - size))
            lines = [_decoded(b) for b in fh.read().split(b"\n")]
            whole = size >= n
            if not whole:
                lines = lines[1:]  # cut mid-line
            if whole or any(ln.strip() for ln in lines):
                return lines
            size *= 4


def _decoded(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""  # decode_lines' reading: an invalid line is blank for the # EOF test


def series_table(keys: list[str], instance: str | None) -> pl.DataFrame:
    """Distinct series (``metric{labels}``) parsed as the polars parse parses a line's: metric, the LABELS
    columns, _pods, _series, ok (the exact pattern takes it); ``instance`` filled in as load_text_files does."""
    g = pl.DataFrame({"key": keys}, schema={"key": pl.String}).with_columns(
        pl.col("key").str.extract_groups(SERIES_PATTERN).alias("g")).unnest("g")
    g = label_columns(g.rename({"1": "metric", "2": "labels"}))
    g = g.with_columns(_pods=pods_count(pl.col("labels")), _series=pl.col("labels").fill_null(""),
                       ok=pl.col("metric").is_not_null())
    return g.with_columns(pl.col("instance").fill_null(instance)) if instance else g


def _bad_gpu_keys(series: pl.DataFrame, cat: dict[str, Metric]) -> list[str]:
    """Series whose gpu label split_bad_samples rejects (every line of them is bad; value 0 is a good count)."""
    s = series.filter(pl.col("ok")).with_columns(value=pl.lit(0.0), line_no=pl.int_range(pl.len(), dtype=pl.UInt64))
    nos = split_bad_samples(s, cat)[1].get_column("line_no")
    return s.filter(pl.col("line_no").is_in(nos.implode())).get_column("key").to_list()


def _int_keys(series: pl.DataFrame, cat: dict[str, Metric]) -> list[str]:
    names = [n for n, m in cat.items() if m.column in UINT32_COLUMNS]
    return series.filter(pl.col("ok"), pl.col("metric").is_in(names)).get_column("key").to_list()


def _rows(series: pl.DataFrame, cat: dict[str, Metric]) -> tuple[pl.DataFrame, dict[str, tuple[pl.DataFrame, list[str]]]]:
    """Each good series' row of the pivot (families()' index of its family), slot (its metric's column), job
    (rank of its hpc_job) and bit; and per kind: its rows (row, index labels) and metric columns in slot order."""
    known = node_labels(series.filter(pl.col("ok"), pl.col("metric").is_in(list(cat))))
    gpu_names = [n for n, m in cat.items() if m.grain == "gpu"]
    nic_names = [n for n, m in cat.items() if m.grain == "node" and m.per_device]
    gpu = known.filter(pl.col("metric").is_in(gpu_names), pl.col("Hostname").is_not_null(),
                       pl.col("gpu").is_not_null()).with_columns(pl.col("UUID", "modelName", "pci_bus_id").fill_null(""))
    mig = pl.col("GPU_I_ID").fill_null("") != ""
    parts = [
        ("gpu", gpu.filter(~mig), ["Hostname", "gpu", "UUID", "modelName", "pci_bus_id"]),
        ("mig", gpu.filter(mig).with_columns(pl.col("GPU_I_PROFILE", "hpc_job").fill_null("")),
         ["Hostname", "gpu", "GPU_I_ID", "GPU_I_PROFILE", "UUID", "hpc_job"]),
        ("nic", known.filter(pl.col("metric").is_in(nic_names), pl.col("instance").is_not_null()),
         ["instance", "device", "port"]),
    ]
    for name, m in cat.items():
        if m.grain == "node" and not m.per_device:
            part = known.filter(pl.col("metric") == name, pl.col("instance").is_not_null())
            # the series labels the metric has (a label no series of it carries says nothing and is left out)
            labels = [c for c in NODE_SERIES_LABELS if part.get_column(c).null_count() < part.height]
            parts.append((f"node:{name}", part, ["instance", *labels]))
    schema = {"key": pl.String, "row": pl.UInt32, "slot": pl.UInt8, "_pods": pl.UInt32, "_job": pl.String}
    out, kinds, next_row = [pl.DataFrame(schema=schema)], {}, 0
    for kind, part, index in parts:
        if not part.height:
            continue
        present = set(part.get_column("metric"))
        names = [n for n in cat if n in present]
        rows = part.select(index).unique(maintain_order=True).with_row_index("row", offset=next_row)
        next_row += rows.height
        kinds[kind] = (rows.with_columns(pl.col("row").cast(pl.UInt32)), names)
        part = part.join(rows, on=index, how="left", nulls_equal=True)
        out.append(part.select(
            "key", pl.col("row").cast(pl.UInt32),
            pl.col("metric").replace_strict(names, list(range(len(names))), return_dtype=pl.UInt8).alias("slot"),
            "_pods", (pl.col("hpc_job") if kind == "gpu" else pl.lit(None, pl.String)).alias("_job")))
    placed = pl.concat(out, how="vertical_relaxed")
    # the rest (unknown metrics, job_stats, a GPU series without node or index): a row each, only so that the
    # pivot finds repeated samples of them as superseded() does
    rest = series.filter(pl.col("ok"), ~pl.col("key").is_in(placed.get_column("key").implode())).select(
        "key", (pl.int_range(pl.len(), dtype=pl.UInt32) + next_row).alias("row"), pl.lit(0, pl.UInt8).alias("slot"),
        "_pods", pl.lit(None, pl.String).alias("_job"))
    table = pl.concat([placed.select(rest.columns), rest], how="vertical_relaxed")
    # dcgm-exporter's job label: a GPU row keeps the greatest non-empty one of its samples (families())
    jobs = table.get_column("_job").drop_nulls().filter(table.get_column("_job").drop_nulls() != "").unique().sort()
    table = table.with_columns(
        job=pl.col("_job").replace_strict(jobs, list(range(1, jobs.len() + 1)), default=0, return_dtype=pl.UInt32),
        _n=pl.int_range(pl.len()).over("row"))
    table = table.with_columns(bit=pl.when(pl.col("_n") < _MAX_BITS).then(pl.lit(2, pl.UInt64).pow(pl.col("_n")).cast(pl.UInt64))
                               .otherwise(pl.lit(0, pl.UInt64)))
    kinds["_jobs"] = (pl.DataFrame({"job": jobs}), [])
    return table.drop("_n", "_job"), kinds


class _Load:
    """One load's text files through the engine, in a staging folder: their lines as Native files, the
    series table, each file's quarantine."""

    def __init__(self, wh, stage: Path, paths: list[Path], at: datetime | None, cat: dict[str, Metric],
                 instance: str | None):
        self.wh, self.stage, self.paths, self.cat, self.instance = wh, stage, paths, cat, instance
        self.openmetrics = [is_openmetrics(_tail_lines(p)) for p in paths]
        self.fallback = [fallback_ms(p, at) for p in paths]
        self.quarantine = [pl.DataFrame(schema=QUARANTINE_SCHEMA) for _ in paths]
        self.parts = max(1, -(-sum(Path(p).stat().st_size for p in paths) // _PART_BYTES))
        # part -1: all the lines (the pivot of one part names it)
        self.params = {"lines": str(stage / "lines-*.native"), "bad_keys": [], "int_keys": [], "parts": self.parts,
                       "part": -1}

    def arrow(self, sql: str, **params) -> pl.DataFrame:
        return pl.from_arrow(self.wh.query_arrow(sql, {**self.params, **params}))

    def command(self, sql: str, settings: dict | None = None, **params) -> None:
        self.wh.command(sql, {**self.params, **params}, settings)

    def scan(self) -> None:
        for i, p in enumerate(self.paths):
            self.command(_SCAN, _READ, out=str(self.stage / f"lines-{i}-{{_partition_id}}.native"), f=i,
                         path=str(Path(p).resolve()),
                         fallback=self.fallback[i], scale=1000.0 if self.openmetrics[i] else 1.0,
                         ts_max=float(TS_MS_MAX))

    def raw_lines(self, f: int, line_nos: list[int]) -> pl.DataFrame:
        """(line_no, b: the line's bytes) of lines of file f, read again."""
        nos = self.stage / "line-numbers.parquet"  # a file, not a parameter: there may be millions
        pl.DataFrame({"n": sorted(set(line_nos))}, schema={"n": pl.UInt64}).write_parquet(nos)
        df = self.arrow("SELECT _row_number + 1 AS line_no, base64Encode(line) AS b FROM file({path:String}, "
                        "LineAsString) WHERE _row_number + 1 IN (SELECT n FROM file({nos:String}, Parquet)) "
                        "SETTINGS storage_file_read_method = 'pread'",
                        path=str(Path(self.paths[f]).resolve()), nos=str(nos))
        return pl.DataFrame({"line_no": df.get_column("line_no").cast(pl.UInt64),
                             "b": [base64.b64decode(b) for b in df.get_column("b")]},
                            schema={"line_no": pl.UInt64, "b": pl.Binary})

    def put_aside(self, f: int, q: pl.DataFrame, raw: pl.DataFrame) -> None:
        """Bad lines (line_no, reason) of file f into its quarantine, the raw text as the polars path keeps it
        (the line as read, invalid bytes replaced)."""
        q = q.unique("line_no", keep="first").join(raw, on="line_no", how="left")
        q = q.with_columns(raw=pl.Series([clip_raw((b or b"").decode("utf-8", "replace")) for b in q.get_column("b")],
                                         dtype=pl.String))
        self.quarantine[f] = pl.concat([self.quarantine[f], q.select("line_no", "reason", "raw").cast(QUARANTINE_SCHEMA)])

    def irregular(self, series: pl.DataFrame) -> pl.DataFrame:
        """Lines the pivot does not take as they are, through the polars parse and split_bad_samples: the bad
        ones into the quarantine, the samples it takes back (f, line_no, key, v, ts_ms)."""
        odd = self.arrow(f"SELECT f, line_no, st FROM {_LINES} WHERE NOT ({_GOOD}) ORDER BY f, line_no")
        extra = []
        for f in range(len(self.paths)):
            mine = odd.filter(pl.col("f") == f)
            if not mine.height:
                continue
            raw = self.raw_lines(f, mine.get_column("line_no").to_list())
            utf8 = set(mine.filter(pl.col("st") == 2).get_column("line_no").to_list())
            bad_utf8 = raw.filter(pl.col("line_no").is_in(list(utf8)))
            q_utf8 = pl.DataFrame({
                "line_no": bad_utf8.get_column("line_no"), "reason": ["invalid UTF-8"] * bad_utf8.height,
                # backslashreplace keeps the bytes, as decode_lines does
                "raw": [b.decode("utf-8", "backslashreplace") for b in bad_utf8.get_column("b")]},
                schema=QUARANTINE_SCHEMA)
            lines = raw.filter(~pl.col("line_no").is_in(list(utf8))).select(
                "line_no", l=pl.Series([b.decode("utf-8").removesuffix("\r") for b in
                                        raw.filter(~pl.col("line_no").is_in(list(utf8))).get_column("b")],
                                       dtype=pl.String))
            samples, q = parse_lines(lines, self.openmetrics[f], self.fallback[f])
            samples, q_bad = split_bad_samples(samples, self.cat)
            self.quarantine[f] = pl.concat([self.quarantine[f], q.cast(QUARANTINE_SCHEMA), q_utf8])
            self.put_aside(f, q_bad, raw)
            extra.append(samples.select(
                pl.lit(f, pl.UInt16).alias("f"), "line_no", (pl.col("metric") + pl.col("_series")).alias("key"),
                pl.col("value").alias("v"), pl.col("timestamp").dt.epoch("ms").alias("ts_ms")))
        return pl.concat(extra) if extra else pl.DataFrame(
            schema={"f": pl.UInt16, "line_no": pl.UInt64, "key": pl.String, "v": pl.Float64, "ts_ms": pl.Int64})

    def repeats(self, series: pl.DataFrame, good: str) -> None:
        """superseded() on the lines of a series and time given more than once (the pivot saw some)."""
        rep = self.arrow(f"SELECT f, line_no, key, v, ts_ms FROM ({good}) WHERE (f, key, ts_ms) IN "
                         f"(SELECT f, key, ts_ms FROM ({good}) GROUP BY f, key, ts_ms HAVING count() > 1)")
        if not rep.height:
            return
        rep = rep.join(series.select("key", "metric", "_series"), on="key", how="left").with_columns(
            timestamp=pl.col("ts_ms"), value=pl.col("v"), line_no=pl.col("line_no").cast(pl.UInt64))
        for f in range(len(self.paths)):
            mine = rep.filter(pl.col("f") == f)
            if mine.height:
                q = superseded(mine)[1]
                if q.height:
                    self.put_aside(f, q, self.raw_lines(f, q.get_column("line_no").to_list()))


def load_files(wh, stage: Path, paths: list[Path], cat: dict[str, Metric], cluster: str, source: str,
               window: tuple[datetime, datetime], *, at: datetime | None = None, instance: str | None = None
               ) -> tuple[dict, list[pl.DataFrame], int]:
    """(insert_window's counts, each file's quarantine (line_no, reason, raw), how many samples were good)."""
    run = _Load(wh, stage, paths, at, cat, instance)
    run.scan()
    keys = run.arrow(f"SELECT DISTINCT toString(key) AS key FROM {_LINES} WHERE st = 0")
    series = series_table(keys.get_column("key").to_list(), instance)
    run.params["bad_keys"] = series.filter(~pl.col("ok")).get_column("key").to_list() + _bad_gpu_keys(series, cat)
    run.params["int_keys"] = _int_keys(series, cat)
    extra = run.irregular(series)
    new = extra.filter(~pl.col("key").is_in(series.get_column("key").implode())).get_column("key").unique()
    if new.len():  # samples the polars parse took that the engine's cut did not: their series too
        series = pl.concat([series, series_table(new.to_list(), instance)], how="vertical_relaxed")
    table, kinds = _rows(series, cat)
    table.write_parquet(stage / "series.parquet")
    good = f"SELECT f, line_no, toString(key) AS key, h, v, ts_ms FROM {_LINES} WHERE {_GOOD}"
    if extra.height:
        extra.write_parquet(stage / "extra.parquet")
        good += (f" UNION ALL SELECT f, line_no, key, cityHash64(key) AS h, v, ts_ms FROM "
                 f"file({_lit(str(stage / 'extra.parquet'))}, Parquet) "  # in the part of the scan's lines of its time
                 "WHERE {part:Int64} < 0 OR cityHash64(ts_ms) % {parts:UInt64} = {part:Int64}")
    slots = max([1, *(len(names) for _, names in kinds.values())])
    structure = ", ".join(["row UInt32", "ts_ms Int64", *(f"s{i} Nullable(Float64)" for i in range(slots)),
                           "job UInt32", "n UInt64", "bits UInt64", "bits_or UInt64", "bit0 UInt64"])
    pivot = f"file({_lit(str(stage / 'pivot-*.native'))}, Native, {_lit(structure)})"
    # the pivot by parts of the lines (the scan's): the engine's GROUP BY holds one part's rows
    parts = [i for i in range(run.parts) if list(stage.glob(f"lines-*-{i}.native"))] or [0]
    # one series per row and metric, no series given twice at a time (the common file): any sample of the
    # group is the one; else the polars rule, which costs the engine twice the time
    contested = table.select(pl.struct("row", "slot").is_duplicated().any()).item()
    # the group key packed in a UInt64 where row and time fit (every time the cut takes is below 2^42 ms; a
    # fallback time, from ``at`` or the file's, may not be)
    packed = int(table.get_column("row").max() or 0) < (1 << 22) and all(0 <= t < (1 << 42) for t in run.fallback)
    # the pivot joins the lines with their series on the hash the scan wrote (a number, not the text: the text's
    # join was most of the pivot's CPU), unless two series of the load share a hash
    on = "l.h = s.h" if not wh.query_rows(
        "SELECT uniqExact(key) != uniqExact(cityHash64(key)) FROM file({series:String}, Parquet)",
        {"series": str(stage / "series.parquet")})[0][0] else "l.key = s.key"
    for pick in (["last"] if contested else ["any", "last"]):
        for i in parts:
            _pivot(run, good, slots, pick, i, stage / f"pivot-{i}.native", packed, on)
        n_good, repeated = wh.query_rows(f"SELECT sum(n), countIf(bits != bits_or OR bit0 = 0) FROM {pivot}")[0]
        if not repeated:
            break
    if repeated:
        run.repeats(series, good)
    files = _write_families(run, kinds, pivot)
    files.job = _job_file(run, series, good)
    if files.gpu or files.node or files.job or files.mig:
        counts = insert_window(wh, files, cat, cluster, source, window)
    else:
        counts = {"gpu_rows": 0, "node_rows": 0, "xid_events": 0, "quarantined": 0}
    return counts, run.quarantine, int(n_good or 0)


def _pivot(run: _Load, good: str, slots: int, pick: str, part: int, out: Path, packed: bool, on: str) -> None:
    """The good lines of a part joined with their series, one row per pivot row and time (families()'
    wide frames before their labels): s0.. the metrics' values by slot (NULL: none), the job rank, how many
    lines, the repeat check (a series twice in a group sets its bit twice: the sum is no longer the OR).

    Each group keeps its lines' slots, values and bits as arrays (three states a line, not one per metric):
    a metric's value is the first of its slot, after a sort by the polars order for pick 'last'. Its key is
    row and time packed in one number (row < 2^22, 0 <= time < 2^42 ms) where they fit: a hash table on one
    UInt64 grouped 7 M lines in 0.5 s of CPU where (row, ts_ms) took 1.4-1.7 s, and the arrays took 1.6 s where
    13 anyIf took 3.5 s (docs/benchmarks.md, issue 50 round 2)."""
    key = "bitShiftLeft(toUInt64(s.row), 42) + l.ts_ms AS k" if packed else "(s.row, l.ts_ms) AS k"
    row, ts = ("toUInt32(bitShiftRight(k, 42))", "toInt64(bitAnd(k, 4398046511103))") if packed else ("k.1", "k.2")
    if pick == "any":
        arrays, sl, vs = "", "sl", "vs"
    else:
        arrays = f", groupArray({_ORDER}) AS os"
        sl, vs = "arraySort((x, o) -> o, sl, os)", "arraySort((x, o) -> o, vs, os)"
    values = ", ".join(f"if(has(sl, {i}), vs[indexOf(sl, {i})], NULL) AS s{i}" for i in range(slots))
    run.command(
        f"INSERT INTO FUNCTION file({{out:String}}, Native) SELECT {row} AS row, {ts} AS ts_ms, {values}, job, "
        f"length(sl) AS n, arraySum(bs) AS bits, arrayReduce('groupBitOr', bs) AS bits_or, arrayMin(bs) AS bit0 "
        f"FROM (SELECT k, {sl} AS sl, {vs} AS vs, bs, job FROM (SELECT {key}, groupArray(s.slot) AS sl, "
        f"groupArray(l.v) AS vs, groupArray(s.bit) AS bs, max(s.job) AS job{arrays} "
        f"FROM ({good}) AS l INNER JOIN (SELECT *, cityHash64(key) AS h FROM file({{series:String}}, Parquet)) AS s "
        f"ON {on} GROUP BY k))",
        {"engine_file_truncate_on_insert": 1},  # the second pick replaces the first's rows
        out=str(out), series=str(run.stage / "series.parquet"), part=part,
        lines=str(run.stage / f"lines-*-{part}.native"))


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _write_families(run: _Load, kinds: dict, pivot: str) -> ExporterFiles:
    """Each family's exporter-shaped Parquet (timestamp, its index labels, a column per metric) from the
    pivot, as families() shapes its frames."""
    files = ExporterFiles(staged=True)
    jobs = kinds.pop("_jobs")[0].get_column("job").to_list()
    for kind, (rows, names) in kinds.items():
        rows_path = run.stage / f"rows-{kind.replace(':', '-')}.parquet"
        rows.write_parquet(rows_path)
        index = [c for c in rows.columns if c != "row"]
        cols = ", ".join(f"p.s{i} AS {_q(n)}" for i, n in enumerate(names))
        labels = ", ".join(f"r.{_q(c)} AS {_q(c)}" for c in index)
        out = run.stage / f"{kind.replace(':', '-')}.parquet"
        select = f"SELECT fromUnixTimestamp64Milli(p.ts_ms, 'UTC') AS timestamp, {labels}, {cols}"
        source = f" FROM {pivot} AS p INNER JOIN file({{rows:String}}, Parquet) AS r ON p.row = r.row"
        if kind == "gpu" and jobs:  # the greatest job of the GPU's samples at that time, whatever its UUID
            sql = (f"SELECT * EXCEPT j, if(j = 0, NULL, arrayElement({{jobs:Array(String)}}, j)) AS hpc_job FROM "
                   f"({select}, max(p.job) OVER (PARTITION BY p.ts_ms, r.Hostname, r.gpu) AS j{source})")
        elif kind == "gpu":
            sql = f"{select}, CAST(NULL AS Nullable(String)) AS hpc_job{source}"
        else:
            sql = select + source
        sql = "INSERT INTO FUNCTION file({out:String}, Parquet) " + sql
        run.command(sql, out=str(out), rows=str(rows_path), jobs=jobs)
        getattr(files, "gpu" if kind == "gpu" else "mig" if kind == "mig" else "node").append(out)
    return files


def _job_file(run: _Load, series: pl.DataFrame, good: str) -> list[Path]:
    """Lustre job_stats samples as job_frame shapes them (their own long rows: few beside the GPUs')."""
    job_keys = series.filter(pl.col("ok"), pl.col("metric").is_in(list(JOB_METRICS)), pl.col("jobid").is_not_null())
    if not job_keys.height:
        return []
    lines = run.arrow(f"SELECT f, line_no, key, v, ts_ms FROM ({good}) WHERE key IN {{keys:Array(String)}} "
                      "ORDER BY f, line_no", keys=job_keys.get_column("key").to_list())
    samples = lines.join(job_keys.select("key", "metric", *JOB_LABELS), on="key", how="left").select(
        "metric", *JOB_LABELS, pl.from_epoch("ts_ms", "ms").dt.replace_time_zone("UTC").alias("timestamp"),
        pl.col("v").alias("value"))
    frame = job_frame(samples)
    if frame is None or not frame.height:
        return []
    out = run.stage / "job.parquet"
    frame.write_parquet(out)
    return [out]
