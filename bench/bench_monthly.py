"""Benchmark: `ops-report monthly --cluster` on a month of a generated cluster with 1-minute telemetry (256
GPUs by default, --nodes 128 for the 1,024-GPU month of the earlier rounds), beside the same core statistics
computed by DuckDB and by pandas over Parquet, in one run.

    .venv/bin/python bench/bench_monthly.py [--nodes 32] [--days 31] [--workdir DIR] [--repeat N]
    .venv/bin/python bench/bench_monthly.py --profile      # where the report's time goes, mart by mart
    .venv/bin/python bench/bench_monthly.py --ab MART=OLD.sql [--ab-param runs_limit=15]
    .venv/bin/python bench/bench_monthly.py --statements ["query_plan_enable_optimizations = 0" ...]
    .venv/bin/python bench/bench_monthly.py --two-handles   # the report's independent marts on two engine handles
    .venv/bin/python bench/bench_monthly.py --handles --repeat 5  # the report's marts on one handle and on two
    .venv/bin/python bench/bench_monthly.py --settings-ab --repeat 6  # the marts' engine settings against none

The month is prepared once and kept (default workdir ~/.cache/ops-warehouse/bench-monthly-n<nodes>-d<days>-<checkout>,
bench/month_cache.py: one per checkout, so two worktrees never rebuild each other's month):
the 1,024-GPU month took over 25 minutes to generate and load on a loaded 2-core machine, the 256-GPU one 11
(31,015 job runs either way: the job mix is the same, the telemetry a quarter).

1. prepare (skipped when --workdir already holds it): generate the month (sacct, inventory, node events,
   reservation, 60 s telemetry), load it (sacct, capacity, telemetry day files) into an embedded warehouse
   (the loads keep the report's grains up to date), export what the report reads to Parquet (job runs,
   inventory, node events, hourly GPU rollups). A workdir prepared by an older version is upgraded and its
   grains built once (`ops-report etl refresh`), outside the measurements;
2. product, in a fresh child: the core statistics (the marts the baselines compute, reading the grains the
   loads keep), then monthly_report(cluster) and all three formats (md with SVG charts, html, json) into an
   empty folder (every chart drawn): wall time, split into statistics, charts and the rest, and the
   child's peak RSS;
3. baselines, each in a fresh child, over the exported Parquet: the core statistics (capacity and
   allocated GPU-hours by GPU model over an hourly node grid, job-size shares, run-time percentiles per size
   class, end states, allocation by project, mean utilization per GPU): DuckDB SQL, and pandas. DuckDB's
   SQL is the fastest form found for it: each run's hours come from generate_series over the run's own
   span (0.07 s), not from a range join of runs against the month's hours (0.67 s, the form measured
   before 2026-12-01, which made DuckDB look 2-3x slower than it is).
Each child runs --repeat times (default 1) and the fastest run counts (a shared machine's noise only ever
adds). Peak RSS is each child's own high-water mark (VmHWM of /proc/self/status: ru_maxrss of a child
started from this process would report this process's peak, e.g. after preparing). The ratios are baseline
time ÷ product time (above 1: the product is faster). RESULT monthly_core_cpu gives the same ratio in CPU
seconds of each child (time.process_time: the engine's threads are the child's), which the load of a
shared machine changes far less than the wall seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import date, datetime, timezone
from pathlib import Path
from month_cache import month_workdir  # bench/month_cache.py
from peak_rss import peak_rss_mb  # bench/peak_rss.py (benches run as scripts from bench/)

START = datetime(2026, 10, 1, tzinfo=timezone.utc)
W0, W1 = START, datetime(2026, 11, 1, tzinfo=timezone.utc)
PROJECTS = {f"proj{c}": c.upper() for c in "abcdef"}


def prepare(work: Path, nodes: int, days: int) -> None:
    from ops_warehouse.config import Config
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.generate import generate
    from ops_warehouse.warehouse import open_warehouse

    site = work / "site"
    t = time.perf_counter()
    h = generate(site, start=START, days=days, jobs_per_day=1000, nodes=nodes, seed=3, metrics_step_s=60)
    print(f"generated {days} days, {h.inventory['gpus'].sum()} GPUs on {h.inventory.height} nodes, "
          f"{h.runs.height} job runs, 60 s telemetry in {time.perf_counter() - t:.0f} s", flush=True)
    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    t = time.perf_counter()
    load_sacct(wh, site / "sacct" / "sacct.psv")
    load_capacity(wh, inventory=site / "inventory.csv", events=site / "slurm" / "events.psv",
                  reservations=site / "slurm" / "reservations.txt", cluster=h.spec.name)
    c = load_parquet_dir(wh, site, START.date(), date(2026, 10, days), cluster=h.spec.name)
    print(f"loaded ({c['gpu_rows']:,} GPU samples) in {time.perf_counter() - t:.0f} s", flush=True)
    pq = work / "parquet"
    pq.mkdir(exist_ok=True)
    for name, sql in (
            ("runs", "SELECT cluster, job_id, submit_ts, start_ts, end_ts, usage_start_ts, usage_end_ts, wall_s, "
                     "gpus, nodes, state, project, is_final, never_ran, is_superseded FROM fct_job_run"),
            ("inventory", "SELECT * FROM node_inventory FINAL"),
            ("gpu_hour", "SELECT cluster, node, gpu, hour, covered_s, gpu_util_pct_avg FROM gpu_hour FINAL")):
        wh.command(f"INSERT INTO FUNCTION file('{pq / name}.parquet', Parquet) {sql} "
                   "SETTINGS engine_file_truncate_on_insert = 1")
    (work / "cluster").write_text(h.spec.name)
    from ops_warehouse.warehouse import close_embedded

    close_embedded()  # the children open it next


def ensure_grains(work: Path) -> None:
    """A workdir prepared by an older version: upgrade it and build the grains the loads now keep (what
    `ops-report etl refresh` does), and merge their partitions as the loads do, so that the product child
    only reads."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl.grains import refresh_history
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{work / 'warehouse'}"))
    try:
        empty = [t for t in ("run_node_hour", "gpu_day", "run_telemetry")
                 if not wh.query_rows(f"SELECT count() FROM {t}")[0][0]]
        if empty:
            t = time.perf_counter()
            refresh_history(wh)
            print(f"upgraded the workdir's warehouse: built {', '.join(empty)} in {time.perf_counter() - t:.0f} s "
                  "(once; the loads keep them from now on)", flush=True)
        # one part a month, as the nightly loads leave the grains (etl/grains.py merges what a load wrote): an
        # upgrade that re-ran a model's file (job_run's every run inserted again) leaves a second part, which
        # the reports' FINAL reads then merge at every query (0.55 against 0.31 CPU-s for the core statistics,
        # 3.4 against 2.5 for the report's, round 4) until the next load's merge
        for table, partition in wh.query_rows(
                "SELECT table, partition_id FROM system.parts WHERE database = currentDatabase() AND active "
                "AND table IN ('job_run', 'run_node_hour', 'capacity_node_hour', 'run_telemetry', 'gpu_day', "
                "'run_sample_hour') GROUP BY table, partition_id HAVING count() > 1"):
            wh.command(f"OPTIMIZE TABLE {table} PARTITION ID '{partition}' FINAL")
            print(f"merged {table}'s partition {partition} (left in parts by an upgrade)", flush=True)
    finally:
        close_embedded()


