"""Benchmark: telemetry into the warehouse, against the engine reading the same Parquet itself.

    /work/venv/bin/python bench/bench_telemetry.py [--days 31] [--nodes 128] [--workdir DIR] [--keep]
    /work/venv/bin/python bench/bench_telemetry.py --written-once --days 2 --nodes 32

1. generates the period's exporter Parquet at 60 s for the cluster (1,024 GPUs on 128 nodes by default);
2. product: `load_parquet_dir` (counters to per-step amounts, node names, Xid events, hourly rollups) into a
   fresh embedded warehouse, in a child process: rows/s, peak RSS (the child's own: VmHWM, read in it);
3. ceiling: the engine inserting the same Parquet files (dcgm, nic, lustre, ipmi: all the product reads)
   straight into equivalent tables (`INSERT … SELECT … FROM file('dcgm/*.parquet')`, columns renamed, no
   counter work), in a child;
4. OpenMetrics: the product loading the first 2-hour OpenMetrics window of the first day (``--openmetrics-only
   --om-step 15``: only that, a window at 15 s scrapes, beside the engine reading the same file's lines);
``--written-once`` (issue 50 item 2, round 4), in one child instead of 2-5: the load as it is with each
statement's CPU, the same files written once (counters cumulative, no stage, window or pivot) and the engine's
bare insert, then the hourly energy and NIC bytes stepped at read time against the stored steps, compared.
5. Prometheus (when installed): promtool backfill of the first day, then `load_prometheus` for that day and
   the server answering the same requests alone (bench/bench_prometheus.py).
``--rounds N`` (issue 50 item 2, round 7): only the Parquet load and the engine's bare insert, alternated N times,
each in a fresh child, the best of each by CPU and by wall; with ``--before DIR`` also the load of another
tree (``uv pip install --no-deps --target DIR <tree>``: that tree's code and SQL first on PYTHONPATH; or another
checkout's Python, ``--before /work/main/.venv/bin/python``) in the same rounds, before and after in one command:

    .venv/bin/python bench/bench_telemetry.py --days 2 --nodes 32 --rounds 3 --before /tmp/main-site
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from peak_rss import peak_rss_mb  # bench/peak_rss.py (benches run as scripts from bench/)

START = datetime(2026, 10, 1, tzinfo=timezone.utc)


def child(kind: str, data: str, wh: str, days: int) -> dict:
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    w = open_warehouse(Config(dsn=f"chdb://{wh}"))
    d0, d1 = START.date(), START.date() + timedelta(days=days - 1)
    t = time.perf_counter()
    cpu = time.process_time()  # the engine's threads are this process's: its CPU time, beside the wall time
    if kind == "product":
        from ops_warehouse.etl import telemetry_load

        # the grains' refresh timed apart: issue 50 asks >= 0.8 of the engine for the load, >= 0.5 with it
        refresh = telemetry_load.refresh_hourly
        refresh_s = [0.0, 0.0]  # wall, CPU

        def timed_refresh(*args, **kw):
            t_r, c_r = time.perf_counter(), time.process_time()
            try:
                return refresh(*args, **kw)
            finally:
                refresh_s[0] += time.perf_counter() - t_r
                refresh_s[1] += time.process_time() - c_r

        telemetry_load.refresh_hourly = timed_refresh
        c = telemetry_load.load_parquet_dir(w, data, d0, d1, cluster="bench")
        seconds = time.perf_counter() - t
        return {"seconds": seconds, "load_s": seconds - refresh_s[0], "refresh_s": refresh_s[0],
                "cpu_s": time.process_time() - cpu, "load_cpu_s": time.process_time() - cpu - refresh_s[1],
                "rows": c["gpu_rows"], "peak_rss_mb": peak_rss_mb()}
    elif kind == "ceiling":
        rows = _ceiling(w, data)
        return {"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu, "rows": rows,
                "peak_rss_mb": peak_rss_mb()}
    elif kind == "openmetrics":
        from ops_warehouse.etl import openmetrics_engine
        from ops_warehouse.etl.openmetrics_source import load_text_files

        # the shared insert path's share of the load (etl/telemetry_insert.py: another part of issue 50)
        insert, spent = openmetrics_engine.insert_window, {"insert_s": 0.0, "insert_cpu_s": 0.0}

        def timed_insert(*args, **kw):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return insert(*args, **kw)
            finally:
                spent["insert_s"] += time.perf_counter() - t0
                spent["insert_cpu_s"] += time.process_time() - c0

        openmetrics_engine.insert_window = timed_insert
        first = sorted((Path(data) / "telemetry" / "openmetrics").glob("*.om"))[0]
        c = load_text_files(w, [first], d0, d0, cluster="bench")
        return {"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu, "rows": c["gpu_rows"],
                "peak_rss_mb": peak_rss_mb(), **spent}
    elif kind == "om-engine":
        # the ceiling of the text load: the engine reading every line of the same file, nothing else
        first = sorted((Path(data) / "telemetry" / "openmetrics").glob("*.om"))[0]
        rows, _ = w.query_rows("SELECT count(), sum(length(line)) FROM file({p:String}, LineAsString)",
                               {"p": str(first.resolve())})[0]
        return {"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu, "rows": rows,
                "peak_rss_mb": peak_rss_mb()}
    elif kind == "once":
        return written_once(w, data, days)
    else:  # prometheus: bench/bench_prometheus.py, on this run's day
        from bench_prometheus import measure

        return measure(sorted((Path(data) / "telemetry" / "openmetrics").glob("*.om")), Path(wh).parent, w)
    return {"seconds": time.perf_counter() - t, "rows": rows, "peak_rss_mb": peak_rss_mb()}


def _ceiling(w, data: str) -> int:
    """The engine inserting the period's files (dcgm, nic, lustre, ipmi) straight into equivalent tables, no
    counter work: the GPU rows it wrote."""
    w.command("CREATE TABLE ceiling (node LowCardinality(String), gpu UInt16, ts DateTime('UTC'), "
              "model_name LowCardinality(String), uuid String, gpu_util_pct Nullable(Float32), "
              "sm_active Nullable(Float32), gr_engine_active Nullable(Float32), tensor_active Nullable(Float32), "
              "dram_active Nullable(Float32), fb_used_mib Nullable(Float32), fb_free_mib Nullable(Float32), "
              "power_w Nullable(Float32), energy_mj Nullable(Float64), temp_c Nullable(Float32), "
              "sm_clock_mhz Nullable(Float32), throttle_reasons Nullable(UInt32), xid_last Nullable(UInt32)) "
              "ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(ts) ORDER BY (node, gpu, ts)")
    w.client.command(
        "INSERT INTO ceiling SELECT Hostname, toUInt16(gpu), timestamp, modelName, UUID, DCGM_FI_DEV_GPU_UTIL, "
        "DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, "
        "DCGM_FI_PROF_DRAM_ACTIVE, DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_POWER_USAGE, "
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_SM_CLOCK, "
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, DCGM_FI_DEV_XID_ERRORS "
        f"FROM file('{Path(data).resolve()}/telemetry/dcgm/*.parquet', Parquet)",
        settings={"optimize_on_insert": 0})
    # the node-level families too: the product reads them, so the engine reads them here (no counter work)
    w.command("CREATE TABLE ceiling_nic (node String, device String, port String, ts DateTime('UTC'), "
              "rx Nullable(Float64), tx Nullable(Float64)) ENGINE = ReplacingMergeTree "
              "PARTITION BY toYYYYMM(ts) ORDER BY (node, device, ts)")
    w.command("CREATE TABLE ceiling_node (node String, ts DateTime('UTC'), lustre_read Nullable(Float64), "
              "lustre_write Nullable(Float64), power Nullable(Float64)) ENGINE = ReplacingMergeTree "
              "PARTITION BY toYYYYMM(ts) ORDER BY (node, ts)")
    root = Path(data).resolve() / "telemetry"
    for sql in (
            f"INSERT INTO ceiling_nic SELECT instance, device, port, timestamp, "
            f"node_infiniband_port_data_received_bytes_total, node_infiniband_port_data_transmitted_bytes_total "
            f"FROM file('{root}/nic/*.parquet', Parquet)",
            f"INSERT INTO ceiling_node (node, ts, lustre_read, lustre_write) SELECT instance, timestamp, "
            f"lustre_read_bytes_total, lustre_write_bytes_total FROM file('{root}/lustre/*.parquet', Parquet)",
            f"INSERT INTO ceiling_node (node, ts, power) SELECT instance, timestamp, "
            f"ipmi_dcmi_power_consumption_watts FROM file('{root}/ipmi/*.parquet', Parquet)"):
        w.client.command(sql, settings={"optimize_on_insert": 0})
    return w.query_rows("SELECT count() FROM ceiling")[0][0]


# Issue 50 item 2, round 4: the samples written once. The GPU and node files straight into tables of the sample
# tables' shape, with the per-row checks the load applies (sample_value_ok, slurm_node) and the counters left
# cumulative: no stage, no window, no pivot; the steps then taken where the rows are read, in the table's order.
_ONCE_GPU = {  # gpu_sample's column -> the dcgm file's metric and scale
    "gpu_util_pct": ("DCGM_FI_DEV_GPU_UTIL", 1), "sm_active": ("DCGM_FI_PROF_SM_ACTIVE", 1),
    "gr_engine_active": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1), "tensor_active": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1),
    "dram_active": ("DCGM_FI_PROF_DRAM_ACTIVE", 1), "fb_used_mib": ("DCGM_FI_DEV_FB_USED", 1),
    "fb_free_mib": ("DCGM_FI_DEV_FB_FREE", 1), "power_w": ("DCGM_FI_DEV_POWER_USAGE", 1),
    "energy_j": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0.001), "temp_c": ("DCGM_FI_DEV_GPU_TEMP", 1),
    "sm_clock_mhz": ("DCGM_FI_DEV_SM_CLOCK", 1), "throttle_reasons": ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 1),
    "xid_last": ("DCGM_FI_DEV_XID_ERRORS", 1)}


def _checked(column: str, metric: str, scale: float, model: str = "''", where: str = "") -> str:
    v = f"CAST({metric} AS Nullable(Float64))" + (f" * {scale}" if scale != 1 else "")
    if where:
        v = f"if({where}, {v}, NULL)"
    return f"if(sample_value_ok('{column}', {v}, {model}), {v}, NULL)"


def _once_statements(root: Path, day: str) -> list[str]:
    gpu = ", ".join(_checked(c, m, s, "modelName") for c, (m, s) in _ONCE_GPU.items())
    f = f"file('{root}/{{}}/{day}.parquet', Parquet)"
    node = "slurm_node(ifNull(toString(instance), ''))"
    nic = "if(ifNull(port, '') IN ('', '1'), device, concat(device, ':', port))"
    client = "component = 'client'"
    return [
        f"INSERT INTO once_gpu (cluster, node, gpu, ts, step_s, model_name, uuid, hpc_job, {', '.join(_ONCE_GPU)}, "
        f"source) SELECT 'bench', slurm_node(ifNull(toString(Hostname), '')), toUInt16(gpu), "
        f"toDateTime(timestamp, 'UTC'), 60, modelName, UUID, ifNull(hpc_job, ''), {gpu}, 'once' "
        f"FROM {f.format('dcgm')}",
        f"INSERT INTO once_node (node, series, device, ts, nic_rx_bytes, nic_tx_bytes) SELECT {node}, 'nic', {nic}, "
        f"toDateTime(timestamp, 'UTC'), "
        f"{_checked('nic_rx_bytes', 'node_infiniband_port_data_received_bytes_total', 1)}, "
        f"{_checked('nic_tx_bytes', 'node_infiniband_port_data_transmitted_bytes_total', 1)} FROM {f.format('nic')}",
        f"INSERT INTO once_node (node, series, device, ts, lustre_read_bytes, lustre_write_bytes) SELECT {node}, "
        f"concat('lustre|', ifNull(component, ''), '|', ifNull(target, '')), '', toDateTime(timestamp, 'UTC'), "
        f"{_checked('lustre_read_bytes', 'lustre_read_bytes_total', 1, where=client)}, "
        f"{_checked('lustre_write_bytes', 'lustre_write_bytes_total', 1, where=client)} FROM {f.format('lustre')}",
        f"INSERT INTO once_node (node, series, device, ts, node_power_w) SELECT {node}, 'ipmi', '', "
        f"toDateTime(timestamp, 'UTC'), {_checked('node_power_w', 'ipmi_dcmi_power_consumption_watts', 1)} "
        f"FROM {f.format('ipmi')}"]


# the hourly sums of the counters as the rollups read them: from the stored steps (now), and from cumulative
# values stepped by a window over the series in the table's order (the redesign)
_ENERGY_REJECTED = (
    "SELECT count() FROM (SELECT ts, energy_j AS v, anyLast(energy_j) OVER before AS prev, dateDiff('second', "
    "anyLast(if(energy_j IS NULL, NULL, ts)) OVER before, ts) AS dt_s, gpu_max_power_w(model_name) AS max_w "
    "FROM ({{input}}) WINDOW before AS (PARTITION BY node, gpu ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND "
    "1 PRECEDING)) WHERE ts >= {from_ts:DateTime('UTC')} AND v IS NOT NULL AND prev IS NOT NULL "
    "AND counter_step_bounded(v, prev, dt_s, max_w) IS NULL")
_GPU_HOURLY_NOW = ("SELECT node, gpu, toStartOfHour(ts) AS h, sum(energy_j) AS e FROM gpu_sample FINAL "
                   "GROUP BY node, gpu, h")
_NIC_HOURLY_NOW = ("SELECT node, toStartOfHour(ts) AS h, sum(toUInt64(arraySum(nic_rx_bytes))) AS rx FROM node_sample "
                   "FINAL GROUP BY node, h")
_GPU_STEPS = (
    "SELECT node, gpu, toStartOfHour(ts) AS h, sum(e) AS e FROM (SELECT node, gpu, ts, "
    "counter_step_bounded(energy_j, anyLast(energy_j) OVER before, dateDiff('second', anyLast(if(energy_j IS NULL, "
    "NULL, ts)) OVER before, ts), gpu_max_power_w(model_name)) AS e FROM once_gpu FINAL WINDOW before AS "
    "(PARTITION BY cluster, node, gpu ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)) "
    "GROUP BY node, gpu, h")
_NIC_STEPS = (
    "SELECT node, toStartOfHour(ts) AS h, sum(toUInt64(ifNull(rx, 0))) AS rx FROM (SELECT node, ts, "
    "counter_step(nic_rx_bytes, lagInFrame(nic_rx_bytes) OVER s) AS rx FROM once_node FINAL WHERE series = 'nic' "
    "WINDOW s AS (PARTITION BY node, series, device ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)) "
    "GROUP BY node, h")


def written_once(w, data: str, days: int) -> dict:
    """In this child: the load as it is (every statement's CPU, the grains' refresh left out), then the same
    days written once and the engine's bare insert of the same files, then the hourly sums read both ways and
    compared. CPU seconds of this process (the engine's threads included), summed over the days."""
    import collections
    import re

    from ops_warehouse.etl import telemetry_load
    from ops_warehouse.sqlfiles import split_statements, sql_text

    root = (Path(data) / "telemetry").resolve()
    d0 = START.date()
    per = collections.defaultdict(float)
    command = w.client.command

    def timed(sql, *args, **kw):
        c = time.process_time()
        try:
            return command(sql, *args, **kw)
        finally:
            m = re.match(r"\s*(?:INSERT INTO|CREATE TEMPORARY TABLE)\s+(_telemetry_[a-z]+)?(\w+)", sql)
            name = (m.group(1) + " stage" if m.group(1) else m.group(2)) if m else "other"
            per[re.sub(r"_[0-9a-f]{32}", "", name)] += time.process_time() - c

    w.client.command = timed
    refresh, telemetry_load.refresh_hourly = telemetry_load.refresh_hourly, lambda *a, **kw: None
    c = time.process_time()
    telemetry_load.load_parquet_dir(w, data, d0, d0 + timedelta(days=days - 1), cluster="bench")
    load_cpu = time.process_time() - c
    w.client.command = command
    w.command("CREATE TABLE once_gpu AS gpu_sample")
    w.command("CREATE TABLE once_node (cluster LowCardinality(String) DEFAULT 'bench', node LowCardinality(String), "
              "series LowCardinality(String), device LowCardinality(String), ts DateTime('UTC'), "
              "nic_rx_bytes Nullable(Float64), nic_tx_bytes Nullable(Float64), lustre_read_bytes Nullable(Float64), "
              "lustre_write_bytes Nullable(Float64), node_power_w Nullable(Float32)) ENGINE = ReplacingMergeTree "
              "PARTITION BY toYYYYMM(ts) ORDER BY (cluster, node, series, device, ts)")
    w.command("CREATE TABLE once_xid AS xid_event")
    w.command("CREATE TABLE once_pci AS gpu_pci")
    once = {"gpu": 0.0, "node": 0.0, "rest": 0.0}
    for k in range(days):
        for i, sql in enumerate(_once_statements(root, f"{d0 + timedelta(days=k):%Y-%m-%d}")):
            c = time.process_time()
            w.client.command(sql, settings={"optimize_on_insert": 0})
            once["gpu" if i == 0 else "node"] += time.process_time() - c
        # what such a load must still do at load time, reading the rows it wrote (the day and the day before, for
        # each series' previous sample): the energy steps no GPU can draw (quarantined), the Xid events, the bus ids
        w0 = datetime.combine(d0 + timedelta(days=k), datetime.min.time(), timezone.utc)
        params = {"cluster": "bench", "source": "once", "from_ts": w0, "to_ts": w0 + timedelta(days=1), "step_s": 60}
        rows = ("SELECT node, gpu, ts, model_name, xid_last, energy_j FROM once_gpu WHERE "
                "ts >= {from_ts:DateTime('UTC')} - toIntervalDay(1) AND ts < {to_ts:DateTime('UTC')}")
        # gpu_sample keeps no bus id: gpu_pci reads the file's labels again
        labels = (f"SELECT slurm_node(ifNull(toString(Hostname), '')) AS node, toUInt16(gpu) AS gpu, UUID AS uuid, "
                  f"ifNull(pci_bus_id, '') AS pci_bus_id, toDateTime(timestamp, 'UTC') AS ts FROM "
                  f"file('{root}/dcgm/{w0:%Y-%m-%d}.parquet', Parquet)")
        c = time.process_time()
        w.query_rows(_ENERGY_REJECTED.replace("{{input}}", rows), params)
        for name, table, relation in (("xid_event", "once_xid", rows), ("gpu_pci", "once_pci", labels)):
            (sql,) = split_statements(sql_text(f"staging/{name}.sql"))
            w.client.command(sql.replace(f"INSERT INTO {name} ", f"INSERT INTO {table} ").replace(
                "{{input}}", relation).rstrip().rstrip(";"), parameters=params, settings={"optimize_on_insert": 0})
        once["rest"] += time.process_time() - c
    c = time.process_time()
    _ceiling(w, data)
    bare = time.process_time() - c
    w.command("OPTIMIZE TABLE once_gpu FINAL")
    w.command("OPTIMIZE TABLE once_node FINAL")
    w.command("OPTIMIZE TABLE gpu_sample FINAL")
    w.command("OPTIMIZE TABLE node_sample FINAL")
    read = {}
    for name, sql in (("gpu_now", _GPU_HOURLY_NOW), ("node_now", _NIC_HOURLY_NOW), ("gpu_once", _GPU_STEPS),
                      ("node_once", _NIC_STEPS)):
        best = 1e9
        for _ in range(3):
            c = time.process_time()
            w.query_rows(f"SELECT count(), sum({'e' if name.startswith('gpu') else 'rx'}) FROM ({sql})")
            best = min(best, time.process_time() - c)
        read[name] = best
    # the grains' refresh of the span as it is (its hourly rollups read the stored steps once for the GPUs and
    # once for the nodes; run_telemetry reads node_sample's steps twice more)
    c = time.process_time()
    refresh(w, datetime.combine(d0, datetime.min.time(), timezone.utc),
            datetime.combine(d0 + timedelta(days=days), datetime.min.time(), timezone.utc))
    read["refresh"] = time.process_time() - c
    # the same figures: each GPU's and node's hourly energy and NIC bytes, stored steps against read-time steps
    differ = w.query_rows(
        f"SELECT (SELECT count() FROM ({_GPU_HOURLY_NOW}) AS a FULL JOIN ({_GPU_STEPS}) AS b USING (node, gpu, h) "
        "WHERE NOT ((a.e IS NULL AND b.e IS NULL) OR ifNull(abs(a.e - b.e) <= 1e-9 * greatest(abs(a.e), 1), 0))), "
        f"(SELECT count() FROM ({_NIC_HOURLY_NOW}) AS a FULL JOIN ({_NIC_STEPS}) AS b USING (node, h) "
        "WHERE a.rx != b.rx), (SELECT count() FROM gpu_sample FINAL), (SELECT count() FROM once_gpu FINAL), "
        f"(SELECT count() FROM ({_GPU_STEPS})) - (SELECT uniqExact(node, gpu, toStartOfHour(ts)) FROM gpu_sample), "
        f"(SELECT count() FROM ({_NIC_STEPS})) - (SELECT uniqExact(node, toStartOfHour(ts)) FROM node_sample)")[0]
    # an hour one side lacks counts as differing (the joins above give it the other side's default)
    differ = (differ[0] + abs(differ[4]), differ[1] + abs(differ[5]), differ[2], differ[3])
    return {"load_cpu_s": load_cpu, "per_statement": dict(per), "once_gpu_cpu_s": once["gpu"],
            "once_node_cpu_s": once["node"], "once_rest_cpu_s": once["rest"], "bare_cpu_s": bare,
            "read": read, "gpu_hours_differing": differ[0],
            "node_hours_differing": differ[1], "gpu_rows": differ[2], "once_gpu_rows": differ[3]}


def run(kind: str, data: Path, work: Path, days: int, path: str | None = None) -> dict:
    """One child; ``path``: a tree installed apart, put first on its PYTHONPATH (the load as that tree does it),
    or another checkout's Python (a file: ``/work/main/.venv/bin/python``), which runs this script's child with
    that checkout's code."""
    wh = work / f"wh-{kind}"
    shutil.rmtree(wh, ignore_errors=True)
    python = path if path and Path(path).is_file() else sys.executable
    env = {**os.environ, "PYTHONPATH": path} if path and python == sys.executable else None
    p = subprocess.run([python, __file__, "--child", kind, "--data", str(data), "--wh", str(wh),
                        "--days", str(days)], capture_output=True, text=True, env=env)
    shutil.rmtree(wh, ignore_errors=True)
    if p.returncode:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def rounds(data: Path, work: Path, days: int, n: int, before: str | None) -> None:
    """The Parquet load (its grains' refresh apart) and the engine's bare insert of the same files, alternated
    ``n`` times (and the load of the ``before`` tree, each round's order turned about): the best of each by CPU
    seconds (the process's, the engine's threads included) and by wall; on a shared machine only figures of one
    command compare."""
    sides = ["after", "engine"] + (["before"] if before else [])
    got: dict[str, list[dict]] = {s: [] for s in sides}
    for r in range(n):
        for side in sides if r % 2 == 0 else sides[::-1]:
            x = run("ceiling" if side == "engine" else "product", data, work, days,
                    before if side == "before" else None)
            x.setdefault("load_cpu_s", x["cpu_s"])
            x.setdefault("load_s", x["seconds"])
            got[side].append(x)
            print(f"round {r + 1} {side:6s}: CPU {x['load_cpu_s']:6.2f} s, wall {x['load_s']:6.2f} s, "
                  f"peak RSS {x['peak_rss_mb']:,.0f} MB, load average {os.getloadavg()[0]:.1f}", flush=True)
    best = {s: (min(x["load_cpu_s"] for x in got[s]), min(x["load_s"] for x in got[s])) for s in sides}
    rows = got["after"][0]["rows"]
    for s in sides:
        cpu, wall = best[s]
        ratio = "" if s == "engine" else (f", ratio to the engine {best['engine'][0] / cpu:.2f} by CPU, "
                                          f"{best['engine'][1] / wall:.2f} by wall")
        print(f"{s:6s} best of {n}: CPU {cpu:.2f} s, wall {wall:.2f} s ({rows / wall:,.0f} GPU rows/s){ratio}")
    print("RESULT telemetry_rounds " + " ".join(
        f"{s}_cpu_s={best[s][0]:.2f} {s}_wall_s={best[s][1]:.2f}" for s in sides)
        + f" ratio_cpu={best['engine'][0] / best['after'][0]:.2f} ratio_wall={best['engine'][1] / best['after'][1]:.2f}"
        + (f" before_ratio_cpu={best['engine'][0] / best['before'][0]:.2f}" if before else "")
        + f" gpu_rows={rows} rounds={n} goal=>=0.8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=31)
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--skip-prometheus", action="store_true")
    # only the OpenMetrics load: one 2-hour window of --nodes at --om-step seconds (issue 50: 15 s scrapes)
    ap.add_argument("--openmetrics-only", action="store_true")
    ap.add_argument("--om-step", type=int, default=60)
    # issue 50 item 2, round 4: the load as it is, statement by statement, against the samples written once
    # (cumulative counters, steps taken at read time) and the engine's bare insert, in one child
    ap.add_argument("--written-once", action="store_true")
    # issue 50 item 2, round 7: the Parquet load and the engine's bare insert only, alternated N times (best of N);
    # --before DIR: and the load of a tree installed apart in DIR, in the same rounds
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--before")
    ap.add_argument("--child")
    ap.add_argument("--data")
    ap.add_argument("--wh")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.data, a.wh, a.days)))
        return
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-telemetry-"))
    data = work / "site"
    if a.openmetrics_only:
        try:
            openmetrics_only(work, data, a.nodes, a.om_step)
        finally:
            if not a.workdir:
                shutil.rmtree(work, ignore_errors=True)
        return
    try:
        from ops_warehouse.generate import scaled_spec
        from ops_warehouse.generate.schedule import simulate
        from ops_warehouse.generate.telemetry import write_telemetry

        spec = scaled_spec(a.nodes)
        t = time.perf_counter()
        h = simulate(spec, start=START, days=a.days, jobs_per_day=1000, seed=1)
        made = work / f"made-{a.nodes}-{a.days}"
        if not made.exists():  # a --workdir kept from an earlier run of the same size is not written again
            for other in work.glob("made-*"):
                other.unlink()
            write_telemetry(data, spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc,
                            node_events=h.node_events, xids=h.xids, throttle=h.throttle, start=START, end=h.end,
                            step_s=60, seed=1)
            made.touch()
        if a.rounds:
            rounds(data, work, a.days, a.rounds, a.before)
            return
        if a.written_once:
            report_written_once(run("once", data, work, a.days), a.days)
            return
        one_day = h.end - timedelta(days=a.days - 1)
        write_telemetry(work / "om", spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc,
                        node_events=h.node_events, xids=h.xids, throttle=h.throttle, start=START, end=one_day,
                        step_s=60, seed=1, formats=("openmetrics",))
        (data / "telemetry" / "openmetrics").symlink_to(work / "om" / "telemetry" / "openmetrics")
        gen_s = time.perf_counter() - t
        gpus = int(h.inventory["gpus"].sum())
        print(f"generated {a.days} days of 60 s telemetry for {gpus} GPUs on {h.inventory.height} nodes "
              f"(+ one day of OpenMetrics) in {gen_s:.0f} s")
        # product and ceiling back to back, each in a fresh child, the same files
        prod = run("product", data, work, a.days)
        ceil = run("ceiling", data, work, a.days)
        print(f"product load_parquet_dir: {prod['rows']:,} GPU rows in {prod['seconds']:.1f} s = "
              f"{prod['rows'] / prod['seconds']:,.0f} rows/s ({prod['load_s']:.1f} s the load, "
              f"{prod['refresh_s']:.1f} s the grains' refresh), peak RSS {prod['peak_rss_mb']:,.0f} MB "
              f"(plus node rows, Xid events and hourly rollups)")
        print(f"engine ceiling (file() Parquet -> tables, all families): {ceil['rows']:,} rows in {ceil['seconds']:.1f} s = "
              f"{ceil['rows'] / ceil['seconds']:,.0f} rows/s, peak RSS {ceil['peak_rss_mb']:,.0f} MB")
        ceil_rate = ceil['rows'] / ceil['seconds']
        load_ratio = (prod['rows'] / prod['load_s']) / ceil_rate
        ratio = (prod['rows'] / prod['seconds']) / ceil_rate
        print(f"ratio product/ceiling: {load_ratio:.2f} the load (goal >= 0.8), {ratio:.2f} with the grains "
              f"(goal >= 0.5)")
        print(f"RESULT telemetry_load rows_per_s={prod['rows'] / prod['load_s']:.0f} "
              f"ceiling_rows_per_s={ceil_rate:.0f} ratio={load_ratio:.2f} goal=>=0.8 "
              f"peak_mb={prod['peak_rss_mb']:.0f} gpu_rows={prod['rows']}")
        print(f"RESULT telemetry_load_with_grains rows_per_s={prod['rows'] / prod['seconds']:.0f} "
              f"ceiling_rows_per_s={ceil_rate:.0f} ratio={ratio:.2f} goal=>=0.5 peak_mb={prod['peak_rss_mb']:.0f}")
        # CPU seconds (the process's, the engine's threads included): on a machine others share, the wall time
        # is mostly waiting for a core; this ratio is the work's
        print(f"CPU: product {prod['cpu_s']:.1f} s (load and grains), ceiling {ceil['cpu_s']:.1f} s: "
              f"ratio {ceil['cpu_s'] / prod['cpu_s']:.2f}")
        om = run("openmetrics", data, work, 1)
        print(f"OpenMetrics, one 2-hour window: {om['rows']:,} GPU rows in {om['seconds']:.1f} s = "
              f"{om['rows'] / om['seconds']:,.0f} rows/s, peak RSS {om['peak_rss_mb']:,.0f} MB")
        print(f"RESULT openmetrics_load rows_per_s={om['rows'] / om['seconds']:.0f} peak_mb={om['peak_rss_mb']:.0f}")
        if not a.skip_prometheus and shutil.which("prometheus"):
            from bench_prometheus import report

            report(run("prometheus", data, work, 1))
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


