"""Against a real Slurm 22.05 (slurmctld, four slurmd with fake H100/H200 GPUs, slurmdbd on MariaDB) started
by the test (tests/slurm_harness.py) and the scripted workload of tests/slurm_workload.py: the warehouse
facts must be what Slurm did, through `ops-report etl sacct` running sacct itself, through `sacct --json`,
and for the capacity sources through `scontrol show node` / `scontrol show reservation`."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from tests import slurm_harness
from tests.conftest import TODAY, require, warehouse_checksums
from tests.cli_runner import cli, ops

pytestmark = require(slurm_harness.available(), "Slurm (slurm-wlm slurmdbd munge mariadb-server, as root)")


@pytest.fixture(scope="module")
def live(tmp_path_factory, slurm):
    from tests.slurm_workload import run_workload

    base = tmp_path_factory.mktemp("slurm")
    sc = slurm  # the run's cluster (tests/conftest.py), emptied of other modules' jobs
    sc.forget_jobs()
    jobs = run_workload(sc)
    today = datetime.now(timezone.utc).date()
    files = {
        "psv": base / "sacct.psv", "json": base / "sacct.json", "nodes": base / "nodes.txt",
        "resv": base / "resv.txt",
    }
    window = ["-S", f"{today - timedelta(days=1)}T00:00:00", "-E", f"{today + timedelta(days=1)}T00:00:00"]
    files["json"].write_text(sc.run(["sacct", "--json", "--allusers", "--duplicates", *window]))
    files["nodes"].write_text(sc.run(["scontrol", "show", "node"]))
    files["resv"].write_text(sc.run(["scontrol", "show", "reservation"]))
    # the same, one record a line (`scontrol -o`, a common way to run it: no blank line between records)
    files["nodes_o"], files["resv_o"] = base / "nodes-o.txt", base / "resv-o.txt"
    files["nodes_o"].write_text(sc.run(["scontrol", "-o", "show", "node"]))
    files["resv_o"].write_text(sc.run(["scontrol", "-o", "show", "reservation"]))
    files["events"] = base / "events.psv"
    events_cmd = ["sacctmgr", "-P", "show", "event", "Event=Node", f"Start={today - timedelta(days=1)}T00:00:00"]
    files["events"].write_text(sc.run(events_cmd))
    # the same, printed at a site in Japan: scontrol and sacctmgr print local times (TZ), and no offset
    tokyo = {**sc.env, "TZ": "Asia/Tokyo"}
    for key, argv in (("resv_tokyo", ["scontrol", "show", "reservation"]),
                      ("events_tokyo", [*events_cmd[:-1], f"Start={today - timedelta(days=1)}T09:00:00"])):
        files[key] = base / f"{key}.txt"
        files[key].write_text(subprocess.run(argv, env=tokyo, capture_output=True, text=True, check=True,
                                             timeout=60).stdout)
    cfg = base / "ops.toml"
    cfg.write_text(f'[sacct]\ncluster = "{slurm_harness.CLUSTER}"\n[projects]\nproja = "A"\nprojb = "B"\n')
    env = {"SLURM_CONF": sc.env["SLURM_CONF"], "OPS_CONFIG": str(cfg)}
    d0, d1 = (today - timedelta(days=1)).isoformat(), today.isoformat()
    # the product runs sacct itself (the command is the site's; here the test cluster's). The loads run in this
    # process (cli: the same main(), its own argv and environment): no process boundary is tested here, and each
    # ops-report process costs a second or two of start-up (the kills and secrets below keep theirs)
    out = cli("--warehouse", f"chdb://{base / 'wh_text'}", "etl", "sacct", "--from", d0, "--to", d1,
              env=env).stdout
    assert "quarantined 0" in out, out
    cli("--warehouse", f"chdb://{base / 'wh_json'}", "etl", "sacct", str(files["json"]), env=env)
    # the accounting database read directly, with the read-only user; the password only in the environment
    out = cli("--warehouse", f"chdb://{base / 'wh_dbd'}", "etl", "slurmdbd", "--from", d0, "--to", d1, "--db",
              f"mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{sc.mysql_port}/slurm_acct_db",
              "--cluster", slurm_harness.CLUSTER,
              env={**env, "OPS_SLURMDBD_PASSWORD": slurm_harness.READ_ONLY_PASSWORD}).stdout
    assert "quarantined 0" in out and slurm_harness.READ_ONLY_PASSWORD not in out, out
    cli("--warehouse", f"chdb://{base / 'wh_text'}", "etl", "capacity", "--inventory", str(files["nodes"]),
        "--reservations", str(files["resv"]), "--events", str(files["events"]), "--cluster",
        slurm_harness.CLUSTER, env=env)
    # sreport reads slurmdbd's hourly rollups: move the workload into a whole past hour, roll up again,
    # and load that hour from the database (and the inventory, in service since the cluster's registration)
    day = today - timedelta(days=2)
    hour = datetime(day.year, day.month, day.day, 10, tzinfo=timezone.utc)
    sc.backdate(int(hour.timestamp()), lead_s=60)
    reg = hour + timedelta(seconds=60)
    files["inventory"] = base / "inventory.csv"
    files["inventory"].write_text("node,gpu_model,gpus,partition,in_service_date\n" + "".join(
        f"{n},{m},8,{m},{reg:%Y-%m-%dT%H:%M:%S}\n" for n, m in slurm_harness.NODES.items()))
    span = [f"start={hour:%Y-%m-%dT%H:%M:%S}", f"end={hour + timedelta(hours=1):%Y-%m-%dT%H:%M:%S}"]
    sreport = {
        "utilization": sc.run(["sreport", "-P", "-n", "-t", "seconds", "--tres=gres/gpu", "cluster",
                               "utilization", *span]),
        "sizes_s": sc.run(["sreport", "-P", "-n", "-t", "seconds", "--tres=gres/gpu", "job", "sizesbyaccount",
                           *span, "grouping=1,2,5,9", "FlatView"]),
        "sizes_n": sc.run(["sreport", "-P", "-n", "-t", "seconds", "--tres=gres/gpu", "job", "sizesbyaccount",
                           *span, "grouping=1,2,5,9", "FlatView", "printjobcount"]),
    }
    back = f"chdb://{base / 'wh_back'}"
    cli("--warehouse", back, "etl", "slurmdbd", "--from", f"{day}", "--to", f"{day}", "--db",
        f"mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{sc.mysql_port}/slurm_acct_db",
        "--cluster", slurm_harness.CLUSTER, env={**env, "OPS_SLURMDBD_PASSWORD": slurm_harness.READ_ONLY_PASSWORD})
    cli("--warehouse", back, "etl", "capacity", "--inventory", str(files["inventory"]), "--cluster",
        slurm_harness.CLUSTER, env=env)
    yield {"jobs": jobs, "base": base, "env": env, "files": files, "cluster": sc, "hour": hour,
           "sreport": sreport}


def _runs(path) -> pl.DataFrame:
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{path}"), migrate=False)
    try:
        return pl.from_arrow(wh.query_arrow(
            "SELECT job_id, job_id_raw, user, account, partition, state, cancelled_by_uid, exit_code, exit_signal, "
            "toUnixTimestamp(submit_ts) AS submit, toUnixTimestamp(start_ts) AS start, toUnixTimestamp(end_ts) AS end, "
            "elapsed_s, nnodes, ncpus, gpus, gpu_type, nodes, reservation, never_ran, is_superseded "
            "FROM fct_job_run ORDER BY job_id, submit"))
    finally:
        close_embedded()


def test_the_workload_as_slurm_recorded_it(live):
    r = {row["job_id"]: row for row in _runs(live["base"] / "wh_text").filter(pl.col("is_superseded") == 0).to_dicts()}
    j = {k: str(v) for k, v in live["jobs"].items()}
    assert r[j["timeout"]]["state"] == "TIMEOUT" and r[j["timeout"]]["elapsed_s"] >= 60
    assert (r[j["fail_exit3"]]["state"], r[j["fail_exit3"]]["exit_code"]) == ("FAILED", 3)
    assert (r[j["fail_signal"]]["state"], r[j["fail_signal"]]["exit_signal"]) == ("FAILED", 9)
    assert (r[j["cancel_running"]]["state"], r[j["cancel_running"]]["cancelled_by_uid"]) == ("CANCELLED", 0)
    assert r[j["cancel_running"]]["never_ran"] == 0
    assert (r[j["multi"]]["nnodes"], r[j["multi"]]["gpus"], r[j["multi"]]["gpu_type"]) == (2, 8, "h200")
    assert r[j["multi"]]["nodes"] == ["g3", "g4"]
    assert (r[j["h200x8"]]["gpus"], r[j["h200x8"]]["user"], r[j["h200x8"]]["account"]) == (8, "bob", "projb")
    assert r[j["resv"]]["reservation"] == "resA" and r[j["resv"]]["nodes"] == ["g2"]
    assert {f"{j['array']}_{t}" for t in (1, 2, 3)} <= set(r)
    # the requeued job: two runs, the first superseded (it held its GPUs, it is not a second job)
    runs = _runs(live["base"] / "wh_text").filter(pl.col("job_id") == j["requeue"])
    assert runs["is_superseded"].to_list() == [1, 0] and runs["gpus"].to_list() == [4, 4]
    assert runs["state"].to_list() == ["REQUEUED", "COMPLETED"]


def test_parsable2_and_json_paths_agree(live):
    """The same jobs through `sacct --parsable2` (run by the product) and `sacct --json`. The 22.05 JSON
    bugs (docs/sources.md) are the only differences allowed: exit codes of failed jobs
    reported as 0, the reservation name lost; and the JSON names the user who cancelled a job
    (kill_request_user) where the text gives the uid ("CANCELLED by 0"): a name is not a uid on another
    host, so that run's cancelled_by_uid stays unknown from JSON."""
    text, js = _runs(live["base"] / "wh_text"), _runs(live["base"] / "wh_json")
    # 11 submissions, the array's 3 tasks, the requeued job's 2 runs; the job held and cancelled while pending
    # was never eligible, and sacct's -S/-E window selects by eligibility: it is in neither (only the
    # accounting database has it)
    assert text.height == js.height == 13
    assert str(live["jobs"]["cancel_pending"]) not in set(text["job_id"])
    known_bugs = ["exit_code", "exit_signal", "reservation", "cancelled_by_uid"]
    differing = {c: (text[c].to_list(), js[c].to_list()) for c in text.columns
                 if c not in known_bugs and text[c].to_list() != js[c].to_list()}
    assert not differing, differing
    diff = text.join(js, on=["job_id", "submit"], suffix="_json").filter(
        (pl.col("exit_code") != pl.col("exit_code_json")) | (pl.col("exit_signal") != pl.col("exit_signal_json"))
        | (pl.col("reservation") != pl.col("reservation_json"))
        | (pl.col("cancelled_by_uid").fill_null(-1) != pl.col("cancelled_by_uid_json").fill_null(-1)))
    j = live["jobs"]
    # the job killed by signal 9 agrees since the JSON reader takes 22.05's exit_code.signal.signal_id (it
    # read 0 before); its exit code is 0 in both
    assert set(diff["job_id"]) == {str(j["fail_exit3"]), str(j["resv"]), str(j["cancel_running"])}


