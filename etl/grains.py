"""The intermediate grains the marts read, kept up to date by the loads that change their inputs.

- capacity_node_hour (sql/intermediate/capacity_node_hour.sql): the hourly node grid, capacity split into
  down, drained, reserved, allocated and idle time, with the telemetry of each node and hour;
- run_node_hour (sql/intermediate/run_node_hour.sql): the run → node → hour fan-out with each node-hour's
  telemetry as rates, what chargeback, the daily timeline, stragglers and the per-run efficiency read;
- gpu_day (sql/intermediate/gpu_day.sql): the hourly GPU rollups summed per GPU and day (the heatmap and
  throttling over a month);
- run_telemetry (sql/intermediate/run_telemetry.sql): per ended run, what its per-sample telemetry says (last
  checkpoint, start-up, last busy time and the idle samples after it), refreshed with the hourly grains for
  the runs that ended over their hours, what hung_jobs and campaigns read.

Who refreshes what: a sacct or slurmdbd load the days its runs changed (the runs whose fan-out in
run_node_hour no longer matches the history, sql/intermediate/run_node_hour_changes.sql: a job still
running re-read night after night changes only the hours since it was last seen), the days the history's
as-of time moved over, and the days of the node events and reservations it brought
(sql/intermediate/capacity_node_hour_changes.sql); a capacity load the whole loaded history (inventory,
events and reservations change every hour they cover) of the models that read them (capacity_node_hour,
run_node_hour: the runs' samples are as they were); a telemetry load its days (the hourly rollups, then
gpu_day, then the hourly grains of those hours). The hourly grains are refreshed together for whole hours, a
day at a time, in the order the models' declarations give (core/grain_versions.py: run_sample_hour,
capacity_node_hour, run_node_hour, run_telemetry): run_node_hour is what the next load's comparison reads, so
a load killed between the two is found changed again and redone by the rerun. Loads inside ``one_refresh``
(a night's sacct extract and telemetry day) record their hours and refresh them once, at its end. Each refresh replaces the
rows of its hours (ReplacingMergeTree, rows no longer produced written deleted), so reloads and backfills
leave every grain as a clean load does; reports and the API only read them.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from functools import wraps

from ops_warehouse.etl import concurrent_steps
from ops_warehouse.etl.watermarks import set_watermark
from ops_warehouse.grain_versions import GRAINS, models, record_grains
from ops_warehouse.progress import count_progress
from ops_warehouse.sqlfiles import sql_query, sql_statements
from ops_warehouse.warehouse import INSERT_SETTINGS, INTERPRETED

_PARAM = re.compile(r"\{(\w+):")
_CHUNK = timedelta(days=1)  # the fewest hours a piece of a big refresh covers (memory: _refresh_hours)
# the node-hours (the grid's plus the runs' fan-out) one refresh statement may hold: a span under it is one
# piece (a test site's month, the demo's: a piece costs a pass over its samples and a fixed plan cost), a
# span over it is cut into pieces of about this much work, never under _CHUNK (docs/benchmarks.md, "Issue
# 50": a month of 4,000 nodes is 2.9 M grid node-hours, over 1 GB in one statement; a day of it 96 k, under)
_PIECE_NODE_H = 400_000
# the runs one job_run statement reads (etl/grains.py _job_ranges): about 1.3 KB of the engine's memory a run
# (docs/benchmarks.md, "Issue 50: sacct loads in bounded memory", round 3)
_PIECE_RUNS = 50_000
# The refresh's statements that compute rows (an INSERT ... SELECT, a temporary table's CREATE ... AS SELECT) run
# with the engine's JIT compilation off (core/warehouse.py INTERPRETED, as a telemetry load's): a refresh runs each
# once with its window's constants, and what the engine compiles serves that statement alone. Four days of a
# 256-GPU month refreshed, alternated in fresh processes (load 2.2-2.6): 6.82 -> 5.91 CPU-s median, every grain's
# rows the same (docs/benchmarks.md, issue 50 round 11, coordinator)
_TEMPORARY_AS = re.compile(r"CREATE TEMPORARY TABLE\b.*?\bAS\s+(?:SELECT|WITH)\b", re.S)


def _computing(stmt: str, settings: dict | None = None) -> dict | None:
    """The settings ``stmt`` runs with: ``settings`` and INTERPRETED where it computes rows (an INSERT, a
    temporary table's CREATE ... AS SELECT), none elsewhere (a DROP, a DELETE: nothing to compile)."""
    if stmt.startswith("INSERT") or _TEMPORARY_AS.match(stmt):
        return {**INTERPRETED, **(settings or {})}
    return None


# the rows to merge over which a refresh's merges run two at once (below it, a night's: one after the other)
_MERGE_ROWS_AT_ONCE = 500_000
# the hours a load inside one_refresh left to refresh: etl_watermark's "grains pending <first hour>", its
# watermark_ts the end, deleted once refreshed
_PENDING = "grains pending "


@contextmanager
def one_refresh(wh):
    """Loads inside this block refresh the hourly grains once, at its end, for every hour any of them changed
    (a night's sacct extract and its telemetry day change the same hours: refreshed apart, each refresh reads
    the runs' samples of them again; measured in docs/benchmarks.md, "Issue 50"). Until then the hours are
    recorded in the warehouse (``_PENDING``), so that a load killed inside the block leaves them to the next
    writer's refresh (``refresh_pending``, run by every refresh) rather than to nobody. A report or notebook
    waiting for the warehouse gets it refreshed (``refresh_capacity``). Nested blocks are one block."""
    if getattr(wh, "_grains_deferred", False):
        yield
        return
    wh._grains_deferred = True
    try:
        yield
    finally:
        wh._grains_deferred = False
        refresh_pending(wh)


def refresh_pending(wh) -> list[tuple[datetime, datetime]]:
    """Refresh the hours loads inside ``one_refresh`` left pending (this process's, or a killed one's), the
    overlapping ones merged, then clear their records. Returns the spans refreshed."""
    rows = wh.query_rows("SELECT source, argMax(watermark_ts, updated_at) AS t FROM etl_watermark "
                         "WHERE startsWith(source, {p:String}) GROUP BY source "
                         "ORDER BY source", {"p": _PENDING})
    spans: list[tuple[datetime, datetime]] = []
    for w0, w1 in sorted((datetime.fromisoformat(s[len(_PENDING):]), t.replace(tzinfo=timezone.utc))
                         for s, t in rows):
        if spans and w0 <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], w1))
        else:
            spans.append((w0, w1))
    written: set[str] = set()
    for w0, w1 in spans:
        written |= _refresh_hours(wh, w0, w1, compact=False)
    # the grains just written and the tables the block's loads left to merge, in one look at system.parts (by the
    # refresh this runs in, at its end, where it runs in one: ``_merged_at_end``)
    wh._compact_pending = getattr(wh, "_compact_pending", set()) | written
    if not getattr(wh, "_merges_deferred", False):
        tables, wh._compact_pending = wh._compact_pending, set()
        _compact(wh, tuple(sorted(tables)))
    if rows:  # deleted, not overwritten: a load run again leaves etl_watermark as the first run did
        # as a patch part (migration 0026): as a mutation it waited 0.02-1 s a night for the background scheduler
        patch = {"lightweight_delete_mode": "lightweight_update"} if wh.embedded else {}
        wh.command("DELETE FROM etl_watermark WHERE source IN {s:Array(String)}", {"s": [r[0] for r in rows]}, patch)
    return spans


