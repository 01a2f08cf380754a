"""One name, one meaning: figures that two sections (or two reports) of the monthly report give under the same
name must agree (issue 28, item 5). Each test loads a small hand-built month (October 2026, 744 h; 8-GPU H100
nodes, partition gpu, the default cost model: node 300,000 USD over 5 years, 0.15 USD/kWh, PUE 1.3) whose
figures are worked out by hand in its docstring, from the sacct lines, events and telemetry written here.
Every month ends with a job running past 11-01 00:00, so the month is complete (the as-of time is after it).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.analytics.api import Connection
from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.analytics.monthly import monthly_report
from ops_warehouse.analytics.whatif import whatif, whatif_report
from ops_warehouse.planning.changes import parse_change
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import one_refresh, refresh_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.reports.monthly_render import to_markdown
from ops_warehouse.reports.whatif_render import sections
from tests.test_hung_and_idle_jobs import mart as hung_mart
from tests.test_hung_and_idle_jobs import loaded, site  # noqa: F401  (the hand-built hang day: fixtures)

pytestmark = [pytest.mark.slow]

UTC = timezone.utc
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
PROJECTS = {"proja": "A", "projb": "B"}
HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName")
CAPEX_PER_GPU_H = 300_000 / 8 / (5 * 8766)  # the default H100 cost model
PUE, PRICE = 1.3, 0.15


def _t(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=UTC)


def _line(jid, acct, user, gpus, nodelist, submit, start=None, end=None, state="COMPLETED", seen=None, resv=""):
    """One sacct --parsable2 line: an ended job (start, end), a running one (start, end None: seen running
    at ``seen``), or a pending one (no start: sacct prints no AllocTRES and no nodes for it)."""
    nn = 2 if "[" in nodelist else 1
    req = f"billing={14 * gpus},cpu={14 * gpus},gres/gpu={gpus},mem=100G,node={nn}"
    if start is None:  # pending
        return (f"{jid}|{jid}|t1|gpu|normal|{acct}|{acct}|1|{user}|1|{submit}|{submit}|Unknown|Unknown|0|50000|0:0|"
                f"PENDING|{nn}|{14 * gpus}|{14 * gpus}|100G|{req}||None assigned|{resv}|job{jid}")
    el = int(((_t(end) if end else _t(seen)) - _t(start)).total_seconds())
    exit_code = "0:0" if state in ("COMPLETED", "RUNNING") else "1:0"
    return (f"{jid}|{jid}|t1|gpu|normal|{acct}|{acct}|1|{user}|1|{submit}|{submit}|{start}|{end or 'Unknown'}|{el}|"
            f"50000|{exit_code}|{state}|{nn}|{14 * gpus}|{14 * gpus}|100G|{req}|{req}|{nodelist}|{resv}|job{jid}")


def _month(tmp_path, cfg, lines: list[str], nodes: int, events: str = "", resv: str = "", telemetry=None):
    """The month loaded: the sacct lines, ``nodes`` H100 nodes n1.., node events, reservations, telemetry."""
    from ops_warehouse.warehouse import open_warehouse

    cfg.projects = PROJECTS
    wh = open_warehouse(cfg)
    (tmp_path / "sacct.psv").write_text("\n".join([HEAD, *lines]) + "\n")
    (tmp_path / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n" + "".join(
        f"n{i},h100,8,gpu,r1,2026-09-01\n" for i in range(1, nodes + 1)))
    kw = {}
    if events:
        (tmp_path / "events.psv").write_text("Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n" + events)
        kw["events"] = tmp_path / "events.psv"
    if resv:
        (tmp_path / "resv.txt").write_text(resv)
        kw["reservations"] = tmp_path / "resv.txt"
    # the loads and the month's grains in one refresh at the end (etl/grains.py one_refresh, as `etl nightly`
    # runs a night's): each load refreshing its own hours, then the month once more, wrote the same rows up to
    # three times over (every table's checksum equal either way; docs/benchmarks.md, issue 51 round 9)
    with one_refresh(wh):
        assert load_sacct(wh, tmp_path / "sacct.psv").quarantined == 0
        load_capacity(wh, inventory=tmp_path / "inventory.csv", cluster="t1", **kw)
        if telemetry:
            days = telemetry(tmp_path / "telemetry")
            load_parquet_dir(wh, tmp_path, min(days), max(days), cluster="t1")
        refresh_capacity(wh, "t1", *OCT)
    return wh


def mart(wh, name, project="", **params):
    return run_mart(wh, name, cluster="t1", window=OCT, project=project, **params)


# ----------------------------------------------------------------------------------------------- (a) what-if

def test_whatif_counts_the_jobs_still_pending_and_names_its_own_figures(tmp_path, cfg):
    """n1, n2: job 8001 (A, 16 GPUs) runs from 09-29 and is still running when last seen, 11-01 02:00, so no
    GPU is free all October. 8002 (B, 8 GPUs, submitted 09-30 12:00) and 8003 (B, 8 GPUs, 10-20 00:00) are
    still PENDING at the last extract: sacct prints neither AllocTRES nor nodes for them, only ReqTRES.
      jobs submitted in the window: 1 (8003); not started by its end: 2 (8002 waiting since September, 8003),
      in what happened and in the unchanged replay alike (8001 holds both nodes to 11-01 02:00)
      capacity 2 × 8 × 744 = 11,904 GPU-h, allocated 16 × 744 = 11,904: allocated ÷ capacity 1
      capex 11,904 × 300,000 ÷ 8 ÷ (5 × 8,766); ÷ allocated GPU-hours: the capex per allocated GPU-hour.
    The what-if's "allocated ÷ capacity" is not the report's utilization (allocated ÷ available), nor its
    capex per allocated GPU-hour the report's cost per allocated GPU-hour (capex and energy): each has its
    own name, in the mart and in the rendered section."""
    wh = _month(tmp_path, cfg, [
        _line(8001, "proja", "alice", 16, "n[1-2]", "2026-09-29T00:00:00", "2026-09-29T00:00:00", None, "RUNNING",
              seen="2026-11-01T02:00:00"),
        _line(8002, "projb", "bob", 8, "n1", "2026-09-30T12:00:00"),
        _line(8003, "projb", "bob", 8, "n1", "2026-10-20T00:00:00"),
    ], nodes=2)
    w = whatif(wh, cluster="t1", window=OCT, changes=[parse_change(add=["h100:1"])])
    s = {r["scenario"]: r for r in w["summary"].to_dicts()}
    for sc in ("observed", "replay"):
        assert (s[sc]["jobs"], s[sc]["jobs_not_started"]) == (1, 2), sc
        assert (s[sc]["capacity_gpu_h"], s[sc]["allocated_gpu_h"]) == (11_904, 11_904), sc
        assert s[sc]["allocated_of_capacity"] == pytest.approx(1.0), sc
        assert s[sc]["capex"] == pytest.approx(11_904 * CAPEX_PER_GPU_H), sc
        assert s[sc]["capex_per_allocated_gpu_h"] == pytest.approx(CAPEX_PER_GPU_H), sc
    # a third node from the window's start: 8002, first in line, starts on it at once and runs for a pending
    # job's stand-in run time (its limit, at most a day: to 10-02 00:00); 8003 starts on it when submitted
    assert s["+1 h100"]["jobs_not_started"] == 0
    for gone in ("utilization", "cost_per_allocated_gpu_hour", "utilization_error_pts"):
        assert gone not in w["summary"].columns and gone not in w["daily"].columns, gone
    assert s["replay"]["allocated_of_capacity_error_pts"] == pytest.approx(0)
    assert "allocated_of_capacity" in w["daily"].columns
    # the rendered section: no row called "utilization" or "cost per allocated GPU-h"
    rep = whatif_report(wh, cluster="t1", window=OCT, changes=[parse_change(add=["h100:1"])])
    labels = [row[0] for _, _, _, rows, _ in sections(rep) for row in rows]
    assert not [x for x in labels if x == "utilization" or x.startswith("cost per allocated")], labels
    assert "allocated ÷ capacity" in labels and any(x.startswith("capex per allocated GPU-h") for x in labels)
    row = next(r for _, _, _, rows, _ in sections(rep) for r in rows if r[0] == "not started by the end")
    assert row[1:3] == ["2", "2"]


# --------------------------------------------------------------------------------------------- (b) reservation

def test_a_reservation_counts_its_jobs_on_a_drained_node(tmp_path, cfg):
    """n1 is reserved for proja 10-05 00:00 .. 10-07 00:00 (48 h) and drained 10-05 12:00 .. 10-06 00:00;
    job 8101 (A, 8 GPUs, in resA) runs on it 10-05 10:00 .. 16:00 (a draining node runs its jobs to the end);
    8102 (B, 8 GPUs) 10-31 22:00 .. 11-01 02:00.
      usable reserved time: 48 − 12 = 36 h × 8 = 288 GPU-h, and the 4 h 8101 ran on the drained node × 8 = 32
      (allocated, so available, as the utilization counts it): reserved 320; used 6 h × 8 = 48; idle 272
      the utilization: drained 12 × 8 − 32 = 64, reserved unused 272 (the reservation's idle)."""
    wh = _month(tmp_path, cfg, [
        _line(8101, "proja", "alice", 8, "n1", "2026-10-05T09:30:00", "2026-10-05T10:00:00", "2026-10-05T16:00:00",
              resv="resA"),
        _line(8102, "projb", "bob", 8, "n1", "2026-10-31T21:30:00", "2026-10-31T22:00:00", "2026-11-01T02:00:00"),
    ], nodes=1, events="t1|n1|2026-10-05T12:00:00|2026-10-06T00:00:00|DRAIN|burn-in|root(0)\n",
        resv="ReservationName=resA StartTime=2026-10-05T00:00:00 EndTime=2026-10-07T00:00:00 Duration=2-00:00:00\n"
             "   Nodes=n1 NodeCnt=1 CoreCnt=112 Features=(null) PartitionName=gpu Flags=\n"
             "   TRES=cpu=112\n   Users=(null) Groups=(null) Accounts=proja Licenses=(null) State=INACTIVE\n")
    r = mart(wh, "reservations").row(0, named=True)
    assert (r["reservation"], r["reserved_gpu_h"], r["used_gpu_h"], r["idle_gpu_h"]) == (
        "resA", pytest.approx(320), pytest.approx(48), pytest.approx(272))
    assert r["use_ratio"] == pytest.approx(48 / 320)
    assert mart(wh, "reservations", project="A").row(0, named=True)["used_gpu_h"] == pytest.approx(48)
    u = mart(wh, "utilization").filter(pl.col("level") == "cluster").row(0, named=True)
    assert u["drained_gpu_h"] == pytest.approx(64) and u["allocated_gpu_h"] == pytest.approx(48 + 16)
    assert u["reserved_idle_gpu_h"] == pytest.approx(r["idle_gpu_h"])


# -------------------------------------------------------------------------------------------------- (c) MTTF

def test_the_mttf_model_uses_the_clusters_failure_rate_in_a_project_report(tmp_path, cfg):
    """Runs ended in October, one node each: A 8201 1 GPU n1 10-02 .. 10-03 NODE_FAIL, 8202 1 GPU n1 10-04 ..
    10-05; B 8203 8 GPUs n2 10-02 .. 10-03, 8204 n3 10-02 .. 10-03, 8205 n4 10-02 .. 10-04 (2 days); B 8206 ends
    in November (not counted).
      the cluster: 1 failure in 1 + 1 + 1 + 1 + 2 = 6 node-days: 1000 ÷ 6 = 166.7 per 1,000 node-days; the model
      MTTF of a 1-node job 24 h ÷ (1 × 1/6) = 144 h, in the cluster's report and in A's (A's own rate, 1 in 2
      node-days, would give 48 h)."""
    wh = _month(tmp_path, cfg, [
        _line(8201, "proja", "alice", 1, "n1", "2026-10-02T00:00:00", "2026-10-02T00:00:00", "2026-10-03T00:00:00",
              "NODE_FAIL"),
        _line(8202, "proja", "alice", 1, "n1", "2026-10-04T00:00:00", "2026-10-04T00:00:00", "2026-10-05T00:00:00"),
        _line(8203, "projb", "bob", 8, "n2", "2026-10-02T00:00:00", "2026-10-02T00:00:00", "2026-10-03T00:00:00"),
        _line(8204, "projb", "bob", 8, "n3", "2026-10-02T00:00:00", "2026-10-02T00:00:00", "2026-10-03T00:00:00"),
        _line(8205, "projb", "bob", 8, "n4", "2026-10-02T00:00:00", "2026-10-02T00:00:00", "2026-10-04T00:00:00"),
        _line(8206, "projb", "bob", 8, "n2", "2026-10-31T22:00:00", "2026-10-31T22:00:00", "2026-11-01T02:00:00"),
    ], nodes=4)
    cl = {r["size_class"]: r for r in mart(wh, "failures_by_size").to_dicts()}
    a = {r["size_class"]: r for r in mart(wh, "failures_by_size", project="A").to_dicts()}
    assert cl["all"]["failures_per_1000_node_days"] == pytest.approx(1000 / 6)
    assert a["all"]["failures_per_1000_node_days"] == pytest.approx(1000 / 2)  # the project's own, as observed
    assert cl["1"]["mttf_model_h"] == pytest.approx(144) and a["1"]["mttf_model_h"] == pytest.approx(144)
    assert cl["2-8"]["mttf_model_h"] == pytest.approx(144)
    for rows in (cl, a):
        assert [r["cluster_failures_per_1000_node_days"] for r in rows.values()] == [pytest.approx(1000 / 6)] * len(rows)
    assert a["1"]["mttf_observed_h"] == pytest.approx(48)  # A's own: 48 run hours, 1 failure


# ------------------------------------------------------------------------------------------------- (d) hangs

def test_a_runs_hang_suspects_are_the_clusters_in_a_project_report(site):  # noqa: F811
    """tests/test_hung_and_idle_jobs.py's day: 2001 (A, n1 n2) and 2002 (B, n2 n3) hung; n2 is in both, so it is
    each run's suspect node. A's report lists 2001 alone, with the same suspect n2 (its own project had one
    hang on n2: a filter that changed the run's figures gave none)."""
    cluster = {r["job_id"]: r for r in hung_mart(site, "hung_jobs", hang_minutes=30).to_dicts()}
    a = {r["job_id"]: r for r in hung_mart(site, "hung_jobs", project="A", hang_minutes=30).to_dicts()}
    b = {r["job_id"]: r for r in hung_mart(site, "hung_jobs", project="B", hang_minutes=30).to_dicts()}
    assert list(a) == ["2001"] and list(b) == ["2002"]
    assert cluster["2001"]["suspect_nodes"] == a["2001"]["suspect_nodes"] == ["n2"]
    assert cluster["2002"]["suspect_nodes"] == b["2002"]["suspect_nodes"] == ["n2"]
    for jid, row in {**a, **b}.items():  # every other figure of the run the same too
        assert row == cluster[jid], jid


# ------------------------------------------------------------------------------------------------ (e) energy

def _energy_day(root):
    """10-05, one sample every 10 minutes: n1's 8 GPUs at 500 W (energy counters: 300 kJ a step); IPMI node
    power 6,000 W in the samples 00:00 .. 11:50 only (the exporter stopped at noon)."""
    day = date(2026, 10, 5)
    t0 = datetime(2026, 10, 5, tzinfo=UTC)
    ts = [t0 + timedelta(minutes=10 * k) for k in range(144)]
    gpu = [{"timestamp": t, "Hostname": "n1", "gpu": str(g), "UUID": f"GPU-n1-{g}", "modelName": "NVIDIA H100 80GB HBM3",
            "DCGM_FI_DEV_GPU_UTIL": 80.0, "DCGM_FI_DEV_POWER_USAGE": 500.0,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": float(k * 3e8)} for k, t in enumerate(ts) for g in range(8)]
    ipmi = [{"timestamp": t, "instance": "n1:9290", "ipmi_dcmi_power_consumption_watts": 6000.0}
            for t in ts if t.hour < 12]
    for fam, rows in (("dcgm", gpu), ("ipmi", ipmi)):
        (root / fam).mkdir(parents=True, exist_ok=True)
        pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
            root / fam / f"{day}.parquet")
    return [day]


def test_energy_cost_charges_the_whole_nodes_measured_energy(tmp_path, cfg):
    """n1 runs job 8301 (A, 8 GPUs) all of 10-05 and 8302 (B) 10-31 22:00 .. 11-01 02:00; telemetry on 10-05
    only (_energy_day). Each GPU sample stands for its 600-s step, so the samples cover every hour whole
    (3,600 s); the energy counters give 143 steps (the day's first reading has no earlier one to count from).
      hours 00 .. 11 (IPMI): the node's 6,000 W × 12 × 3,600 s = 259.2 MJ = 72 kWh
      hours 12 .. 23 (no IPMI): the GPUs' counters, 12 × 6 steps × 300 kJ × 8 = 172.8 MJ = 48 kWh
      IT energy 120 kWh (the GPUs alone: 143 × 300 kJ × 8 = 95.33 kWh); energy cost 120 × 1.3 × 0.15 USD;
      72 of the 120 kWh measured at the node. The energy mart's IT kWh of 8301 (its only run with telemetry,
      holding the node all day) is the same 120 kWh."""
    wh = _month(tmp_path, cfg, [
        _line(8301, "proja", "alice", 8, "n1", "2026-10-04T23:00:00", "2026-10-05T00:00:00", "2026-10-06T00:00:00"),
        _line(8302, "projb", "bob", 8, "n1", "2026-10-31T21:30:00", "2026-10-31T22:00:00", "2026-11-01T02:00:00"),
    ], nodes=1, telemetry=_energy_day)
    node_kwh = 6000 * 12 * 3600 / 3.6e6
    gpu_kwh = 12 * 6 * 3e5 * 8 / 3.6e6
    assert (node_kwh, gpu_kwh) == (pytest.approx(72), pytest.approx(48))
    c = {r["model"]: r for r in mart(wh, "cost").to_dicts()}
    for model in ("h100", "all"):
        row = c[model]
        assert row["it_energy_kwh"] == pytest.approx(node_kwh + gpu_kwh), model
        assert row["facility_energy_kwh"] == pytest.approx((node_kwh + gpu_kwh) * PUE), model
        assert row["energy_cost"] == pytest.approx((node_kwh + gpu_kwh) * PUE * PRICE), model
        assert row["ipmi_energy_share"] == pytest.approx(node_kwh / (node_kwh + gpu_kwh)), model
        assert row["energy_basis"] == "node (IPMI) where measured, else GPUs only", model
        assert row["gpu_energy_kwh"] == pytest.approx(8 * 143 * 3e5 / 3.6e6), model
        assert row["total_cost"] == pytest.approx(row["capex"] + row["energy_cost"]), model
    e = {r["project_key"]: r for r in mart(wh, "energy").to_dicts()}
    assert e["A"]["it_kwh"] == pytest.approx(node_kwh + gpu_kwh)
    # chargeback shares the same total cost
    assert sum(r["cost"] for r in mart(wh, "chargeback").to_dicts()) == pytest.approx(c["all"]["total_cost"])
    # the rendered cost section says which energy it charged
    md = to_markdown(monthly_report(Connection(wh), month=date(2026, 10, 1)))
    assert "node (IPMI) where measured, else GPUs only" in md


def test_node_power_without_gpu_samples_is_measured_nowhere(tmp_path, cfg):
    """The same day, but the GPUs' exporter stopped at noon while IPMI went on reporting 6,000 W all day. A
    node-hour's node energy is IPMI power × the time its GPUs' samples cover, so hours 12 .. 23 have none
    measured: IT energy is hours 00 .. 11 alone, 6,000 W × 12 × 3,600 s = 72 kWh, all of it IPMI's (the GPUs'
    counters: 71 steps × 300 kJ × 8 = 47.33 kWh, less than the node's each hour). 8301 held the node all day:
    half its node-hours measured at the node, so its node_power is 'partial' (it said 'measured' when
    run_node_hour counted IPMI power alone), and cost's IPMI share and job_energy's label read one rule."""
    def gpus_stop_at_noon(root):
        days = _energy_day(root)
        t0 = datetime(2026, 10, 5, tzinfo=UTC)
        ipmi = [{"timestamp": t0 + timedelta(minutes=10 * k), "instance": "n1:9290",
                 "ipmi_dcmi_power_consumption_watts": 6000.0} for k in range(144)]
        pl.DataFrame(ipmi).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
            root / "ipmi" / f"{days[0]}.parquet")
        f = root / "dcgm" / f"{days[0]}.parquet"
        pl.read_parquet(f).filter(pl.col("timestamp").dt.hour() < 12).write_parquet(f)
        return days

    wh = _month(tmp_path, cfg, [
        _line(8301, "proja", "alice", 8, "n1", "2026-10-04T23:00:00", "2026-10-05T00:00:00", "2026-10-06T00:00:00"),
    ], nodes=1, telemetry=gpus_stop_at_noon)
    node_kwh = 6000 * 12 * 3600 / 3.6e6
    row = mart(wh, "cost").filter(pl.col("model") == "all").row(0, named=True)
    assert row["it_energy_kwh"] == pytest.approx(node_kwh)
    assert row["gpu_energy_kwh"] == pytest.approx(71 * 3e5 * 8 / 3.6e6)
    assert row["ipmi_energy_share"] == pytest.approx(1.0)
    (run,) = mart(wh, "job_energy").to_dicts()
    assert run["job_id"] == "8301" and run["gpu_h"] == pytest.approx(8 * 24)
    assert run["it_kwh"] == pytest.approx(node_kwh)
    assert run["node_power"] == "partial"
    a = mart(wh, "energy").filter(pl.col("project_key") == "A").row(0, named=True)
    assert a["node_power_measured_share"] == pytest.approx(0.0)  # no run of A measured at every node-hour
    measured = wh.query_rows("SELECT hour, node_power_measured FROM run_node_hour FINAL WHERE job_id = '8301' "
                             "ORDER BY hour")
    assert [m for _, m in measured] == [1] * 12 + [0] * 12

    # a warehouse built before the rule (its node-hours "measured" wherever IPMI reported power; the hourly
    # grain's fingerprint an earlier version's, core/grain_versions.py) is built again by its next load, without
    # being asked
    wh.command("INSERT INTO schema_migrations (name, kind, checksum, applied_at) "
               "VALUES ('grains/hourly', 'grain', 'an earlier version', now64(3))")
    wh.command("ALTER TABLE run_node_hour UPDATE node_power_measured = 1 WHERE job_id = '8301' "
               "SETTINGS mutations_sync = 2")
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    wh.close()
    close_embedded()
    wh = open_warehouse(cfg)
    assert wh.stale_grains == ("hourly",)
    load_sacct(wh, tmp_path / "sacct.psv")
    assert mart(wh, "job_energy")["node_power"].to_list() == ["partial"]


def test_energy_cost_basis_without_ipmi_is_the_gpus(tmp_path, cfg):
    """The same day without the IPMI exporter: the GPUs' counters alone, 95.33 kWh, 'GPUs only (no IPMI)'."""
    def no_ipmi(root):
        days = _energy_day(root)
        for f in (root / "ipmi").iterdir():
            f.unlink()
        (root / "ipmi").rmdir()
        return days

    wh = _month(tmp_path, cfg, [
        _line(8301, "proja", "alice", 8, "n1", "2026-10-04T23:00:00", "2026-10-05T00:00:00", "2026-10-06T00:00:00"),
        _line(8302, "projb", "bob", 8, "n1", "2026-10-31T21:30:00", "2026-10-31T22:00:00", "2026-11-01T02:00:00"),
    ], nodes=1, telemetry=no_ipmi)
    row = mart(wh, "cost").filter(pl.col("model") == "all").row(0, named=True)
    assert row["it_energy_kwh"] == pytest.approx(8 * 143 * 3e5 / 3.6e6)
    assert row["energy_basis"] == "GPUs only (no IPMI)" and row["ipmi_energy_share"] == pytest.approx(0)
