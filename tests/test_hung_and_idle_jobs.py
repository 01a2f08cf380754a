"""Hung jobs, hang-suspect nodes and idle-GPU jobs (issue 17, parts 2 and 4) on a hand-built day whose every
figure is worked out by hand below.

Cluster t1: three 8-GPU H100 nodes n1, n2, n3. Telemetry for 2026-10-05 only, one sample every 10 minutes
(00:00 .. 23:50): dcgm-exporter (a GPU's utilization at the sample's time) and node_exporter's infiniband
counters (2 NICs a node, mlx5_0 and mlx5_1; the amount in the step ending at the sample follows the state at
the sample, as the generator writes it). A GPU is busy at 80 % while its job runs, unless said otherwise,
and at 0 % when nothing runs. Per NIC and direction: 1e9 B/s while a multi-node job is busy, 4e7 B/s while
a single-node job is busy, a background of 1.5e3 B/s otherwise, so a node idles at 4 × 1.5e3 = 6,000 B/s,
under the 1 MB/s NIC threshold. The idle threshold is the config's 5 %. Projects: proja → A, projb → B,
projc → C. Jobs of 2026-10-05 (sacct lines below), each [start, end):

  2001 A alice 16 GPUs n[1-2] 00:00 .. 04:30 TIMEOUT    busy until 03:00, then all idle: a HANG.
       last busy sample 02:50, hang_start 03:00, 90 min, GPU-h lost 16 × 1.5 = 24; idle samples 03:00 .. 04:20 = 9
  2002 B bob   16 GPUs n[2-3] 05:00 .. 07:00 NODE_FAIL  busy until 06:00, then idle; n3 stops reporting at 06:30
       (no samples 06:30 .. 07:50): n2 alone is looked at, still idle to the end: a HANG.
       hang_start 06:00, 60 min, GPU-h lost 16 × 1 = 16; idle samples 06:00 .. 06:50 = 6
  2003 A alice  8 GPUs n1     08:00 .. 10:20 CANCELLED  busy until 10:00, idle 20 min: not a hang at 30 min
       (one at hang_minutes = 15: 20 min, 8 × 20/60 GPU-h)
  2004 B bob   16 GPUs n[1-2] 12:00 .. 15:00 TIMEOUT    busy until 13:00, then idle but n2's GPU 5 at 90 %: not a hang
  2008 B erin   8 GPUs n3     12:00 .. 15:00 FAILED     busy until 13:00, then GPUs at 0 % but its NICs still
       move 5e7 B/s each way (4 × 5e7 = 2e8 B/s on the node, busy to 14:50): not a hang; with
       hang_nic_bytes_per_s = 1e9 (above even its busy 4 × 4e7) it is one: 120 min from 13:00, 8 × 2 = 16 GPU-h
  2005 C carol  8 GPUs n3     08:00 .. 11:00 COMPLETED  busy until 09:00, then idle: not a hang (state)
  2006 C carol  8 GPUs n3     16:00 .. 19:00 COMPLETED  2 % all along                  IDLE  24 GPU-h whole nodes
  2007 A dave   1 GPU  n1     16:00 .. 18:00 COMPLETED  its GPU (0) at 1 %, alone on n1  IDLE   2 GPU-h shared node
  2010 A alice  8 GPUs n2     16:00 .. 17:30 COMPLETED  0 %                             IDLE  12 GPU-h whole nodes
  2011 B bob    8 GPUs n2     20:00 .. 20:40 COMPLETED  0 % for 40 min: under the hour (idle at idle_min_minutes
       = 30: 8 × 40/60 GPU-h)
  2012 B bob    8 GPUs n1     20:00 .. 22:00 FAILED     0 % all along: never busy, so not a hang;  IDLE  16 GPU-h

A run's last busy time is the later of its last busy GPU sample and its last NIC-busy sample (2001: both
02:50; 2002: 05:50); the hang starts at the next GPU sample and lasts to the run's end.
Hung jobs (hang_minutes 30): 2001 (24 GPU-h lost) and 2002 (16): 2 hangs, 40 GPU-h. At 60 min the same two
(≥), at 61 only 2001, at 15 and at the default 20 also 2003.
Hang suspects (per node: hangs, node's part of the lost GPU-hours = the run's GPUs ÷ its nodes × hang hours):
  n2  2 hangs (2001, 2002), suspect, 1.5 + 1 = 2.5 h, 8 × 1.5 + 8 × 1 = 20 GPU-h, of 5 runs ended on it
      (2001, 2002, 2004, 2010, 2011): hang share 2/5
  n1  1 hang (2001), 1.5 h, 12 GPU-h, of 5 runs (2001, 2003, 2004, 2007, 2012): 1/5
  n3  1 hang (2002), 1 h, 8 GPU-h, of 4 runs (2002, 2005, 2006, 2008): 1/4
  Project A alone: n1 and n2 one hang each (2001), of A's 3 runs on n1 (2001, 2003, 2007) and 2 on n2 (2001, 2010).

Idle-GPU jobs (mean GPU utilization under 5 % over at least 60 minutes with telemetry): the run's mean is its
nodes' GPU activity in each hour shared by allocation (the run_node_hour grain). None of the busy runs comes
near: 2001 (3 × 80 + 1.5 × 0) / 4.5 = 53 %; 2002 80 × 16 / (16 + 8 + 4) = 46 % (n3 half covered in hour 06);
2003 69 %, 2004 (80 × 16 + 2 × 8 × 11.25) / 48 = 30 % (GPU 5's 90 % over n2's 8 allocated GPUs);
2005, 2008 27 %. Listed, worst first:
  2006 carol C 24 GPU-h 2 % whole nodes 180 min;  2012 bob B 16 GPU-h 0 % whole nodes 120 min;
  2010 alice A 12 GPU-h 0 % whole nodes 90 min;   2007 dave A 2 GPU-h 1 % shared node 120 min.
  4 runs, 54 GPU-h (52 on whole nodes, 2 shared). Capex: GPU-hours × 300,000 / 8 / (5 × 8,766) (the default
  H100 cost model: node price, GPUs, amortization years).
Per user and project: all 4 runs 54 GPU-h; A 2 runs 14 GPU-h (alice 12, rank 1, share 12/14, worst 2010;
dave 2, rank 2); B bob 1 run 16 (worst 2012); C carol 1 run 24 (worst 2006).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import one_refresh, refresh_capacity, refresh_history
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from tests.warehouse_copies import Loaded

# the loads and marts here run on the embedded warehouse and on a ClickHouse server (tests/conftest.py)
pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

UTC = timezone.utc
DAY = date(2026, 10, 5)
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName")


def at(hhmm: str) -> datetime:
    h, m = hhmm.split(":")
    return datetime(DAY.year, DAY.month, DAY.day, int(h), int(m), tzinfo=UTC)


# id, account, user, gpus, node list, nodes, start, end, state, busy until (None: never at 80 %)
JOBS = [
    (2001, "proja", "alice", 16, "n[1-2]", ("n1", "n2"), "00:00", "04:30", "TIMEOUT", "03:00"),
    (2002, "projb", "bob", 16, "n[2-3]", ("n2", "n3"), "05:00", "07:00", "NODE_FAIL", "06:00"),
    (2003, "proja", "alice", 8, "n1", ("n1",), "08:00", "10:20", "CANCELLED", "10:00"),
    (2004, "projb", "bob", 16, "n[1-2]", ("n1", "n2"), "12:00", "15:00", "TIMEOUT", "13:00"),
    (2008, "projb", "erin", 8, "n3", ("n3",), "12:00", "15:00", "FAILED", "13:00"),
    (2005, "projc", "carol", 8, "n3", ("n3",), "08:00", "11:00", "COMPLETED", "09:00"),
    (2006, "projc", "carol", 8, "n3", ("n3",), "16:00", "19:00", "COMPLETED", None),
    (2007, "proja", "dave", 1, "n1", ("n1",), "16:00", "18:00", "COMPLETED", None),
    (2010, "proja", "alice", 8, "n2", ("n2",), "16:00", "17:30", "COMPLETED", None),
    (2011, "projb", "bob", 8, "n2", ("n2",), "20:00", "20:40", "COMPLETED", None),
    (2012, "projb", "bob", 8, "n1", ("n1",), "20:00", "22:00", "FAILED", None),
]
# the utilization of a job's GPUs when not busy at 80 % (default 0)
LOW = {2006: 2.0, 2007: 1.0}
NODES = ("n1", "n2", "n3")
STEP = 600
BACKGROUND, SINGLE, MULTI, TRANSFER = 1.5e3, 4e7, 1e9, 5e7  # bytes/s per NIC and direction
HANGS = {"2001": ("03:00", 90.0, 24.0, 9), "2002": ("06:00", 60.0, 16.0, 6)}
RATE = 300_000 / 8 / (5 * 8766)  # H100 write-off per GPU-hour (the default cost model)
IDLE = {  # job: (user, project, GPU-hours, mean util %, attribution, observed minutes)
    "2006": ("carol", "C", 24.0, 2.0, "whole nodes", 180.0),
    "2012": ("bob", "B", 16.0, 0.0, "whole nodes", 120.0),
    "2010": ("alice", "A", 12.0, 0.0, "whole nodes", 90.0),
    "2007": ("dave", "A", 2.0, 1.0, "shared node: node share", 120.0),
}
OTHERS = {"A": ("bob", "carol", "erin", "2002", "2004", "2005", "2006", "2008", "2011", "2012", "projb", "projc"),
          "B": ("alice", "carol", "dave", "2001", "2003", "2005", "2006", "2007", "2010", "proja", "projc"),
          "C": ("alice", "bob", "dave", "erin", "2001", "2002", "2003", "2004", "2007", "2008", "2010", "2011",
                "2012", "proja", "projb")}


def _sacct(path):
    lines = [HEAD]
    for jid, acct, user, gpus, nodelist, nodes, s, e, state, _ in JOBS:
        s, e = at(s), at(e)
        submit = (s - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
        nn = len(nodes)
        tres = f"billing={14 * gpus},cpu={14 * gpus},gres/gpu={gpus},mem=100G,node={nn}"
        exit_code = "0:0" if state == "COMPLETED" else "1:0"
        lines.append(f"{jid}|{jid}|t1|gpu|normal|{acct}|{acct}|1|{user}|1|{submit}|{submit}|"
                     f"{s:%Y-%m-%dT%H:%M:%S}|{e:%Y-%m-%dT%H:%M:%S}|{int((e - s).total_seconds())}|2880|{exit_code}|"
                     f"{state}|{nn}|{14 * gpus}|{14 * gpus}|100G|{tres}|{tres}|{nodelist}|||job{jid}")
    path.write_text("\n".join(lines) + "\n")


def _state(node: str, gpu: int, t: datetime) -> tuple[float, float]:
    """(GPU utilization %, the node's NIC rate per NIC and direction) at sample time t."""
    util, nic = 0.0, BACKGROUND
    for jid, _, _, gpus, _, nodes, s, e, _, busy_until in JOBS:
        if node not in nodes or not at(s) <= t < at(e):
            continue
        busy = busy_until is not None and t < at(busy_until)
        holds = gpus >= 8 * len(nodes) or gpu < gpus
        if holds:
            util = 80.0 if busy else LOW.get(jid, 0.0)
            if jid == 2004 and node == "n2" and gpu == 5:
                util = 90.0  # the GPU that stayed busy
        if busy:
            nic = MULTI if len(nodes) > 1 else SINGLE
        elif jid == 2008:
            nic = TRANSFER  # GPUs idle, the network not
    return util, nic


def _reports(node: str, t: datetime) -> bool:
    return not (node == "n3" and at("06:30") <= t < at("08:00"))  # n3 failed under 2002


def _telemetry(root):
    t0 = at("00:00")
    times = [t0 + timedelta(seconds=STEP * k) for k in range(144)]
    gpu_rows, nic_rows = [], []
    counters = {(n, d): 0.0 for n in NODES for d in ("mlx5_0", "mlx5_1")}
    for t in times:
        for node in NODES:
            nic = _state(node, 0, t)[1]
            for dev in ("mlx5_0", "mlx5_1"):
                counters[node, dev] += nic * STEP  # the counter moves whether or not a sample is kept
            if not _reports(node, t):
                continue
            for gpu in range(8):
                gpu_rows.append({"timestamp": t, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}",
                                 "modelName": "NVIDIA H100 80GB HBM3",
                                 "DCGM_FI_DEV_GPU_UTIL": _state(node, gpu, t)[0],
                                 "DCGM_FI_DEV_POWER_USAGE": 100.0})
            for dev in ("mlx5_0", "mlx5_1"):
                nic_rows.append({"timestamp": t, "instance": f"{node}:9100", "device": dev, "port": "1",
                                 "node_infiniband_port_data_received_bytes_total": counters[node, dev],
                                 "node_infiniband_port_data_transmitted_bytes_total": counters[node, dev]})
    for family, rows in (("dcgm", gpu_rows), ("nic", nic_rows)):
        (root / family).mkdir(parents=True, exist_ok=True)
        pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
            root / family / f"{DAY}.parquet")