def refresh_capacity(wh, cluster: str, w0: datetime, w1: datetime, idle_util_pct: float | None = None,
                     changed: tuple[str, ...] | None = None) -> None:
    """Recompute the hourly grains (capacity_node_hour, then run_node_hour) for the whole hours [w0, w1)
    touches; inside ``one_refresh``, record them for its one refresh at the end. ``cluster`` is accepted for
    symmetry with the marts: the refresh covers every cluster in the warehouse (the grid is cheap).
    ``changed``: the only tables whose rows changed; the models that read none of them, directly or through
    another model of the grain, keep their rows (a capacity load: run_sample_hour and run_telemetry read no
    capacity table)."""
    if getattr(wh, "_grains_deferred", False) and idle_util_pct is None:
        w0, w1 = _hour(w0), _ceil_hour(w1)
        if w1 > w0:
            set_watermark(wh, _PENDING + w0.isoformat(), w1)
        if wh.others_waiting():  # a report is about to get the warehouse: grains and samples agreeing
            refresh_pending(wh)
        return
    _refresh_hours(wh, w0, w1, idle_util_pct, changed)


def _reading(files: list[str], decl: dict, changed: tuple[str, ...]) -> list[str]:
    """Those of ``files`` (in refresh order) that read a table of ``changed``, or one an earlier kept file
    writes, directly or through the views and includes they name (core/grain_versions.py's declarations)."""
    def reads(name: str, seen: set[str]) -> set[str]:
        out = set()
        for r in decl.get(name, {}).get("reads", ()):
            out.add(r)
            via = next((n for n, d in decl.items() if n == r or r in d.get("defines", ())), None)
            if via and via not in seen:
                out |= reads(via, seen | {via})
        return out

    reach, kept = set(changed), []
    for f in files:
        if reads(f, {f}) & reach:
            kept.append(f)
            reach |= set(decl[f]["writes"])
    return kept


