"""The monthly models on a hand-built month whose every figure is worked out by hand below.

Cluster t1, October 2026 (744 h): three 8-GPU H100 nodes, n1 and n2 in rack r1, n3 in rack r2.
  capacity   3 × 8 × 744                                             = 17,856 GPU-h
  n2 DRAIN 10-10 00:00 .. 10-12 00:00 (48 h); J5 holds all 8 GPUs of n2 for its first 4 h
  n3 DOWN  10-20 06:00 .. 10:00 after Xid 79, and DRAIN 08:00 .. 12:00 (merged: unusable 06..12, 4 h down)
  down       n3 4 h × 8                                              =     32
  drained    n2 48 × 8 − 32 (J5 still running) + n3 2 h × 8          =    368
  available  17,856 − 32 − 368                                       = 17,456
Reservation resA: n1 for proja, 10-05 .. 10-07 (48 h × 8 = 384 GPU-h).
Jobs (sacct lines below):
  J0 1000 proja alice  8 GPUs n1 09-30 20:00 .. 10-01 04:00 COMPLETED (4 h in September, 4 h in October)   32
  J1 1001 proja alice  8 GPUs n1 10-05 00:00 .. 10-06 00:00 COMPLETED in resA   192 GPU-h
  J2 1002 projb bob   16 GPUs n[2-3] 10-20 02:00 .. 06:00 NODE_FAIL (Xid 79 on n3 at 05:59)   64
  J3 1003 proja alice  1 GPU  n3 10-31 22:00 .. 11-01 02:00 COMPLETED (2 h in October)          2
  J4 1004 projb bob    4 GPUs n2 10-15 00:00 .. 10:00 FAILED, GPUs idle all along               40
  J5 1005 projc carol  8 GPUs n2 10-09 20:00 .. 10-10 04:00 COMPLETED                           64
  allocated 394; utilization 394 / 17,456; reserved idle 384 − 192 = 192; free 17,456 − 394 − 192 = 16,870.
September (720 h): capacity 3 × 8 × 720 = 17,280, allocated 32 (J0).
Telemetry (10-minute samples) for 10-05, 10-15 and 10-20: J1's GPUs at 80% utilization, tensor 0.5, 500 W;
n1 GPU 3 thermally throttled (bit 0x40) 10:00 .. 12:00 on 10-05; every other GPU idle at 0%, 60 W (so J2 and
J4 are allocated-but-idle: 64 + 40 GPU-h).
Node scorecard (node_health.sql): multi-node runs with GPUs that ended in October, per node: J2 alone, on n2
and n3 (1 each, NODE_FAIL: failed 1 each); the cluster's failed share 2 / 2 = 1, expected 1 each, P(X ≥ 1) at
Poisson(1) = 0.632: not significant, no points. No hangs (J2 and J4 were never busy), no run behind its peers
(J2's nodes both at 0%). Hardware faults: n3's Xid 79 at 05:59 and its DOWN at 06:00 are one fault (within 10
minutes); its DRAIN at 08:00 ("after Xid 79: burn-in", not planned) counts a point; n2's thermal DRAIN a
point; n1 2 h throttled = 2 ÷ 24 days × 30 ÷ 31 = 0.0806. Points: n3 3 + 1 = 4, n2 1, n1 0.0806: one fault in
a month is chance, nobody on the swap list (6). Ranks n3, n2, n1. With --reservation resA: n1 alone, the same
figures (the rates stay the cluster's).
Energy (job_energy.sql, energy.sql): the GPUs' energy counters, 300 kJ a 10-minute step busy, 36 kJ idle; no
IPMI node power, so no rest-of-node energy ("missing"). J1: 143 steps on 10-05 (the day's first sample has no
earlier one) × 300 kJ × 8 GPUs = 95.333 kWh. J2: 10-20 02:00 .. 06:00, 24 steps × 36 kJ × 16 GPUs = 3.84 kWh.
J4: 10-15 00:00 .. 10:00, 5 + 9 × 6 = 59 steps × 36 kJ × 8 GPUs (the run alone on n2 holds its idle GPUs'
energy too) = 4.72 kWh. J0, J3, J5: no telemetry, 0. Facility × PUE 1.3; carbon at 400 g/kWh. A: 95.333 kWh
over 226 GPU-h (J0 32, J1 192, J3 2); B: 8.56 kWh over 104 GPU-h; C: 0 over 64.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.grains import one_refresh, refresh_capacity
from ops_warehouse.analytics.api import Connection
from ops_warehouse.analytics.monthly import monthly_report
from ops_warehouse.analytics.pseudonyms import pseudonym, pseudonym_key
from ops_warehouse.reports.monthly_render import to_html, to_json, to_markdown
from ops_warehouse.config import Config
from tests.sites import built_site

# the loads and reports here run on the embedded warehouse and on a ClickHouse server (tests/conftest.py)
pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

UTC = timezone.utc
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
PROJECTS = {"proja": "A", "projb": "B", "projc": "C"}
HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName")
JOBS = [  # id, account, user, gpus, nodes, start, end, state, exit, reservation
    (1000, "proja", "alice", 8, "n1", "2026-09-30T20:00:00", "2026-10-01T04:00:00", "COMPLETED", "0:0", ""),
    (1001, "proja", "alice", 8, "n1", "2026-10-05T00:00:00", "2026-10-06T00:00:00", "COMPLETED", "0:0", "resA"),
    (1002, "projb", "bob", 16, "n[2-3]", "2026-10-20T02:00:00", "2026-10-20T06:00:00", "NODE_FAIL", "0:0", ""),
    (1003, "proja", "alice", 1, "n3", "2026-10-31T22:00:00", "2026-11-01T02:00:00", "COMPLETED", "0:0", ""),
    (1004, "projb", "bob", 4, "n2", "2026-10-15T00:00:00", "2026-10-15T10:00:00", "FAILED", "1:0", ""),
    (1005, "projc", "carol", 8, "n2", "2026-10-09T20:00:00", "2026-10-10T04:00:00", "COMPLETED", "0:0", ""),
]
CAPACITY, DOWN, DRAINED, ALLOCATED, RESERVED, RESERVED_IDLE = 17_856, 32, 368, 394, 384, 192
AVAILABLE = CAPACITY - DOWN - DRAINED
FREE = AVAILABLE - ALLOCATED - RESERVED_IDLE


def _sacct(path):
    lines = [HEAD]
    for jid, acct, user, gpus, nodes, s, e, state, exit_code, resv in JOBS:
        nn = 2 if "[" in nodes else 1
        el = int((datetime.fromisoformat(e) - datetime.fromisoformat(s)).total_seconds())
        submit = (datetime.fromisoformat(s) - timedelta(minutes=30)).isoformat()
        tres = f"billing={14 * gpus},cpu={14 * gpus},gres/gpu={gpus},mem=100G,node={nn}"
        lines.append(f"{jid}|{jid}|t1|gpu|normal|{acct}|{acct}|1|{user}|1|{submit}|{submit}|{s}|{e}|{el}|"
                     f"2880|{exit_code}|{state}|{nn}|{14 * gpus}|{14 * gpus}|100G|{tres}|{tres}|{nodes}|{resv}|job{jid}")
    path.write_text("\n".join(lines) + "\n")


def _telemetry(root):
    """dcgm-exporter day files for 10-05, 10-15, 10-20 (10-minute steps)."""
    for day in (date(2026, 10, 5), date(2026, 10, 15), date(2026, 10, 20)):
        t0 = datetime(day.year, day.month, day.day, tzinfo=UTC)
        ts = [t0 + timedelta(minutes=10 * k) for k in range(144)]
        rows = []
        for node in ("n1", "n2", "n3"):
            for gpu in range(8):
                for k, t in enumerate(ts):
                    busy = node == "n1" and day == date(2026, 10, 5)
                    hot = busy and gpu == 3 and 10 <= t.hour < 12
                    xid = 79 if (node == "n3" and gpu == 0 and day == date(2026, 10, 20)
                                 and t >= datetime(2026, 10, 20, 6, 0, tzinfo=UTC)) else 0
                    rows.append({"timestamp": t, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}",
                                 "modelName": "NVIDIA H100 80GB HBM3",
                                 "DCGM_FI_DEV_GPU_UTIL": 80.0 if busy else 0.0,
                                 "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.5 if busy else 0.0,
                                 "DCGM_FI_PROF_SM_ACTIVE": 0.7 if busy else 0.0,
                                 "DCGM_FI_DEV_POWER_USAGE": 500.0 if busy else 60.0,
                                 # mJ counter: 500 W × 600 s = 3e8 mJ a step when busy
                                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": float(k * (3e8 if busy else 3.6e7)),
                                 "DCGM_FI_DEV_GPU_TEMP": 90.0 if hot else 50.0,
                                 "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0x40 if hot else 0,
                                 "DCGM_FI_DEV_XID_ERRORS": xid})
        d = root / "dcgm"
        d.mkdir(parents=True, exist_ok=True)
        pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
            d / f"{day}.parquet")


def build_scenario(tmp_path, cfg):
    """The scenario's month loaded into the warehouse ``cfg`` names (files written in ``tmp_path``)."""
    from ops_warehouse.warehouse import open_warehouse

    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    _sacct(tmp_path / "sacct.psv")
    (tmp_path / "inventory.csv").write_text(
        "node,gpu_model,gpus,partition,rack,in_service_date\n"
        "n1,h100,8,gpu,r1,2025-01-01\nn2,h100,8,gpu,r1,2025-01-01\nn3,h100,8,gpu,r2,2025-01-01\n")
    (tmp_path / "events.psv").write_text(
        "Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
        "t1|n2|2026-10-10T00:00:00|2026-10-12T00:00:00|DRAIN|thermal: GPU over temp|root(0)\n"
        "t1|n3|2026-10-20T06:00:00|2026-10-20T10:00:00|DOWN|Xid 79: GPU has fallen off the bus|root(0)\n"
        "t1|n3|2026-10-20T08:00:00|2026-10-20T12:00:00|DRAIN|after Xid 79: burn-in|root(0)\n"
        "t1||2026-10-01T00:00:00|Unknown|CLUSTER_TRES|cluster TRES change|slurm(64030)\n")
    (tmp_path / "resv.txt").write_text(
        "ReservationName=resA StartTime=2026-10-05T00:00:00 EndTime=2026-10-07T00:00:00 Duration=2-00:00:00\n"
        "   Nodes=n1 NodeCnt=1 CoreCnt=112 Features=(null) PartitionName=gpu Flags=\n"
        "   TRES=cpu=112\n   Users=(null) Groups=(null) Accounts=proja Licenses=(null) State=INACTIVE\n")
    _telemetry(tmp_path / "telemetry")
    # the loads and the month's grains in one refresh at the end (etl/grains.py one_refresh, as `etl nightly` runs
    # a night's): every table's checksum as with each load refreshing its hours and the month again after them
    # (docs/benchmarks.md, issue 51 round 9)
    with one_refresh(wh):
        assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
        assert load_capacity(wh, inventory=tmp_path / "inventory.csv", events=tmp_path / "events.psv",
                             reservations=tmp_path / "resv.txt", cluster="t1") == {
            "node_inventory": 3, "node_event": 3, "reservation": 1}
        load_parquet_dir(wh, tmp_path, date(2026, 10, 5), date(2026, 10, 20), cluster="t1")
        refresh_capacity(wh, "t1", *OCT)
    return wh