def report_written_once(r: dict, days: int) -> None:
    per = ", ".join(f"{k} {v / days:.2f}" for k, v in sorted(r["per_statement"].items(), key=lambda kv: -kv[1])
                    if v / days >= 0.01)
    once = r["once_gpu_cpu_s"] + r["once_node_cpu_s"] + r["once_rest_cpu_s"]
    print(f"CPU s a day, one child: the load as it is {r['load_cpu_s'] / days:.2f} ({per}); written once "
          f"{once / days:.2f} (GPU {r['once_gpu_cpu_s'] / days:.2f}, node {r['once_node_cpu_s'] / days:.2f}, "
          f"energy check, Xid events and bus ids from the written rows {r['once_rest_cpu_s'] / days:.2f}); "
          f"the engine's bare insert {r['bare_cpu_s'] / days:.2f}")
    rd = r["read"]
    print(f"hourly sums over the {days} days, from the stored steps / stepped at read time: GPU energy "
          f"{rd['gpu_now']:.3f} / {rd['gpu_once']:.3f} s, NIC bytes {rd['node_now']:.3f} / {rd['node_once']:.3f} s "
          f"(the grains' refresh of the span as it is: {rd['refresh']:.2f} s); hours that differ: GPU "
          f"{r['gpu_hours_differing']}, node {r['node_hours_differing']} (GPU rows {r['gpu_rows']:,} / "
          f"{r['once_gpu_rows']:,})")
    print(f"RESULT telemetry_written_once load_cpu_s={r['load_cpu_s']:.2f} once_cpu_s={once:.2f} "
          f"bare_cpu_s={r['bare_cpu_s']:.2f} ratio_now={r['bare_cpu_s'] / r['load_cpu_s']:.2f} "
          f"ratio_once={r['bare_cpu_s'] / once:.2f} goal=>=0.8 read_gpu_now_s={rd['gpu_now']:.3f} "
          f"read_gpu_once_s={rd['gpu_once']:.3f} read_nic_now_s={rd['node_now']:.3f} "
          f"read_nic_once_s={rd['node_once']:.3f} refresh_cpu_s={rd['refresh']:.2f} differing_hours="
          f"{r['gpu_hours_differing'] + r['node_hours_differing']}")