def _refresh_hours(wh, w0: datetime, w1: datetime, idle_util_pct: float | None = None,
                   changed: tuple[str, ...] | None = None, compact: bool = True) -> set[str]:
    """Refresh the hourly grains' hours [w0, w1); returns the tables written (``compact``: merged here, else
    the caller merges them with others in one look at system.parts)."""
    threshold = wh.cfg.idle_util_pct if idle_util_pct is None else idle_util_pct
    w0, w1 = _hour(w0), _ceil_hour(w1)
    if w1 <= w0:
        return set()
    # from the hour before, where the loaded history has it: a run in it is named by the labels of the hour
    # after it too (run_sample_hour's 'gpu' attribution looks an hour either side), so the samples a load
    # brings change the hour before them; never before the history's first month (the grid starts there)
    first, _ = history_as_of(wh)
    if first is not None and w0 - timedelta(hours=1) >= first:
        w0 -= timedelta(hours=1)
    params = {"from_ts": w0, "to_ts": w1, "idle_util_pct": float(threshold)}
    params["hang_nic_bytes_per_s"] = float(wh.cfg.hang_nic_bytes_per_s)
    params["ckpt_write_bytes_per_s"] = float(wh.cfg.ckpt_write_bytes_per_s)
    # the hourly grain's models in the order their declarations say they read each other
    # (core/grain_versions.py: run_sample_hour, capacity_node_hour, run_node_hour, run_telemetry): a model whose
    # required table holds nothing it would read is left out (capacity_node_hour without an inventory: no grid to
    # write; run_sample_hour without GPU samples in the hours, run_telemetry without samples of the runs: no row)
    decl = models()
    size, files = _plan(wh, w0, w1, decl, GRAINS["hourly"][0])
    if changed is not None:
        files = _reading(files, decl, changed)
    # in pieces of about _PIECE_NODE_H node-hours (whole days): what a statement holds is the fan-out and the grid of its hours, so memory stays
    # bounded whatever the span and the largest job (a month of 4,000 nodes with one 4,000-node job of 48 h
    # among 120,000 one-node jobs: capacity_node_hour and run_node_hour over 1 GB over the month, under it a
    # day at a time; docs/benchmarks.md, "Issue 50"); whole hours give the rows one pass over the span gives.
    # a model refreshed by run (unit "run": run_telemetry forms every run overlapping the hours whole, from
    # all its samples, one row a run) goes by the same pieces: over a first load's whole span it staged every
    # run of the history (1 M jobs: 180 MB over the load's own peak, the whole load's peak); a run
    # overlapping two pieces is formed in both, the same row written again (ReplacingMergeTree)
    # one file after the other, on one handle: run_sample_hour's statements already keep both cores busy, and
    # run_telemetry on a second handle beside them took back nothing of the demo backfill's 15.8 s refresh (load
    # 2) while its peak RSS rose by 170 MB; pieces two at a time held what a piece twice the size holds (a 1 M-job
    # first load's run_node_hour: 1,000-1,139 MB against 785-898; docs/benchmarks.md, "Issue 50", round 8)
    for c0, c1 in _chunks(w0, w1, size):
        for f in files:
            if decl[f].get("unit") == "hour":
                _run_file(wh, f, {**params, "from_ts": c0, "to_ts": c1})
        for f in files:
            if decl[f].get("unit") != "hour":
                _run_file(wh, f, {**params, "from_ts": c0, "to_ts": c1})
    written = {t for f in files for t in decl[f]["writes"]}
    if compact:
        _compact_later(wh, *written)
    return written


def rebuild_stale(wh) -> tuple[str, ...]:
    """Rebuild, over the whole loaded history, the grains an earlier version's SQL built
    (``wh.stale_grains``, core/grain_versions.py), in the order they read each other, and record today's
    fingerprints: after an upgrade, every report reads what a fresh load of the same files gives. What
    `ops-report init` does, and every load before its own refresh. Returns the grains rebuilt."""
    stale = tuple(getattr(wh, "stale_grains", ()))
    rebuilds = {"telemetry_hourly": _rebuild_telemetry_hourly, "gpu_day": _build_gpu_day,
                "job_run": _rebuild_job_run, "hourly": _rebuild_hourly}
    for grain in stale:
        rebuilds[grain](wh)
    if stale:
        record_grains(wh, stale)
        wh.stale_grains = ()
    if not getattr(wh, "_grains_deferred", False):  # the hours a killed load inside one_refresh left
        refresh_pending(wh)
    return stale