def _built_embedded(out) -> dict:
    from ops_warehouse.warehouse import close_embedded

    build_scenario(out, Config(dsn=f"chdb://{out / 'warehouse'}")).close()
    close_embedded()
    return {}


def scenario_warehouse(form, folder, tmp_path_factory, request):
    """The scenario's month loaded, a copy of the caller's own: on the server, of the one loaded through the
    server once by this worker (ChdbServer.kept_warehouse); embedded, of the one built once (tests/sites.py; its
    loads are the same code on the same files)."""
    from ops_warehouse.warehouse import open_warehouse

    if form == "server":
        def load(dsn):
            build_scenario(folder / "scenario-files", Config(dsn=dsn)).close()

        (folder / "scenario-files").mkdir(parents=True, exist_ok=True)
        cfg = Config(dsn=request.getfixturevalue("chdb_server").kept_warehouse("monthly-scenario", load))
    else:
        site = built_site(tmp_path_factory, "monthly-scenario", _built_embedded)
        cfg = Config(dsn=f"chdb://{site.open_copy(folder)}")
    cfg.projects = PROJECTS
    return open_warehouse(cfg)


@pytest.fixture(scope="module")
def scenario(form, tmp_path_factory, request):
    """One scenario warehouse per form for the module's tests: they only read it."""
    from ops_warehouse.warehouse import close_embedded

    wh = scenario_warehouse(form, tmp_path_factory.mktemp(f"scenario-{form}"), tmp_path_factory, request)
    yield wh
    wh.close()
    close_embedded()