def child_product(work: Path) -> dict:
    import shutil

    from ops_warehouse.config import Config
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.analytics.monthly import monthly_report
    from ops_warehouse.reports.charts import draw_all
    from ops_warehouse.reports.monthly_render import write
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    cluster = (work / "cluster").read_text()
    # the core statistics the baselines compute, alone: the marts over the grains the loads keep
    t, c = time.perf_counter(), time.process_time()
    for name in ("utilization", "chargeback", "job_sizes", "run_times", "end_states", "gpu_heatmap"):
        run_mart(wh, name, cluster=cluster, window=(W0, W1))
    core_s, core_cpu_s = time.perf_counter() - t, time.process_time() - c
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)  # every chart drawn: none kept from an earlier run
    t, c = time.perf_counter(), time.process_time()
    r = monthly_report(Connection(wh), month=START.date(), cluster=cluster)
    t_stats, stats_cpu_s = time.perf_counter() - t, time.process_time() - c
    write(r, out, ["md", "html", "json"])  # (every chart drawn in it)
    seconds = time.perf_counter() - t
    # the charts' part, drawn again apart (SVG, round 10: nothing is kept from the draw inside write(); until
    # then this draw came first and write() reused it, so the whole's seconds count the charts once either way)
    t1 = time.perf_counter()
    draw_all(r)
    t_charts = time.perf_counter() - t1
    cl = next(u for u in r["utilization"] if u["level"] == "cluster")
    return {"seconds": seconds, "stats_s": t_stats, "charts_s": t_charts, "core_s": core_s,
            "core_cpu_s": core_cpu_s, "stats_cpu_s": stats_cpu_s,
            "peak_rss_mb": peak_rss_mb(), "allocated_gpu_h": cl["allocated_gpu_h"], "capacity_gpu_h": cl["capacity_gpu_h"],
            "sizes": {s["size_class"]: s["jobs"] for s in r["job_sizes"]}}