def _rebuild_telemetry_hourly(wh) -> None:
    """gpu_hour and node_hour from the fine samples, a week at a time. With ``telemetry.fine_ttl_days`` the
    hours whose samples the TTL may have removed keep their rollups (rebuilt from what is left they would
    lose time)."""
    lo, hi = wh.query_rows("SELECT min(lo), max(hi) FROM (SELECT min(ts) AS lo, max(ts) AS hi FROM gpu_sample "
                           "UNION ALL SELECT min(ts), max(ts) FROM node_sample) WHERE hi > toDateTime(0)")[0]
    if hi is None or hi.year < 2000:
        return
    lo, hi = _hour(lo.replace(tzinfo=timezone.utc)), _hour(hi.replace(tzinfo=timezone.utc)) + timedelta(hours=1)
    if wh.cfg.telemetry_ttl_days:
        lo = max(lo, _ceil_hour(datetime.now(timezone.utc) - timedelta(days=wh.cfg.telemetry_ttl_days)))
    weeks = [(t, min(_next_week(t), hi)) for t in _steps(lo, hi, _next_week)]
    with count_progress("rebuilding telemetry_hourly (weeks)") as progress:
        for i, (w0, w1) in enumerate(weeks, 1):
            for stmt in sql_statements("intermediate/telemetry_hourly.sql"):
                wh.command(stmt, {"from_ts": w0, "to_ts": w1}, _computing(stmt))
            progress(i, len(weeks))


def _rebuild_job_run(wh) -> None:
    """as_of_by_cluster and job_run for every run (as refresh_all_jobs makes them)."""
    _refresh_as_of(wh)
    _refresh_job_run(wh, datetime(1970, 1, 1, tzinfo=timezone.utc))


def _rebuild_hourly(wh) -> None:
    """The hourly grains over the whole job history, a month at a time (a refresh of whole hours gives the
    rows one refresh of the whole span gives)."""
    first, as_of = history_as_of(wh)
    if as_of is None:
        return
    hi = _hour(as_of) + timedelta(hours=1)
    months = [(t, min(_next_month(t), hi)) for t in _steps(first, hi, _next_month)]
    with count_progress("rebuilding capacity_node_hour, run_node_hour, run_telemetry (months)") as progress:
        for i, (m0, m1) in enumerate(months, 1):
            _refresh_hours(wh, m0, m1)
            progress(i, len(months))


def _run_file(wh, name: str, params: dict) -> None:
    """The statements of sql/intermediate/<name>.sql, each given the parameters it names. A SELECT among them
    is a guard: the statement after it runs only where it returns true (run_sample_hour's DELETE, a mutation
    that rewrites its month's part even when every row it matches is written again)."""
    skip = False
    declared = models()[name].get("settings", {})
    for stmt in sql_statements(f"intermediate/{name}.sql"):
        if skip:
            skip = False
            continue
        used = set(_PARAM.findall(stmt))
        p = {k: v for k, v in params.items() if k in used}
        if stmt.startswith("SELECT"):
            skip = not wh.query_rows(stmt, p)[0][0]
            continue
        # optimize_on_insert is an insert's setting: the temporary tables' CREATE, the DROPs and the DELETE go
        # without it (Warehouse.command puts settings in the statement's own SETTINGS clause), as they go
        # without the model's own (its header's ``settings``: how its rows are planned)
        wh.command(stmt, p, _computing(stmt, {**INSERT_SETTINGS, **declared} if stmt.startswith("INSERT") else None))


# the time column of the tables a model's ``requires`` may name by time: the samples. A model that requires
# one writes nothing for hours (or runs) where it holds no row (run_sample_hour, run_telemetry: rows only where
# samples are), so a refresh of hours without samples (a job load's days before telemetry came, a site
# without telemetry) leaves it out: 16 statements and 0.2-0.5 CPU-s of a small job load's refresh,
# docs/benchmarks.md, "Issue 50", round 7
_TIME_COLUMN = {"gpu_sample": "ts", "node_sample": "ts"}


