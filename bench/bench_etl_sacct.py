"""Benchmark: sacct text -> warehouse, the product's loader against the engine's own ceiling.

    /work/venv/bin/python bench/bench_etl_sacct.py [--jobs 1000000] [--small-jobs 250000] [--workdir DIR]
        [--inputs DIR]   (keep the generated dumps in DIR and reuse them next time)

1. writes a synthetic ``sacct --parsable2`` dump with steps (ops_warehouse.generate.volume) and times it;
2. in a fresh child process, loads it with the product (``ops_warehouse.etl.sacct_load.load_sacct``) into a
   fresh embedded warehouse: seconds, rows/s, peak RSS of that child; then again with ``refresh=False`` (the
   parse and the storing into typed tables alone, without the grains' refresh that follows a load);
3. in another fresh child, the ceiling: ClickHouse (chDB through clickhouse-connect, fresh warehouse) parsing
   the same file itself (``INSERT INTO t SELECT ... FROM file(..., 'CSVWithNames')``, times through
   ``parseDateTimeBestEffortOrNull``) into a typed ReplacingMergeTree with slurm_job_run's ORDER BY;
4. the product load again on a smaller dump, to show its peak RSS does not grow with the input.

Each phase runs in its own process, whose own peak RSS (VmHWM, read in the child) is that phase's peak. ``--stages`` adds a child that times
the loader's stages (read/split, normalize, Parquet staging, engine insert) chunk by chunk. ``--parts`` adds a
child that splits both sides into CPU seconds, one step after another (nothing overlapped): the engine's parse
alone (into a Null table) and with its write; the product's read, normalize, Parquet staging and insert; and the
issue's engine-typed design at its cheapest (the engine parses the file and inserts runs and steps itself, with
the common forms' conversions only: no routing of odd lines, no quarantine, no undo, no DST fold), the most
that design could reach. ``--no-whole`` skips the whole load with the grains (a long run at 5 M jobs).

``--nightly DIR`` measures instead a small file's fixed cost: the nightly extracts of DIR (the demo's 31,
~2,800 lines each) loaded one after the other inside one ``one_refresh``, against the engine's own parse of
each file into the ceiling's table, each side in its own child, ``--rounds`` pairs back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from peak_rss import peak_rss_mb  # bench/peak_rss.py (benches run as scripts from bench/)

GOAL_RATIO = 0.8  # issue 16 and 50: parsing and storing at >= 0.8 of the engine's own parse
GOAL_WHOLE_RATIO = 0.5  # issue 50: the whole load with its grains at >= 0.5
GOAL_RSS_MB = 1024  # issue 50: peak RSS <= 1 GB whatever the file's size
GOAL_NIGHTLY_S_PER_FILE = 0.2  # issue 50 item 1, round 5: a nightly file of ~2,800 lines, quiet machine
START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _current_rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


# ---------------------------------------------------------------------------------------------- children

def child_product(path: str, wh_dir: str, refresh: bool = True) -> dict:
    from ops_warehouse.config import Config
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.warehouse import open_warehouse

    t = time.perf_counter()
    wh = open_warehouse(Config(dsn=f"chdb://{wh_dir}"))
    connect_s = time.perf_counter() - t
    rss_before = _current_rss_mb()
    t = time.perf_counter()
    r = load_sacct(wh, path, refresh=refresh)
    seconds = time.perf_counter() - t
    runs = wh.query_rows("SELECT count() FROM slurm_job_run")[0][0]
    steps = wh.query_rows("SELECT count() FROM slurm_job_step")[0][0]
    return {
        "seconds": seconds, "connect_s": connect_s, "records_read": r.records_read, "jobs_loaded": r.jobs_loaded,
        "steps_loaded": r.steps_loaded, "quarantined": r.quarantined, "reasons": r.reasons,
        "rows_in_tables": runs + steps, "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb(),
    }


def _sacct_columns(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.readline().rstrip("\n").split("|")


CEILING_TABLE = """
CREATE TABLE sacct_ceiling
(
    cluster LowCardinality(String), job_id String, job_id_raw String, partition LowCardinality(String),
    qos LowCardinality(String), account LowCardinality(String), group_name LowCardinality(String),
    gid Nullable(UInt32), user LowCardinality(String), uid Nullable(UInt32),
    submit_ts DateTime('UTC'), eligible_ts Nullable(DateTime('UTC')), start_ts Nullable(DateTime('UTC')),
    end_ts Nullable(DateTime('UTC')), elapsed_s UInt64, timelimit String, exit_code String,
    state LowCardinality(String), nnodes UInt32, ncpus UInt32, req_cpus Nullable(UInt32), req_mem String,
    req_tres String, alloc_tres String, node_list String, reservation LowCardinality(String), job_name String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(submit_ts)
ORDER BY (cluster, job_id, submit_ts)
"""

CEILING_INSERT = """
INSERT INTO sacct_ceiling
SELECT
    Cluster, JobID, JobIDRaw, Partition, QOS, Account, `Group`, toUInt32OrNull(GID), User, toUInt32OrNull(UID),
    ifNull(parseDateTimeBestEffortOrNull(Submit, 'UTC'), toDateTime(0, 'UTC')),
    parseDateTimeBestEffortOrNull(Eligible, 'UTC'), parseDateTimeBestEffortOrNull(Start, 'UTC'),
    parseDateTimeBestEffortOrNull(`End`, 'UTC'), toUInt64OrZero(ElapsedRaw), TimelimitRaw, ExitCode, State,
    toUInt32OrZero(NNodes), toUInt32OrZero(NCPUS), toUInt32OrNull(ReqCPUS), ReqMem, ReqTRES, AllocTRES,
    NodeList, Reservation, JobName
FROM file({path:String}, 'CSVWithNames', {structure:String})
SETTINGS format_csv_delimiter = '|', format_csv_allow_double_quotes = 0, format_csv_allow_single_quotes = 0,
    input_format_csv_empty_as_default = 0, input_format_csv_use_default_on_bad_values = 0,
    -- read with pread rather than mmap (mapped file pages would count as the child's RSS), and insert in
    -- blocks of 128k rows, about the product's chunk, rather than 1M rows: bounded memory, and faster here
    storage_file_read_method = 'pread', max_insert_block_size = 131072, min_insert_block_size_rows = 131072,
    min_insert_block_size_bytes = 33554432
"""


def child_ceiling(path: str, wh_dir: str) -> dict:
    import clickhouse_connect

    client = clickhouse_connect.get_client(dsn=f"chdb://{wh_dir}")
    client.command(CEILING_TABLE)
    structure = ", ".join(f"`{c}` String" for c in _sacct_columns(path))
    rss_before = _current_rss_mb()
    t = time.perf_counter()
    client.command(CEILING_INSERT, parameters={"path": str(Path(path).resolve()), "structure": structure})
    seconds = time.perf_counter() - t
    rows = client.command("SELECT count() FROM sacct_ceiling")
    return {"seconds": seconds, "rows_in_tables": int(rows), "rss_before_mb": rss_before,
            "peak_rss_mb": peak_rss_mb()}


def child_stages(path: str, wh_dir: str) -> dict:
    """The product load with each stage timed (wrappers add a few calls per chunk, nothing per row)."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl import sacct_load, sacct_text
    from ops_warehouse.warehouse import Warehouse, open_warehouse

    acc: dict[str, float] = {"read+split (sacct_text.read_text)": 0.0, "normalize": 0.0,
                             "write_parquet (staging)": 0.0, "engine INSERT from Parquet": 0.0}
    orig_read, orig_norm, orig_load = sacct_text.read_text, sacct_load.normalize, Warehouse.load_parquet

    def read_text(*a, **k):
        it = orig_read(*a, **k)
        while True:
            t = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                acc["read+split (sacct_text.read_text)"] += time.perf_counter() - t
            yield item

    def normalize(*a, **k):
        t = time.perf_counter()
        try:
            return orig_norm(*a, **k)
        finally:
            acc["normalize"] += time.perf_counter() - t

    def load_parquet(self, table, p):
        t = time.perf_counter()
        try:
            return orig_load(self, table, p)
        finally:
            acc["engine INSERT from Parquet"] += time.perf_counter() - t

    orig_stage = sacct_load.stage_job_frames

    def stage_and_load(*a, **k):
        t = time.perf_counter()
        before = acc["engine INSERT from Parquet"]
        try:
            return orig_stage(*a, **k)
        finally:
            acc["write_parquet (staging)"] += time.perf_counter() - t - (acc["engine INSERT from Parquet"] - before)

    sacct_text.read_text = read_text
    sacct_load.normalize = normalize
    sacct_load.stage_job_frames = stage_and_load
    Warehouse.load_parquet = load_parquet
    wh = open_warehouse(Config(dsn=f"chdb://{wh_dir}"))
    t = time.perf_counter()
    sacct_load.load_sacct(wh, path)
    total = time.perf_counter() - t
    return {"seconds": total, "stages": acc, "peak_rss_mb": peak_rss_mb()}


# The engine-typed design at its cheapest: the engine parses the file (as the ceiling does) and inserts
# the product's two tables itself, each field through its common form's conversion only. What a full SQL
# normalize adds (routing odd lines to the quarantine, the undo's keys, the DST fold, the checks) comes on top:
# this is an upper bound of that design's speed, not a loader.
_TS = "parseDateTimeOrNull({}, '%Y-%m-%dT%H:%i:%s', 'UTC')"
_DIRECT_FROM = f"""
FROM (SELECT *, rowNumberInAllBlocks() + 2 AS line_no, {_TS.format('Submit')} AS sub, {_TS.format('Eligible')} AS eli,
      {_TS.format('Start')} AS sta, {_TS.format('`End`')} AS en, toUInt64OrZero(ElapsedRaw) AS el,
      position(JobID, '.') > 0 AS is_step, splitByChar('.', JobID)[1] AS jid,
      State IN ('COMPLETED', 'CANCELLED', 'FAILED', 'TIMEOUT', 'NODE_FAIL', 'PREEMPTED', 'OUT_OF_MEMORY') AS fin,
      if(fin, coalesce(en, sub), sub) AS aso
      FROM file({{p:String}}, 'CSVWithNames', {{s:String}}))"""
_DIRECT_SETTINGS = CEILING_INSERT[CEILING_INSERT.index("SETTINGS"):].strip() + ", optimize_on_insert = 0"
DIRECT_RUNS = f"""
INSERT INTO slurm_job_run (cluster, job_id, job_id_raw, array_job_id, array_task_id, het_job_id, het_job_offset,
    job_name, user, uid, account, group_name, partition, qos, reservation, state, exit_code, exit_signal, submit_ts,
    eligible_ts, start_ts, end_ts, as_of_ts, elapsed_s, timelimit_s, timelimit_kind, nnodes, ncpus, req_cpus,
    req_mem, alloc_mem_mib, gpus, gpu_type, billing, alloc_tres, req_tres, node_list, nodes, is_final, never_ran,
    source, source_line, _version)
SELECT Cluster, jid, toUInt64OrZero(JobIDRaw), 0, -1, 0, -1, JobName, User, toUInt32OrNull(UID), Account, `Group`,
    Partition, QOS, Reservation, State, toInt32OrNull(splitByChar(':', ExitCode)[1]),
    toInt32OrNull(splitByChar(':', ExitCode)[2]), assumeNotNull(sub), eli, sta, en, aso,
    el, toUInt64OrNull(TimelimitRaw) * 60, '', toUInt32OrZero(NNodes), toUInt32OrZero(NCPUS),
    toUInt32OrNull(ReqCPUS), ReqMem, toFloat64OrNull(extract(AllocTRES, 'mem=(\\d+)M')),
    toUInt32OrZero(extract(AllocTRES, 'gres/gpu=(\\d+)')), extract(AllocTRES, 'gres/gpu:([^=,]+)='),
    toUInt64OrNull(extract(AllocTRES, 'billing=(\\d+)')), AllocTRES, ReqTRES, NodeList, [NodeList], fin,
    fin AND NodeList = '', 'bench', line_no, toUInt64(fin) * 1099511627776 + toUnixTimestamp(aso)
{_DIRECT_FROM} WHERE NOT is_step
{_DIRECT_SETTINGS}
"""
DIRECT_STEPS = f"""
INSERT INTO slurm_job_step (cluster, job_id, job_id_raw, step_id, step_name, state, exit_code, exit_signal, start_ts,
    end_ts, elapsed_s, nnodes, ncpus, ntasks, gpus, alloc_tres, node_list, nodes, source, source_line, _version)
SELECT Cluster, jid, toUInt64OrZero(splitByChar('.', JobIDRaw)[1]), splitByChar('.', JobID)[2], JobName, State,
    toInt32OrNull(splitByChar(':', ExitCode)[1]), toInt32OrNull(splitByChar(':', ExitCode)[2]),
    coalesce(sta, sub, toDateTime(0, 'UTC')), en, el, toUInt32OrZero(NNodes), toUInt32OrZero(NCPUS),
    CAST(NULL, 'Nullable(UInt32)'),
    toUInt32OrZero(extract(AllocTRES, 'gres/gpu=(\\d+)')), AllocTRES, NodeList, [NodeList], 'bench', line_no,
    toUInt64(fin) * 1099511627776 + toUnixTimestamp(coalesce(en, sta, sub, toDateTime(0, 'UTC')))
{_DIRECT_FROM} WHERE is_step
{_DIRECT_SETTINGS}
"""


# Each field in its common form, the check a SQL normalize would route a line by (a line failing one would go to
# the polars path and its quarantine): the cheapest form of the rules, one match() a field
_T = "'^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$'"
_NO_TIME = "('', 'Unknown', 'None', 'N/A', '(null)')"
_STATES = ("('COMPLETED', 'CANCELLED', 'FAILED', 'TIMEOUT', 'NODE_FAIL', 'PREEMPTED', 'BOOT_FAIL', 'DEADLINE', "
           "'OUT_OF_MEMORY', 'REQUEUED', 'REVOKED', 'SPECIAL_EXIT', 'PENDING', 'RUNNING', 'SUSPENDED', 'REQUEUE_HOLD')")
# what no pattern can say: the times in range and in order
_IN_ORDER = ("(toYear(sub) BETWEEN 2000 AND 2105 AND (sta IS NULL OR is_step OR sta >= sub) "
             "AND (en IS NULL OR sta IS NULL OR en >= sta))")
_ID = "'^[0-9]+(_[0-9]+)?(\\\\.[A-Za-z0-9_]+)?$'"
COMMON_FORMS = f"""(match(JobID, {_ID}) AND match(JobIDRaw, {_ID})
    AND match(Submit, {_T}) AND (match(Eligible, {_T}) OR Eligible IN {_NO_TIME})
    AND (match(Start, {_T}) OR Start IN {_NO_TIME}) AND (match(`End`, {_T}) OR `End` IN {_NO_TIME})
    AND {_IN_ORDER} AND match(ElapsedRaw, '^[0-9]{{1,10}}$')
    AND match(TimelimitRaw, '^([0-9]{{1,9}}|UNLIMITED|Partition_Limit|)$')
    AND match(ExitCode, '^[0-9]{{1,3}}:[0-9]{{1,3}}$')
    AND (State IN {_STATES} OR match(State, '^CANCELLED by [0-9]+$'))
    AND match(NNodes, '^[0-9]{{1,7}}$') AND match(NCPUS, '^[0-9]{{1,9}}$')
    AND match(UID, '^[0-9]{{0,9}}$') AND match(ReqCPUS, '^[0-9]{{0,9}}$') AND NOT match(NodeList, '[\\[,]')
    AND match(AllocTRES, '^([a-z][a-z/:0-9_.-]*=[0-9.]+[KMGTP]?)?(,[a-z][a-z/:0-9_.-]*=[0-9.]+[KMGTP]?)*$')
    AND (position(AllocTRES, 'gres/gpu=') > 0 OR position(AllocTRES, 'gres/gpu') = 0))"""


_T_RE = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
_DIGITS = "[0-9]{0,9}"
# the same forms as one pattern over the whole line (issue 16's measured suggestion: one match() a line instead
# of one a field), a field's pattern by its header name; any other field: anything but the delimiter
_FIELD_RE = {
    "jobidraw": "[0-9]+(?:_[0-9]+)?(?:\\.[A-Za-z0-9_]+)?", "jobid": "[0-9]+(?:_[0-9]+)?(?:\\.[A-Za-z0-9_]+)?",
    "gid": _DIGITS, "uid": _DIGITS, "reqcpus": _DIGITS, "submit": _T_RE,
    **{name: f"(?:{_T_RE}|Unknown|None|)" for name in ("eligible", "start", "end")},
    "elapsedraw": "[0-9]{1,10}", "timelimitraw": "(?:[0-9]{1,9}|UNLIMITED|Partition_Limit|)",
    "exitcode": "[0-9]{1,3}:[0-9]{1,3}", "nnodes": "[0-9]{1,7}", "ncpus": "[0-9]{1,9}",
    "state": "(?:" + _STATES[1:-1].replace("'", "").replace(", ", "|") + "|CANCELLED by [0-9]+)",
    "alloctres": "(?:[a-z][a-z/:0-9_.-]*=[0-9.]+[KMGTP]?(?:,[a-z][a-z/:0-9_.-]*=[0-9.]+[KMGTP]?)*)?",
    "nodelist": "[^|\\[,]*",
}


def _line_pattern(columns: list[str]) -> str:
    return "^" + "\\|".join(_FIELD_RE.get(c.lower(), "[^|]*") for c in columns) + "$"


def _one_pass(wh, structure: str, checked: str | None = None, columns: list[str] | None = None) -> None:
    """The bound in one read of the file: rows go into a Null table whose two materialized views write the runs
    and the steps (a SELECT feeds one INSERT, so two tables from one parse need the views). ``checked``: the
    views take the lines whose every field is in its common form (COMMON_FORMS), a third sets the others'
    line numbers aside; "fields": a match() a field, "line": the file read as lines (``columns``: the header's
    names), one match() a line (_line_pattern), the fields split from it by splitByChar."""
    for old in ("sacct_lines_split", "sacct_lines", "sacct_in_runs", "sacct_in_steps", "sacct_in_odd", "sacct_in",
                "sacct_odd_lines"):
        wh.command(f"DROP TABLE IF EXISTS {old}")
    wh.command(f"CREATE TABLE sacct_in ({structure}, line_no UInt64, ok UInt8) ENGINE = Null")
    cond = {"fields": COMMON_FORMS, "line": f"(ok AND {_IN_ORDER})"}.get(checked or "")
    if checked == "line":
        wh.command("CREATE TABLE sacct_lines (line String, line_no UInt64) ENGINE = Null")
        fields = ", ".join(f"f[{i + 1}] AS `{c}`" for i, c in enumerate(columns))
        wh.command(f"CREATE MATERIALIZED VIEW sacct_lines_split TO sacct_in AS SELECT {fields}, line_no, "
                   f"match(line, '{_line_pattern(columns)}') AS ok "
                   "FROM (SELECT *, splitByChar('|', line) AS f FROM sacct_lines WHERE line_no > 1)")
    if cond:
        wh.command("CREATE TABLE sacct_odd_lines (line_no UInt64) ENGINE = MergeTree ORDER BY line_no")
        source = _DIRECT_FROM.replace("rowNumberInAllBlocks() + 2 AS line_no, ", "").replace(
            "FROM file({p:String}, 'CSVWithNames', {s:String})", "FROM sacct_in")
        wh.command(f"CREATE MATERIALIZED VIEW sacct_in_odd TO sacct_odd_lines AS SELECT line_no {source} "
                   f"WHERE NOT {cond}")
    for name, direct in (("sacct_in_runs", DIRECT_RUNS), ("sacct_in_steps", DIRECT_STEPS)):
        if cond:
            direct = direct.replace("WHERE NOT is_step", f"WHERE NOT is_step AND {cond}").replace(
                "WHERE is_step", f"WHERE is_step AND {cond}")
        head, rest = direct.split("SELECT", 1)
        table, cols = head.replace("INSERT INTO", "").strip().split(" ", 1)
        exprs, source = rest.split("\nFROM (", 1)
        # a view's columns go to the table by name: each expression aliased with its column
        named = ", ".join(f"{e} AS `{c}`" for e, c in zip(_top_level(exprs), _top_level(cols.strip()[1:-1]),
                                                          strict=True))
        source = source[:source.index("SETTINGS")].replace("rowNumberInAllBlocks() + 2 AS line_no, ", "").replace(
            "FROM file({p:String}, 'CSVWithNames', {s:String})", "FROM sacct_in")
        wh.command(f"CREATE MATERIALIZED VIEW {name} TO {table} AS SELECT {named} FROM ({source}")


def _job_rows(wh) -> int:
    return wh.query_rows("SELECT (SELECT count() FROM slurm_job_run) + (SELECT count() FROM slurm_job_step)")[0][0]


def _empty_job_tables(wh) -> None:
    wh.command("TRUNCATE TABLE slurm_job_run")
    wh.command("TRUNCATE TABLE slurm_job_step")


def _top_level(text: str) -> list[str]:
    """The comma-separated items of an SQL list, commas inside brackets or quotes left alone."""
    items, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'`":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    items.append("".join(cur).strip())
    return [i.split(" AS ")[0] if " AS " in i else i for i in items]


_INTO_SACCT_IN = ("INSERT INTO sacct_in SELECT *, rowNumberInAllBlocks() + 2, 1 FROM file({p:String}, 'CSVWithNames', "
                  "{s:String}) " + _DIRECT_SETTINGS)


def child_parts(path: str, wh_dir: str) -> dict:
    """CPU and wall seconds of each part of both sides, run one after another in one process (a step's CPU
    seconds are the process's, all threads, over that step alone)."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl import sacct_text
    from ops_warehouse.etl.normalize import normalize
    from ops_warehouse.etl.staging import staging_dir
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{wh_dir}"))
    structure = ", ".join(f"`{c}` String" for c in _sacct_columns(path))
    out: dict[str, dict[str, float]] = {}

    def step(name: str):
        class _Timer:
            def __enter__(self):
                self.c, self.t = time.process_time(), time.perf_counter()

            def __exit__(self, *exc):
                d = out.setdefault(name, {"cpu_s": 0.0, "wall_s": 0.0})
                d["cpu_s"] += time.process_time() - self.c
                d["wall_s"] += time.perf_counter() - self.t
        return _Timer()

    wh.command(CEILING_TABLE)
    wh.command(CEILING_TABLE.replace("sacct_ceiling", "sacct_parse_only").split("ENGINE")[0] + "ENGINE = Null")
    params = {"path": str(Path(path).resolve()), "structure": structure}
    with step("engine: parse alone (into a Null table)"):
        wh.command(CEILING_INSERT.replace("INSERT INTO sacct_ceiling", "INSERT INTO sacct_parse_only"), params)
    with step("engine: parse and write (the ceiling)"):
        wh.command(CEILING_INSERT, params)
    stage = staging_dir(wh)
    chunks = sacct_text.read_text(Path(path))
    i = 0
    while True:
        with step("product: read and split (sacct_text)"):
            item = next(chunks, None)
        if item is None:
            break
        records, _, raw = item
        with step("product: normalize (polars)"):
            runs, steps, _ = normalize(records, tz="UTC", cluster="bench", source="bench", raw=raw)
        for table, df in (("slurm_job_run", runs), ("slurm_job_step", steps)):
            p = stage / f"{table}-{i}.parquet"
            with step("product: Parquet staging"):
                df.write_parquet(p, compression="uncompressed", statistics=False)
            with step("product: engine insert from Parquet"):
                wh.load_parquet(table, p)
            p.unlink()
        i += 1
    shutil.rmtree(stage, ignore_errors=True)
    product_rows = _job_rows(wh)
    _empty_job_tables(wh)
    with step("engine-typed design, common forms only (bound)"):
        wh.command(DIRECT_RUNS, {"p": params["path"], "s": structure})
        wh.command(DIRECT_STEPS, {"p": params["path"], "s": structure})
    direct_rows = _job_rows(wh)
    _empty_job_tables(wh)
    _one_pass(wh, structure)
    with step("engine-typed design, one read (Null table + 2 views)"):
        wh.command(_INTO_SACCT_IN, {"p": params["path"], "s": structure})
    one_pass_rows = _job_rows(wh)
    checked: dict[str, tuple[int, int]] = {}
    for how, name in (("fields", "engine-typed design, one read, each field checked"),
                      ("line", "engine-typed design, one read, one pattern a line")):
        _empty_job_tables(wh)
        _one_pass(wh, structure, how, _sacct_columns(path))
        with step(name):
            if how == "line":
                wh.command("INSERT INTO sacct_lines SELECT line, rowNumberInAllBlocks() + 1 "
                           "FROM file({p:String}, 'LineAsString') " + _DIRECT_SETTINGS, {"p": params["path"]})
            else:
                wh.command(_INTO_SACCT_IN, {"p": params["path"], "s": structure})
        checked[how] = (_job_rows(wh), wh.query_rows("SELECT count() FROM sacct_odd_lines")[0][0])
    return {"parts": out, "product_rows": product_rows, "direct_rows": direct_rows, "one_pass_rows": one_pass_rows,
            "checked": checked, "peak_rss_mb": peak_rss_mb()}


def child_nightly(folder: str, wh_dir: str) -> dict:
    """The nightly extracts of ``folder`` (*.psv, in name order) loaded one after the other, each through
    ``load_sacct`` with its own source name as the nightly gives it, inside one ``one_refresh`` (the hourly
    grains refreshed once, at the end): the fixed cost a file pays besides its rows. Each load is timed (wall
    and process CPU), and the block's closing refresh apart."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl.grains import one_refresh
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{wh_dir}"))
    rss_before = _current_rss_mb()
    files = sorted(Path(folder).glob("*.psv"))
    per_file, cpu, read = [], 0.0, 0
    with one_refresh(wh):
        for f in files:
            t, c = time.perf_counter(), time.process_time()
            r = load_sacct(wh, f, source=f"nightly/{f.name}")
            per_file.append(time.perf_counter() - t)
            cpu += time.process_time() - c
            read += r.records_read
        t = time.perf_counter()
    refresh_s = time.perf_counter() - t
    rows = wh.query_rows("SELECT (SELECT count() FROM slurm_job_run FINAL) + (SELECT count() FROM slurm_job_step FINAL)")
    return {"seconds": sum(per_file), "cpu_s": cpu, "per_file_s": per_file, "refresh_s": refresh_s, "lines": read,
            "rows_in_tables": rows[0][0], "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb()}


def child_nightly_ceiling(folder: str, wh_dir: str) -> dict:
    """The engine's own parse of the same extracts into the ceiling's table (CEILING_INSERT), one statement a
    file, one after the other: what a file costs the engine alone."""
    import clickhouse_connect

    client = clickhouse_connect.get_client(dsn=f"chdb://{wh_dir}")
    client.command(CEILING_TABLE)
    files = sorted(Path(folder).glob("*.psv"))
    rss_before = _current_rss_mb()
    per_file, cpu = [], 0.0
    for f in files:
        structure = ", ".join(f"`{c}` String" for c in _sacct_columns(str(f)))
        t, c = time.perf_counter(), time.process_time()
        client.command(CEILING_INSERT, parameters={"path": str(f.resolve()), "structure": structure})
        per_file.append(time.perf_counter() - t)
        cpu += time.process_time() - c
    rows = client.command("SELECT count() FROM sacct_ceiling")
    return {"seconds": sum(per_file), "cpu_s": cpu, "per_file_s": per_file, "rows_in_tables": int(rows),
            "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb()}


def nightly(folder: Path, workdir: Path, rounds: int) -> dict:
    """``rounds`` pairs of (product, engine) children over the extracts of ``folder``, back to back; the best
    round of each side is reported (a shared machine's noise only ever adds time)."""
    files = sorted(folder.glob("*.psv"))
    lines = sum(sum(1 for _ in open(f, "rb")) - 1 for f in files)
    out: dict = {"files": len(files), "lines": lines, "rounds": []}
    for k in range(rounds):
        p = run_child("nightly", folder, workdir)
        c = run_child("nightly_ceiling", folder, workdir)
        out["rounds"].append({"product": p, "ceiling": c})
        n = len(files)
        print(f"nightly round {k + 1}: {n} files, {lines:,} lines: product {p['seconds']:.2f} s "
              f"({p['seconds'] / n:.3f} s a file, median {sorted(p['per_file_s'])[n // 2]:.3f}; {p['cpu_s']:.2f} CPU-s; "
              f"then the block's refresh {p['refresh_s']:.2f} s), engine {c['seconds']:.2f} s "
              f"({c['seconds'] / n:.3f} s a file; {c['cpu_s']:.2f} CPU-s); peak RSS product {p['peak_rss_mb']:.0f} MB, "
              f"engine {c['peak_rss_mb']:.0f} MB; rows in tables {p['rows_in_tables']:,} / {c['rows_in_tables']:,}")
    best_p = min(r["product"]["seconds"] for r in out["rounds"])
    best_c = min(r["ceiling"]["seconds"] for r in out["rounds"])
    cpu_p = min(r["product"]["cpu_s"] for r in out["rounds"])
    cpu_c = min(r["ceiling"]["cpu_s"] for r in out["rounds"])
    peak = max(r["product"]["peak_rss_mb"] for r in out["rounds"])
    n = len(files)
    # (the goal bounds the line's first figure, seconds a file: bench/run_all.py)
    print(f"RESULT sacct_nightly s_per_file={best_p / n:.3f} ceiling_s_per_file={best_c / n:.3f} "
          f"ratio={best_c / best_p:.2f} goal=<={GOAL_NIGHTLY_S_PER_FILE}s files={n} lines={lines} "
          f"product_cpu_s={cpu_p:.2f} ceiling_cpu_s={cpu_c:.2f} peak_mb={peak:.0f}")
    return out


def child_store(path: str, wh_dir: str) -> dict:
    """The product's parse and storing alone: the load without the grains' refresh (``refresh=False``)."""
    return child_product(path, wh_dir, refresh=False)


CHILDREN = {"product": child_product, "store": child_store, "ceiling": child_ceiling, "stages": child_stages,
            "parts": child_parts, "nightly": child_nightly, "nightly_ceiling": child_nightly_ceiling}


# ---------------------------------------------------------------------------------------------- parent

def run_child(kind: str, path: Path, workdir: Path) -> dict:
    wh_dir = workdir / f"wh-{kind}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--child", kind, "--file", str(path), "--warehouse-dir", str(wh_dir)],
            capture_output=True, text=True, check=False,
        )
        if p.returncode != 0:
            sys.exit(f"{kind} child failed (exit {p.returncode}):\n{p.stderr[-4000:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(wh_dir, ignore_errors=True)


def generate(path: Path, jobs: int, days: int, seed: int) -> dict:
    from ops_warehouse.generate.volume import write_sacct_dump

    t = time.perf_counter()
    out = write_sacct_dump(path, jobs=jobs, start=START, days=days, seed=seed, steps=True)
    out["seconds"] = time.perf_counter() - t
    return out


def _input(folder: Path, jobs: int, days: int, seed: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"sacct-{jobs}-{days}d-s{seed}.psv"


def _reused(path: Path, jobs: int) -> dict:
    """What ``generate`` reports, for a dump generated by an earlier run (lines counted, no time)."""
    with open(path, "rb") as f:
        lines = sum(1 for _ in f) - 1  # the header
    print(f"reusing {path}")
    return {"lines": lines, "bytes": path.stat().st_size, "seconds": float("nan"), "jobs": jobs}


def machine() -> str:
    model = platform.processor() or "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    import psutil

    return f"{os.cpu_count()} CPUs, {model}, {psutil.virtual_memory().total / 2**30:.1f} GiB RAM"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--small-jobs", type=int, default=250_000, help="second product run (0: skip)")
    ap.add_argument("--days", type=int, default=180, help="period the jobs are submitted over")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder, removed after")
    ap.add_argument("--inputs", type=Path, default=None,
                    help="keep the generated dumps here and reuse them (sacct-<jobs>-<days>d-s<seed>.psv): "
                         "generating 1 M jobs takes a minute or more on a shared machine")
    ap.add_argument("--stages", action="store_true", help="also time the loader's stages (one more load)")
    ap.add_argument("--parts", action="store_true", help="also split both sides into CPU seconds (one more child)")
    ap.add_argument("--no-whole", action="store_true", help="skip the whole load with the grains")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    ap.add_argument("--nightly", type=Path, default=None,
                    help="instead: load the nightly extracts of this folder (the demo's data/sacct/nightly; "
                         "generated there, 31 days of ~900 jobs, when it has none) one file after another "
                         "against the engine's own parse of the same files")
    ap.add_argument("--rounds", type=int, default=2, help="--nightly: product/engine pairs, best of each")
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--warehouse-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(CHILDREN[a.child](a.file, a.warehouse_dir)))
        return

    if a.nightly is not None:
        if not any(a.nightly.glob("*.psv")):
            from ops_warehouse.generate import generate as generate_site

            site = a.nightly.parent / "site"
            generate_site(site, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=31, jobs_per_day=900, seed=7,
                          telemetry=(), nightly=True)
            a.nightly.mkdir(parents=True, exist_ok=True)
            for f in (site / "sacct" / "nightly").glob("*.psv"):
                shutil.copy(f, a.nightly / f.name)
        print(f"machine: {machine()}")
        workdir = Path(tempfile.mkdtemp(prefix="bench-etl-sacct-"))
        try:
            res = nightly(a.nightly.resolve(), workdir, a.rounds)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if a.json:
            a.json.write_text(json.dumps(res, indent=2))
        return

    own = a.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="bench-etl-sacct-")) if own else a.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    res: dict = {"machine": machine(), "jobs": a.jobs, "days": a.days, "seed": a.seed}
    print(f"machine: {res['machine']}")
    try:
        big = _input(a.inputs or workdir, a.jobs, a.days, a.seed)
        g = res["generate"] = (_reused(big, a.jobs) if a.inputs and big.exists()
                               else generate(big, a.jobs, a.days, a.seed))
        print(f"generate: {g['jobs']:,} jobs, {g['lines']:,} lines, {g['bytes'] / 1e6:,.0f} MB "
              f"in {g['seconds']:.1f} s ({g['lines'] / g['seconds']:,.0f} lines/s)")

        def show(name: str, r: dict, lines: int, size: int) -> None:
            r["rows_per_s"] = lines / r["seconds"]
            r["mb_per_s"] = size / 1e6 / r["seconds"]
            print(f"{name}: {lines:,} lines, {size / 1e6:,.0f} MB in {r['seconds']:.1f} s = "
                  f"{r['rows_per_s']:,.0f} rows/s ({r['mb_per_s']:.1f} MB/s), "
                  f"peak RSS {r['peak_rss_mb']:,.0f} MB (before the load {r['rss_before_mb']:,.0f} MB), "
                  f"rows in tables {r['rows_in_tables']:,}"
                  + (f", quarantined {r['quarantined']:,} {r['reasons'] or ''}" if "quarantined" in r else ""))

        p = None
        if not a.no_whole:
            p = res["product"] = run_child("product", big, workdir)
            show("product load_sacct", p, g["lines"], g["bytes"])
        st = res["store"] = run_child("store", big, workdir)
        show("product load_sacct(refresh=False)", st, g["lines"], g["bytes"])
        c = res["ceiling"] = run_child("ceiling", big, workdir)
        show("engine ceiling (chDB file() CSV)", c, g["lines"], g["bytes"])
        if c["rows_in_tables"] != g["lines"]:
            print(f"  WARNING: ceiling loaded {c['rows_in_tables']:,} rows, the file has {g['lines']:,}")
        for name, r in (("product", p), ("refresh=False", st)):
            if r is not None and r["rows_in_tables"] != g["lines"] - r["quarantined"]:
                print(f"  WARNING: {name} tables hold {r['rows_in_tables']:,} rows, expected "
                      f"{g['lines'] - r['quarantined']:,}")
        store_ratio = res["store_ratio"] = st["rows_per_s"] / c["rows_per_s"]
        if p is not None:
            ratio = res["ratio"] = p["rows_per_s"] / c["rows_per_s"]
            print(f"ratio product/ceiling, the whole load with its grains: {ratio:.2f} (goal >= {GOAL_WHOLE_RATIO}: "
                  f"{'met' if ratio >= GOAL_WHOLE_RATIO else 'NOT met'})")
        print(f"ratio product/ceiling, parse and store (refresh=False): {store_ratio:.2f} (goal >= {GOAL_RATIO}: "
              f"{'met' if store_ratio >= GOAL_RATIO else 'NOT met'})")
        met = lambda r: "met" if r["peak_rss_mb"] <= GOAL_RSS_MB else "NOT met"  # noqa: E731
        print(f"peak RSS goal <= {GOAL_RSS_MB} MB: " + (f"product {met(p)}, " if p is not None else "")
              + f"refresh=False {met(st)}, ceiling {met(c)}")
        if a.parts:
            pt = res["parts"] = run_child("parts", big, workdir)
            print(f"parts, one after another in one process (CPU s over all threads; wall s): product rows "
                  f"{pt['product_rows']:,}, the bounds' rows {pt['direct_rows']:,} and {pt['one_pass_rows']:,}; "
                  + "; ".join(f"checked by {k}: {v[0]:,} in the tables, {v[1]:,} lines set aside"
                              for k, v in pt["checked"].items()))
            for k, v in pt["parts"].items():
                print(f"  {k:<52} cpu {v['cpu_s']:7.2f} s  wall {v['wall_s']:7.2f} s")
            cpu = {k: v["cpu_s"] for k, v in pt["parts"].items()}
            ceiling_cpu = cpu["engine: parse and write (the ceiling)"]
            product_cpu = sum(v for k, v in cpu.items() if k.startswith("product:"))
            bound_cpu = min(cpu["engine-typed design, common forms only (bound)"],
                            cpu["engine-typed design, one read (Null table + 2 views)"])
            checked_cpu = min(cpu["engine-typed design, one read, each field checked"],
                              cpu["engine-typed design, one read, one pattern a line"])
            print(f"RESULT sacct_parts product_cpu_s={product_cpu:.2f} ceiling_cpu_s={ceiling_cpu:.2f} "
                  f"cpu_ratio={ceiling_cpu / product_cpu:.2f} bound_cpu_s={bound_cpu:.2f} "
                  f"bound_cpu_ratio={ceiling_cpu / bound_cpu:.2f} checked_cpu_s={checked_cpu:.2f} "
                  f"checked_cpu_ratio={ceiling_cpu / checked_cpu:.2f} jobs={a.jobs}")
        if a.stages:
            s = res["stages"] = run_child("stages", big, workdir)
            print(f"product stages ({s['seconds']:.1f} s in all):")
            for k, v in s["stages"].items():
                print(f"  {k:<40} {v:7.1f} s  {100 * v / s['seconds']:5.1f}%")
        if not a.inputs:
            big.unlink()
        if a.small_jobs:
            small_days = max(1, a.days * a.small_jobs // a.jobs)
            small = _input(a.inputs or workdir, a.small_jobs, small_days, a.seed)
            gs = res["generate_small"] = (_reused(small, a.small_jobs) if a.inputs and small.exists()
                                          else generate(small, a.small_jobs, small_days, a.seed))
            ps = res["product_small"] = run_child("product", small, workdir)
            show(f"product load_sacct, {a.small_jobs:,} jobs", ps, gs["lines"], gs["bytes"])
            print(f"peak RSS {a.small_jobs:,} jobs: {ps['peak_rss_mb']:,.0f} MB; {a.jobs:,} jobs: "
                  f"{(p or st)['peak_rss_mb']:,.0f} MB")
            if not a.inputs:
                small.unlink()
        # for bench/run_all.py: the product's rows/s against the ceiling's, and the product child's own peak
        if p is not None:
            print(f"RESULT sacct_load rows_per_s={p['rows_per_s']:.0f} ceiling_rows_per_s={c['rows_per_s']:.0f} "
                  f"ratio={ratio:.2f} goal=>={GOAL_WHOLE_RATIO} peak_mb={p['peak_rss_mb']:.0f} jobs={a.jobs}")
        print(f"RESULT sacct_store rows_per_s={st['rows_per_s']:.0f} ceiling_rows_per_s={c['rows_per_s']:.0f} "
              f"ratio={store_ratio:.2f} goal=>={GOAL_RATIO} peak_mb={st['peak_rss_mb']:.0f} jobs={a.jobs}")
        print(f"RESULT sacct_load_memory peak_mb={(p or st)['peak_rss_mb']:.0f} goal=<={GOAL_RSS_MB}MB jobs={a.jobs}"
              + ("" if p is not None else " of=refresh_false")
              + (f" small_peak_mb={ps['peak_rss_mb']:.0f} small_jobs={a.small_jobs}" if a.small_jobs else ""))
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
