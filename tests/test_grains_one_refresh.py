"""A night's loads refresh the hourly grains once (issue 50, item 4): inside ``grains.one_refresh`` a sacct load
and the telemetry day after it record the hours they changed, and the block's end refreshes them together
(before, each load refreshed its own hours: the night's hours were read twice). The hours are recorded in
the warehouse, so a load killed inside the block leaves them to the next writer.

The site is tests/test_sample_step_attribution.py's hand-built day (cluster t2, one 8-GPU H100 node n1,
5-minute dcgm-exporter samples of 2026-10-05 labelled with the job holding each GPU), whose figures are worked
out there by hand from the raw lines, per hour in GPU-minutes (allocated, observed, busy):
  10: 4001 holds GPUs 0-3 for 13 min (10 of them seen busy), 4002 GPUs 4-7 from 10:52:30, 7.5 min, idle
  11: 4001 60 min busy on 4 GPUs; 4002 31 min 40 s on 4, idle
  18: 4005 holds all 8 GPUs the whole hour, busy
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from ops_warehouse.etl import grains
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.test_hung_and_idle_jobs import DAY
from tests.test_sample_step_attribution import _sacct, _telemetry

EXPECTED_GPU_MIN = {10: (4 * 13 + 4 * 7.5, 4 * 13 + 4 * 7.5, 4 * 10),
                    11: (4 * 60 + 4 * (31 + 40 / 60), 4 * 60 + 4 * (31 + 40 / 60), 4 * 60),
                    18: (8 * 60, 8 * 60, 8 * 60)}


def _hours(wh) -> dict[int, tuple[float, float, float]]:
    return {r[0].hour: tuple(round(v / 60, 6) for v in r[1:]) for r in wh.query_rows(
        "SELECT hour, allocated_gpu_s, allocated_observed_gpu_s, busy_gpu_s FROM capacity_node_hour FINAL "
        "WHERE cluster = 't2' AND node = 'n1' AND toHour(hour) IN (10, 11, 18) AND toDate(hour) = {d:Date} "
        "ORDER BY hour", {"d": DAY})}


def _expected() -> dict[int, tuple[float, float, float]]:
    return {h: tuple(round(v, 6) for v in f) for h, f in EXPECTED_GPU_MIN.items()}


@pytest.fixture
def files(tmp_path, cfg):
    cfg.projects = {"proja": "A"}
    _sacct(tmp_path / "sacct.psv")
    (tmp_path / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                            "n1,h100,8,gpu,r1,2025-01-01\n")
    _telemetry(tmp_path / "telemetry", True)
    wh = open_warehouse(cfg)
    load_capacity(wh, inventory=tmp_path / "inventory.csv", cluster="t2")
    yield wh, tmp_path
    wh.close()
    close_embedded()


def _recording(wh, *tables: str) -> list[tuple]:
    """The [from_ts, to_ts) of every refresh of ``tables`` the warehouse runs from now on: the window of the
    statement that writes the table and names the window (run_sample_hour's INSERT reads its window's inputs
    staged by the statements before it, and names none: the staging of its samples, _rsh_g, does; run_telemetry's
    the staging of its runs, _rt_runs)."""
    spans: list[tuple] = []
    real = wh.client.command
    staged = {"run_sample_hour": "CREATE TEMPORARY TABLE _rsh_g ", "run_telemetry": "CREATE TEMPORARY TABLE _rt_runs "}
    heads = tuple(staged.get(t, f"INSERT INTO {t}") for t in tables)

    def command(sql, *a, **k):
        if sql.lstrip().startswith(heads):
            p = k.get("parameters") or a[0]
            if "from_ts" in p:
                spans.append((p["from_ts"], p["to_ts"]))
        return real(sql, *a, **k)

    wh.client.command = command
    return spans


def test_a_night_refreshes_its_hours_once(files):
    wh, d = files
    spans = _recording(wh, "run_sample_hour")
    with grains.one_refresh(wh):
        assert load_sacct(wh, d / "sacct.psv").quarantined == 0
        load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")
    # every hour once: the pieces follow each other (before: the sacct load's refresh of the history, then the
    # telemetry day's again, 2026-10-04 23:00 .. 2026-10-06 00:00)
    assert spans and all(a[1] == b[0] for a, b in zip(spans, spans[1:])), spans
    assert _hours(wh) == _expected()
    # nothing left pending
    assert grains.refresh_pending(wh) == []


def test_a_load_killed_inside_the_block_leaves_its_hours_to_the_next_writer(files, cfg):
    wh, d = files
    load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")  # the samples first: no job yet
    wh._grains_deferred = True  # inside one_refresh, killed before its end (its finally never ran)
    assert load_sacct(wh, d / "sacct.psv").quarantined == 0
    assert _hours(wh) == {}  # not refreshed: no grid yet (it spans the job history)
    wh.close()
    close_embedded()
    # the next writer (here `ops-report init`'s rebuild; any load's refresh does the same) refreshes them
    nxt = open_warehouse(cfg)
    try:
        grains.rebuild_stale(nxt)
        assert _hours(nxt) == _expected()
        assert grains.refresh_pending(nxt) == []
    finally:
        nxt.close()


def test_a_refresh_of_a_long_span_goes_a_day_at_a_time(files, monkeypatch):
    """Memory: a refresh statement holds the fan-out and grid of its hours, so a whole-month refresh (a first
    load, `etl refresh`, an upgrade's rebuild) whose node-hours are over grains._PIECE_NODE_H goes a day at a
    time (before: the month in one statement, over 1 GB for a month of 4,000 nodes with one 4,000-node job;
    docs/benchmarks.md) and gives the hand-worked figures. A span under it is one piece (a piece costs a
    pass over its samples and a fixed plan cost: a day at a time, a small first load took 18 s, not 1.4 s)."""
    wh, d = files
    assert load_sacct(wh, d / "sacct.psv").quarantined == 0
    load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")
    spans = _recording(wh, "run_node_hour")
    run_spans = _recording(wh, "run_telemetry")
    grains.refresh_history(wh)  # this site's few node-hours: one piece
    assert spans == [(datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 10, 5, 20, tzinfo=timezone.utc))]
    assert run_spans == spans
    runs_whole = _run_telemetry(wh)
    # a row for each run with a sample: not 4003 (13:01-13:03) nor 4006 (19:00:10-19:04), between 5-min samples
    assert [r[1] for r in runs_whole] == ["4001", "4002", "4004", "4005"]
    spans.clear()
    run_spans.clear()
    monkeypatch.setattr(grains, "_PIECE_NODE_H", 1)  # as if every day of it were a 4,000-node machine's
    grains.refresh_history(wh)  # everything: October 1 to the hour after the as-of time's (2026-10-05 19:04:00)
    # (before: one statement over the whole span)
    assert spans[0][0] == datetime(2026, 10, 1, tzinfo=timezone.utc)
    assert spans[-1][1] == datetime(2026, 10, 5, 20, tzinfo=timezone.utc)  # (the hour after the as-of time's)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), spans
    assert max(b - a for a, b in spans) <= timedelta(days=1, hours=6), spans
    assert _hours(wh) == _expected()
    # run_telemetry goes by the same pieces (before: the whole span at once, every run of the history staged
    # in one statement), each run formed whole from all its samples: the rows of the one-piece refresh
    assert run_spans == spans
    assert _run_telemetry(wh) == runs_whole


def _run_telemetry(wh) -> list[tuple]:
    return wh.query_rows("SELECT * EXCEPT (refreshed_at) FROM run_telemetry FINAL ORDER BY cluster, job_id, submit_ts")


def test_the_refresh_order_follows_the_models_declarations(tmp_path):
    """Each sql/intermediate model declares its kind, what it writes and reads (``--- [model]``); the grains,
    their files' order and the grains they read follow from these (core/grain_versions.py), not from a
    hand-kept list: a model added to the hourly grain that reads run_node_hour is built after it, and one
    declaring a table its statements never name is refused."""
    import shutil

    from ops_warehouse.grain_versions import GRAINS, _grains, models
    from ops_warehouse.sqlfiles import sql_files

    # the installed declarations give the order etl/grains.py has always refreshed in
    assert GRAINS["hourly"] == (("run_sample_hour", "capacity_node_hour", "run_node_hour", "run_telemetry"),
                                ("job_run", "telemetry_hourly"))
    assert GRAINS["gpu_day"] == (("gpu_day",), ("telemetry_hourly",))
    assert list(GRAINS).index("hourly") > max(list(GRAINS).index(g) for g in ("job_run", "telemetry_hourly"))
    root = tmp_path / "sql"
    for folder in ("functions", "intermediate", "migrations"):
        (root / folder).mkdir(parents=True)
        for name, text in sql_files(folder):
            (root / folder / name).write_text(text)
    (root / "intermediate" / "aa_node_share.sql").write_text(
        "--- [model]\n--- kind = \"incremental_by_time_range\"\n--- unit = \"hour\"\n--- grain = \"hourly\"\n"
        "--- writes = [\"aa_node_share\"]\n--- reads = [\"run_node_hour\"]\n"
        "INSERT INTO aa_node_share SELECT * FROM run_node_hour;\n")
    files = _grains(models(root))["hourly"][0]
    assert files == ("run_sample_hour", "capacity_node_hour", "run_node_hour", "aa_node_share", "run_telemetry")
    (root / "intermediate" / "aa_node_share.sql").write_text(
        "--- [model]\n--- kind = \"view\"\n--- reads = [\"gpu_samples\"]\nCREATE VIEW aa AS SELECT 1;\n")
    with pytest.raises(ValueError, match="aa_node_share.sql declares gpu_samples"):
        models(root)
    shutil.rmtree(root)


def test_a_models_declared_settings_ride_its_writing_statements(files, tmp_path):
    """A model's header declares the engine settings its writing statements run with (``settings``: job_run's
    and run_node_hour's `query_plan_enable_optimizations = 0`), and etl/grains.py gives them to those INSERTs
    alone, in the statement's own SETTINGS clause, whichever route refreshes the model (job_run's ranges,
    the hourly grain's files); a settings value that is not a number or a string is refused."""
    import shutil

    from ops_warehouse.grain_versions import models
    from ops_warehouse.sqlfiles import sql_files

    wh, d = files
    sent: list[str] = []
    real = wh.client.command

    def command(sql, *a, **k):
        sent.append(sql)
        return real(sql, *a, **k)

    wh.client.command = command
    with grains.one_refresh(wh):
        load_sacct(wh, d / "sacct.psv")
        load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")
    plain = {m.group(1) for sql in sent if "query_plan_enable_optimizations = 0" in sql
             for m in [re.match(r"\s*INSERT INTO (\w+)", sql)]}
    assert plain == {"job_run", "run_node_hour"}, plain
    written = {m.group(1) for sql in sent for m in [re.match(r"\s*INSERT INTO (\w+)", sql)] if m}
    assert {"run_sample_hour", "capacity_node_hour", "run_telemetry"} <= written  # the others go without them
    assert _hours(wh) == _expected()

    root = tmp_path / "sql"
    (root / "intermediate").mkdir(parents=True)
    for name, text in sql_files("intermediate"):
        (root / "intermediate" / name).write_text(text)
    job_run = root / "intermediate" / "job_run.sql"
    job_run.write_text(job_run.read_text().replace("query_plan_enable_optimizations = 0",
                                                   "query_plan_enable_optimizations = true"))
    with pytest.raises(ValueError, match="job_run.sql: settings must be a table of engine settings"):
        models(root)
    shutil.rmtree(root)


def _reads(wh, tables: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """From now on, per statement kind of the hourly grains' refresh (the table an INSERT writes, or the
    temporary table a CREATE stages), how often the engine's plan of its query reads each of ``tables``
    (EXPLAIN: a CTE named n times is read n times; the DELETEs' subqueries are not counted)."""
    seen: dict[str, dict[str, int]] = {}
    real = wh.client.command

    def command(sql, *a, **k):
        s = sql.strip()
        m = re.match(r"(?:INSERT INTO (\w+) \([^)]*\)\s*\n|CREATE TEMPORARY TABLE (\w+) [^\n]* AS\n)", s)
        if m:
            plan = real("EXPLAIN " + s[m.end():], *a, **k)
            plan = plan if isinstance(plan, str) else "\n".join(map(str, plan))
            counts = seen.setdefault(m.group(1) or m.group(2), {})
            for t in re.findall(r"ReadFromMergeTree \(\w+\.(\w+)\)", plan):
                if t in tables:
                    counts[t] = counts.get(t, 0) + 1
        return real(sql, *a, **k)

    wh.client.command = command
    return seen


def test_a_refresh_reads_the_samples_and_the_runs_once(files):
    """run_sample_hour and run_telemetry stage what several of their parts read (temporary tables): before,
    the engine evaluated every CTE where it was named, and one refresh of run_sample_hour read gpu_sample six
    times and job_run four, run_telemetry job_run five (docs/benchmarks.md, "Issue 50", round 2). The
    figures the grains give stay the hand-worked ones."""
    wh, d = files
    with grains.one_refresh(wh):
        assert load_sacct(wh, d / "sacct.psv").quarantined == 0
        load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")
        reads = _reads(wh, ("gpu_sample", "job_run", "node_sample"))
    sample_hour = [k for k in reads if k == "run_sample_hour" or k.startswith("_rsh_")]
    assert sum(reads[k].get("gpu_sample", 0) for k in sample_hour) == 1, reads
    assert sum(reads[k].get("job_run", 0) for k in sample_hour) == 1, reads
    telemetry = [k for k in reads if k == "run_telemetry" or k.startswith("_rt_")]
    assert sum(reads[k].get("job_run", 0) for k in telemetry) == 1, reads
    # its two sample tables, each read by the start-up and hang parts (node_sample: checkpoints and NICs)
    assert sum(reads[k].get("gpu_sample", 0) for k in telemetry) == 2, reads
    assert _hours(wh) == _expected()
    assert wh.query_rows("SELECT count() FROM run_telemetry FINAL WHERE cluster = 't2'")[0][0] > 0


def _sample_rows(wh) -> dict[tuple, float]:
    """run_sample_hour of n1's hours 10, 11 and 18 as (hour, job) -> observed GPU-minutes, and its ghost rows."""
    return {(r[0].hour, r[1], r[2]): round(r[3] / 60, 6) for r in wh.query_rows(
        "SELECT hour, node, job_id, observed_gpu_s FROM run_sample_hour FINAL WHERE cluster = 't2' "
        "AND (toHour(hour) IN (10, 11, 18) OR job_id = 'ghost') ORDER BY hour, node, job_id")}


def test_a_refresh_deletes_old_rows_only_where_some_are_not_written_again(files):
    """run_sample_hour's refresh replaces the rows of the node-hours its window's samples touch. Before, it
    first deleted every old row there (a lightweight DELETE, which rewrote the row mask of the month's part
    every night, though every row it matched was written again: 0.3-0.5 s of a night's refresh on the loaded
    machine, docs/benchmarks.md "Issue 50", round 3); now the DELETE runs only where an old row is not written
    again. A refresh writing each row as it was deletes nothing; a row no longer written (a run gone from n1)
    still goes; a row of a node-hour no sample touches stays. Figures: the header's, per run."""
    wh, d = files
    with grains.one_refresh(wh):
        assert load_sacct(wh, d / "sacct.psv").quarantined == 0
        load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")
    by_hand = {(10, "n1", "4001"): 4 * 13, (10, "n1", "4002"): 4 * 7.5, (11, "n1", "4001"): 4 * 60,
               (11, "n1", "4002"): round(4 * (31 + 40 / 60), 6), (18, "n1", "4005"): 8 * 60}
    assert _sample_rows(wh) == by_hand
    deletes: list[str] = []
    real = wh.client.command

    def command(sql, *a, **k):
        if sql.lstrip().startswith("DELETE FROM run_sample_hour"):
            deletes.append(sql)
        return real(sql, *a, **k)

    wh.client.command = command
    grains.refresh_history(wh)  # every hour again, each row written as it was
    assert deletes == []
    assert _sample_rows(wh) == by_hand and _hours(wh) == _expected()
    # one row a key after the refresh's compaction (the rows written again replaced their old versions)
    assert wh.query_rows("SELECT count() FROM run_sample_hour")[0][0] == \
        wh.query_rows("SELECT count() FROM run_sample_hour FINAL")[0][0]
    # old rows the refresh does not write again: a run on n1 at 11:00 (its samples touch the hour) and on
    # n9 (no sample of it)
    for node in ("n1", "n9"):
        wh.command("INSERT INTO run_sample_hour (cluster, hour, node, job_id, submit_ts, attribution, observed_gpu_s, "
                   "refreshed_at) VALUES ('t2', {h:DateTime('UTC')}, {n:String}, 'ghost', {h:DateTime('UTC')}, "
                   "'node share', 600, now64(3) - 60)",
                   {"h": datetime(DAY.year, DAY.month, DAY.day, 11, tzinfo=timezone.utc), "n": node})
    grains.refresh_history(wh)
    assert len(deletes) == 1
    assert _sample_rows(wh) == {**by_hand, (11, "n9", "ghost"): 10.0}


def _pending(wh) -> list[tuple]:
    return wh.query_rows("SELECT source, watermark_ts FROM etl_watermark FINAL "
                         "WHERE startsWith(source, 'grains pending')")


def test_the_blocks_pending_hours_go_without_a_mutation(files, cfg):
    """The block's end deletes its pending records as a patch part (migration 0026), not as a mutation: a
    mutation waited 0.02-1 s a night for the engine's background scheduler (docs/benchmarks.md, "Issue 50",
    round 6). Twice, the same hours: the second night's record of the same first hour must not find the first
    one's, deleted (its span would grow), and the records stay deleted in a warehouse opened again."""
    wh, d = files
    for night in (1, 2):
        spans = _recording(wh, "run_sample_hour")
        with grains.one_refresh(wh):
            assert load_sacct(wh, d / "sacct.psv").quarantined == 0
            load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")
        # the first night builds the loaded history (its first month's start to the hour after the as-of time,
        # 2026-10-05 19:xx); the second refreshes the telemetry day's hours and the hour before, to the same end:
        # had it found the first night's records, deleted, it would start at October 1 again
        first = datetime(2026, 10, 1 if night == 1 else 4, 0 if night == 1 else 23, tzinfo=timezone.utc)
        assert spans == [(first, datetime(2026, 10, 5, 20, tzinfo=timezone.utc))], (night, spans)
        assert _pending(wh) == [], night
        assert wh.query_rows("SELECT count() FROM system.mutations WHERE database = currentDatabase() "
                             "AND table = 'etl_watermark'")[0][0] == 0, night
        assert _hours(wh) == _expected()
    wh.close()
    close_embedded()
    again = open_warehouse(cfg)
    try:
        assert _pending(again) == []
        assert grains.refresh_pending(again) == []
    finally:
        again.close()


def test_a_nights_refresh_drops_its_staging_at_once_and_looks_at_the_parts_once(files):
    """The night's staged tables go in one DROP each time (run_sample_hour's seven, before and after its
    statements; before: one statement a table, 16 DROPs a night), and the merges the block owes (job_run and
    as_of_by_cluster from the sacct load, gpu_day from the telemetry day, the hourly grains from the refresh)
    are found in one look at system.parts (before: three), every partition of them left in one part."""
    wh, d = files
    sent: list[str] = []
    for name in ("command", "query"):
        real = getattr(wh.client, name)

        def call(sql, *a, _real=real, **k):
            sent.append(" ".join(sql.split()))
            return _real(sql, *a, **k)

        setattr(wh.client, name, call)
    with grains.one_refresh(wh):
        assert load_sacct(wh, d / "sacct.psv").quarantined == 0
        load_parquet_dir(wh, d / "telemetry", DAY, DAY, cluster="t2")
    drops = [s for s in sent if re.match(r"DROP TEMPORARY TABLE (IF EXISTS )?_(rsh|rt)_", s)]
    # run_sample_hour: the leftovers, _rsh_g once read, the rest at its end; run_telemetry: _rt_runs before, after
    assert len(drops) == 5, drops
    assert sum(s.startswith("SELECT table, partition_id") and "system.parts" in s for s in sent) == 1
    merged = ("job_run", "as_of_by_cluster", "gpu_day", "run_sample_hour", "capacity_node_hour", "run_node_hour",
              "run_telemetry")
    parts = wh.query_rows("SELECT table, partition_id, count() FROM system.parts WHERE database = currentDatabase() "
                          "AND active AND table IN {t:Array(String)} GROUP BY table, partition_id", {"t": list(merged)})
    assert {t for t, _, _ in parts} == set(merged)
    assert [p for p in parts if p[2] > 1] == []
    assert _hours(wh) == _expected()