def _plan(wh, w0: datetime, w1: datetime, decl: dict, files: tuple[str, ...]) -> tuple[timedelta, list[str]]:
    """How many hours a piece of the refresh of [w0, w1) covers (all of them where the grid's and the runs'
    node-hours in it are under _PIECE_NODE_H, else about that much work a piece, whole days), and which of
    ``files`` have something to write: those whose ``requires`` (a table, or a list: any of them) holds rows,
    a sample table where the model reads it (unit "hour": the hours and one either side, as run_sample_hour's
    staging reads; unit "run": from the first start to the last end, and two hours after, of the runs
    overlapping the hours, as run_telemetry forms them from all their samples). One statement (before: the
    piece size's, and one more for the inventory)."""
    needs = sorted({(t, decl[f].get("unit", "hour") if t in _TIME_COLUMN else "")
                    for f in files for t in _required(decl[f])})
    held = []
    for table, unit in needs:
        if not re.fullmatch(r"\w+", table):
            raise ValueError(f"a model requires {table!r}: not a table name")
        if not unit:
            held.append(f"(SELECT count() > 0 FROM {table})")
            continue
        ts = _TIME_COLUMN[table]
        if unit == "run":
            lo, hi = "tupleElement(run_span, 1)", "tupleElement(run_span, 2)"
        else:
            lo, hi = "{w0:DateTime('UTC')} - toIntervalHour(1)", "{w1:DateTime('UTC')} + toIntervalHour(1)"
        held.append(f"(SELECT count() > 0 FROM (SELECT 1 FROM {table} WHERE {ts} >= {lo} AND {ts} < {hi} LIMIT 1))")
    # the span of the runs overlapping the hours (job_run's every version of them: wider than the latest's, never
    # narrower), for a model refreshed by run
    runs = ("WITH (SELECT (min(start_ts), max(end_ts) + toIntervalHour(2)) FROM job_run WHERE end_ts + "
            "toIntervalHour(1) > {w0:DateTime('UTC')} AND start_ts < {w1:DateTime('UTC')}) AS run_span "
            if any(unit == "run" for _, unit in needs) else "")
    row = wh.query_rows(
        runs + "SELECT (SELECT count() FROM (SELECT DISTINCT cluster, node FROM node_inventory)) * "
        "dateDiff('hour', {w0:DateTime('UTC')}, {w1:DateTime('UTC')}), "
        "(SELECT sum(length(nodes) * (dateDiff('second', greatest(usage_start_ts, {w0:DateTime('UTC')}), "
        "least(usage_end_ts, {w1:DateTime('UTC')})) / 3600 + 1)) FROM job_run "
        "WHERE NOT never_ran AND gpus > 0 AND usage_start_ts < {w1:DateTime('UTC')} "
        "AND usage_end_ts > {w0:DateTime('UTC')})" + "".join(", " + h for h in held), {"w0": w0, "w1": w1})[0]
    holds = {need: bool(v) for need, v in zip(needs, row[2:])}
    kept = [f for f in files if not _required(decl[f]) or any(
        holds[(t, decl[f].get("unit", "hour") if t in _TIME_COLUMN else "")] for t in _required(decl[f]))]
    work = float(row[0] or 0) + float(row[1] or 0)
    span = w1 - w0
    if work <= _PIECE_NODE_H:
        return span, kept
    days = max(1, int(span / _CHUNK * _PIECE_NODE_H / work))
    return _CHUNK * days, kept


def _required(model: dict) -> tuple[str, ...]:
    r = model.get("requires", ())
    return (r,) if isinstance(r, str) else tuple(r)


def _chunks(w0: datetime, w1: datetime, size: timedelta) -> list[tuple[datetime, datetime]]:
    """[w0, w1) cut into pieces of ``size``; a last piece under a quarter of it joins the one before (a night's
    refresh, a day and the hour before it, is one piece: each piece costs a pass over its samples)."""
    out = [(t, min(t + size, w1)) for t in _steps(w0, w1, lambda t: t + size)]
    if len(out) > 1 and out[-1][1] - out[-1][0] < size / 4:
        out[-2:] = [(out[-2][0], w1)]
    return out


def _next_month(t: datetime) -> datetime:
    return (t.replace(day=1, hour=0) + timedelta(days=32)).replace(day=1)


def _next_week(t: datetime) -> datetime:
    return t + timedelta(days=7)


def _steps(lo: datetime, hi: datetime, step) -> list[datetime]:
    """The starts of [lo, hi) cut where ``step`` (a time -> the next start) says."""
    out, t = [], lo
    while t < hi:
        out.append(t)
        t = step(t)
    return out


def history_as_of(wh) -> tuple[datetime | None, datetime | None]:
    """(start of the first month with a job, latest as-of time) of the loaded job history over every cluster
    (sql/intermediate/cluster_as_of.sql): the span the hourly grain covers, since reports are by month (the
    first month is reported whole). (None, None) when no job is loaded."""
    first, as_of = wh.query_rows("SELECT min(first_ts), max(as_of_ts) FROM cluster_as_of")[0]
    if as_of is None or as_of.year < 2000:
        return None, None
    first = first.replace(tzinfo=timezone.utc)
    return first.replace(day=1, hour=0, minute=0, second=0, microsecond=0), as_of.replace(tzinfo=timezone.utc)


@contextmanager
def _merged_at_end(wh):
    """A load's refresh outside ``one_refresh`` merges what it wrote (job_run and as_of_by_cluster after a job
    load, gpu_day after a telemetry day, the hourly grains) at its end, found in one look at system.parts as the
    block's end finds them (a small job load looked three times: docs/benchmarks.md, "Issue 50", round 7). The
    statements between read the tables FINAL, as they read them inside a block. Inside one, its end merges."""
    if getattr(wh, "_grains_deferred", False) or getattr(wh, "_merges_deferred", False):
        yield
        return
    wh._merges_deferred = True
    try:
        yield
    except BaseException:
        wh._compact_pending = set()  # (a failed load is taken back: its parts merge at the next refresh's end)
        raise
    finally:
        wh._merges_deferred = False
    tables, wh._compact_pending = getattr(wh, "_compact_pending", set()), set()
    _compact(wh, tuple(sorted(tables)))