PROJECTS = {"proja": "A", "projb": "B", "projc": "C"}


def _load(wh, root) -> None:
    _sacct(root / "sacct.psv")
    (root / "inventory.csv").write_text(
        "node,gpu_model,gpus,partition,rack,in_service_date\n"
        "n1,h100,8,gpu,r1,2025-01-01\nn2,h100,8,gpu,r1,2025-01-01\nn3,h100,8,gpu,r2,2025-01-01\n")
    _telemetry(root / "telemetry")
    # the loads and the month's grains in one refresh at the end (etl/grains.py one_refresh, as `etl nightly`
    # runs a night's): every table's checksum as with each load refreshing its hours and the month again after
    # them (docs/benchmarks.md, issue 51 round 10)
    with one_refresh(wh):
        assert load_sacct(wh, root / "sacct.psv").quarantined == 0
        load_capacity(wh, inventory=root / "inventory.csv", cluster="t1")
        load_parquet_dir(wh, root, DAY, DAY, cluster="t1")
        refresh_capacity(wh, "t1", *OCT)


@pytest.fixture(scope="module")
def loaded(form, tmp_path_factory, request):
    """The day loaded once per form (a load is most of a test's time): the tests that only read it open it,
    the one that changes it (refresh_history) a copy (tests/warehouse_copies.py)."""
    return Loaded(form, request, tmp_path_factory, lambda wh, folder, _: _load(wh, folder), PROJECTS)


