"""A hand-built day for the user-efficiency marts (tests/test_users_efficiency.py, tests/test_digest.py): the
sacct lines and dcgm-exporter samples written here, and DuckDB's reading of those very files (never the
product's SQL) for the figures the tests hold the marts to.

Cluster t1: two 8-GPU H100 nodes n1, n2. One dcgm-exporter sample a GPU every 10 minutes of 2026-10-05
(00:00 .. 23:50). Every run holds whole nodes from one hour to another, and each GPU it holds reports the
run's utilization and SM/tensor/DRAM activity at every sample inside [start, end); a GPU no run holds reports 0.
Projects: proja -> A, projb -> B. The runs (id, account, user, GPUs, nodes, start, end, util %, SM, tensor, DRAM,
the share of the GPUs' 81,920 MiB used; a GPU no run holds uses none):

  3001 A alice  8 n1     00-04  90  0.60 0.40 0.30  0.75   32 GPU-h
  3002 A alice  8 n1     05-06  50  0.30 0.10 0.20  0.50    8
  3003 A bob   16 n1,n2  08-10   2  0.01 0.00 0.01  0.02/0.06 32  idle (under 5 % for 2 h); n1's GPUs use 2 %
                                                                of their memory, n2's 6 %; suspended 20 minutes
  3004 A bob    8 n2     00-03  70  0.50 0.30 0.40  0.60   24
  3005 A carol  8 n2     12-13  45  0.30 0.20 0.20  0.30    8
  3006 B dave   8 n1     12-18  25  0.15 0.05 0.10  0.05   48
  3007 B erin   8 n2     14-20  85  0.70 0.50 0.40  0.90   48
  3008 B frank  8 n1     18-19  80  0.50 0.30 0.30  0.50    8  grade A: 80 % is A's bound, idle share 0
  3009 B gina   8 n1     19-20  79.5 0.50 0.30 0.30 0.50    8  grade B: just under A's 80 %
  3010 B heidi  8 n2     20-24 100  0.80 0.60 0.50  0.50   32
  3011 B heidi  8 n1     20-21   0  0     0    0     0.50    8  idle (an hour at 0 %)

By hand, pooled over GPU-hours: alice (32 × 90 + 8 × 50) / 40 = 82 % (the mean of her runs' means is 70 %),
bob (32 × 2 + 24 × 70) / 56 = 31.14 % with 32 idle GPU-hours (share 0.571), carol 45 %, dave 25 %, erin 85 %;
GPU memory, each run's peak share (of the GPU that used the most, as `ops-report job` gives it) pooled by
GPU-hours: alice (32 × 0.75 + 8 × 0.5) / 40 = 0.70, bob (32 × 0.06 + 24 × 0.6) / 56 = 0.2914 (its GPUs one by
one would give (16 × 0.02 + 16 × 0.06 + 24 × 0.6) / 56 = 0.28), carol 0.30, dave 0.05, erin 0.90. CPU, each
run's TotalCPU over NCPUS × Elapsed: sacct's Elapsed leaves a suspension out, so bob's 3003 held its 224 CPUs
for 6,000 s of its 7,200: (0.02 × 224 × 6,000 + 0.75 × 112 × 10,800) / (224 × 6,000 + 112 × 10,800) = 0.3658
(by End − Start 0.3310). Memory, each run's MaxRSS over its whole request: 3003 wrote 0.05 of a node's part
(2,560 MiB) of 102,400 MiB, so bob (2,560 + 61,440) / (2 × 102,400) = 0.3125.
heidi: (32 × 100 + 8 × 0) / 40 = 80 % with an idle
share of 8 / 40 = 0.20, so not A (share ≥ 0.05), B (≥ 0.10) nor C (C wants under 0.20): D.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import duckdb
import polars as pl

UTC = timezone.utc
DAY = date(2026, 10, 5)
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
PROJECTS = {"proja": "A", "projb": "B"}
STEP_S = 600
FB_TOTAL_MIB = 81_920.0
HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName|"
        "TotalCPU|MaxRSS")
MEM_MIB = 102_400  # every run's AllocTRES mem=100G
# per run: its CPU efficiency (its .batch step's TotalCPU ÷ (NCPUS × elapsed)) and its .batch step's MaxRSS as a
# share of one node's part of the memory it was given (the run's share of its request: this over its nodes)
# the runs suspended for a while (seconds): sacct's Elapsed leaves them out, End − Start does not
SUSPENDED_S = {3003: 1200}
CPU_MEM = {3001: (0.50, 0.40), 3002: (0.25, 0.20), 3003: (0.02, 0.05), 3004: (0.75, 0.60), 3005: (0.90, 0.50),
           3006: (0.95, 0.30), 3007: (0.30, 0.70), 3008: (0.50, 0.50), 3009: (0.50, 0.50), 3010: (0.50, 0.50),
           3011: (0.50, 0.50)}
# id, account, user, GPUs, node list, nodes, start hour, end hour, util %, SM, tensor, DRAM, GPU memory used
RUNS = [
    (3001, "proja", "alice", 8, "n1", ("n1",), 0, 4, 90.0, 0.60, 0.40, 0.30, 0.75),
    (3002, "proja", "alice", 8, "n1", ("n1",), 5, 6, 50.0, 0.30, 0.10, 0.20, 0.50),
    (3003, "proja", "bob", 16, "n[1-2]", ("n1", "n2"), 8, 10, 2.0, 0.01, 0.0, 0.01, (0.02, 0.06)),
    (3004, "proja", "bob", 8, "n2", ("n2",), 0, 3, 70.0, 0.50, 0.30, 0.40, 0.60),
    (3005, "proja", "carol", 8, "n2", ("n2",), 12, 13, 45.0, 0.30, 0.20, 0.20, 0.30),
    (3006, "projb", "dave", 8, "n1", ("n1",), 12, 18, 25.0, 0.15, 0.05, 0.10, 0.05),
    (3007, "projb", "erin", 8, "n2", ("n2",), 14, 20, 85.0, 0.70, 0.50, 0.40, 0.90),
    (3008, "projb", "frank", 8, "n1", ("n1",), 18, 19, 80.0, 0.50, 0.30, 0.30, 0.50),
    (3009, "projb", "gina", 8, "n1", ("n1",), 19, 20, 79.5, 0.50, 0.30, 0.30, 0.50),
    (3010, "projb", "heidi", 8, "n2", ("n2",), 20, 24, 100.0, 0.80, 0.60, 0.50, 0.50),
    (3011, "projb", "heidi", 8, "n1", ("n1",), 20, 21, 0.0, 0.0, 0.0, 0.0, 0.50),
]


def at(hour: int) -> datetime:
    return datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC) + timedelta(hours=hour)


def write_files(root) -> None:
    """sacct.psv, inventory.csv and telemetry/dcgm/<day>.parquet under ``root``."""
    lines = [HEAD]
    for jid, acct, user, gpus, nodelist, nodes, h0, h1, *_ in RUNS:
        s, e = at(h0), at(h1)
        el = int((e - s).total_seconds()) - SUSPENDED_S.get(jid, 0)
        submit = (s - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
        tres = f"billing={14 * gpus},cpu={14 * gpus},gres/gpu={gpus},mem=100G,node={len(nodes)}"
        cpu_eff, rss_share = CPU_MEM[jid]
        cpu_s = round(cpu_eff * 14 * gpus * el)
        d, rest = divmod(cpu_s, 86400)
        total_cpu = (f"{d}-" if d else "") + f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
        rss_k = round(rss_share * MEM_MIB / len(nodes) * 1024)
        t0, t1 = f"{s:%Y-%m-%dT%H:%M:%S}", f"{e:%Y-%m-%dT%H:%M:%S}"
        lines.append(f"{jid}|{jid}|t1|gpu|normal|{acct}|{acct}|1|{user}|1|{submit}|{submit}|{t0}|{t1}|{el}|2880|0:0|"
                     f"COMPLETED|{len(nodes)}|{14 * gpus}|{14 * gpus}|100G|{tres}|{tres}|{nodelist}||job{jid}|"
                     f"{total_cpu}|")
        lines.append(f"{jid}.batch|{jid}.batch|t1||||||||{t0}|{t0}|{t0}|{t1}|{el}||0:0|COMPLETED|{len(nodes)}|"
                     f"{14 * gpus}||||{tres}|{nodelist}||batch|{total_cpu}|{rss_k}K")
    (root / "sacct.psv").write_text("\n".join(lines) + "\n")
    (root / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                        "n1,h100,8,gpu,r1,2025-01-01\nn2,h100,8,gpu,r1,2025-01-01\n")
    rows = []
    for k in range(24 * 3600 // STEP_S):
        t = at(0) + timedelta(seconds=STEP_S * k)
        for node in ("n1", "n2"):
            held = [r for r in RUNS if node in r[5] and at(r[6]) <= t < at(r[7])]
            util, sm, tensor, dram, fb = held[0][8:] if held else (0.0, 0.0, 0.0, 0.0, 0.0)
            fb = fb[held[0][5].index(node)] if isinstance(fb, tuple) else fb  # per node of the run
            for gpu in range(8):
                rows.append({"timestamp": t, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}",
                             "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_UTIL": util,
                             "DCGM_FI_PROF_SM_ACTIVE": sm, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": tensor,
                             "DCGM_FI_PROF_DRAM_ACTIVE": dram, "DCGM_FI_DEV_FB_USED": fb * FB_TOTAL_MIB,
                             "DCGM_FI_DEV_FB_FREE": (1 - fb) * FB_TOTAL_MIB, "DCGM_FI_DEV_POWER_USAGE": 100.0})
    (root / "telemetry" / "dcgm").mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
        root / "telemetry" / "dcgm" / f"{DAY}.parquet")


def load(wh, root) -> None:
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.grains import refresh_capacity
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.etl.telemetry_load import load_parquet_dir

    write_files(root)
    assert load_sacct(wh, root / "sacct.psv").quarantined == 0
    load_capacity(wh, inventory=root / "inventory.csv", cluster="t1")
    load_parquet_dir(wh, root, DAY, DAY, cluster="t1")
    refresh_capacity(wh, "t1", *OCT)


def load_day(folder):
    """The day's files written and loaded into ``folder``/warehouse (embedded), with a config file ops.toml
    naming it and the projects; returns the Config."""
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    cfg = config_for(folder)
    with open_warehouse(cfg) as wh:
        load(wh, folder)
    close_embedded()
    return cfg


def config_for(folder):
    """The Config of the warehouse in ``folder``/warehouse with the day's projects, written there as ops.toml
    too (the CLI's tests run commands in ``folder``)."""
    from ops_warehouse.config import Config

    dsn = f"chdb://{folder / 'warehouse'}"
    projects = "".join(f'{account} = "{name}"\n' for account, name in PROJECTS.items())
    (folder / "ops.toml").write_text(f'[warehouse]\ndsn = "{dsn}"\n[projects]\n{projects}')
    cfg = Config(dsn=dsn)
    cfg.projects = dict(PROJECTS)
    return cfg


def duckdb_runs(root, idle_util_pct: float = 5.0, idle_min_minutes: float = 60.0) -> duckdb.DuckDBPyConnection:
    """DuckDB over the raw files: the view ``runs`` (one row per run: user, project, GPU-hours from the sacct
    line, its GPUs' samples' mean utilization and activity, idle by the idle-GPU rule: mean under
    ``idle_util_pct`` over at least ``idle_min_minutes`` of samples) and ``users`` (pooled per user)."""
    con = duckdb.connect()
    con.execute(f"""
        CREATE VIEW sacct AS SELECT * FROM read_csv('{root}/sacct.psv', delim='|', header=true, all_varchar=true);
        CREATE VIEW samples AS SELECT * FROM read_parquet('{root}/telemetry/dcgm/*.parquet');
        CREATE VIEW steps AS
        SELECT split_part(JobID, '.', 1) AS job_id,
               -- TotalCPU as sacct prints it: [D-]HH:MM:SS
               coalesce(CAST(nullif(regexp_extract(TotalCPU, '^(\\d+)-', 1), '') AS DOUBLE), 0) * 86400
               + CAST(split_part(regexp_replace(TotalCPU, '^\\d+-', ''), ':', 1) AS DOUBLE) * 3600
               + CAST(split_part(regexp_replace(TotalCPU, '^\\d+-', ''), ':', 2) AS DOUBLE) * 60
               + CAST(split_part(regexp_replace(TotalCPU, '^\\d+-', ''), ':', 3) AS DOUBLE) AS cpu_s,
               CAST(rtrim(MaxRSS, 'K') AS DOUBLE) / 1024 AS rss_mib
        FROM sacct WHERE JobID LIKE '%.%';
        CREATE VIEW runs AS
        WITH held AS (
            SELECT JobID AS job_id, CAST(NCPUS AS DOUBLE) * CAST(ElapsedRaw AS DOUBLE) AS cpu_alloc_s,
                   CAST(NNodes AS DOUBLE) AS nnodes, "User" AS user_name, Account AS account,
                   CAST(Start AS TIMESTAMP) AS t0, CAST("End" AS TIMESTAMP) AS t1,
                   CAST(regexp_extract(AllocTRES, 'gres/gpu=(\\d+)', 1) AS INTEGER) AS gpus,
                   -- n[1-2] or n1: the nodes the run held
                   CASE WHEN NodeList LIKE '%[%' THEN ['n1', 'n2'] ELSE [NodeList] END AS nodes
            FROM sacct WHERE JobID NOT LIKE '%.%'),
        seen AS (
            SELECT h.job_id, count(*) AS samples, avg(s.DCGM_FI_DEV_GPU_UTIL) AS util_pct,
                   avg(s.DCGM_FI_PROF_SM_ACTIVE) AS sm, avg(s.DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) AS tensor,
                   avg(s.DCGM_FI_PROF_DRAM_ACTIVE) AS dram,
                   -- the GPUs' peaks (each GPU's highest used ÷ its used + free), the run's GPUs alike in time
                   max(s.DCGM_FI_DEV_FB_USED / (s.DCGM_FI_DEV_FB_USED + s.DCGM_FI_DEV_FB_FREE)) AS fb_frac
            FROM held h JOIN samples s
              ON list_contains(h.nodes, s.Hostname) AND s.timestamp >= h.t0 AND s.timestamp < h.t1
            GROUP BY h.job_id)
        SELECT h.job_id, h.user_name, CASE h.account WHEN 'proja' THEN 'A' ELSE 'B' END AS project,
               h.gpus * epoch(h.t1 - h.t0) / 3600 AS gpu_h, h.t0 AS start_ts,
               s.util_pct, s.sm, s.tensor, s.dram, s.fb_frac, h.cpu_alloc_s,
               (SELECT sum(cpu_s) FROM steps t WHERE t.job_id = h.job_id) AS cpu_s,
               (SELECT max(rss_mib) FROM steps t WHERE t.job_id = h.job_id) AS rss_mib,
               102400 AS mem_req_mib,  -- the memory given: AllocTRES mem=100G
               s.samples * {STEP_S} / 3600.0 AS observed_gpu_h,
               s.util_pct < {idle_util_pct} AND s.samples * {STEP_S} / 60.0 / h.gpus >= {idle_min_minutes} AS idle
        FROM held h JOIN seen s USING (job_id);
        CREATE VIEW users AS
        SELECT user_name, project, count(*) AS runs, sum(gpu_h) AS gpu_h,
               sum(util_pct * observed_gpu_h) / sum(observed_gpu_h) AS util_pct,
               sum(sm * observed_gpu_h) / sum(observed_gpu_h) AS sm,
               sum(tensor * observed_gpu_h) / sum(observed_gpu_h) AS tensor,
               sum(dram * observed_gpu_h) / sum(observed_gpu_h) AS dram,
               sum(fb_frac * gpu_h) / sum(gpu_h) AS gpu_mem_eff,
               sum(cpu_s) / sum(cpu_alloc_s) AS cpu_eff,
               sum(rss_mib) / sum(mem_req_mib) AS mem_eff,
               sum(CASE WHEN idle THEN gpu_h ELSE 0 END) AS idle_gpu_h,
               sum(observed_gpu_h * (1 - util_pct / 100)) AS unbusy_gpu_h,
               avg(util_pct) AS mean_of_means_pct
        FROM runs GROUP BY user_name, project;
    """)
    return con