def test_capacity_sources_from_the_live_cluster(live):
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{live['base'] / 'wh_text'}"), migrate=False)
    try:
        inv = wh.query_rows("SELECT node, gpu_model, gpus, partition FROM node_inventory FINAL ORDER BY node")
        resv = wh.query_rows("SELECT name, nodes, accounts FROM reservation FINAL")
    finally:
        close_embedded()
    assert inv == [(n, m, 8, m) for n, m in slurm_harness.NODES.items()]
    assert resv == [("resA", ["g2"], ["proja"])]


def test_scontrol_one_line_output_loads_as_the_blank_line_form(live):
    """`scontrol -o show node` and `scontrol -o show reservation` (issue 31: read as one node with 0 GPUs
    before, exit 0): the four nodes with 8 GPUs each, their models and partitions, and resA on g2 for
    proja, as the blank-line form gives them."""
    from ops_warehouse.etl.capacity_sources import read_inventory, read_reservations

    f = live["files"]
    lines = f["nodes_o"].read_text().strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("NodeName=") for line in lines)  # the form under test
    one, blank = read_inventory(f["nodes_o"], "c"), read_inventory(f["nodes"], "c")
    cols = ["node", "gpu_model", "gpus", "partition", "cpus"]
    assert one.select(cols).to_dicts() == blank.select(cols).to_dicts()
    assert [tuple(r.values()) for r in one.select("node", "gpu_model", "gpus", "partition").to_dicts()] == [
        (n, m, 8, m) for n, m in slurm_harness.NODES.items()]
    # a node in two partitions (its model's and `all`): its capacity counts under the first, both are kept,
    # and its state at the snapshot: idle, the workload done, g2 in reservation resA
    assert one["partitions"].to_list() == blank["partitions"].to_list() == [
        [m, slurm_harness.ALL_PARTITION] for m in slurm_harness.NODES.values()]
    assert one["state"].to_list() == blank["state"].to_list() == ["IDLE", "IDLE+RESERVED", "IDLE", "IDLE"]
    r_one, r_blank = read_reservations(f["resv_o"], "c"), read_reservations(f["resv"], "c")
    assert r_one.drop("source").to_dicts() == r_blank.drop("source").to_dicts()
    assert [(r["name"], r["nodes"], r["accounts"]) for r in r_one.to_dicts()] == [("resA", ["g2"], ["proja"])]