@pytest.fixture
def site(loaded, tmp_path, request):
    """A warehouse of the test's own holding the day, for a test that changes it (refresh_history)."""
    with loaded.opened_copy(tmp_path, request) as wh:
        yield wh


@pytest.fixture
def shared_site(loaded):
    from ops_warehouse.warehouse import open_warehouse

    # opened for each test: a test between may have closed the process's embedded engines (close_embedded)
    wh = open_warehouse(loaded.get()[0])
    yield wh
    wh.close()


def mart(wh, name, project="", **params):
    return run_mart(wh, name, cluster="t1", window=OCT, project=project, idle_util_pct=wh.cfg.idle_util_pct,
                    **params)


def _texts(df: pl.DataFrame) -> str:
    """The text a report would print of a mart's rows: its strings (names, ids, node lists)."""
    text = df.select(c for c, t in df.schema.items() if t == pl.String or t == pl.List(pl.String))
    return " ".join(str(v) for row in text.rows() for v in row)


def test_hung_jobs_and_suspect_nodes(site):
    h = mart(site, "hung_jobs", hang_minutes=30)
    got = {r["job_id"]: r for r in h.to_dicts()}
    assert list(got) == ["2001", "2002"]  # worst first
    for jid, (start, minutes, lost, samples) in HANGS.items():
        r = got[jid]
        assert r["hang_start_ts"] == at(start) and r["hang_minutes"] == pytest.approx(minutes)
        assert r["hung_gpu_h"] == pytest.approx(lost) and r["idle_samples"] == samples
        assert r["last_busy_ts"] == at(start) - timedelta(minutes=10)
    assert (got["2001"]["user"], got["2001"]["project"], got["2001"]["state"], got["2001"]["nodes"]) == (
        "alice", "A", "TIMEOUT", ["n1", "n2"])
    assert (got["2002"]["state"], got["2002"]["gpus"], got["2002"]["nnodes"]) == ("NODE_FAIL", 16, 2)
    assert got["2001"]["end_ts"] == at("04:30") and got["2001"]["start_ts"] == at("00:00")
    assert h["hung_gpu_h"].sum() == pytest.approx(40)
    # n2 was in both hangs: each run's suspect nodes (what the monthly report lists beside the hangs)
    assert [r["suspect_nodes"] for r in h.to_dicts()] == [["n2"], ["n2"]]
    # N minutes is a parameter: ≥ N
    assert mart(site, "hung_jobs", hang_minutes=60)["job_id"].to_list() == ["2001", "2002"]
    assert mart(site, "hung_jobs", hang_minutes=61)["job_id"].to_list() == ["2001"]
    short = {r["job_id"]: r for r in mart(site, "hung_jobs", hang_minutes=15).to_dicts()}
    assert set(short) == {"2001", "2002", "2003"}
    # the default, 20 minutes (below a 30-minute watchdog less a sampling step): 2003's 20 idle minutes count
    assert mart(site, "hung_jobs")["job_id"].to_list() == ["2001", "2002", "2003"]
    assert short["2003"]["hang_minutes"] == pytest.approx(20)
    assert short["2003"]["hung_gpu_h"] == pytest.approx(8 * 20 / 60)
    # the NIC rule: 2008's GPUs idled while its NICs moved 2e8 B/s; over a threshold above that, it hung. The
    # threshold is the site's ([reports] hang_nic_bytes_per_s), applied when the loads form run_telemetry
    site.cfg.hang_nic_bytes_per_s = 1e9
    refresh_history(site)
    nic = {r["job_id"]: r for r in mart(site, "hung_jobs", hang_minutes=30).to_dicts()}
    site.cfg.hang_nic_bytes_per_s = 1e6
    refresh_history(site)
    assert mart(site, "hung_jobs")["job_id"].to_list() == ["2001", "2002", "2003"]  # formed again: as before
    assert set(nic) == {"2001", "2002", "2008"}
    assert (nic["2008"]["hang_start_ts"], nic["2008"]["hang_minutes"], nic["2008"]["hung_gpu_h"]) == (
        at("13:00"), pytest.approx(120), pytest.approx(16))
    # a window by end time: 2001 ended 04:30, 2002 07:00
    early = run_mart(site, "hung_jobs", cluster="t1", window=(at("00:00"), at("05:00")),
                     idle_util_pct=site.cfg.idle_util_pct)
    assert early["job_id"].to_list() == ["2001"]

    # per node: n2 was in both hangs
    s = mart(site, "hang_suspect_nodes", hang_minutes=30)
    assert s.columns == ["node", "hangs", "multi_node_hangs", "suspect", "hang_hours", "hung_gpu_h",
                         "first_hang_ts", "last_hang_ts", "runs_ended", "hang_share"]  # nodes only: no users, jobs
    rows = [(r["node"], r["hangs"], r["multi_node_hangs"], r["suspect"], round(r["hang_hours"], 9),
             round(r["hung_gpu_h"], 9), r["runs_ended"]) for r in s.to_dicts()]
    assert rows == [("n2", 2, 2, 1, 2.5, 20.0, 5), ("n1", 1, 1, 0, 1.5, 12.0, 5), ("n3", 1, 1, 0, 1.0, 8.0, 4)]
    assert s["hang_share"].to_list() == pytest.approx([2 / 5, 1 / 5, 1 / 4])
    n2 = s.row(0, named=True)
    assert (n2["first_hang_ts"], n2["last_hang_ts"]) == (at("03:00"), at("06:00"))
    assert s["hung_gpu_h"].sum() == pytest.approx(h["hung_gpu_h"].sum())

    # project isolation: a project's hangs only, naming none of another project's users or jobs
    for project, hung in {"A": ["2001"], "B": ["2002"], "C": []}.items():
        jobs = mart(site, "hung_jobs", project=project, hang_minutes=30)
        nodes = mart(site, "hang_suspect_nodes", project=project, hang_minutes=30)
        assert jobs["job_id"].to_list() == hung, project
        _isolated(project, jobs, nodes)
    # A's 2001 on n1 and n2, one hang each of A's; n2 is the cluster's suspect (in 2002's hang too), as hung_jobs
    # names it in A's report (issue 28: a project selects rows, never changes a row's figures)
    a = mart(site, "hang_suspect_nodes", project="A", hang_minutes=30)
    assert [(r["node"], r["hangs"], r["suspect"], r["runs_ended"]) for r in a.to_dicts()] == [
        ("n1", 1, 0, 3), ("n2", 1, 1, 2)]  # A's runs: 2001, 2003, 2007 on n1; 2001, 2010 on n2
    for name in ("hung_jobs", "hang_suspect_nodes"):  # a project name is a parameter, never SQL
        assert mart(site, name, project=EVIL).height == 0, name