@pytest.fixture(scope="module")
def report_a(scenario):
    """Project A's October report as `ops-report monthly --project A` makes it, made once per form for the tests
    that only read it (three made the same report each: ~2 CPU-s apiece, docs/benchmarks.md issue 51 round 9)."""
    return monthly_report(Connection(scenario), project="A", cluster="t1")


def mart(wh, name, project="", **params):
    return run_mart(wh, name, cluster="t1", window=OCT, project=project, **params)


def test_capacity_idle_and_utilization(scenario):
    u = mart(scenario, "utilization").filter(pl.col("level") == "cluster").row(0, named=True)
    assert u["capacity_gpu_h"] == pytest.approx(CAPACITY)
    assert u["down_gpu_h"] == pytest.approx(DOWN)
    assert u["drained_gpu_h"] == pytest.approx(DRAINED)
    assert u["available_gpu_h"] == pytest.approx(AVAILABLE)
    assert u["allocated_gpu_h"] == pytest.approx(ALLOCATED)
    assert u["utilization"] == pytest.approx(ALLOCATED / AVAILABLE)
    assert u["reserved_gpu_h"] == pytest.approx(RESERVED)
    assert u["reserved_idle_gpu_h"] == pytest.approx(RESERVED_IDLE)
    assert u["free_gpu_h"] == pytest.approx(FREE)
    # telemetry covers 10-05, 10-15, 10-20: J4's 4 GPUs idle 10 h and J2's 16 idle 4 h (stalled before the
    # node failed); J1 busy
    assert u["allocated_idle_gpu_h"] == pytest.approx(40 + 64)
    daily = mart(scenario, "utilization_daily")
    assert daily.height == 31 and daily["capacity_gpu_h"].sum() == pytest.approx(CAPACITY)
    d10 = daily.filter(pl.col("day") == date(2026, 10, 10)).row(0, named=True)
    assert d10["drained_gpu_h"] == pytest.approx(24 * 8 - 4 * 8) and d10["allocated_gpu_h"] == pytest.approx(32)


def test_job_sizes_run_times_and_end_states(scenario):
    s = {r["size_class"]: r for r in mart(scenario, "job_sizes").to_dicts()}
    # J0 started in September: its October hours count, the job does not
    assert {k: (v["jobs"], round(v["gpu_h"], 6)) for k, v in s.items()} == {
        "1": (1, 2.0), "2-8": (3, 328.0), "9-64": (1, 64.0)}
    assert s["2-8"]["job_share"] == pytest.approx(3 / 5) and s["2-8"]["gpu_h_share"] == pytest.approx(328 / 394)
    rt = {r["size_class"]: r for r in mart(scenario, "run_times").to_dicts()}
    assert "1" not in rt or rt["1"]["jobs_ended"] == 0  # J3 ends in November
    # ended in October: J0 8 h, J5 8 h, J4 10 h, J1 24 h; p50 is the value at position ⌊4 × 0.5⌋ = 2
    assert rt["2-8"]["jobs_ended"] == 4 and rt["2-8"]["run_p50_s"] == 10 * 3600 and rt["2-8"]["run_p99_s"] == 24 * 3600
    assert rt["2-8"]["wait_p50_s"] == 1800
    st = {r["state"]: r for r in mart(scenario, "end_states").to_dicts()}
    assert {k: (v["runs"], round(v["gpu_h"], 6)) for k, v in st.items()} == {
        "COMPLETED": (3, 288.0), "NODE_FAIL": (1, 64.0), "FAILED": (1, 40.0)}