def test_capacity_by_partition_for_nodes_in_two_partitions(live):
    """The live cluster's nodes are each in their model's partition and in `all` (issue 31: capacity counted a
    node only under its first). Over the workload's two days, from the scontrol capacity: the 'partition' rows
    (each node under its first) add up to the cluster; the 'partition_member' rows count each node in both its
    partitions: `all` is the whole cluster, figure by figure, h100 and h200 are their two nodes (here the same
    as their 'partition' rows), so the members add up to twice the cluster; their law holds."""
    from ops_warehouse.analytics.checks import run_checks
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.config import Config
    from ops_warehouse.etl.grains import refresh_capacity
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    window = (today - timedelta(days=1), today + timedelta(days=1))
    wh = open_warehouse(Config(dsn=f"chdb://{live['base'] / 'wh_text'}"))
    try:
        refresh_capacity(wh, slurm_harness.CLUSTER, *window)
        u = run_mart(wh, "utilization", cluster=slurm_harness.CLUSTER, window=window)
        laws = {o.law.name: o.status for o in run_checks(
            wh, cluster=slurm_harness.CLUSTER, window=window, project="",
            names=["partition_members_within_cluster"])}
    finally:
        close_embedded()
    figures = ["capacity_gpu_h", "available_gpu_h", "allocated_gpu_h", "free_gpu_h", "reserved_idle_gpu_h"]
    by = {(r["level"], r["key"]): r for r in u.to_dicts()}
    cl = by[("cluster", "")]
    assert cl["capacity_gpu_h"] > 0 and cl["allocated_gpu_h"] > 0
    assert sorted(k for lv, k in by if lv == "partition") == ["h100", "h200"]
    assert sorted(k for lv, k in by if lv == "partition_member") == ["all", "h100", "h200"]
    for f in figures:
        assert by[("partition_member", "all")][f] == pytest.approx(cl[f], abs=1e-6), f
        for m in ("h100", "h200"):
            assert by[("partition_member", m)][f] == pytest.approx(by[("partition", m)][f], abs=1e-6), (m, f)
        assert sum(by[("partition", m)][f] for m in ("h100", "h200")) == pytest.approx(cl[f], abs=1e-6), f
    # two nodes of 8 GPUs each per model partition: half the cluster's capacity each
    assert by[("partition_member", "h100")]["capacity_gpu_h"] == pytest.approx(cl["capacity_gpu_h"] / 2, abs=1e-6)
    assert laws == {"partition_members_within_cluster": "holds"}