def test_idle_gpu_jobs_and_users(shared_site):
    j = mart(shared_site, "idle_gpu_jobs")
    assert j["job_id"].to_list() == list(IDLE)  # worst first
    for r in j.to_dicts():
        user, project, gpu_h, util, attribution, minutes = IDLE[r["job_id"]]
        assert (r["user"], r["project"], r["attribution"]) == (user, project, attribution)
        assert r["gpu_h"] == pytest.approx(gpu_h) and r["observed_gpu_h"] == pytest.approx(gpu_h)
        assert r["gpu_util_pct"] == pytest.approx(util, abs=1e-9)
        assert r["observed_minutes"] == pytest.approx(minutes)
        assert r["capex"] == pytest.approx(gpu_h * RATE) and r["currency"]
    assert j.height == 4 and j["gpu_h"].sum() == pytest.approx(54)
    assert j.filter(pl.col("job_id") == "2012")["state"].item() == "FAILED"  # idle, never busy: not a hang
    # the hour is a parameter: 2011's 40 idle minutes count at 30
    j30 = mart(shared_site, "idle_gpu_jobs", idle_min_minutes=30)
    assert set(j30["job_id"]) == set(IDLE) | {"2011"}
    r = j30.filter(pl.col("job_id") == "2011").row(0, named=True)
    assert (r["gpu_h"], r["observed_minutes"]) == (pytest.approx(8 * 40 / 60), pytest.approx(40))
    # so is the idle threshold (the config's): at 1 % dave's 1 % run is no longer under it, carol's 2 % neither
    assert set(run_mart(shared_site, "idle_gpu_jobs", cluster="t1", window=OCT, idle_util_pct=1.0)["job_id"]) == {
        "2012", "2010"}

    u = mart(shared_site, "idle_gpu_users")
    rows = [(r["level"], r["project"], r["user"], r["runs"], round(r["gpu_h"], 9),
             round(r["whole_node_gpu_h"], 9), round(r["shared_gpu_h"], 9), r["rank_in_project"],
             r["worst_job_id"]) for r in u.to_dicts()]
    assert rows == [
        ("all", "", "", 4, 54.0, 52.0, 2.0, 0, "2006"),
        ("project", "A", "", 2, 14.0, 12.0, 2.0, 0, "2010"),
        ("user", "A", "alice", 1, 12.0, 12.0, 0.0, 1, "2010"),
        ("user", "A", "dave", 1, 2.0, 0.0, 2.0, 2, "2007"),
        ("project", "B", "", 1, 16.0, 16.0, 0.0, 0, "2012"),
        ("user", "B", "bob", 1, 16.0, 16.0, 0.0, 1, "2012"),
        ("project", "C", "", 1, 24.0, 24.0, 0.0, 0, "2006"),
        ("user", "C", "carol", 1, 24.0, 24.0, 0.0, 1, "2006"),
    ]
    share = {(r["project"], r["user"]): r["share_of_project"] for r in u.to_dicts()}
    assert share[("", "")] is None and share[("A", "")] == pytest.approx(1)
    assert share[("A", "alice")] == pytest.approx(12 / 14) and share[("A", "dave")] == pytest.approx(2 / 14)
    assert u.filter(pl.col("level") == "all")["capex"].item() == pytest.approx(54 * RATE)

    # project isolation: a project's idle runs and users only
    for project, idle in {"A": ["2010", "2007"], "B": ["2012"], "C": ["2006"]}.items():
        jobs = mart(shared_site, "idle_gpu_jobs", project=project)
        users = mart(shared_site, "idle_gpu_users", project=project)
        assert jobs["job_id"].to_list() == idle, project
        assert set(users["project"]) == {"", project}
        _isolated(project, jobs, users)
    assert mart(shared_site, "idle_gpu_jobs", project=EVIL).height == 0  # a parameter, never SQL
    none = mart(shared_site, "idle_gpu_users", project=EVIL)  # the scope's total alone: nothing idle
    assert [(r["level"], r["project"], r["runs"]) for r in none.to_dicts()] == [("all", "", 0)]