def child_profile(work: Path) -> dict:
    """Where the report's time goes, in one process: each mart the report asks for (time and CPU time from its
    progress label to the next, included marts evaluated inside it) and the rows the engine read for it
    (system.events SelectedRows: no machine load changes it), then each chart drawn here one after the
    other, then each format rendered, then the files written. A second pass of the statistics follows the
    first in the same process (the engine's caches warm), and the report's JSON is saved beside the workdir
    (report.json) to compare figures before and after a change."""
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.monthly import monthly_report
    from ops_warehouse.config import Config
    from ops_warehouse.reports import charts as ch
    from ops_warehouse.reports import monthly_render as mr
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    cluster = (work / "cluster").read_text()

    def rows_read() -> int:
        return wh.query_rows("SELECT value FROM system.events WHERE event = 'SelectedRows'")[0][0]

    passes = []
    for _ in range(2):
        marks = []

        def step(label: str) -> None:
            marks.append((label, time.perf_counter(), rows_read(), time.process_time()))

        t, c = time.perf_counter(), time.process_time()
        r = monthly_report(Connection(wh), month=START.date(), cluster=cluster, progress=step)
        marks.append(("(end)", time.perf_counter(), rows_read(), time.process_time()))
        per = {}
        for (label, t0, n0, c0), (_, t1, n1, c1) in zip(marks, marks[1:]):
            k = label if label not in per else label + " (previous)"
            per[k] = (round(t1 - t0, 4), n1 - n0, round(c1 - c0, 4))  # seconds, rows read, CPU seconds
        passes.append({"stats_s": round(time.perf_counter() - t, 3), "stats_cpu_s": round(time.process_time() - c, 3),
                       "marts": per})
    charts = {}
    for name, _, fn in ch.CHARTS:
        t = time.perf_counter()
        fn(r)
        charts[name] = round(time.perf_counter() - t, 4)
    svg = ch.draw_all(r)
    render = {}
    for fmt, fn in (("md", lambda: mr.to_markdown(r, {k: k + ".svg" for k in svg})),
                    ("html", lambda: mr.to_html(r, svg)), ("json", lambda: mr.to_json(r))):
        t = time.perf_counter()
        fn()
        render[fmt] = round(time.perf_counter() - t, 4)
    (work / "report.json").write_text(mr.to_json({**r, "generated_at": None}))
    return {"passes": passes, "charts_s": charts, "render_s": render}


def _open(work: Path):
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    cfg.projects = PROJECTS
    return open_warehouse(cfg)


def _report_statements(wh, work: Path) -> list[tuple[str, str, dict]]:
    """[(table, SELECT text, parameters)] of the cluster report's mart evaluations, in the report's order,
    captured from one report run on ``wh`` inside an each_mart_once block of the caller's (so that the included
    marts' temporary tables stay readable after it)."""
    import re

    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.monthly import monthly_report

    got, command = [], wh.command

    def capture(sql, params=None):
        m = re.match(r"CREATE TEMPORARY TABLE (\S+) ENGINE = Memory AS ", sql)
        if m:
            got.append((m.group(1), sql[m.end():], params or {}))
        return command(sql, params)

    wh.command = capture
    monthly_report(Connection(wh), month=START.date(), cluster=(work / "cluster").read_text())
    wh.command = command
    return got


CORE = ("utilization", "chargeback", "job_sizes", "run_times", "end_states", "gpu_heatmap")


def child_statements(work: Path, settings: list[str], rounds: int = 3) -> dict:
    """The report's mart statements (as analytics/marts.py sends them: its SETTINGS included) re-run as plain
    SELECTs with each of ``settings`` (a SETTINGS clause, one or several comma-separated) and without,
    interleaved statement by statement, ``rounds`` rounds: per variant the
    CPU seconds of the planning (``EXPLAIN PLAN``: parse, analysis, plan and its optimizations) and of the whole
    run, best per statement, summed over all of them and over the core six's (CORE); each statement's own best;
    and the statements whose rows differ from the default's (sorted, exact)."""
    from ops_warehouse.analytics.marts import each_mart_once

    out = {}
    wh = _open(work)
    with each_mart_once(wh, handles=1):  # (the capture sees one handle's statements)
        stmts = _report_statements(wh, work)
        variants = {"default": "", **{x: x for x in settings}}
        plan = {v: {} for v in variants}
        best = {v: {} for v in variants}
        rows = {v: {} for v in variants}
        refused = {}
        order = list(variants)
        for i in range(rounds):
            for table, sql, params in stmts:
                # the variants one after the other on each statement (what the machine's load does to one
                # statement's figures it does to every variant's), each round starting from the next one (none
                # always first, meeting the caches colder than the others)
                for v in order[i % len(order):] + order[:i % len(order)]:
                    clause = variants[v]
                    if v in refused:
                        continue
                    tail = f" SETTINGS {clause}" if clause else ""
                    try:
                        c = time.process_time()
                        wh.query_rows(f"EXPLAIN PLAN SELECT * FROM ({sql})" + tail, params)
                        plan[v][table] = min(time.process_time() - c, plan[v].get(table, float("inf")))
                        c = time.process_time()
                        r = wh.query_rows(f"SELECT * FROM ({sql})" + tail, params)
                    except Exception as e:  # a setting this engine refuses (e.g. enable_analyzer = 0 on chDB 26)
                        refused[v] = str(e).strip().splitlines()[0][:200]
                        continue
                    best[v][table] = min(time.process_time() - c, best[v].get(table, float("inf")))
                    rows[v][table] = sorted(map(repr, r))
        for v in variants:
            if v in refused:
                out[v] = {"error": refused[v]}
                continue
            core = [t for t in best[v] if t.rsplit("_", 1)[0].removeprefix("_mart_") in CORE]
            out[v] = {"cpu_s": round(sum(best[v].values()), 3), "plan_cpu_s": round(sum(plan[v].values()), 3),
                      "core_cpu_s": round(sum(best[v][t] for t in core), 3),
                      "core_plan_cpu_s": round(sum(plan[v][t] for t in core), 3),
                      "rows_differ": [t for t in rows["default"] if rows[v].get(t) != rows["default"][t]],
                      "each": {t: [round(plan[v][t], 4), round(best[v][t], 4)] for t in best[v]}}
    return {"statements": len(stmts), "rounds": rounds, "variants": out}