def test_reservation_and_event_times_are_read_in_the_sites_zone(live):
    """scontrol and sacctmgr print local times without an offset (issue 31: read as UTC, a Japanese site's
    reservations and DOWN/DRAIN windows shifted 9 h against its jobs). Printed by the live cluster with
    TZ=Asia/Tokyo and read with that zone, they are the instants the UTC printout gives; read as UTC, 9 h
    late."""
    from ops_warehouse.errors import OpsError
    from ops_warehouse.etl.capacity_sources import read_events, read_reservations

    f = live["files"]
    assert "T" in f["resv_tokyo"].read_text() and f["resv_tokyo"].read_text() != f["resv"].read_text()
    for read, tokyo, utc in ((read_reservations, f["resv_tokyo"], f["resv"]),
                             (read_events, f["events_tokyo"], f["events"])):
        want = read(utc, "c").drop("source")
        assert want.height >= 1, utc.read_text()
        assert read(tokyo, "c", "Asia/Tokyo").drop("source").to_dicts() == want.to_dicts()
        naive = read(tokyo, "c").drop("source")
        assert (naive["start_ts"] - want["start_ts"]).dt.total_seconds().to_list() == [9 * 3600] * want.height
    with pytest.raises(OpsError, match="timezone 'Asia/Tokio': not a time zone"):
        read_reservations(f["resv_tokyo"], "c", "Asia/Tokio")


def _table(path, table: str, order: str) -> pl.DataFrame:
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{path}"), migrate=False)
    try:
        return pl.from_arrow(wh.query_arrow(
            f"SELECT * EXCEPT (source, source_line) FROM {table} FINAL ORDER BY {order}"))
    finally:
        close_embedded()


def test_slurmdbd_source_gives_the_same_facts_as_sacct(live):
    """Table by table, every column but where the row came from: the database read directly and sacct
    run by the product agree on every job sacct shows. The database also has the job held and cancelled
    while pending, which sacct's window never selects."""
    held = str(live["jobs"]["cancel_pending"])
    for table, order in (("slurm_job_run", "job_id, submit_ts"), ("slurm_job_step", "job_id, step_id, start_ts")):
        text, dbd = _table(live["base"] / "wh_text", table, order), _table(live["base"] / "wh_dbd", table, order)
        assert text.height > 10
        dbd = dbd.filter(pl.col("job_id") != held)
        differing = {c: [(a, b) for a, b in zip(text[c].to_list(), dbd[c].to_list()) if a != b]
                     for c in text.columns if text[c].to_list() != dbd[c].to_list()}
        assert not differing, (table, differing)
    only = _table(live["base"] / "wh_dbd", "slurm_job_run", "job_id").filter(pl.col("job_id") == held).row(0, named=True)
    assert (only["state"], only["never_ran"], only["cancelled_by_uid"]) == ("CANCELLED", 1, 0)