EVIL = "A' OR 1=1 --"


def _isolated(project: str, *frames: pl.DataFrame) -> None:
    """A project's rows name no other project's users, accounts or jobs: none of their strings (names, ids,
    node lists) holds one."""
    text = " ".join(_texts(df) for df in frames)
    for other in OTHERS[project]:
        assert other not in text, (project, other)


def test_energy_from_power_samples_where_there_are_no_counters(shared_site):
    """This day's dcgm files carry power (100 W a GPU) and no energy counter: the GPU energy is power × the
    time the samples cover, and said so. 2006 held all 8 GPUs of n3 16:00 .. 19:00: 8 × 100 W × 3 h = 2.4
    kWh. 2007 held 1 GPU of n1 16:00 .. 18:00 alone on the node, so the node's 8 GPUs' energy is its (as
    efficiency.sql shares a node's GPU activity among the runs on it): 8 × 100 W × 2 h = 1.6 kWh."""
    j = {r["job_id"]: r for r in mart(shared_site, "job_energy").to_dicts()}
    assert (j["2006"]["gpu_kwh"], j["2006"]["gpu_counter_kwh"]) == (pytest.approx(2.4), 0.0)
    assert j["2007"]["gpu_kwh"] == pytest.approx(1.6)
    assert {j[k]["gpu_energy_source"] for k in ("2006", "2007")} == {"power samples"}
    assert j["2006"]["node_power"] == "missing" and j["2006"]["kg_co2e"] is None
    e = mart(shared_site, "energy").filter(pl.col("project_key") == "C").row(0, named=True)
    assert e["gpu_counter_share"] == 0.0 and e["node_power_measured_share"] == 0.0