def child_two_handles(work: Path, rounds: int = 3) -> dict:
    """Could the report's independent marts run two at a time? clickhouse-connect serializes the calls on one
    client (a lock per chDB handle), and a temporary table belongs to its handle, so a second handle on the
    same path is the only way: the report's statements that read no other mart's table, run one after the
    other on the report's handle, then split between it and a second handle in two threads (chDB releases
    the GIL), interleaved, ``rounds`` rounds: wall and CPU seconds, and the statements whose rows differ."""
    import threading

    import clickhouse_connect
    from ops_warehouse.analytics.marts import each_mart_once

    passes = []
    wh = _open(work)
    with each_mart_once(wh, handles=1):  # (the capture sees one handle's statements)
        stmts = _report_statements(wh, work)
        leaves = [(t, s, p) for t, s, p in stmts if "_mart_" not in s.replace("_mart_row", "")]
        second = clickhouse_connect.get_client(dsn=f"chdb://{work / 'warehouse'}")  # as the warehouse opens its own

        def run(client, items, out):
            for t, s, p in items:
                out[t] = sorted(map(repr, client.query(f"SELECT * FROM ({s})", parameters=p).result_rows))

        for _ in range(rounds):
            one, two = {}, {}
            t, c = time.perf_counter(), time.process_time()
            run(wh.client, leaves, one)
            serial = (round(time.perf_counter() - t, 3), round(time.process_time() - c, 3))
            t, c = time.perf_counter(), time.process_time()
            threads = [threading.Thread(target=run, args=(cl, leaves[k::2], two))
                       for k, cl in enumerate((wh.client, second))]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            passes.append({"one_handle_s_cpu": serial,
                           "two_handles_s_cpu": (round(time.perf_counter() - t, 3), round(time.process_time() - c, 3)),
                           "rows_differ": [k for k in one if one[k] != two[k]]})
        second.close()
    return {"independent_statements": len(leaves), "of": len(stmts), "passes": passes}


def child_handles(work: Path, rounds: int = 5) -> dict:
    """The report's statistics with its marts on one engine handle, then scheduled over two (what it ships:
    analytics/marts.py evaluate_ahead), interleaved, ``rounds`` rounds in one child: wall and CPU seconds
    (best and median) of each, and whether the report's JSON (generated_at blanked) is the same byte for byte
    in every run."""
    import statistics

    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.marts import each_mart_once
    from ops_warehouse.analytics.monthly import monthly_report
    from ops_warehouse.reports.monthly_render import to_json

    wh = _open(work)
    cluster = (work / "cluster").read_text()
    runs: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    texts = set()
    for _ in range(rounds):
        for handles in (1, 2):
            t, c = time.perf_counter(), time.process_time()
            with each_mart_once(wh, handles=handles):
                r = monthly_report(Connection(wh), month=START.date(), cluster=cluster)
            runs[handles].append((time.perf_counter() - t, time.process_time() - c))
            texts.add(to_json({**r, "generated_at": None}))
    out = {}
    for handles, got in runs.items():
        wall, cpu = [g[0] for g in got], [g[1] for g in got]
        out[f"handles_{handles}"] = {"best_s": round(min(wall), 3), "median_s": round(statistics.median(wall), 3),
                                     "best_cpu_s": round(min(cpu), 3), "median_cpu_s": round(statistics.median(cpu), 3)}
    return {**out, "rounds": rounds, "same_json_every_run": len(texts) == 1}