def test_slurmdbd_read_a_page_at_a_time_gives_the_same_tables(live):
    """Issue 50: the load reads the database a page of job_db_inx at a time, so years of accounting load in
    a page's memory. Pages of 2 job ids (the live database's jobs split across 8 or more pages, a job's steps
    read with its page) give the tables of the one-page load of the same window, row for row, and the same
    counts."""
    from ops_warehouse.config import Config
    from ops_warehouse.etl.slurmdbd_source import load_slurmdbd
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    # the day the fixture moved the workload to (sreport's hour), as wh_back loaded it
    w0 = live["hour"].replace(hour=0)
    w1 = w0 + timedelta(days=1)
    url = f"mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{live['cluster'].mysql_port}/slurm_acct_db"
    results = {}
    for name, page in (("wh_dbd_page1", 10**9), ("wh_dbd_pages", 2)):
        wh = open_warehouse(Config(dsn=f"chdb://{live['base'] / name}"))
        try:
            results[name] = load_slurmdbd(wh, url, w0, w1, cluster=slurm_harness.CLUSTER,
                                          password=slurm_harness.READ_ONLY_PASSWORD, page_jobs=page)
        finally:
            wh.close()
            close_embedded()
    one, paged = results["wh_dbd_page1"], results["wh_dbd_pages"]
    assert (paged.records_read, paged.jobs_loaded, paged.steps_loaded, paged.quarantined) == (
        one.records_read, one.jobs_loaded, one.steps_loaded, one.quarantined)
    assert one.jobs_loaded == 14 and one.steps_loaded > 0, one  # the 14 runs the database holds (test_nightly_...)
    for table, order in (("slurm_job_run", "job_id, submit_ts"), ("slurm_job_step", "job_id, step_id, start_ts")):
        a = _table(live["base"] / "wh_dbd_page1", table, order).drop("loaded_at", strict=False)
        b = _table(live["base"] / "wh_dbd_pages", table, order).drop("loaded_at", strict=False)
        assert a.height > 10 and a.equals(b), (table, a.height, b.height)


def test_node_events_and_reservations_from_the_database_and_from_text_agree(live):
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    got = {}
    for name in ("wh_text", "wh_dbd"):
        wh = open_warehouse(Config(dsn=f"chdb://{live['base'] / name}"), migrate=False)
        try:
            got[name] = (wh.query_rows("SELECT node, start_ts, end_ts, state, reason FROM node_event FINAL ORDER BY ALL"),
                         wh.query_rows("SELECT name, start_ts, end_ts, nodes, accounts FROM reservation FINAL"))
        finally:
            close_embedded()
    events, resv = got["wh_dbd"]
    assert [(e[0], e[3], e[4]) for e in events] == [("g4", "DRAIN", "thermal: GPU over temp")]
    # drained for the workload's 3 s; Slurm records the event once the node is drained, not while it drains
    assert 0 < (events[0][2] - events[0][1]).total_seconds() <= 10
    assert got["wh_text"] == got["wh_dbd"]


def test_against_sreport(live):
    """Slurm's own numbers for the workload's hour: `sreport cluster utilization` and `sreport job
    sizesbyaccount` (GPU TRES) against the utilization model and `ops-report summary`. Definitions line up as
    docs/sources.md says: sreport's Down is our down + drained, its Idle our free + reserved-unused (it has
    no separate reserved-idle time for a reservation without the MAINT flag), its job sizes are bins of the
    job's CPU count, and it counts runs (a requeued job's first run too, runs of zero seconds not)."""
    from ops_warehouse.config import Config
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.etl.grains import refresh_capacity
    from ops_warehouse.analytics.summary import summary
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    h0 = live["hour"]
    h1 = h0 + timedelta(hours=1)
    cluster_, tres, alloc, down, pdown, idle, planned, reported = live["sreport"]["utilization"].split("|")
    wh = open_warehouse(Config(dsn=f"chdb://{live['base'] / 'wh_back'}"))
    try:
        refresh_capacity(wh, slurm_harness.CLUSTER, h0, h1)
        u = run_mart(wh, "utilization", cluster=slurm_harness.CLUSTER, window=(h0, h1)).filter(
            pl.col("level") == "cluster").row(0, named=True)
        by_acct = summary(wh, h0.date(), h0.date(), ["account", "job_size_bin"])
        runs = pl.from_arrow(wh.query_arrow(
            "SELECT account, ncpus, wall_s, gpus, end_ts FROM fct_job_run WHERE NOT never_ran AND gpus > 0"))
    finally:
        close_embedded()
    assert int(reported) == round(u["capacity_gpu_h"] * 3600) == 32 * (3600 - 60)
    assert int(alloc) == round(u["allocated_gpu_h"] * 3600) > 100
    assert int(down) + int(pdown) == round((u["down_gpu_h"] + u["drained_gpu_h"]) * 3600) > 0
    assert int(idle) + int(planned) == round((u["free_gpu_h"] + u["reserved_idle_gpu_h"]) * 3600)
    # job sizes by account: GPU-seconds per CPU-count bin, and the runs sreport counts
    bins = {"1": "1-1", "2": "2-4", "3 - 4": "2-4", "5 - 8": "5-8"}
    mine: dict[tuple[str, str], float] = {}
    for r in by_acct.iter_rows(named=True):
        key = (r["account"], bins.get(r["job_size_bin"], ">= 9"))
        mine[key] = mine.get(key, 0) + r["gpu_h"] * 3600
    counted = runs.filter(pl.col("wall_s") > 0).with_columns(
        b=pl.when(pl.col("ncpus") == 1).then(pl.lit("1-1")).when(pl.col("ncpus") <= 4).then(pl.lit("2-4"))
        .when(pl.col("ncpus") <= 8).then(pl.lit("5-8")).otherwise(pl.lit(">= 9")))
    lines_s, lines_n = live["sreport"]["sizes_s"].splitlines(), live["sreport"]["sizes_n"].splitlines()
    assert [x.split("|")[1] for x in lines_s] == [x.split("|")[1] for x in lines_n] == ["proja", "projb"]
    for line_s, line_n in zip(lines_s, lines_n):
        _, account, *secs, _share = line_s.split("|")
        counts = line_n.split("|")[2:-1]
        for b, sec, n in zip(["0-0", "1-1", "2-4", "5-8", ">= 9"], secs, counts):
            assert int(sec) == round(mine.get((account, b), 0)), (account, b)
            assert int(n) == counted.filter((pl.col("account") == account) & (pl.col("b") == b)).height, (account, b)