def _merging_at_end(fn):
    """``fn(wh, ...)`` inside ``_merged_at_end``."""
    @wraps(fn)
    def merging(wh, *a, **k):
        with _merged_at_end(wh):
            return fn(wh, *a, **k)
    return merging


@_merging_at_end
def refresh_after_jobs(wh, first_ts: datetime | None, old: tuple[datetime | None, datetime | None],
                       job_ids: tuple[str, str] | None = None, runs: int = 0) -> None:
    """After a job load that wrote runs from ``first_ts`` on (``old``: the history's span before it): the
    hourly grains for the days that changed, whole days, within the loaded history. A first load (nothing
    loaded before) refreshes the whole history. ``job_ids``: the smallest and largest job id of the ``runs``
    runs the load wrote, when it deleted none (job_run is then formed for those ids alone)."""
    rebuild_stale(wh)
    _refresh_as_of(wh)
    if first_ts is not None:
        _refresh_job_run(wh, first_ts, job_ids if runs <= _PIECE_RUNS else None)
    first, as_of = history_as_of(wh)
    if as_of is None:
        return
    span = (first, _hour(as_of) + timedelta(hours=1))
    if old[1] is None or _unbuilt(wh):
        refresh_capacity(wh, "", *span)
        return
    days: set[date] = set()
    if first_ts is not None:
        # the runs written: those whose fan-out the grain holds differently
        days |= _days(wh, "intermediate/run_node_hour_changes.sql", {"from_ts": min(first_ts, as_of)})
    # the as-of time moved (looked for from a week before where the last load left it), the history reached
    # back before the grid, node events and reservations loaded
    if _holds_rows(wh, "capacity_node_hour"):  # (no grid yet: nothing of it to bring up to date)
        days |= _days(wh, "intermediate/capacity_node_hour_changes.sql",
                      {"since": min(old[1], as_of) - timedelta(days=7)})
    for d0, d1 in _day_ranges(days, span):
        refresh_capacity(wh, "", d0, d1)


def refresh_all_jobs(wh) -> tuple[datetime, datetime] | None:
    """After runs were deleted (a failed load taken back, etl/undo.py): the as-of time (a cluster left with no
    run loses its row: the refresh writes only clusters with runs) and job_run for every run, then the hourly
    grains for the whole history as a job load's refresh makes them, to the hour after the as-of time. Returns
    that span (None: no job is left)."""
    rebuild_stale(wh)
    _refresh_as_of(wh)
    if wh.query_rows("SELECT count() FROM as_of_by_cluster WHERE cluster NOT IN (SELECT DISTINCT cluster FROM "
                     "slurm_job_run)")[0][0]:
        wh.command("DELETE FROM as_of_by_cluster WHERE cluster NOT IN (SELECT DISTINCT cluster FROM slurm_job_run)")
    _refresh_job_run(wh, datetime(1970, 1, 1, tzinfo=timezone.utc))
    first, as_of = history_as_of(wh)
    if as_of is None:
        return None
    span = (first, _hour(as_of) + timedelta(hours=1))
    # at once, even inside one_refresh: the failed load's take-back deletes what was refreshed outside the span
    _refresh_hours(wh, *span)
    return span


@_merging_at_end
def refresh_history(wh, w0: datetime | None = None, w1: datetime | None = None,
                    changed: tuple[str, ...] | None = None) -> tuple[datetime, datetime] | None:
    """The hours of [w0, w1) (default: the whole loaded history) that the job history reaches: after a
    capacity load (inventory, events and reservations change every hour they cover) or a telemetry load.
    ``changed``: the tables the load wrote, whose readers alone are refreshed (None: every hourly model).
    Returns the hours refreshed (None: nothing)."""
    rebuild_stale(wh)
    # `etl refresh` of everything; not a capacity load's (``changed``): job_run, its as-of times and gpu_day
    # read no capacity table (rebuilt over every job and day, they were most of its refresh: docs/benchmarks.md)
    if w0 is None and w1 is None and changed is None:
        _refresh_as_of(wh)
        _refresh_job_run(wh, datetime(1970, 1, 1, tzinfo=timezone.utc))
        _build_gpu_day(wh)
    first, as_of = history_as_of(wh)
    if as_of is None:
        return None
    lo = max(w0, first) if w0 else first
    # the grid ends where every refresh ends it, the hour after the as-of time's (a capacity load's refresh
    # that ended it at the as-of time + 1 h, rounded up, made the grid an hour longer on the nightly's second
    # run than on its first, whose capacity refresh is deferred into one_refresh while the grains are unbuilt)
    end = _hour(as_of) + timedelta(hours=1)
    hi = min(w1, end) if w1 else end
    if lo >= hi:
        return None
    span = (_hour(lo), _ceil_hour(hi))
    if _unbuilt(wh):  # the first build: every model, whatever the load changed
        span, changed = (first, _hour(as_of) + timedelta(hours=1)), None
    refresh_capacity(wh, "", *span, changed=changed)
    return span


