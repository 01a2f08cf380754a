"""The generator's planted efficiency cases (issue 52 item 5) found by DuckDB over the site's raw files alone
(telemetry/dcgm/*.parquet and sacct/sacct.psv), against the truth the generator records
(truth/efficiency.parquet, faults.json's ``idle_users``; generate/__init__.py's docstring). Nothing here goes
through the warehouse's parsers, loads or SQL: the figures are worked out from the exporter's samples and
sacct's lines as a facilitator would with jobstats' arithmetic.

The site: 10 days of October 2026, 500 jobs a day on 24 nodes (192 GPUs), seed 11, 5-minute telemetry
(about 5 s to generate). A run's samples are the dcgm-exporter rows whose ``hpc_job`` label is its JobIDRaw, at
or after its Start and before the next run of the same id (a requeue keeps its id); a GPU's figures are the
means over them. What must hold:
- idle_gpu_of_n: the truth's (node, gpu) is the run's one GPU with a mean util under 4 % (planted 0-3 %, the
  exporter's integer rounding of its noise adds up to about 0.4), its mean within 2 points of the planted
  figure, every other GPU of the run above 30 %; and no other run of 4 GPUs or more with three samples a
  GPU shows that signature by chance;
- low_gpu_memory: busy GPUs (mean util over 30 %) whose largest FB_USED / (FB_USED + FB_FREE) is under 10 %,
  within 0.005 of the planted fraction; no other busy run so;
- cpu_bound: every GPU's mean util under 30 % and sacct's TotalCPU / (NCPUS x ElapsedRaw) the planted
  figure (85-98 %); no other ended run's over 80 %. Every ended run's CPU and memory efficiency from its sacct
  lines (the steps' largest MaxRSS / ReqMem) is the truth's runs.parquet's, to the second and KiB sacct prints;
- idle_user: in every account, the user faults.json names is first by idle GPU-hours (runs whose every GPU
  averaged under 5 %; GPUs x ElapsedRaw from sacct), and most of that user's runs under 64 GPUs with samples
  are idle (large runs are never idle ones).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import duckdb
import polars as pl
import pytest

from ops_warehouse.generate import generate

START = datetime(2026, 10, 1, tzinfo=timezone.utc)
DAYS = 10
END_S = int(START.timestamp()) + DAYS * 86400  # sacct's as-of: a run not ended by then has no TotalCPU yet
STEP_S = 300


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("efficiency")
    generate(out, start=START, days=DAYS, jobs_per_day=500, nodes=24, seed=11, metrics_step_s=STEP_S)
    con = duckdb.connect()
    con.execute(f"""
        CREATE TABLE sacct AS SELECT * FROM read_csv('{out}/sacct/sacct.psv', delim='|', header=true,
                                                     all_varchar=true, quote='', escape='');
        -- TotalCPU as sacct prints it: MM:SS.mmm under an hour, [D-]HH:MM:SS from one
        CREATE MACRO cpu_s(t) AS CASE
            WHEN t LIKE '%.%' THEN split_part(t, ':', 1)::INT * 60 + split_part(split_part(t, ':', 2), '.', 1)::INT
            ELSE (CASE WHEN t LIKE '%-%' THEN split_part(t, '-', 1)::INT * 86400 ELSE 0 END)
                 + split_part(split_part(t, '-', -1), ':', 1)::INT * 3600
                 + split_part(split_part(t, '-', -1), ':', 2)::INT * 60
                 + split_part(split_part(t, '-', -1), ':', 3)::INT
            END;
        CREATE TABLE job AS SELECT JobIDRaw AS raw, User AS user, Account AS account,
            epoch(strptime(Start, '%Y-%m-%dT%H:%M:%S'))::BIGINT AS start,
            ElapsedRaw::BIGINT AS elapsed_s, NCPUS::BIGINT AS cpus, State AS state,
            regexp_extract(AllocTRES, 'gres/gpu=(\\d+)', 1)::INT AS gpus,
            replace(ReqMem, 'M', '')::BIGINT * 1024 AS req_kib, cpu_s(TotalCPU) AS cpu_s
        FROM sacct WHERE JobIDRaw NOT LIKE '%.%' AND Start <> 'Unknown' AND "End" <> 'Unknown' AND AllocTRES <> '';
        CREATE TABLE step AS SELECT split_part(JobIDRaw, '.', 1) AS raw,
            epoch(strptime(Start, '%Y-%m-%dT%H:%M:%S'))::BIGINT AS start,
            max(replace(MaxRSS, 'K', '')::BIGINT) AS rss_kib, sum(cpu_s(TotalCPU)) AS cpu_s
        FROM sacct WHERE JobIDRaw LIKE '%.%' AND MaxRSS <> '' GROUP BY ALL;
        CREATE TABLE eff AS SELECT j.*, j.cpu_s / (j.cpus * j.elapsed_s) AS cpu_eff, s.rss_kib / j.req_kib AS mem_eff,
            s.cpu_s AS steps_cpu_s
        FROM job j JOIN step s USING (raw, start) WHERE j.elapsed_s > 0;
        CREATE TABLE dcgm AS SELECT epoch(timestamp)::BIGINT AS ts, Hostname AS node, gpu::INT AS gpu,
            hpc_job AS raw, DCGM_FI_DEV_GPU_UTIL AS util, DCGM_FI_PROF_SM_ACTIVE AS sm,
            DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) AS fb
        FROM read_parquet('{out}/telemetry/dcgm/*.parquet') WHERE hpc_job <> '';
        CREATE TABLE runs AS SELECT DISTINCT JobIDRaw AS raw,
            epoch(strptime(Start, '%Y-%m-%dT%H:%M:%S'))::BIGINT AS start
        FROM sacct WHERE JobIDRaw NOT LIKE '%.%' AND Start <> 'Unknown';
        -- each sample to the run of its job id that started last at or before it (a requeue keeps the id)
        CREATE TABLE per_gpu AS SELECT r.raw, r.start, d.node, d.gpu, count(*) AS n, avg(d.util) AS util,
            avg(d.sm) AS sm, max(d.fb) AS fb
        FROM dcgm d ASOF JOIN runs r ON d.raw = r.raw AND d.ts >= r.start GROUP BY ALL;
        CREATE TABLE per_run AS SELECT raw, start, count(*) AS gpus_seen, min(n) AS min_n, min(util) AS min_util,
            max(util) AS max_util, avg(util) AS util, max(fb) AS max_fb,
            count(*) FILTER (WHERE util < 4) AS n_idle_gpus, min(util) FILTER (WHERE util >= 4) AS others_min_util
        FROM per_gpu GROUP BY ALL;
    """)
    truth = pl.read_parquet(out / "truth" / "efficiency.parquet")
    con.register("truth", truth.with_columns(raw=pl.col("job_id_raw").cast(pl.String)))
    faults = json.loads((out / "truth" / "faults.json").read_text())
    yield con, truth, faults, pl.read_parquet(out / "truth" / "runs.parquet")
    con.close()


def q(con, sql: str) -> pl.DataFrame:
    return con.sql(sql).pl()


def test_the_site_has_each_planted_kind(site):
    _, truth, faults, _ = site
    counts = dict(truth.group_by("kind").len().iter_rows())
    assert counts.keys() == {"idle_gpu_of_n", "low_gpu_memory", "cpu_bound", "idle_user"}
    assert counts["idle_gpu_of_n"] >= 2 and counts["low_gpu_memory"] >= 2 and counts["cpu_bound"] >= 3
    assert sorted(faults["idle_users"]) == [f"proj{c}" for c in "abcdef"]
    assert truth.filter(pl.col("kind") == "idle_user").select(pl.struct("account", "user").unique()).height == 6


def test_the_idle_gpu_of_n_runs_are_found(site):
    con, truth, _, _ = site
    planted = q(con, """SELECT t.job_id, t.node, t.gpu, t.gpu_util, t.gpus, p.node AS seen_node, p.gpu AS seen_gpu,
            p.util AS seen_util, p.n, r.gpus_seen, r.others_min_util
        FROM truth t JOIN per_gpu p ON p.raw = t.raw AND p.start = t.start AND p.util < 4
        JOIN per_run r ON r.raw = t.raw AND r.start = t.start WHERE t.kind = 'idle_gpu_of_n'""")
    assert planted.height == truth.filter(pl.col("kind") == "idle_gpu_of_n").height  # each has one idle GPU
    for r in planted.iter_rows(named=True):
        assert (r["seen_node"], r["seen_gpu"]) == (r["node"], r["gpu"]), r
        assert r["gpus_seen"] == r["gpus"] >= 8 and r["others_min_util"] > 30, r
        if r["n"] >= 3:  # (a run of minutes has a sample or two: its mean is one noisy reading)
            assert abs(r["seen_util"] - r["gpu_util"]) < 2, r
    assert (planted["n"] >= 3).sum() >= 2
    # the signature, over every run with three samples a GPU: exactly the planted ones
    found = q(con, """SELECT raw, start FROM per_run WHERE gpus_seen >= 4 AND min_n >= 3 AND n_idle_gpus = 1
                      AND others_min_util > 30 ORDER BY ALL""")
    seen = q(con, """SELECT t.raw, t.start FROM truth t JOIN per_run r ON r.raw = t.raw AND r.start = t.start
                     WHERE t.kind = 'idle_gpu_of_n' AND r.min_n >= 3 ORDER BY ALL""")
    assert found.rows() == seen.rows() and seen.height >= 2


def test_the_low_gpu_memory_runs_are_found(site):
    con, truth, _, _ = site
    planted = q(con, """SELECT t.job_id, t.fb_used_frac, r.max_fb, r.util, r.min_n FROM truth t
        JOIN per_run r ON r.raw = t.raw AND r.start = t.start WHERE t.kind = 'low_gpu_memory'""")
    assert planted.height == truth.filter(pl.col("kind") == "low_gpu_memory").height
    for r in planted.iter_rows(named=True):
        assert r["max_fb"] < 0.10 and abs(r["max_fb"] - r["fb_used_frac"]) < 0.005 and r["util"] > 30, r
    found = q(con, "SELECT raw, start FROM per_run WHERE util > 30 AND max_fb < 0.10 ORDER BY ALL")
    assert found.rows() == sorted(truth.filter(pl.col("kind") == "low_gpu_memory")
                                  .select(pl.col("job_id_raw").cast(pl.String), "start").rows())


def test_the_cpu_bound_runs_are_found(site):
    con, truth, _, _ = site
    planted = q(con, """SELECT t.job_id, t.cpu_eff, e.cpu_eff AS seen_cpu_eff, r.max_util FROM truth t
        JOIN eff e ON e.raw = t.raw AND e.start = t.start
        JOIN per_run r ON r.raw = t.raw AND r.start = t.start WHERE t.kind = 'cpu_bound'""")
    ended = truth.filter((pl.col("kind") == "cpu_bound") & (pl.col("end") <= END_S))
    assert planted.height == ended.height >= 3
    for r in planted.iter_rows(named=True):
        assert r["max_util"] < 30 and 0.85 <= r["seen_cpu_eff"] <= 0.98, r
        assert abs(r["seen_cpu_eff"] - r["cpu_eff"]) < 1e-3, r
    found = q(con, "SELECT raw, start FROM eff WHERE cpu_eff > 0.8 ORDER BY ALL")
    assert found.rows() == sorted(ended.select(pl.col("job_id_raw").cast(pl.String), "start").rows())
    # a run still running at the end: its GPUs already show it, sacct's TotalCPU not yet (00:00:00)
    running = q(con, """SELECT t.raw, r.max_util FROM truth t JOIN per_run r ON r.raw = t.raw AND r.start = t.start
                        WHERE t.kind = 'cpu_bound' AND t."end" > {END_S}""".replace("{END_S}", str(END_S)))
    assert (running["max_util"] < 30).all()


def test_every_ended_run_has_its_cpu_and_memory_efficiency_in_sacct(site):
    con, _, _, runs = site
    con.register("runs_truth", runs.select(pl.col("job_id_raw").cast(pl.String).alias("raw"), "start", "cpu_eff",
                                           "mem_eff"))
    d = q(con, """SELECT e.raw, e.cpu_eff, e.mem_eff, t.cpu_eff AS t_cpu, t.mem_eff AS t_mem, e.cpus, e.elapsed_s,
                         e.req_kib, e.cpu_s, e.steps_cpu_s FROM eff e JOIN runs_truth t USING (raw, start)""")
    assert d.height > 3000 and d.height == q(con, "SELECT count(*) AS n FROM eff").item()
    assert (d["cpu_s"] == d["steps_cpu_s"]).all()  # the job line's TotalCPU is the sum of its steps'
    # whole seconds of CPU time, whole KiB of memory
    assert ((d["cpu_eff"] - d["t_cpu"]).abs() * d["cpus"] * d["elapsed_s"] <= 0.5 + 1e-6).all()
    assert ((d["mem_eff"] - d["t_mem"]).abs() * d["req_kib"] <= 0.5 + 1e-6).all()
    assert d["cpu_eff"].max() <= 0.98 and d["mem_eff"].max() <= 0.92


def test_each_accounts_idle_user_ranks_first_by_idle_gpu_hours(site):
    con, _, faults, _ = site
    users = q(con, """WITH r AS (
            SELECT e.user, e.account, e.gpus, e.gpus * e.elapsed_s / 3600 AS gpu_h, p.max_util < 5 AS idle
            FROM job e JOIN per_run p ON p.raw = e.raw AND p.start = e.start),
        u AS (SELECT account, user, coalesce(sum(gpu_h) FILTER (WHERE idle), 0) AS idle_gpu_h,
                     avg(idle::INT) FILTER (WHERE gpus < 64) AS idle_share FROM r GROUP BY account, user)
        SELECT *, row_number() OVER (PARTITION BY account ORDER BY idle_gpu_h DESC) AS rank FROM u""")
    first = dict(users.filter(pl.col("rank") == 1).select("account", "user").iter_rows())
    assert first == faults["idle_users"]
    planted = users.join(pl.DataFrame(list(faults["idle_users"].items()), schema=["account", "user"], orient="row"),
                         on=["account", "user"])
    assert planted.height == 6 and (planted["idle_share"] > 0.5).all()