def test_incremental_slurmdbd_loads(live):
    """Without a window the load takes every job changed since the last load (slurmdbd's mod_time, less a
    10-minute overlap). The jobs are made a day old, a first load takes them all, then one job changes
    (renamed, as an admin's `scontrol update` would) and the next load reads that job alone."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    sc = live["cluster"]
    dsn = f"chdb://{live['base'] / 'wh_incr'}"
    args = ["--warehouse", dsn, "etl", "slurmdbd", "--cluster", slurm_harness.CLUSTER, "--db",
            f"mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{sc.mysql_port}/slurm_acct_db"]
    env = {**live["env"], "OPS_SLURMDBD_PASSWORD": slurm_harness.READ_ONLY_PASSWORD}
    # the jobs were last changed two days ago, the h200x8 job a day ago: the load's watermark is a day ago
    sc.sql("UPDATE slurm_acct_db.lt1_job_table SET mod_time = UNIX_TIMESTAMP() - 2 * 86400; "
           f"UPDATE slurm_acct_db.lt1_job_table SET mod_time = UNIX_TIMESTAMP() - 86400 "
           f"WHERE id_job = {live['jobs']['h200x8']}")
    first = ops(*args, env=env).stdout
    assert "(14 job runs" in first, first  # every run, the held and cancelled one included
    job = live["jobs"]["small"]
    sc.sql(f"UPDATE slurm_acct_db.lt1_job_table SET job_name = 'renamed', mod_time = UNIX_TIMESTAMP() "
           f"WHERE id_job = {job}")
    second = ops(*args, env=env).stdout
    # the renamed job, and the one changed at the watermark (inside the overlap); nothing older
    assert "(2 job runs, 2 steps)" in second, second
    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    try:
        assert wh.query_rows("SELECT job_name, count() OVER () FROM slurm_job_run FINAL WHERE job_id = {j:String}",
                             {"j": str(job)}) == [("renamed", 1)]
        assert wh.query_rows("SELECT count() FROM slurm_job_run FINAL")[0][0] == 14
    finally:
        close_embedded()


def test_nightly_with_the_slurmdbd_source(live, tmp_path):
    """`ops-report etl nightly` with slurmdbd chosen for the cluster by config: a dry run loads nothing, a
    run loads every source, a second run changes no table, a run while one holds the lock exits at once,
    and a failing source is reported without stopping the others."""
    import fcntl
    import subprocess

    from tests.cli_runner import OPS

    sc, files = live["cluster"], live["files"]
    wh = tmp_path / "wh"
    cfg = tmp_path / "ops.toml"
    cfg.write_text(
        f'[warehouse]\ndsn = "chdb://{wh}"\n'
        f'[[nightly.slurm]]\ncluster = "{slurm_harness.CLUSTER}"\nsource = "slurmdbd"\n'
        f'db = "mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{sc.mysql_port}/slurm_acct_db"\n'
        f'[nightly.capacity]\ncluster = "{slurm_harness.CLUSTER}"\ninventory = "{files["nodes"]}"\n'
        f'reservations = "{files["resv"]}"\n')
    env = {**live["env"], "OPS_CONFIG": str(cfg), "OPS_SLURMDBD_PASSWORD": slurm_harness.READ_ONLY_PASSWORD,
           "OPS_WAREHOUSE": ""}
    dry = ops("etl", "nightly", "--dry-run", env=env).stdout
    assert "slurmdbd lt1 changed since the last load (mod_time): dry-run" in dry and "capacity lt1" in dry
    assert _count(wh, "slurm_job_run") == 0
    first = ops("etl", "nightly", env=env).stdout
    assert first.count(": ok ") == 2, first
    sums = warehouse_checksums(wh)
    assert sums["slurm_job_run"][0] == 14 and sums["node_inventory"][0] == 4
    ops("etl", "nightly", env=env)
    assert warehouse_checksums(wh) == sums
    # a second run while one holds the lock: exits at once, says why, loads nothing
    from ops_warehouse.config import load_config
    from ops_warehouse.etl.nightly import lock_path

    lock = lock_path(load_config(cfg))
    with open(lock, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        p = ops("etl", "nightly", env=env, check=False)
    assert p.returncode != 0 and "another ops-report etl nightly is running" in p.stderr
    # a source that fails (a telemetry folder that is not there): the others still load, exit 1, one line
    cfg.write_text(cfg.read_text() + f'[nightly.telemetry]\nsource = "file"\npath = "{tmp_path / "nowhere"}"\n')
    p = subprocess.run([*OPS, "etl", "nightly"], capture_output=True, text=True, env={**__import__("os").environ, **env},
                       timeout=300)
    assert p.returncode == 1 and p.stdout.count(": ok ") == 2
    assert p.stderr.strip().splitlines() == [
        next(line for line in p.stderr.splitlines() if "nightly source failed: telemetry-file " in line)]
    assert slurm_harness.READ_ONLY_PASSWORD not in p.stdout + p.stderr


def _count(path, table: str) -> int:
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    wh = open_warehouse(Config(dsn=f"chdb://{path}"))
    try:
        return wh.query_rows(f"SELECT count() FROM {table} FINAL")[0][0]
    finally:
        close_embedded()


@pytest.mark.parametrize("kind", ["sacct", "slurmdbd"])
def test_nightly_slurm_source_survives_reruns_backfills_and_kills(live, tmp_path, kind, embedded_template):
    """Issue 7's data-safety checks on the real Slurm, per source: nightly run three times and a backfill of
    the window already loaded leave every table identical; SIGKILL at random points of a run (each on a
    fresh warehouse), then a rerun, gives exactly the clean run's tables."""
    import random
    import shutil

    from tests.cli_runner import OPS
    from tests.test_nightly_safety import NIGHTLY_START, _kill_during, load_seconds

    sc = live["cluster"]
    db = f'db = "mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{sc.mysql_port}/slurm_acct_db"\n'

    def config(name: str) -> tuple[dict, object]:
        wh, cfg = tmp_path / name, tmp_path / f"{name}.toml"
        cfg.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\n[sacct]\ncluster = "{slurm_harness.CLUSTER}"\n'
                       f'[[nightly.slurm]]\ncluster = "{slurm_harness.CLUSTER}"\nsource = "{kind}"\n'
                       + (db if kind == "slurmdbd" else ""))
        return {**live["env"], "OPS_CONFIG": str(cfg), "OPS_WAREHOUSE": "",
                "OPS_SLURMDBD_PASSWORD": slurm_harness.READ_ONLY_PASSWORD}, wh

    env, clean = config("clean")
    ops("init", env=env)
    # the kills are timed from the run's line as the source's load begins (past the interpreter's and the
    # engine's start-up, which on a busy machine varies by more than this load takes), within the clean
    # load's time from that line
    load_s, out = load_seconds([*OPS, "etl", "nightly"], env, NIGHTLY_START)
    want = warehouse_checksums(clean)
    # the fixture moved the workload two days back: the first window (three days to yesterday) has what sacct
    # lists for it; slurmdbd's first incremental run has every job the database holds. The run's day is the
    # session's (OPS_TODAY, tests/conftest.py), as the nightly's window is
    today = TODAY
    listed = sc.run(["sacct", "-X", "-n", "-P", "--allusers", "--duplicates", "--format=JobID",
                     "-S", f"{today - timedelta(days=3)}T00:00:00", "-E", f"{today}T00:00:00"]).split()
    assert want["slurm_job_run"][0] == (14 if kind == "slurmdbd" else len(listed)) > 10, out
    assert want["slurm_job_step"][0] > 0
    for args in [(), (), ("--from", f"{today - timedelta(days=3)}", "--to", f"{today - timedelta(days=1)}")]:
        ops("etl", "nightly", *args, env=env)
        assert warehouse_checksums(clean) == want, args

    rng = random.Random(f"{kind}-3")
    landed = 0
    for k in range(3):
        env_k, crashed = config(f"crashed{k}")
        shutil.copytree(embedded_template, crashed, symlinks=True)  # what `ops-report init` leaves
        landed += _kill_during([*OPS, "etl", "nightly"], env_k, rng.uniform(0, load_s), NIGHTLY_START)
        ops("etl", "nightly", env=env_k)
        assert warehouse_checksums(crashed) == want, f"kill {k}"
    print(f"nightly {kind}: load {load_s:.1f} s from its start line, {landed} of 3 kills landed")
    assert landed >= 2