@_merging_at_end
def refresh_hourly(wh, w0: datetime, w1: datetime) -> None:
    """After a telemetry load of [w0, w1): its hourly rollups (sql/intermediate/telemetry_hourly.sql), the
    daily GPU rollup of its days (sql/intermediate/gpu_day.sql), then the hourly grains' telemetry for the
    hours the job history reaches."""
    rebuild_stale(wh)
    for stmt in sql_statements("intermediate/telemetry_hourly.sql"):
        wh.command(stmt, {"from_ts": w0, "to_ts": w1}, _computing(stmt))
    if not _holds_rows(wh, "gpu_day"):
        _build_gpu_day(wh)
    else:
        _refresh_gpu_day(wh, w0, w1)
    refresh_history(wh, w0, w1)


def _refresh_as_of(wh) -> None:
    """as_of_by_cluster: how far each cluster's job history reaches (sql/intermediate/cluster_as_of.sql)."""
    for stmt in sql_statements("intermediate/as_of_by_cluster.sql"):
        wh.command(stmt)
    _compact_later(wh, "as_of_by_cluster")


def _refresh_job_run(wh, first_ts: datetime, job_ids: tuple[str, str] | None = None) -> None:
    """job_run (the job-run model, sql/intermediate/fct_job_run.sql) for every job with a run from
    ``first_ts`` on, a range of job ids at a time (``_job_ranges``), two ranges at once (a range's runs are
    its own: etl/concurrent_steps.py); or, ``job_ids`` (the smallest and largest id of a load's runs, at most
    _PIECE_RUNS of them), for the jobs of those ids: the model forms the jobs whose records job_run does not
    hold, and those a load changed are the ones it wrote. One statement, without the look for ranges, and its
    reads bounded by the ids: a nightly file's 0.10 CPU-s statement 0.08 (docs/benchmarks.md, "Issue 50: sacct
    loads in bounded memory", round 8)."""
    # '~' sorts after every character of a job id (digits, '_' of an array task, '+' of a het job): the
    # range's exclusive end just past the largest id
    ranges = [(job_ids[0], job_ids[1] + "~")] if job_ids else _job_ranges(wh, first_ts)
    params = {"from_ts": first_ts, "every": int(first_ts.year < 2000)}

    declared = models()["job_run"].get("settings")  # its header's: how its rows are planned

    def run(h, r: tuple[str, str]) -> None:
        for stmt in sql_statements("intermediate/job_run.sql"):
            h.command(stmt, {**params, "job_lo": r[0], "job_hi": r[1]}, _computing(stmt, declared))

    concurrent_steps.run_steps(wh, ranges, [set() for _ in ranges], run)
    _compact_later(wh, "job_run")


def _compact_later(wh, *tables: str) -> None:
    """``_compact`` of a table every load writes (job_run, as_of_by_cluster, gpu_day); inside ``one_refresh`` once,
    when its hours are refreshed (its end, or a report waiting): the 31 nightly files of the demo loaded in one block
    merged job_run's month after each file, 0.06 s of a file's 0.6 s (docs/benchmarks.md, "Issue 50", round 5);
    a night's refresh looks at system.parts once for all of them and the grains it writes (round 6)."""
    if getattr(wh, "_grains_deferred", False) or getattr(wh, "_merges_deferred", False):
        wh._compact_pending = getattr(wh, "_compact_pending", set()) | set(tables)
        return
    _compact(wh, tuple(sorted(tables)))


def _job_ranges(wh, first_ts: datetime) -> list[tuple[str, str]]:
    """The job ids of the runs from ``first_ts`` on cut into ranges [lo, hi) ('' : open) of about _PIECE_RUNS
    runs per cluster: the model's window sorts every column of the runs a statement reads, so one statement
    over a first load held memory growing with the load (1.0 GB over its baseline at 1 M jobs; a range
    reads only its ids' granules, the ids being the sorting key's after the cluster). A job's runs share its
    id, so each is formed whole in one range. The ids are read in the table's order (no sort to hold)."""
    starts = sorted({r[0] for r in wh.query_rows(
        "SELECT job_id FROM (SELECT job_id, rowNumberInAllBlocks() AS n FROM (SELECT cluster, job_id "
        "FROM slurm_job_run WHERE coalesce(start_ts, submit_ts) >= {from_ts:DateTime('UTC')} "
        "ORDER BY cluster, job_id)) WHERE n > 0 AND n % {runs:UInt64} = 0",
        {"from_ts": first_ts, "runs": _PIECE_RUNS})})
    bounds = ["", *starts, ""]
    return list(zip(bounds, bounds[1:]))