def test_reliability(scenario):
    f = {r["size_class"]: r for r in mart(scenario, "failures_by_size").to_dicts()}
    node_days = 8 / 24 + 1 + 2 * 4 / 24 + 10 / 24 + 8 / 24  # J0, J1, J2, J4, J5 (J3 ends in November)
    assert f["all"]["node_days"] == pytest.approx(node_days)
    assert f["all"]["hw_failures"] == 1 and f["9-64"]["node_fail_runs"] == 1
    assert f["all"]["failures_per_1000_node_days"] == pytest.approx(1000 / node_days)
    assert f["9-64"]["mttf_observed_h"] == pytest.approx(4.0)
    assert f["9-64"]["node_fail_run_gpu_h"] == pytest.approx(64)  # the whole run's
    x = mart(scenario, "xid_events").to_dicts()
    assert [(r["xid"], r["node"], r["gpu"], r["events"], r["hardware"]) for r in x] == [(79, "n3", 0, 1, 1)]
    n = {r["node"]: r for r in mart(scenario, "node_failures").to_dicts()}
    assert (n["n3"]["down_events"], n["n3"]["drain_events"], n["n3"]["down_hours"]) == (1, 1, 4.0)
    assert n["n2"]["drained_hours"] == 48.0
    assert n["n3"]["cluster_down_per_1000_node_days"] == pytest.approx(1000 / (3 * 31))
    t = mart(scenario, "throttling").to_dicts()
    assert [(r["node"], r["gpu"], r["throttled_hours"]) for r in t] == [("n1", 3, 2.0)]


def test_node_scorecard(scenario):
    card = mart(scenario, "node_health")
    throttle = round(2 / 24 * 30 / 31, 6)
    rows = [(r["rank"], r["node"], round(r["score"], 6), r["swap"], r["hw_xids"], r["fault_events"], r["down_events"],
             r["drain_events"], r["multi_runs"], r["failed_runs"]) for r in card.to_dicts()]
    assert rows == [(1, "n3", 4.0, 0, 1, 1, 1, 1, 1, 1), (2, "n2", 1.0, 0, 0, 0, 0, 1, 1, 1),
                    (3, "n1", throttle, 0, 0, 0, 0, 0, 0, 0)]
    n = {r["node"]: r for r in card.to_dicts()}
    assert [n[k]["failed_expected"] for k in ("n2", "n3")] == pytest.approx([1.0, 1.0])
    assert [n[k]["failed_p"] for k in ("n2", "n3")] == pytest.approx([1 - 2.718281828459045 ** -1] * 2)
    assert (n["n3"]["lone_hw_xids"], n["n3"]["other_drain_events"], n["n3"]["planned_drain_events"]) == (0, 1, 0)
    assert n["n3"]["reasons"] == "1 hardware fault (Xids seen: 79×1); 1 DOWN (4 h); 1 DRAIN (4 h)"
    assert n["n2"]["reasons"] == "1 DRAIN (48 h)" and n["n1"]["reasons"].startswith("2 h throttled")
    assert (n["n3"]["hangs"], n["n3"]["runs_behind"], n["n1"]["throttled_hours"]) == (0, 0, 2.0)
    resa = mart(scenario, "node_health", reservation="resA")
    assert [(r["node"], r["rank"], round(r["score"], 6)) for r in resa.to_dicts()] == [("n1", 1, throttle)]
    assert mart(scenario, "node_health", swap_min_score=0.5)["swap"].to_list() == [1, 1, 0]


def test_energy_and_carbon(scenario):
    j = {r["job_id"]: r for r in mart(scenario, "job_energy", carbon_g_per_kwh=400.0).to_dicts()}
    kwh = {"1001": 8 * 143 * 3e5 / 3.6e6, "1002": 24 * 3.6e4 * 16 / 3.6e6, "1004": 59 * 3.6e4 * 8 / 3.6e6,
           "1000": 0.0, "1003": 0.0, "1005": 0.0}
    assert {k: r["gpu_kwh"] for k, r in j.items()} == pytest.approx(kwh)
    for k, r in j.items():
        assert (r["rest_kwh"], r["node_power"]) == (0.0, "missing")
        assert r["gpu_energy_source"] == ("counters" if kwh[k] else "none")
        assert r["facility_kwh"] == pytest.approx(1.3 * kwh[k]) and r["kg_co2e"] == pytest.approx(1.3 * kwh[k] * 0.4)
    e = {r["project_key"]: r for r in mart(scenario, "energy", carbon_g_per_kwh=400.0).to_dicts()}
    a_kwh, b_kwh = kwh["1001"], kwh["1002"] + kwh["1004"]
    assert [(k, e[k]["runs"], e[k]["gpu_h"], e[k]["it_kwh"]) for k in sorted(e)] == [
        ("", 6, pytest.approx(394), pytest.approx(a_kwh + b_kwh)), ("A", 3, pytest.approx(226), pytest.approx(a_kwh)),
        ("B", 2, pytest.approx(104), pytest.approx(b_kwh)), ("C", 1, pytest.approx(64), pytest.approx(0.0))]
    assert e["A"]["kwh_per_gpu_h"] == pytest.approx(a_kwh / 226)
    assert e["A"]["kg_co2e_per_gpu_h"] == pytest.approx(a_kwh * 1.3 * 0.4 / 226)
    assert e["B"]["gpu_counter_share"] == 1.0 and e["C"]["gpu_counter_share"] is None
    delivered = mart(scenario, "efficiency").filter(pl.col("project_key") == "A")["delivered_pflop_days"].item()
    assert e["A"]["delivered_pflop_days"] == pytest.approx(delivered) and delivered > 0
    assert e["A"]["facility_kwh_per_pflop_day"] == pytest.approx(1.3 * a_kwh / delivered)
    # no carbon intensity configured: the energy, and no carbon figure
    assert mart(scenario, "energy")["kg_co2e"].to_list() == [None] * 4
    # a project's rows are its own
    assert [r["project_key"] for r in mart(scenario, "energy", project="B").to_dicts()] == ["", "B"]
    assert set(mart(scenario, "job_energy", project="B")["job_id"]) == {"1002", "1004"}