def test_the_slurmdbd_password_is_never_written_anywhere(live, tmp_path):
    """Issue 7, secrets: with the password only in the environment, run nightly (ok; MariaDB's port wrong;
    a database that does not exist; a wrong password) and the monthly report, then look for the password
    in: every process's argv while it runs (ops-report and what it starts), stdout and stderr, etl_run_log
    and every other table of the warehouse, every byte of the warehouse's files, the report files."""
    import subprocess
    import time

    from tests.cli_runner import OPS

    sc, files = live["cluster"], live["files"]
    secret = slurm_harness.READ_ONLY_PASSWORD
    wh, cfg, out = tmp_path / "wh", tmp_path / "ops.toml", tmp_path / "out"
    env = {**os.environ, **live["env"], "OPS_CONFIG": str(cfg), "OPS_WAREHOUSE": "",
           "OPS_SLURMDBD_PASSWORD": secret}

    def config(port: int, dbname: str = "slurm_acct_db") -> None:
        cfg.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\n[nightly]\nretries = 1\nbackoff_s = 0.1\n'
                       f'[[nightly.slurm]]\ncluster = "{slurm_harness.CLUSTER}"\nsource = "slurmdbd"\n'
                       f'db = "mysql://{slurm_harness.READ_ONLY_USER}@127.0.0.1:{port}/{dbname}"\n'
                       f'[nightly.capacity]\ncluster = "{slurm_harness.CLUSTER}"\ninventory = "{files["nodes"]}"\n')

    seen_argv, outputs = [], []

    def run(*args: str, expect: int, **extra_env) -> None:
        p = subprocess.Popen([*OPS, *args], env={**env, **extra_env}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        while p.poll() is None:  # the argv of it and its children, as `ps` shows them to every user
            for proc in Path("/proc").iterdir():
                try:
                    seen_argv.append((proc / "cmdline").read_bytes())
                except OSError:
                    pass
            time.sleep(0.2)
        o, e = p.communicate()
        outputs.append(o + e)
        assert p.returncode == expect, (args, o, e)

    from pathlib import Path

    config(sc.mysql_port)
    run("etl", "nightly", expect=0)
    config(free := slurm_harness.free_port())
    run("etl", "nightly", expect=1)
    config(sc.mysql_port, "no_such_db")
    run("etl", "nightly", expect=1)
    config(sc.mysql_port)
    run("etl", "nightly", expect=1, OPS_SLURMDBD_PASSWORD=secret + "-wrong")
    month = live["hour"].strftime("%Y-%m")
    run("--warehouse", f"chdb://{wh}", "monthly", "--cluster", "--month", month,
        "--format", "all", "--out", str(out), expect=0)
    assert free and len(outputs) == 5 and any("no_such_db" in o for o in outputs)

    leaks = [f"argv {a[:80]!r}" for a in seen_argv if secret.encode() in a]
    leaks += [f"output {i}" for i, o in enumerate(outputs) if secret in o]
    leaks += [f"file {f}" for f in [*wh.rglob("*"), *out.rglob("*")] if f.is_file() and secret.encode() in f.read_bytes()]
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    w = open_warehouse(Config(dsn=f"chdb://{wh}"), migrate=False)
    try:
        failed = w.query_rows("SELECT count() FROM etl_run_log WHERE status = 'failed'")[0][0]
        for (t,) in w.query_rows("SELECT name FROM system.tables WHERE database = currentDatabase() "
                                 "AND engine LIKE '%MergeTree'"):
            n = w.query_rows(f"SELECT count() FROM {t} WHERE position(formatRow('TSV', *), {{s:String}}) > 0",
                             {"s": secret})[0][0]
            leaks += [f"table {t}: {n} rows"] if n else []
    finally:
        close_embedded()
    assert failed >= 3 and len(seen_argv) > 50 and list(out.glob("monthly-*.html"))
    assert not leaks


def test_a_drained_nodes_one_line_record_reads_past_its_reason(live, tmp_path):
    """`scontrol -o show node` of a drained node: its Reason (with spaces, and scontrol's [user@time] after
    it) sits inside the one line, and what follows it must still be read (its partitions, GPUs). Last in the
    module: the drain leaves an event in the accounting database, which the next module's forget_jobs()
    clears."""
    from ops_warehouse.etl.capacity_sources import read_inventory

    sc = live["cluster"]
    sc.run(["scontrol", "update", "NodeName=g1", "State=DRAIN", "Reason=thermal: GPU 3 over 90 C"])
    try:
        line = sc.run(["scontrol", "-o", "show", "node", "g1"])
    finally:
        sc.run(["scontrol", "update", "NodeName=g1", "State=RESUME"])
    assert line.count("\n") == 1 and "Reason=thermal: GPU 3 over 90 C [" in line, line
    (tmp_path / "g1.txt").write_text(line)
    r = read_inventory(tmp_path / "g1.txt", "c").row(0, named=True)
    assert (r["node"], r["gpu_model"], r["gpus"], r["partitions"]) == ("g1", "h100", 8, ["h100", "all"]), (r, line)
    assert r["state"].split("+")[:2] == ["IDLE", "DRAIN"], (r, line)