def child_settings_ab(work: Path, rounds: int = 5) -> dict:
    """The mart statements' engine settings (analytics/marts.py SETTINGS) as shipped against none, in one child,
    ``rounds`` rounds, the two sides in turn (ABBA: each side first in every other round, so that neither
    always meets the caches the other warmed): the core six (run_mart, as child_product runs them) and the
    report's statistics (monthly_report, as shipped: two handles), wall and CPU seconds, best and median, and
    whether each side's report JSON (generated_at blanked) and core rows are the same byte for byte."""
    import statistics

    from ops_warehouse.analytics import marts
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.analytics.monthly import monthly_report
    from ops_warehouse.reports.monthly_render import to_json

    wh = _open(work)
    cluster = (work / "cluster").read_text()
    shipped = dict(marts.SETTINGS)
    sides = {"shipped": shipped, "none": {}}
    got = {k: {"core": [], "report": []} for k in sides}
    texts = {k: set() for k in sides}
    for i in range(rounds):
        for side in (("shipped", "none") if i % 2 == 0 else ("none", "shipped")):
            marts.SETTINGS = sides[side]
            t, c = time.perf_counter(), time.process_time()
            core = [run_mart(wh, name, cluster=cluster, window=(W0, W1)) for name in CORE]
            got[side]["core"].append((time.perf_counter() - t, time.process_time() - c))
            t, c = time.perf_counter(), time.process_time()
            r = monthly_report(Connection(wh), month=START.date(), cluster=cluster)
            got[side]["report"].append((time.perf_counter() - t, time.process_time() - c))
            texts[side].add(to_json({**r, "generated_at": None}) + "".join(map(repr, (df.rows() for df in core))))
    marts.SETTINGS = shipped
    out = {"settings": shipped, "rounds": rounds,
           "same_figures": len(texts["shipped"] | texts["none"]) == 1}
    for side, parts in got.items():
        for part, runs in parts.items():
            wall, cpu = [g[0] for g in runs], [g[1] for g in runs]
            out[f"{part}_{side}"] = {"best_s": round(min(wall), 3), "median_s": round(statistics.median(wall), 3),
                                     "best_cpu_s": round(min(cpu), 3),
                                     "median_cpu_s": round(statistics.median(cpu), 3)}
    return out


DUCK = """
CREATE MACRO ov(a0, a1, b0, b1) AS greatest(0, epoch(least(a1, b1)) - epoch(greatest(a0, b0)));
CREATE TEMP TABLE hours AS SELECT unnest(generate_series(TIMESTAMPTZ '{w0}', TIMESTAMPTZ '{w1}' - INTERVAL 1 HOUR,
                                                         INTERVAL 1 HOUR)) AS hour;
CREATE TEMP TABLE runs AS SELECT * FROM '{pq}/runs.parquet' WHERE NOT never_ran AND gpus > 0 AND len(nodes) > 0;
CREATE TEMP TABLE inv AS SELECT * FROM '{pq}/inventory.parquet';
-- capacity and allocation by GPU model, on the hourly node grid
CREATE TEMP TABLE grid AS SELECT i.node, i.gpu_model, h.hour,
    i.gpus * ov(h.hour, h.hour + INTERVAL 1 HOUR, i.in_service_ts, TIMESTAMPTZ '2106-01-01') AS cap_s
    FROM inv i, hours h;
CREATE TEMP TABLE alloc AS SELECT node, hour, sum(gpus / len(nodes) * ov(hour, hour + INTERVAL 1 HOUR,
    usage_start_ts, usage_end_ts)) AS gpu_s, project
    FROM (SELECT node, nodes, gpus, usage_start_ts, usage_end_ts, project,
                 unnest(generate_series(date_trunc('hour', greatest(usage_start_ts, TIMESTAMPTZ '{w0}')),
                                        least(usage_end_ts, TIMESTAMPTZ '{w1}') - INTERVAL 1 MICROSECOND,
                                        INTERVAL 1 HOUR)) AS hour
          FROM (SELECT *, unnest(nodes) AS node FROM runs WHERE usage_start_ts < '{w1}' AND usage_end_ts > '{w0}'))
    GROUP BY ALL;
SELECT g.gpu_model, sum(g.cap_s) / 3600 AS capacity_gpu_h, sum(coalesce(a.gpu_s, 0)) / 3600 AS allocated_gpu_h
    FROM grid g LEFT JOIN (SELECT node, hour, sum(gpu_s) AS gpu_s FROM alloc GROUP BY ALL) a USING (node, hour)
    GROUP BY ALL;
SELECT project, sum(gpu_s) / 3600 FROM alloc GROUP BY ALL;
CREATE TEMP TABLE cls AS SELECT *, CASE WHEN gpus = 1 THEN '1' WHEN gpus <= 8 THEN '2-8' WHEN gpus <= 64 THEN '9-64'
    WHEN gpus <= 256 THEN '65-256' WHEN gpus <= 1024 THEN '257-1024' ELSE '>1024' END AS size_class FROM runs;
SELECT size_class, count(*) FILTER (WHERE NOT is_superseded AND start_ts >= '{w0}' AND start_ts < '{w1}') AS jobs,
    sum(gpus * ov(usage_start_ts, usage_end_ts, TIMESTAMPTZ '{w0}', TIMESTAMPTZ '{w1}')) / 3600 AS gpu_h
    FROM cls WHERE usage_start_ts < '{w1}' AND usage_end_ts > '{w0}' GROUP BY ALL;
SELECT size_class, quantile_disc(wall_s, [0.5, 0.9, 0.99]) FROM cls
    WHERE is_final AND NOT is_superseded AND end_ts >= '{w0}' AND end_ts < '{w1}' GROUP BY ALL;
SELECT state, count(*), sum(gpus * ov(usage_start_ts, usage_end_ts, TIMESTAMPTZ '{w0}', TIMESTAMPTZ '{w1}')) / 3600
    FROM runs WHERE is_final AND end_ts >= '{w0}' AND end_ts < '{w1}' GROUP BY ALL;
SELECT node, gpu, sum(gpu_util_pct_avg * covered_s) / sum(covered_s) FROM '{pq}/gpu_hour.parquet'
    WHERE hour >= '{w0}' AND hour < '{w1}' GROUP BY ALL;
"""