def test_reservation_efficiency_and_cost(scenario):
    r = mart(scenario, "reservations").row(0, named=True)
    assert (r["reservation"], r["reserved_gpu_h"], r["used_gpu_h"], r["idle_gpu_h"]) == ("resA", 384, 192, 192)
    j1 = mart(scenario, "job_efficiency").filter(pl.col("job_id") == "1001").row(0, named=True)
    assert j1["gpu_util_pct"] == pytest.approx(80) and j1["tensor_active"] == pytest.approx(0.5)
    # 143 energy steps on 10-05 (the first sample of the file has no earlier one) × 300 kJ × 8 GPUs
    assert j1["gpu_energy_kwh"] == pytest.approx(8 * 143 * 3e5 / 3.6e6)
    assert j1["delivered_pflop"] == pytest.approx(0.5 * 989 * 8 * 24 * 3600 / 1000)
    c = mart(scenario, "cost").filter(pl.col("model") == "all").row(0, named=True)
    capex_rate = 300_000 / 8 / (5 * 8766)
    assert c["capex"] == pytest.approx(CAPACITY * capex_rate)
    assert c["idle_cost"] == pytest.approx((AVAILABLE - ALLOCATED) * capex_rate)
    assert c["cost_per_allocated_gpu_h"] == pytest.approx(c["total_cost"] / ALLOCATED)
    p = {x["project"]: x for x in mart(scenario, "chargeback").to_dicts()}
    assert p["A"]["allocated_gpu_h"] == pytest.approx(226) and p["B"]["allocated_gpu_h"] == pytest.approx(104)
    assert sum(x["cost"] for x in p.values()) == pytest.approx(c["total_cost"])


def test_project_report_isolation_and_formats(scenario, report_a):
    r = report_a
    assert r["month"] == "2026-10" and r["scope"] == "project" and r["month_complete"]  # J3 ends in November
    # month over month: September holds J0's first four hours
    prev = next(u for u in r["utilization_previous"] if u["level"] == "cluster")
    assert (prev["capacity_gpu_h"], prev["allocated_gpu_h"]) == (17_280, 32) and r["previous_month_has_data"]
    assert r["chargeback_previous"] == [{**r["chargeback_previous"][0], "project": "A", "allocated_gpu_h": 32.0}]
    text = to_json(r) + to_markdown(r) + to_html(r, charts={})
    assert "alice" in text
    for other in ("bob", "carol", "1002", "1004", "1005", "projb", "projc"):
        assert other not in text, other
    assert {x["user"] for x in r["users"]} == {"alice"}
    anon = monthly_report(Connection(scenario), project="A", cluster="t1", anonymize_users=True)
    text = to_json(anon) + to_markdown(anon)
    assert "alice" not in text and pseudonym("alice", pseudonym_key(scenario)) in text
    cl = monthly_report(Connection(scenario), cluster="t1")
    assert {p["project"] for p in cl["chargeback"]} == {"A", "B", "C"} and cl["users"] == []


def test_project_text_is_a_parameter_never_sql(scenario):
    """A project name that looks like SQL matches no project and changes no query: every mart takes it as a
    query parameter, and the report refuses a project with no jobs."""
    from ops_warehouse.errors import OpsError

    evil = "A' OR 1=1 --"
    for name in ("job_sizes", "end_states", "users", "chargeback"):
        df = mart(scenario, name, project=evil)
        rows = df.filter(pl.col("project") == evil) if name == "chargeback" else df
        assert rows.height == 0 or name == "chargeback", name
    assert mart(scenario, "job_efficiency", project=evil).height == 0
    with pytest.raises(OpsError, match="no jobs of project"):
        monthly_report(Connection(scenario), project=evil, cluster="t1")
    # and the real project is untouched by the attempt
    assert mart(scenario, "job_sizes", project="A")["jobs"].sum() == 2  # J1, J3 (J0 started in September)


