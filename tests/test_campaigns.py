"""Training campaigns and their effective training time ratio (ETTR) on a hand-built week whose every figure is
worked out by hand below (issue 17, part 1; sql/marts/campaigns.sql).

Cluster t1: two 8-GPU nodes n1, n2. Lustre client telemetry (lustre_exporter's lustre_write_bytes_total) for
2026-10-05 only, a sample every 10 minutes: each node writes 1e6 B/s in the background (6e8 bytes a step),
and n1 writes a checkpoint in the steps ending 02:00 and 04:00 (3e11 bytes: 5e8 B/s, over the 1e8 B/s
threshold). dcgm-exporter on n2 the same day, every 10 minutes: its GPUs at 90 % in the samples 06:30 .. 10:00
(3002 starting up for its first 30 minutes) and 11:10 .. 11:50 (3006, which then hangs), 0 % otherwise.
Jobs (8 GPUs each, sacct lines below):

  3001 alice proja "llm"   n1  submit 10-05 00:00, run 01:00 .. 05:00  NODE_FAIL
  3002 alice proja "llm"   n2  submit 10-05 05:30, run 06:00 .. 10:00  COMPLETED   (resubmitted 30 min after 3001's end)
  3006 dave  proja "llm2"  n2  submit 10-05 11:00, run 11:00 .. 13:00  TIMEOUT     (no checkpoint written)
  3003 bob   projb "sweep" n1  submit 10-05 12:00, run 12:30 .. 14:30  COMPLETED
  3005 alice proja "llm"   n1  submit 10-05 12:00, run 15:00 .. 17:00  COMPLETED   (after 3002 COMPLETED: new work)
  3007 dave  proja "llm2"  n2  submit 10-05 20:00, run 20:00 .. 21:00  COMPLETED   (7 h after 3006's end)
  3004 carol projc "x"     n2  submit 10-06 00:00, run 00:00 .. 03:00  FAILED      (no telemetry that day)

Campaigns (gap 6 h, checkpoint at 1e8 B/s; ETTR's clock from the first start, docs/monthly.md's examples):
  alice llm (1)  runs 3001, 3002 (3002 submitted 30 min after 3001 was interrupted, same user, account, name
                 and 8 GPUs). Initial wait 00:00 .. 01:00 = 3,600 s, apart. Wall 01:00 .. 10:00 = 32,400;
                 running 4 h + 4 h = 28,800; restart wait 06:00 − 05:00 = 3,600; 3001's last checkpoint 04:00,
                 lost 05:00 − 04:00 = 3,600; 3002's start-up 06:00 .. its first busy sample 06:30 = 1,800;
                 productive 28,800 − 3,600 − 1,800 = 23,400; ETTR 23,400 ÷ 32,400 = 0.722. GPU-hours 64,
                 lost 8 (NODE_FAIL), start-up 4 GPU-hours.
  alice llm (2)  3005: submitted 2 h after 3002's end, within the gap, but 3002 COMPLETED: a new campaign.
                 Initial wait 3 h; wall = running = 7,200; ETTR 1.
  dave llm2 (1)  3006 lost 13:00 − 11:00 = 7,200 (no checkpoint in the run: all its work); ETTR 0; 16 GPU-h
                 lost, to a hang (hung_jobs: busy until 11:50, idle samples 12:00 .. 13:00, 60 minutes), not
                 TIMEOUT.
  dave llm2 (2)  3007 submitted 7 h after 3006's end, past the 6-hour gap: a campaign of its own, ETTR 1
                 (with an 8-hour gap the two are one: 2 runs).
  bob sweep      wall 12:30 .. 14:30 = running = 7,200: ETTR 1 (its 30-minute wait is its initial wait).
  carol x        FAILED without telemetry: lost unknown, ETTR unknown (NULL), never 0.
Per project (goodput.sql: GPU-time weighted, GPUs × seconds; no campaign reaches 64 GPUs, so ``ettr`` is
NULL and ``ettr_all`` weighs them all; with campaign_min_gpus 8, ``ettr`` is the same): A = 8 × (23,400 + 7,200
+ 0 + 3,600) ÷ 8 × (32,400 + 7,200 + 7,200 + 3,600) = 34,200 ÷ 50,400 = 0.678571; B 1.0; C unknown (its one
campaign is). A's restart overhead: 1 hour of restart wait, 1,800 s of start-up (4 GPU-hours).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.grains import refresh_history
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir

pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

UTC = timezone.utc
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName")
JOBS = [  # id, account, user, node, submit, start, end, state, name
    (3001, "proja", "alice", "n1", "2026-10-05T00:00", "2026-10-05T01:00", "2026-10-05T05:00", "NODE_FAIL", "llm"),
    (3002, "proja", "alice", "n2", "2026-10-05T05:30", "2026-10-05T06:00", "2026-10-05T10:00", "COMPLETED", "llm"),
    (3006, "proja", "dave", "n2", "2026-10-05T11:00", "2026-10-05T11:00", "2026-10-05T13:00", "TIMEOUT", "llm2"),
    (3003, "projb", "bob", "n1", "2026-10-05T12:00", "2026-10-05T12:30", "2026-10-05T14:30", "COMPLETED", "sweep"),
    (3005, "proja", "alice", "n1", "2026-10-05T12:00", "2026-10-05T15:00", "2026-10-05T17:00", "COMPLETED", "llm"),
    (3007, "proja", "dave", "n2", "2026-10-05T20:00", "2026-10-05T20:00", "2026-10-05T21:00", "COMPLETED", "llm2"),
    (3004, "projc", "carol", "n2", "2026-10-06T00:00", "2026-10-06T00:00", "2026-10-06T03:00", "FAILED", "x"),
]


@pytest.fixture
def site(tmp_path, cfg):
    from ops_warehouse.warehouse import open_warehouse

    cfg.projects = {"proja": "A", "projb": "B", "projc": "C"}
    wh = open_warehouse(cfg)
    lines = [HEAD]
    for jid, acct, user, node, submit, start, end, state, name in JOBS:
        el = int((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
        tres = "billing=112,cpu=112,gres/gpu=8,mem=100G,node=1"
        exit_code = "0:0" if state == "COMPLETED" else "1:0"
        lines.append(f"{jid}|{jid}|t1|gpu|normal|{acct}|{acct}|1|{user}|1|{submit}:00|{submit}:00|{start}:00|"
                     f"{end}:00|{el}|2880|{exit_code}|{state}|1|112|112|100G|{tres}|{tres}|{node}||{name}")
    (tmp_path / "sacct.psv").write_text("\n".join(lines) + "\n")
    assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
    t0 = datetime(2026, 10, 5, tzinfo=UTC)
    rows, total = [], {"n1": 0.0, "n2": 0.0}
    for k in range(144):
        t = t0 + timedelta(minutes=10 * k)
        for i, node in enumerate(("n1", "n2")):
            ckpt = node == "n1" and t in (t0 + timedelta(hours=2), t0 + timedelta(hours=4))
            total[node] += 3e11 if ckpt else 6e8  # the bytes written in the step ending at t
            rows.append({"timestamp": t, "instance": f"{node}:9169", "component": "client",
                         "target": f"lustre01-ffff{i}", "lustre_read_bytes_total": 0.0,
                         "lustre_write_bytes_total": total[node]})
    (tmp_path / "lustre").mkdir()
    pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
        tmp_path / "lustre" / "2026-10-05.parquet")
    gpu_rows = []
    for k in range(144):
        t = t0 + timedelta(minutes=10 * k)
        util = 90.0 if (t0 + timedelta(minutes=390) <= t <= t0 + timedelta(hours=10)  # 3002: busy from 06:30
                        or t0 + timedelta(minutes=670) <= t <= t0 + timedelta(minutes=710)) else 0.0  # 3006
        gpu_rows += [{"timestamp": t, "Hostname": "n2", "gpu": str(g), "UUID": f"GPU-n2-{g}",
                      "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_UTIL": util} for g in range(8)]
    (tmp_path / "dcgm").mkdir()
    pl.DataFrame(gpu_rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
        tmp_path / "dcgm" / "2026-10-05.parquet")
    load_parquet_dir(wh, tmp_path, date(2026, 10, 5), date(2026, 10, 5), cluster="t1")
    return wh


def test_campaigns_and_their_ettr(site):
    c = run_mart(site, "campaigns", cluster="t1", window=OCT)
    got = {(r["user"], r["job_name"], r["first_start_ts"].hour): r for r in c.to_dicts()}
    assert len(got) == 6
    a = got[("alice", "llm", 1)]
    assert (a["runs"], a["interrupted_runs"], a["job_ids"], a["wall_s"], a["initial_wait_s"], a["running_s"],
            a["restart_wait_s"], a["lost_s"], a["restart_startup_s"], a["productive_s"]) == (
        2, 1, ["3001", "3002"], 32_400, 3_600, 28_800, 3_600, 3_600, 1_800, 23_400)
    assert a["ettr"] == pytest.approx(23_400 / 32_400) and a["gpu_h"] == pytest.approx(64)
    assert (a["lost_gpu_h"], a["lost_node_fail_gpu_h"], a["last_state"]) == (pytest.approx(8), pytest.approx(8),
                                                                                       "COMPLETED")
    assert (a["restarts"], a["restarts_without_startup"], a["restart_startup_gpu_h"]) == (1, 0, pytest.approx(4))
    a2 = got[("alice", "llm", 15)]  # after a COMPLETED run: new work, whatever the gap
    assert (a2["job_ids"], a2["initial_wait_s"], a2["wall_s"], a2["ettr"]) == (["3005"], 10_800, 7_200, 1.0)
    d = got[("dave", "llm2", 11)]
    assert (d["lost_s"], d["ettr"], d["lost_hang_gpu_h"], d["lost_timeout_gpu_h"]) == (
        7_200, 0.0, pytest.approx(16), 0)
    assert got[("dave", "llm2", 20)]["job_ids"] == ["3007"]  # 7 h after the interruption: past the gap
    b = got[("bob", "sweep", 12)]
    assert (b["wall_s"], b["initial_wait_s"], b["running_s"], b["lost_s"], b["ettr"]) == (7_200, 1_800, 7_200, 0, 1.0)
    x = got[("carol", "x", 0)]
    assert (x["lost_s"], x["ettr"], x["lost_gpu_h"]) == (None, None, None)  # unknown, never 0
    # the gap is a parameter: at 8 h dave's two runs are one campaign; alice's 3005 stays apart (3002 completed)
    wide = run_mart(site, "campaigns", cluster="t1", window=OCT, campaign_gap_hours=8.0)
    dave = wide.filter(pl.col("user") == "dave").row(0, named=True)
    assert (dave["job_ids"], dave["wall_s"], dave["restart_wait_s"], dave["restart_startup_s"], dave["ettr"]) == (
        ["3006", "3007"], 36_000, 25_200, 3_600, 0.0)  # 3007 never busy: its whole hour is start-up
    assert sorted(wide.filter(pl.col("user") == "alice")["runs"].to_list()) == [1, 2]
    # so is the checkpoint rate: above 5e8 B/s no checkpoint is seen, and 3001 lost all its 4 hours
    site.cfg.ckpt_write_bytes_per_s = 6e8  # the site's ([reports]), applied when the loads form run_telemetry
    refresh_history(site)
    high = run_mart(site, "campaigns", cluster="t1", window=OCT)
    assert high.filter((pl.col("user") == "alice") & (pl.col("runs") == 2))["lost_s"].item() == 14_400
    # (3002's start-up is still its own: 23,400 − 10,800 more lost = 12,600 productive of 32,400)
    assert high.filter((pl.col("user") == "alice") & (pl.col("runs") == 2))["productive_s"].item() == 12_600
    # a project's campaigns only; a project name is a parameter, never SQL
    assert set(run_mart(site, "campaigns", cluster="t1", window=OCT, project="A")["user"]) == {"alice", "dave"}
    assert run_mart(site, "campaigns", cluster="t1", window=OCT, project="A' OR 1=1 --").height == 0


def test_goodput_per_project(site):
    g = {r["project_key"]: r for r in run_mart(site, "goodput", cluster="t1", window=OCT).to_dicts()}
    assert set(g) == {"", "A", "B", "C"}
    assert (g["A"]["campaigns"], g["A"]["unknown_campaigns"], g["A"]["large_campaigns"]) == (4, 0, 0)
    assert g["A"]["ettr"] is None  # no campaign of 64 GPUs or more
    assert g["A"]["ettr_all"] == pytest.approx(34_200 / 50_400)
    assert g["B"]["ettr_all"] == 1.0 and g["C"]["ettr_all"] is None and g["C"]["unknown_campaigns"] == 1
    assert g["A"]["lost_gpu_h"] == pytest.approx(8 + 16)
    assert (g["A"]["lost_node_fail_gpu_h"], g["A"]["lost_hang_gpu_h"], g["A"]["lost_timeout_gpu_h"]) == (
        pytest.approx(8), pytest.approx(16), 0)
    assert (g["A"]["restart_wait_hours"], g["A"]["restart_startup_hours"], g["A"]["restart_overhead_gpu_h"]) == (
        pytest.approx(1), pytest.approx(0.5), pytest.approx(4))  # 8 GPUs × the 0.5 h start-up: the wait holds none
    assert g["A"]["initial_wait_hours"] == pytest.approx(1 + 3)  # alice's two first waits, in no ETTR
    # the whole cluster: the campaigns whose ETTR is known (A's four, B's), C's counted as unknown
    assert g[""]["ettr_all"] == pytest.approx((34_200 + 7_200) / (50_400 + 7_200))
    assert (g[""]["campaigns"], g[""]["unknown_campaigns"]) == (6, 1)
    # the size that counts as large training is a parameter: at 8 GPUs every campaign is in ``ettr``
    small = {r["project_key"]: r for r in run_mart(site, "goodput", cluster="t1", window=OCT,
                                                   campaign_min_gpus=8).to_dicts()}
    assert small["A"]["ettr"] == pytest.approx(34_200 / 50_400) and small["A"]["large_campaigns"] == 4