def openmetrics_only(work: Path, data: Path, nodes: int, step_s: int) -> None:
    """The text load of one 2-hour OpenMetrics window beside the engine reading the same file's lines, each in
    a fresh process, back to back in this command (the machine is shared: only side-by-side figures compare)."""
    from ops_warehouse.generate import scaled_spec
    from ops_warehouse.generate.schedule import simulate
    from ops_warehouse.generate.telemetry import write_telemetry

    spec = scaled_spec(nodes)
    h = simulate(spec, start=START, days=1, jobs_per_day=1000, seed=1)
    made = data / "telemetry" / "openmetrics" / f"made-{nodes}-{step_s}"
    if not made.exists():  # a --workdir kept from an earlier run holds the same window: not written again
        write_telemetry(data, spec=spec, inventory=h.inventory, gpu_alloc=h.gpu_alloc, node_events=h.node_events,
                        xids=h.xids, throttle=h.throttle, start=START, end=START + timedelta(hours=2),
                        step_s=step_s, seed=1, formats=("openmetrics",))
        made.touch()
    first = sorted((data / "telemetry" / "openmetrics").glob("*.om"))[0]
    size_mb = first.stat().st_size / 1e6
    om = run("openmetrics", data, work, 1)
    eng = run("om-engine", data, work, 1)
    rate, ceiling = om["rows"] / om["seconds"], om["rows"] / eng["seconds"]
    print(f"OpenMetrics, one 2-hour window of {h.inventory.height} nodes at {step_s} s ({size_mb:,.0f} MB, "
          f"{eng['rows']:,} lines): {om['rows']:,} GPU rows in {om['seconds']:.1f} s = {rate:,.0f} GPU rows/s, "
          f"peak RSS {om['peak_rss_mb']:,.0f} MB; the engine reading the lines alone: {eng['seconds']:.1f} s "
          f"(= {ceiling:,.0f} GPU rows/s), peak RSS {eng['peak_rss_mb']:,.0f} MB; CPU (this process and the "
          f"engine's threads) {om['cpu_s']:.1f} s against {eng['cpu_s']:.1f} s; the shared insert path "
          f"(insert_window) {om['insert_s']:.1f} s, {om['insert_cpu_s']:.1f} s CPU")
    print(f"RESULT openmetrics_load rows_per_s={rate:.0f} goal=>=200000 engine_lines_rows_per_s={ceiling:.0f} "
          f"ratio={rate / ceiling:.2f} cpu_s={om['cpu_s']:.1f} engine_cpu_s={eng['cpu_s']:.1f} "
          f"insert_share={om['insert_s'] / om['seconds']:.2f} insert_cpu_share={om['insert_cpu_s'] / om['cpu_s']:.2f} "
          f"peak_mb={om['peak_rss_mb']:.0f} goal_peak_mb=<=1500 gpu_rows={om['rows']} "
          f"lines={eng['rows']} file_mb={size_mb:.0f} step_s={step_s}")


if __name__ == "__main__":
    main()