def test_what_the_report_shows_is_computed_in_the_marts(scenario):
    """Shares, totals, groupings, filters and thresholds the report shows come from the marts (sql/README.md:
    every statistic once, in SQL): the renderers only format them."""
    idle = mart(scenario, "idle_capacity").filter(pl.col("level") == "cluster").row(0, named=True)
    assert idle["free_share"] == pytest.approx(FREE / CAPACITY)
    assert idle["reserved_idle_share"] == pytest.approx(RESERVED_IDLE / CAPACITY)
    assert idle["allocated_idle_share"] == pytest.approx(104 / CAPACITY)
    assert (idle["down_share"], idle["drained_share"]) == pytest.approx((DOWN / CAPACITY, DRAINED / CAPACITY))
    u = mart(scenario, "utilization").filter(pl.col("level") == "cluster").row(0, named=True)
    assert u["unavailable_gpu_h"] == pytest.approx(DOWN + DRAINED) and u["idle_util_pct"] == 5.0
    # chargeback: the project's rows only, with the project's totals over GPU models
    assert mart(scenario, "chargeback", project="A")["project"].to_list() == ["A"]
    t = mart(scenario, "chargeback_totals", project="A").row(0, named=True)
    cost = mart(scenario, "cost").filter(pl.col("model") == "all").row(0, named=True)
    assert t["project"] == "A" and t["allocated_gpu_h"] == pytest.approx(226)
    assert t["share_of_available"] == pytest.approx(226 / AVAILABLE)
    assert t["cost"] == pytest.approx(cost["total_cost"] * 226 / ALLOCATED)
    assert mart(scenario, "chargeback_totals")["project"].to_list() == ["A", "B", "C"]
    # reservations: a project's are those held for its accounts
    assert mart(scenario, "reservations", project="A")["reservation"].to_list() == ["resA"]
    assert mart(scenario, "reservations", project="B").height == 0
    # Xid events by code; the largest jobs; stragglers only where a node was behind (J2's nodes were both idle)
    assert [(x["xid"], x["events"], x["nodes"], x["hardware"]) for x in mart(scenario, "xid_codes").to_dicts()] == [
        (79, 1, 1, 1)]
    top = run_mart(scenario, "largest_jobs", cluster="t1", window=OCT, top_jobs=2)
    assert top["job_id"].to_list() == ["1001", "1005"] and "submit_ts" not in top.columns
    assert mart(scenario, "stragglers").height == 0
    eff = mart(scenario, "efficiency").filter(pl.col("project_key") == "").row(0, named=True)
    assert eff["delivered_pflop_days"] == pytest.approx(eff["delivered_pflop"] / 86400) and eff["delivered_pflop_days"] > 0
    # the report carries them, and the thresholds the marts ran with
    r = monthly_report(Connection(scenario), project="A", cluster="t1", behind_ratio=0.7)
    assert (r["schema_version"], r["behind_ratio"], r["top_jobs"], r["idle_util_pct"]) == ("5.1", 0.7, 15, 5.0)
    assert (r["hang_minutes"], r["hang_nic_bytes_per_s"], r["idle_min_minutes"]) == (20, 1e6, 60)
    assert r["chargeback_totals"] == [{**r["chargeback_totals"][0], "project": "A"}]
    assert [x["reservation"] for x in r["reservations"]] == ["resA"] and r["xid_codes"][0]["xid"] == 79
    md = to_markdown(r)
    assert "under 0.7 of the median" in md and f"| project A: share of available | {100 * 226 / AVAILABLE:.1f}% |" in md
    # the node score's rule is written once, in node_health.sql's declaration: the report carries it and the
    # swap-list section prints it (3 points a fault: the SQL's `3 * fault_events`)
    rule = declarations.mart("node_health").rule
    assert r["node_score_rule"] == rule and rule.startswith("Points: 3 a hardware fault") and rule in md
    assert "3 * fault_events" in sql_text("marts/node_health.sql")


@pytest.mark.embedded_only("the report's lists and the export's files against the marts' names")
def test_one_name_per_statistic(scenario, report_a, tmp_path):
    """A statistic has one name (sql/README.md): each list of the report and each file of the export is
    named after its mart (sql/marts/<name>.sql) and the API function that runs it."""
    from ops_warehouse.analytics.export import export_month
    from tests.conftest import REPO

    marts = {p.stem for p in (REPO / "sql" / "marts").glob("*.sql")}
    r = report_a
    names = {k.removesuffix("_previous") for k, v in r.items() if isinstance(v, list)}
    names.discard("efficiency_by_project")  # the per-project rows of the efficiency mart (cluster reports)
    assert names <= marts and all(callable(getattr(Connection, n, None)) for n in names), names - marts
    # the report holds exactly the marts declared `report = true` (the one row of fine_telemetry as an object)
    assert names | {"fine_telemetry"} == set(declarations.reported()), names ^ set(declarations.reported())
    files = export_month(Connection(scenario), tmp_path, "2026-10", project="A", cluster="t1")["files"]
    assert {f["file"] for f in files.values()} == {f"{n}.parquet" for n in files}
    assert set(files) <= marts and all(callable(getattr(Connection, n, None)) for n in files), set(files) - marts


# ------------------------------------------------------------------- every declared mart (issue 30)

from ops_warehouse.analytics import declarations  # noqa: E402
from ops_warehouse.sqlfiles import sql_text  # noqa: E402

DECLARED = sorted(declarations.marts())