def child_duckdb(work: Path) -> dict:
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    t, c = time.perf_counter(), time.process_time()
    out = {}
    for stmt in DUCK.format(pq=work / "parquet", w0=W0.isoformat(), w1=W1.isoformat()).split(";"):
        if stmt.strip():
            rows = con.execute(stmt).fetchall()
            if stmt.lstrip().startswith(("SELECT g.gpu_model",)):
                out["allocated_gpu_h"] = sum(r[2] for r in rows)
                out["capacity_gpu_h"] = sum(r[1] for r in rows)
    return {"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - c, "peak_rss_mb": peak_rss_mb(), **out}


def child_pandas(work: Path) -> dict:
    import numpy as np
    import pandas as pd

    pq = work / "parquet"
    t = time.perf_counter()
    w0, w1 = pd.Timestamp(W0), pd.Timestamp(W1)
    runs = pd.read_parquet(pq / "runs.parquet")
    for c in ("submit_ts", "start_ts", "end_ts", "usage_start_ts", "usage_end_ts"):
        runs[c] = pd.to_datetime(runs[c], utc=True)
    runs = runs[(runs.never_ran == 0) & (runs.gpus > 0) & (runs.nodes.str.len() > 0)]
    inv = pd.read_parquet(pq / "inventory.parquet")
    inv["in_service_ts"] = pd.to_datetime(inv["in_service_ts"], utc=True)
    hours = pd.date_range(w0, w1, freq="h", inclusive="left")
    # capacity on the hourly grid
    grid = inv[["node", "gpu_model", "gpus", "in_service_ts"]].merge(pd.DataFrame({"hour": hours}), how="cross")
    start = np.maximum(grid["hour"], grid["in_service_ts"])
    grid["cap_s"] = grid["gpus"] * np.clip((grid["hour"] + pd.Timedelta(hours=1) - start).dt.total_seconds(), 0, None)
    # allocation per node-hour: runs × nodes × hours touched
    r = runs[(runs.usage_start_ts < w1) & (runs.usage_end_ts > w0)].copy()
    r["s"], r["e"] = r.usage_start_ts.clip(lower=w0), r.usage_end_ts.clip(upper=w1)
    r["gpn"] = r.gpus / r.nodes.str.len()
    r = r.explode("nodes").rename(columns={"nodes": "node"})
    r = r.reset_index(drop=True)
    r["first"] = r.s.dt.floor("h")
    n_h = ((r.e - pd.Timedelta(seconds=1)).dt.floor("h") - r["first"]) // pd.Timedelta(hours=1) + 1
    r = r.loc[r.index.repeat(n_h)]
    r["hour"] = r["first"] + pd.to_timedelta(r.groupby(level=0).cumcount(), unit="h")
    lo = np.maximum(r.hour, r.s)
    hi = np.minimum(r.hour + pd.Timedelta(hours=1), r.e)
    r["gpu_s"] = r.gpn * np.clip((hi - lo).dt.total_seconds(), 0, None)
    alloc = r.groupby(["node", "hour"], as_index=False)["gpu_s"].sum()
    g = grid.merge(alloc, on=["node", "hour"], how="left").fillna({"gpu_s": 0})
    by_model = g.groupby("gpu_model")[["cap_s", "gpu_s"]].sum() / 3600
    r.groupby("project")["gpu_s"].sum()
    # job sizes, run times, end states
    runs["size_class"] = pd.cut(runs.gpus, [0, 1, 8, 64, 256, 1024, np.inf],
                                labels=["1", "2-8", "9-64", "65-256", "257-1024", ">1024"])
    ov = (runs.usage_end_ts.clip(upper=w1) - runs.usage_start_ts.clip(lower=w0)).dt.total_seconds().clip(lower=0)
    runs["gpu_h"] = runs.gpus * ov / 3600
    started = (~runs.is_superseded.astype(bool)) & (runs.start_ts >= w0) & (runs.start_ts < w1)
    runs[started].groupby("size_class", observed=True).size()
    runs.groupby("size_class", observed=True)["gpu_h"].sum()
    ended = runs[(runs.is_final == 1) & (runs.end_ts >= w0) & (runs.end_ts < w1)]
    ended[~ended.is_superseded.astype(bool)].groupby("size_class", observed=True)["wall_s"].quantile(
        [0.5, 0.9, 0.99], interpolation="lower")
    ended.groupby("state").agg(runs=("job_id", "size"), gpu_h=("gpu_h", "sum"))
    gh = pd.read_parquet(pq / "gpu_hour.parquet")
    gh["w"] = gh.gpu_util_pct_avg * gh.covered_s
    gh.groupby(["node", "gpu"])[["w", "covered_s"]].sum()
    return {"seconds": time.perf_counter() - t, "peak_rss_mb": peak_rss_mb(),
            "allocated_gpu_h": float(by_model["gpu_s"].sum()), "capacity_gpu_h": float(by_model["cap_s"].sum())}


def run(kind: str, work: Path, repeat: int = 1) -> dict:
    """The fastest of ``repeat`` runs of a child (each a fresh process)."""
    best = None
    for _ in range(repeat):
        p = subprocess.run([sys.executable, __file__, "--child", kind, "--workdir", str(work)],
                           capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(p.stderr[-3000:])
        got = json.loads(p.stdout.strip().splitlines()[-1])
        if best is None:
            best = got
        else:  # the product's parts each at their fastest
            for k in ("seconds", "stats_s", "charts_s", "core_s", "core_cpu_s", "stats_cpu_s", "cpu_s"):
                if k in got:
                    best[k] = min(best[k], got[k])
            best["peak_rss_mb"] = max(best["peak_rss_mb"], got["peak_rss_mb"])
    return best


def ab_mart(work: Path, name: str, old_file: str, rounds: int, extra: dict | None = None) -> dict:
    """Mart ``name`` as shipped and as ``old_file`` writes it (its whole text, header included), one after the
    other in each round, over this month and the last: best seconds and the rows the engine read
    (system.events SelectedRows) of each, and whether both gave the same rows. ``extra``: parameters beside
    the window's (a project, or runs_limit as largest_jobs passes it to job_efficiency)."""
    from ops_warehouse.analytics import marts
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{work / 'warehouse'}")
    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    cluster = (work / "cluster").read_text()
    # the old text through the loader's own inlining, read from its file (the shipped one is never touched)
    from ops_warehouse.sqlfiles import _inline, split_statements

    old = split_statements(Path(old_file).read_text())[0].rstrip().rstrip(";")
    texts = {"new": marts.sql_query(f"marts/{name}.sql"), "old": _inline(old, f"marts/{name}.sql", ())}

    def rows_read() -> int:
        return wh.query_rows("SELECT value FROM system.events WHERE event = 'SelectedRows'")[0][0]

    best = {k: float("inf") for k in texts}
    # CPU seconds of this process, the engine's threads included (chDB runs in it): on the shared machine the
    # wall seconds swing 2x with the load, the CPU a query burns much less
    cpu = {k: float("inf") for k in texts}
    read, got = {}, {}
    prev = datetime(2026, 9, 1, tzinfo=timezone.utc)
    for _ in range(rounds):
        for k, sql in texts.items():
            t, c, r0, out = time.perf_counter(), time.process_time(), rows_read(), []
            for w in ((prev, W0), (W0, W1)):
                p = marts._params(wh, cluster, w, (extra or {}).get("project", ""), extra or {})
                out.append(wh.query_rows(sql, marts._bound(sql, p)))
            best[k] = min(best[k], time.perf_counter() - t)
            cpu[k] = min(cpu[k], time.process_time() - c)
            read[k], got[k] = rows_read() - r0, repr(out)
    return {"mart": name, "old_s": best["old"], "new_s": best["new"], "old_cpu_s": cpu["old"],
            "new_cpu_s": cpu["new"], "old_rows_read": read["old"], "new_rows_read": read["new"],
            "same_rows": got["old"] == got["new"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--days", type=int, default=31)
    ap.add_argument("--workdir", type=Path, help="where the month is prepared and kept (default: "
                    "~/.cache/ops-warehouse/bench-monthly-n<nodes>-d<days>-<checkout>)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each child; the fastest counts")
    ap.add_argument("--ab", metavar="MART=OLD.sql",
                    help="only this: the mart's shipped SQL against an older text of it (a file), interleaved in "
                         "one child over the prepared month, --repeat rounds, best of each; rows read and seconds")
    ap.add_argument("--profile", action="store_true",
                    help="only this: where the report's time goes (each mart's seconds and rows read, each chart, "
                         "each format), in one fresh child over the prepared month; saves report.json in the workdir")
    ap.add_argument("--ab-param", action="append", default=[], metavar="NAME=VALUE",
                    help="with --ab: a parameter of the mart (project=A, runs_limit=15); integers as integers")
    ap.add_argument("--statements", nargs="*", metavar="SETTING",
                    help="only this: the report's mart statements re-run with each setting ('name = value', or "
                         "several comma-separated) and without, interleaved, --repeat rounds (at least 3) in one "
                         "child: CPU seconds of the planning and the run, and whether the rows stay the same")
    ap.add_argument("--two-handles", action="store_true",
                    help="only this: the report's independent mart statements on one engine handle, then split "
                         "over two handles in two threads, interleaved, in one child")
    ap.add_argument("--handles", action="store_true",
                    help="only this: the report's statistics with its marts on one handle and over two (as shipped), "
                         "interleaved, --repeat rounds (at least 3) in one child; and whether the JSON stays the same")
    ap.add_argument("--settings-ab", action="store_true",
                    help="only this: the mart statements' engine settings (analytics/marts.py SETTINGS) as shipped "
                         "against none, the core six and the report's statistics, --repeat rounds (at least 4) in "
                         "one child, the sides in turn; and whether the figures stay the same")
    ap.add_argument("--child")
    a = ap.parse_args()
    a.workdir = a.workdir or month_workdir(a.nodes, a.days)
    if a.profile:
        print(json.dumps(run("profile", a.workdir), indent=1))
        return
    if a.statements is not None:
        print(json.dumps(child_statements(a.workdir, a.statements, max(a.repeat, 3)), indent=1))
        return
    if a.handles:
        print(json.dumps(child_handles(a.workdir, max(a.repeat, 3)), indent=1))
        return
    if a.settings_ab:
        print(json.dumps(child_settings_ab(a.workdir, max(a.repeat, 4)), indent=1))
        return
    if a.two_handles:
        print(json.dumps(child_two_handles(a.workdir), indent=1))
        return
    if a.ab:
        extra = {k: int(v) if v.isdigit() else v for k, v in (x.split("=", 1) for x in a.ab_param)}
        print(json.dumps(ab_mart(a.workdir, *a.ab.split("=", 1), max(a.repeat, 3), extra)))
        return
    if a.child:
        fn = {"profile": child_profile, "product": child_product, "duckdb": child_duckdb, "pandas": child_pandas}[a.child]
        print(json.dumps(fn(a.workdir)))
        return
    if not (a.workdir / "cluster").is_file():
        a.workdir.mkdir(parents=True, exist_ok=True)
        prepare(a.workdir, a.nodes, a.days)
    ensure_grains(a.workdir)
    prod, duck, pand = (run("product", a.workdir, a.repeat), run("duckdb", a.workdir, a.repeat),
                        run("pandas", a.workdir, a.repeat))
    rest = prod["seconds"] - prod["stats_s"] - prod["charts_s"]
    print(f"product monthly --cluster: {prod['seconds']:.2f} s for the whole report (its 19 marts over this month "
          f"and the last {prod['stats_s']:.2f} s, 6 charts {prod['charts_s']:.2f} s, md/html/json {rest:.2f} s), "
          f"peak RSS {prod['peak_rss_mb']:,.0f} MB; the core statistics alone (6 marts): {prod['core_s']:.2f} s")
    for name, b in (("DuckDB", duck), ("pandas", pand)):
        print(f"{name} core statistics over Parquet: {b['seconds']:.2f} s, peak RSS {b['peak_rss_mb']:,.0f} MB; "
              f"ratio {name}/product on the core statistics {b['seconds'] / prod['core_s']:.2f} "
              f"(above 1: the product is faster); {name} core / product whole report {b['seconds'] / prod['seconds']:.2f}")
        for k in ("allocated_gpu_h", "capacity_gpu_h"):
            if abs(b[k] - prod[k]) > 1e-6 * max(1, prod[k]):
                print(f"  MISMATCH {k}: {name} {b[k]:,.3f} vs product {prod[k]:,.3f}")
    print(f"allocated {prod['allocated_gpu_h']:,.0f} of {prod['capacity_gpu_h']:,.0f} GPU-hours (all three agree "
          "unless a MISMATCH line says otherwise)")
    # for bench/run_all.py: ratio = baseline time ÷ product time on the core statistics (above 1: faster)
    print(f"RESULT monthly_core product_s={prod['core_s']:.3f} duckdb_s={duck['seconds']:.3f} "
          f"ratio={duck['seconds'] / prod['core_s']:.2f} goal=>=1.5 duckdb_peak_mb={duck['peak_rss_mb']:.0f}")
    print(f"RESULT monthly_core_pandas product_s={prod['core_s']:.3f} pandas_s={pand['seconds']:.3f} "
          f"ratio={pand['seconds'] / prod['core_s']:.2f} goal=>=1.5 pandas_peak_mb={pand['peak_rss_mb']:.0f}")
    # CPU seconds of each child (its engine's threads included): what the shared machine's load changes least
    print(f"RESULT monthly_core_cpu product_cpu_s={prod['core_cpu_s']:.3f} duckdb_cpu_s={duck['cpu_s']:.3f} "
          f"ratio={duck['cpu_s'] / prod['core_cpu_s']:.2f} statistics_cpu_s={prod['stats_cpu_s']:.2f}")
    print(f"RESULT monthly_report whole_s={prod['seconds']:.2f} stats_s={prod['stats_s']:.2f} "
          f"charts_s={prod['charts_s']:.2f} goal=<=1.5s peak_mb={prod['peak_rss_mb']:.0f}")


if __name__ == "__main__":
    main()