def _refresh_gpu_day(wh, w0: datetime, w1: datetime) -> None:
    for stmt in sql_statements("intermediate/gpu_day.sql"):
        wh.command(stmt, {"from_ts": w0, "to_ts": w1}, _computing(stmt))
    _compact_later(wh, "gpu_day")  # (inside one_refresh, with the block's other merges at its end)


def _build_gpu_day(wh) -> None:
    """gpu_day for every day gpu_hour holds (a warehouse upgraded to the grain, or `etl refresh`)."""
    lo, hi = wh.query_rows("SELECT min(hour), max(hour) FROM gpu_hour")[0]
    if hi is None or hi.year < 2000:
        return
    lo, hi = lo.replace(tzinfo=timezone.utc), hi.replace(tzinfo=timezone.utc) + timedelta(hours=1)
    _refresh_gpu_day(wh, lo, hi)


def _unbuilt(wh) -> bool:
    """run_node_hour (migration 0012) has never been built though runs held GPUs: a warehouse whose first
    refresh builds it for the whole history. (A grain an earlier version's SQL built is found by its
    fingerprint, core/grain_versions.py, and rebuilt by ``rebuild_stale``; the "grain built: …" marks of
    etl_watermark that did this before are no longer read: a warehouse that has them has its fingerprints.)"""
    # (run_node_hour holding rows, as after every refresh but the first, is known from the parts alone; the
    # count over job_run is a scan)
    return not _holds_rows(wh, "run_node_hour") and wh.query_rows(
        "SELECT count() > 0 FROM job_run WHERE NOT never_ran AND gpus > 0 AND length(nodes) > 0")[0][0] == 1


def _holds_rows(wh, table: str) -> bool:
    return wh.query_rows(f"SELECT count() > 0 FROM {table}")[0][0] == 1


def _days(wh, query: str, params: dict) -> set[date]:
    return {r[0] for r in wh.query_rows(sql_query(query), params)}


def _day_ranges(days: set[date], span: tuple[datetime, datetime]) -> list[tuple[datetime, datetime]]:
    """Consecutive days as [start, end) ranges, clipped to ``span``."""
    out: list[tuple[datetime, datetime]] = []
    for d in sorted(days):
        s = datetime(d.year, d.month, d.day, tzinfo=timezone.utc)
        e = s + timedelta(days=1)
        s, e = max(s, span[0]), min(e, span[1])
        if s >= e:
            continue
        if out and out[-1][1] >= s:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _compact(wh, tables: tuple[str, ...]) -> None:
    """Merge the parts of every partition of ``tables`` that has more than one (OPTIMIZE ... FINAL), so that
    the reports' FINAL reads find one part a partition and deduplicate nothing. Measured on the 1,024-GPU
    month (bench/bench_monthly.py's warehouse): merging a month's partition costs the load 0.15 s (job_run),
    0.26 s (run_node_hour), 0.2 s (capacity_node_hour); a second part in job_run's month made job sizes,
    run times and end states 30-45% slower to read (0.052 -> 0.028 s, 0.065 -> 0.039 s, 0.048 -> 0.034 s).
    On a cluster the servers merge in the background (an OPTIMIZE would have to name every shard's local
    table)."""
    if not tables or getattr(wh.cfg, "deployment", "single") == "cluster":
        return  # (no table: refresh_pending's call when no job load deferred a merge asks the engine nothing)
    rows = wh.query_rows("SELECT table, partition_id, count(), sum(rows) FROM system.parts WHERE database = "
                         "currentDatabase() AND table IN {t:Array(String)} AND active GROUP BY table, partition_id "
                         "HAVING count() > 1 ORDER BY table, partition_id", {"t": list(tables)})
    merges = [f"OPTIMIZE TABLE {table} PARTITION ID '{partition}' FINAL"
              for table, partition, _, _ in rows if re.fullmatch(r"\w+", partition)]
    # a partition's merge runs on one thread: a first load's (job_run's and run_node_hour's months) two at once;
    # a night's few small ones one after the other, where a second handle would cost more than it saves
    at_once = concurrent_steps.HANDLES if sum(r[3] for r in rows) >= _MERGE_ROWS_AT_ONCE else 1
    concurrent_steps.run_steps(wh, merges, [set() for _ in merges], lambda h, m: h.command(m), handles=at_once)


def _hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def _ceil_hour(t: datetime) -> datetime:
    h = _hour(t)
    return h if h == t else h + timedelta(hours=1)