@pytest.mark.parametrize("name", DECLARED)
def test_every_declared_mart_is_what_it_declares(scenario, name):
    """Each mart's '--- ' declaration (analytics/declarations.py) against its file and what it returns on the
    hand-built month: the parameters and includes its text names, each parameter explained in its comments,
    and for a window mart the columns it returns (in order, for the cluster and for project B, on the
    embedded warehouse and through the server), every column holding a user name declared a user column. The
    what-if's marts read the replays' tables and summary/telemetry whole days: their declarations are checked
    against their text here, their rows in tests/test_whatif.py and tests/test_summary_xdmod.py."""
    m = declarations.mart(name)
    text = sql_text(f"marts/{name}.sql")
    assert declarations.check(m, text) == [], name
    prose = "\n".join(line for line in text.splitlines() if line.startswith("--") and not line.startswith("--- "))
    assert [p for p in (*m.parameters, *m.takes) if p not in prose] == [], "parameters its comments never explain"
    if m.kind != "window":
        return
    for project in ("", "B"):
        if m.project_only and not project:
            continue
        got = run_mart(scenario, name, cluster="t1", window=OCT, project=project)
        assert tuple(got.columns) == m.columns, (name, project)
    assert {c for c in m.columns if c == "user" or c.endswith("_user")} <= set(m.user_columns)


def test_declared_parameters_are_the_report_parameters():
    """One value per parameter whoever declares it; the report records the ones it ran with, and its values
    are the declared ones (hung_jobs.sql declares hang_minutes = 20, the report says 20)."""
    from ops_warehouse.analytics.marts import PARAMETERS

    p = declarations.parameters()
    assert p == PARAMETERS and p["hang_minutes"] == 20 and p["top_jobs"] == 15 and p["campaign_min_gpus"] == 64
    owners = {k: sorted(n for n, m in declarations.marts().items() if k in m.parameters) for k in p}
    assert owners["hang_minutes"] == ["hung_jobs"] and owners["planned_drain_reasons"] == ["node_failures", "node_health"]
    assert declarations.exported()[0] == "utilization" and "largest_jobs" not in declarations.exported()


