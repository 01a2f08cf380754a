"""A month still in progress in the loaded data is reported through the data's as-of time, not to its end.

Cluster p1, two 8-GPU H100 nodes n1, n2 in service since 2025. The sacct extract below was taken on
2026-10-15 at 12:30 UTC:
  J1 7001  8 GPUs n1      10-01 00:00 .. 10-11 00:00 COMPLETED           240 h × 8  = 1,920 GPU-h
  J2 7002 16 GPUs n[1-2]  10-14 12:00 .. RUNNING, elapsed 24 h 30 min      24.5 h × 16 =   392
  J3 7003  8 GPUs         submitted 10-15 11:00, PENDING (holds nothing)
so the as-of time of the loaded history (sql/intermediate/cluster_as_of.sql) is J2's start + elapsed = 10-15 12:30.
  hours of October known   14 days × 24 + 12.5 h                          = 348.5 h
  capacity                 2 nodes × 8 GPUs × 348.5 h                     = 5,576 GPU-h
  drained                  n2 DRAIN 10-11 00:00 .. 10-12 00:00: 24 h × 8  =   192
  available                5,576 − 192                                    = 5,384
  allocated                1,920 + 392                                    = 2,312
  utilization              2,312 / 5,384                                  = 0.42942...
  free                     5,384 − 2,312 (no reservation before the as-of) = 3,072
(counting the whole month, 744 h, as the bug did: capacity 11,904, available 11,712, utilization 0.197.)
Loaded beyond the as-of, and so not in October's figures: a DRAIN of n1 from 10-15 18:00 still open, a
reservation of n1 for 10-20 .. 10-22, and n1's dcgm-exporter telemetry for the whole of 10-15 (50%
utilization, Xid 79 on GPU 0 from 18:00, GPU 1 thermally throttled 20:00 .. 22:00). Telemetry is hourly:
it counts for the hours that ended by the as-of time, 10-15 00:00 .. 12:00, 12 h × 8 GPUs = 96 GPU-h (the
file holds 192). The daily timeline has 15 days, the last with 12.5 h × 16 = 200 GPU-h of capacity.
Cluster q1 (one 8-GPU node, no jobs loaded) has no as-of time and is not cut: 744 h × 8 = 5,952 GPU-h.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.grains import refresh_capacity
from ops_warehouse.analytics.api import Connection
from ops_warehouse.analytics.monthly import monthly_report
from ops_warehouse.reports.monthly_render import to_html, to_json, to_markdown
from tests.warehouse_copies import Loaded

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

UTC = timezone.utc
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
AS_OF = datetime(2026, 10, 15, 12, 30, tzinfo=UTC)
HOURS = 14 * 24 + 12.5
CAPACITY, DRAINED, ALLOCATED = 2 * 8 * HOURS, 24 * 8, 240 * 8 + 24.5 * 16
AVAILABLE = CAPACITY - DRAINED
HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName")


def _line(jid, gpus, nodes, nn, submit, start, end, elapsed_s, state):
    tres = f"billing={14 * gpus},cpu={14 * gpus},gres/gpu={gpus},mem=100G,node={nn}"
    return (f"{jid}|{jid}|p1|gpu|normal|proja|proja|1|alice|1|{submit}|{submit}|{start}|{end}|{elapsed_s}|2880|"
            f"0:0|{state}|{nn}|{14 * gpus}|{14 * gpus}|100G|{tres}|{tres if start != 'Unknown' else ''}|{nodes}||"
            f"job{jid}")


def _telemetry(root):
    t0 = datetime(2026, 10, 15, tzinfo=UTC)
    rows = []
    for gpu in range(8):
        for k in range(144):
            t = t0 + timedelta(minutes=10 * k)
            hot = gpu == 1 and 20 <= t.hour < 22
            rows.append({"timestamp": t, "Hostname": "n1", "gpu": str(gpu), "UUID": f"GPU-n1-{gpu}",
                         "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DEV_GPU_UTIL": 50.0,
                         "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.2, "DCGM_FI_PROF_SM_ACTIVE": 0.4,
                         "DCGM_FI_DEV_POWER_USAGE": 300.0,
                         "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": float(k * 1.8e8),
                         "DCGM_FI_DEV_GPU_TEMP": 90.0 if hot else 50.0,
                         "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0x40 if hot else 0,
                         "DCGM_FI_DEV_XID_ERRORS": 79 if gpu == 0 and t.hour >= 18 else 0})
    d = root / "telemetry" / "dcgm"
    d.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(d / "2026-10-15.parquet")


def _build(wh, tmp_path, _) -> None:
    (tmp_path / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                            "n1,h100,8,gpu,r1,2025-01-01\nn2,h100,8,gpu,r1,2025-01-01\n")
    (tmp_path / "events.psv").write_text(
        "Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
        "p1|n2|2026-10-11T00:00:00|2026-10-12T00:00:00|DRAIN|firmware update|root(0)\n"
        "p1|n1|2026-10-15T18:00:00|Unknown|DRAIN|Xid 79|root(0)\n")
    (tmp_path / "resv.txt").write_text(
        "ReservationName=resA StartTime=2026-10-20T00:00:00 EndTime=2026-10-22T00:00:00 Duration=2-00:00:00\n"
        "   Nodes=n1 NodeCnt=1 CoreCnt=112 Features=(null) PartitionName=gpu Flags=\n"
        "   TRES=cpu=112\n   Users=(null) Groups=(null) Accounts=proja Licenses=(null) State=INACTIVE\n")
    assert load_capacity(wh, inventory=tmp_path / "inventory.csv", events=tmp_path / "events.psv",
                         reservations=tmp_path / "resv.txt", cluster="p1") == {
        "node_inventory": 2, "node_event": 2, "reservation": 1}
    (tmp_path / "q1.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                     "q1n1,h100,8,gpu,r9,2025-01-01\n")
    load_capacity(wh, inventory=tmp_path / "q1.csv", cluster="q1")
    _telemetry(tmp_path)
    load_parquet_dir(wh, tmp_path, date(2026, 10, 15), date(2026, 10, 15), cluster="p1")
    # the grain as it stood before the jobs were loaded (or as a warehouse from before the fix holds it): the
    # whole month; the refresh after the load must replace it
    refresh_capacity(wh, "p1", *OCT)
    (tmp_path / "sacct.psv").write_text("\n".join([
        HEAD,
        _line(7001, 8, "n1", 1, "2026-09-30T23:00:00", "2026-10-01T00:00:00", "2026-10-11T00:00:00", 240 * 3600,
              "COMPLETED"),
        _line(7002, 16, "n[1-2]", 2, "2026-10-14T11:00:00", "2026-10-14T12:00:00", "Unknown", 24 * 3600 + 1800,
              "RUNNING"),
        _line(7003, 8, "None assigned", 1, "2026-10-15T11:00:00", "Unknown", "Unknown", 0, "PENDING"),
    ]) + "\n")
    assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
    refresh_capacity(wh, "p1", *OCT)


@pytest.fixture(scope="module")
def loaded(request, tmp_path_factory):
    """The month in progress loaded once for the module (its loads were most of each test's time)."""
    return Loaded("embedded", request, tmp_path_factory, _build, {"proja": "A"})


@pytest.fixture
def in_progress(loaded, tmp_path, request):
    """A copy of the loaded month of the test's own (the first test refreshes q1's grains in it)."""
    with loaded.opened_copy(tmp_path, request) as wh:
        yield wh


def test_the_grain_and_the_marts_stop_at_the_as_of_time(in_progress):
    wh = in_progress
    u = run_mart(wh, "utilization", cluster="p1", window=OCT).filter(pl.col("level") == "cluster").row(0, named=True)
    assert u["capacity_gpu_h"] == pytest.approx(CAPACITY) == 5576
    assert u["drained_gpu_h"] == pytest.approx(DRAINED) and u["down_gpu_h"] == 0
    assert u["available_gpu_h"] == pytest.approx(AVAILABLE) == 5384
    assert u["allocated_gpu_h"] == pytest.approx(ALLOCATED) == 2312
    assert u["utilization"] == pytest.approx(2312 / 5384)
    assert u["free_gpu_h"] == pytest.approx(AVAILABLE - ALLOCATED) and u["reserved_gpu_h"] == 0
    assert u["telemetry_gpu_h"] == pytest.approx(12 * 8) and u["allocated_idle_gpu_h"] == 0
    through = run_mart(wh, "data_through", cluster="p1", window=OCT).row(0, named=True)
    assert (through["through_ts"], through["partial"], through["as_of_ts"]) == (AS_OF, 1, AS_OF)

    daily = run_mart(wh, "utilization_daily", cluster="p1", window=OCT)
    assert daily.height == 15 and daily["day"].max() == date(2026, 10, 15)
    assert daily["capacity_gpu_h"].sum() == pytest.approx(CAPACITY)
    assert daily.filter(pl.col("day") == date(2026, 10, 15))["capacity_gpu_h"].item() == pytest.approx(12.5 * 16)
    # nothing after the as-of: n1's drain from 18:00, the reservation, the Xid and the throttled hours
    assert run_mart(wh, "reservations", cluster="p1", window=OCT).height == 0
    assert run_mart(wh, "node_failures", cluster="p1", window=OCT).select("node", "drained_hours").rows() == [
        ("n2", 24.0)]
    assert run_mart(wh, "xid_events", cluster="p1", window=OCT).height == 0
    assert run_mart(wh, "throttling", cluster="p1", window=OCT).height == 0
    heat = run_mart(wh, "gpu_heatmap", cluster="p1", window=OCT)
    assert heat.height == 8 and heat["gpu_util_pct"].to_list() == pytest.approx([50.0] * 8)
    cost = run_mart(wh, "cost", cluster="p1", window=OCT).filter(pl.col("model") == "all").row(0, named=True)
    assert cost["capacity_gpu_h"] == pytest.approx(CAPACITY)
    assert cost["capex"] == pytest.approx(CAPACITY * 300_000 / 8 / (5 * 8766))

    # a complete window is not cut, and a cluster without job records has no as-of time to cut at
    sep = (datetime(2026, 9, 1, tzinfo=UTC), OCT[0])
    assert run_mart(wh, "data_through", cluster="p1", window=sep).row(0, named=True)["partial"] == 0
    refresh_capacity(wh, "q1", *OCT)
    q = run_mart(wh, "utilization", cluster="q1", window=OCT).filter(pl.col("level") == "cluster").row(0, named=True)
    assert q["capacity_gpu_h"] == pytest.approx(744 * 8)
    assert run_mart(wh, "data_through", cluster="q1", window=OCT).row(0, named=True)["partial"] == 0


def test_the_report_says_partial_through_the_as_of_time(in_progress):
    r = monthly_report(Connection(in_progress), month=date(2026, 10, 1), cluster="p1")
    assert r["schema_version"] == "5.1" and r["month_complete"] is False
    assert r["period"] == {"as_of": "2026-10-15T12:30:00+00:00", "partial_through": "2026-10-15T12:30:00+00:00"}
    cl = next(u for u in r["utilization"] if u["level"] == "cluster")
    assert (cl["capacity_gpu_h"], cl["available_gpu_h"], cl["allocated_gpu_h"]) == pytest.approx((5576, 5384, 2312))
    assert cl["utilization"] == pytest.approx(2312 / 5384)
    assert sum(p["allocated_gpu_h"] for p in r["chargeback"]) == pytest.approx(2312)
    assert json.loads(to_json(r))["period"]["partial_through"] == "2026-10-15T12:30:00+00:00"
    md, page = to_markdown(r), to_html(r, charts={})
    assert md.startswith("# Monthly report 2026-10 (partial, through 2026-10-15 12:30 UTC): p1, cluster\n")
    assert "2026-10 (partial, through 2026-10-15 12:30 UTC): every figure stops" in md
    assert "**42.9%**" in md
    assert "<title>Monthly report 2026-10 (partial, through 2026-10-15 12:30 UTC): p1, cluster</title>" in page
    # September is complete (no jobs loaded in it): no partial mark
    s = monthly_report(Connection(in_progress), month=date(2026, 9, 1), cluster="p1")
    assert s["period"]["partial_through"] is None and s["month_complete"] is True
    assert "partial" not in to_markdown(s)