@pytest.mark.parametrize("name", DECLARED)
def test_every_declared_mart_is_an_api_method_as_its_declaration_says(name, tmp_path):
    """A notebook calls each mart by its name (``wh.<mart>``): a method written out with its docstring (so
    that help() and an editor's go-to-definition find it), with the keywords its declaration implies:
    ``project`` exactly when the mart's scope is a project (required when it is only for a project), each
    declared filter, and the window (``start``/``end``, ``cluster``) for a window mart; or, for a mart
    with no method of its own (a new statistic is its SQL file alone), Connection.__getattr__'s, which
    refuses a project where the declaration takes none. The what-if's marts are the frames of
    Connection.whatif."""
    import inspect

    from ops_warehouse.errors import OpsError

    m = declarations.mart(name)
    wh = Connection(Config(dsn=f"chdb://{tmp_path / 'none'}"))  # never opened: attribute lookups only
    if m.kind == "whatif":
        assert not hasattr(wh, name), name
        return
    assert name in dir(wh) or m.kind != "window", name
    fn = getattr(Connection, name, None)
    if fn is None:  # served by __getattr__
        assert m.kind == "window", name
        call = getattr(wh, name)
        assert name in call.__doc__ and m.grain[1:] in call.__doc__
        if m.scope == "cluster":
            with pytest.raises(OpsError, match="takes no project"):
                call("2026-10", project="A")
        return
    assert callable(fn) and (fn.__doc__ or "").strip(), f"Connection.{name}: no docstring"
    kw = {p.name: p for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    if m.kind == "window":
        assert {"cluster", "start", "end"} <= set(kw), (name, sorted(kw))
        assert ("project" in kw) == (m.scope == "project"), (name, m.scope, sorted(kw))
        if m.project_only:
            assert kw["project"].default is inspect.Parameter.empty, name
    assert set(m.filters) <= set(kw), (name, sorted(m.filters), sorted(kw))


@pytest.mark.embedded_only("a declaration read by the report, compared with the API's rows through the same connection")
def test_a_mart_declared_for_the_report_is_in_it_without_python(scenario, monkeypatch):
    """A new statistic reaches the report by its declaration alone (`report = true`): here job_efficiency,
    which the report does not list, declared so; the project's report then holds its rows as the API gives
    them for the project, and the cluster's report for the cluster."""
    import dataclasses

    declared = declarations.marts()
    assert not declared["job_efficiency"].report and declared["job_efficiency"].scope == "project"
    patched = {**declared, "job_efficiency": dataclasses.replace(declared["job_efficiency"], report=28)}
    monkeypatch.setattr(declarations, "marts", lambda: patched)
    wh = Connection(scenario)
    for project in ("A", None):
        r = monthly_report(wh, project=project, cluster="t1")
        want = wh.job_efficiency("2026-10", project=project, cluster="t1").to_dicts()
        assert r["job_efficiency"] == want and len(want) >= 3, (project, len(want))


@pytest.mark.embedded_only("the report's order and months from the declarations")
def test_the_report_reads_what_the_declarations_say(scenario, monkeypatch):
    """The report's marts, their places and their months are the declarations' (`report = N`,
    `previous = true`), no list in Python: declared so, job_sizes moves to the head of the report and brings
    September's rows (J0 alone: 8 GPUs from 09-30 20:00, 4 h of it in September, 32 GPU-h), and utilization,
    declared without `previous`, no longer has the month before. October's for project A, by hand from the
    sacct lines: J1 (8 GPUs, 24 h) and J0's 8 h of October in 2-8, 192 + 32; J3's 2 h of October in 1."""
    import dataclasses

    declared = declarations.marts()
    patched = {**declared, "job_sizes": dataclasses.replace(declared["job_sizes"], report=0, previous=True),
               "utilization": dataclasses.replace(declared["utilization"], previous=False)}
    monkeypatch.setattr(declarations, "marts", lambda: patched)
    r = monthly_report(Connection(scenario), project="A", cluster="t1")
    marts = [k for k, v in r.items() if isinstance(v, list)]
    assert marts[:3] == ["job_sizes", "job_sizes_previous", "utilization"] and "utilization_previous" not in r
    assert [(x["size_class"], x["jobs"], round(x["gpu_h"], 6)) for x in r["job_sizes_previous"]] == [("2-8", 1, 32.0)]
    assert sorted((x["size_class"], x["jobs"], round(x["gpu_h"], 6)) for x in r["job_sizes"]) == [
        ("1", 1, 2.0), ("2-8", 1, 224.0)]


# a fresh interpreter renders the report it is given on stdin: Markdown for the terminal, then the JSON file
_RENDER = """import json, sys
from pathlib import Path
from ops_warehouse.reports import monthly_render
r = json.load(sys.stdin)
text = monthly_render.to_markdown(r)
files = [p.name for p in monthly_render.write(r, Path(sys.argv[1]), ["json"])]
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib")
print(json.dumps({"files": files, "links": text.count("]("), "matplotlib": loaded[:1]}))"""


@pytest.mark.embedded_only("the renderers in a fresh interpreter, given the report")
def test_json_and_terminal_markdown_draw_no_chart(report_a, tmp_path):
    """The charts are drawn for the formats that show them, after the figures: the Markdown printed on the
    terminal links none and the JSON holds none, so neither draws one nor loads the chart library
    (matplotlib, 0.5 s to 3 s and 60 MB: it was imported with the renderers, before the report was made)."""
    import json
    import subprocess
    import sys

    r = report_a
    done = subprocess.run([sys.executable, "-c", _RENDER, str(tmp_path / "out")], input=to_json(r), text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"files": ["monthly-t1-A-2026-10.json"], "links": 0, "matplotlib": []}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["monthly-t1-A-2026-10.json"]


@pytest.mark.embedded_only("docs/sql.md's example: a declaration, a section, an export file")
def test_the_docs_new_statistic_end_to_end(scenario, monkeypatch, tmp_path):
    """docs/sql.md's example, as written there: partition_hours.sql (its SQL and declaration), added to the
    installed marts for this test. The API serves it by name, the report holds it, the export writes it,
    and its figures are the hand-built month's: every run is on one partition (the sacct lines), so project
    A's 226 GPU-h (J0 32 in October, J1 192, J3 2) over 3 runs, and the cluster's 394 over 6."""
    import re

    from ops_warehouse import sqlfiles
    from ops_warehouse.analytics.export import export_month
    from tests.conftest import REPO

    doc = (REPO / "docs" / "sql.md").read_text()
    sql = re.search(r"`sql/marts/partition_hours\.sql`:\n\n```sql\n(.*?)```", doc, re.S).group(1)
    declared = {**declarations.marts(), "partition_hours": declarations.declaration("partition_hours", sql)}
    monkeypatch.setattr(declarations, "marts", lambda: declared)
    shipped = sqlfiles.sql_text
    monkeypatch.setattr(sqlfiles, "sql_text", lambda rel: sql if rel == "marts/partition_hours.sql" else shipped(rel))
    assert declarations.check(declared["partition_hours"], sql) == []
    wh = Connection(scenario)
    a = wh.partition_hours("2026-10", project="A", cluster="t1").to_dicts()
    assert [x["runs"] for x in a] == [3] and a[0]["gpu_h"] == pytest.approx(226), a
    everyone = wh.partition_hours("2026-10", cluster="t1").to_dicts()
    assert sum(x["runs"] for x in everyone) == 6 and sum(x["gpu_h"] for x in everyone) == pytest.approx(394)
    r = monthly_report(wh, project="A", cluster="t1")
    assert r["partition_hours"] == a and list(r)[list(r).index("campaigns") + 1] == "partition_hours"  # place 28
    # its section, as docs/sql.md writes it, in the renderers' table after the chargeback: one row, 3 runs, 226 GPU-h
    from ops_warehouse.reports import monthly_render

    code = re.search(r"`\(\"partition_hours\", _partition_hours\)`\):\n\n  ```python\n(.*?)  ```", doc, re.S).group(1)
    scope = dict(vars(monthly_render))
    exec("\n".join(line[2:] for line in code.splitlines()), scope)
    at = [n for n, _ in monthly_render._SECTIONS].index("chargeback") + 1
    monkeypatch.setattr(monthly_render, "_SECTIONS", [*monthly_render._SECTIONS[:at],
                                                      ("partition_hours", scope["_partition_hours"]),
                                                      *monthly_render._SECTIONS[at:]])
    md = to_markdown(r)
    assert f"## GPU-hours by partition\n\nWhat each partition's runs held in the month.\n\n| partition | runs | GPU-h |\n" \
           f"|---|---:|---:|\n| {a[0]['partition']} | 3 | 226 |\n" in md
    assert md.index("## Chargeback") < md.index("## GPU-hours by partition") < md.index("## Users of the project")
    m = export_month(wh, tmp_path, "2026-10", project="A", cluster="t1")
    from pathlib import Path

    assert pl.read_parquet(Path(m["folder"]) / m["files"]["partition_hours"]["file"]).to_dicts() == a
