"""Capacity sources: `scontrol show node`, `sacctmgr list event --parsable2`, `scontrol show reservation`,
the site inventory CSV; clear errors on bad input; reloads change nothing."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.etl.capacity_sources import load_capacity, read_events, read_inventory, read_reservations

UTC = timezone.utc
SCONTROL_NODES = """NodeName=gpu-001 Arch=x86_64 CoresPerSocket=56
   CPUAlloc=0 CPUEfctv=112 CPUTot=112 CPULoad=0.04
   AvailableFeatures=h100,rack07,ib
   ActiveFeatures=h100,rack07,ib
   Gres=gpu:h100:8(S:0-1)
   NodeAddr=gpu-001 NodeHostName=gpu-001 Version=23.02.7
   OS=Linux 5.15.0-91-generic #101-Ubuntu SMP
   RealMemory=2000000 AllocMem=0 FreeMem=1950000 Sockets=2 Boards=1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=h100,debug
   BootTime=2026-09-30T10:00:00 SlurmdStartTime=2026-09-30T10:02:00
   Reason=thermal: GPU over temp [root@2026-10-02T01:00:00]

NodeName=gpu-002 Arch=x86_64 CoresPerSocket=56
   CPUAlloc=112 CPUEfctv=112 CPUTot=112 CPULoad=98.00
   AvailableFeatures=h100,rack07
   ActiveFeatures=h100,rack07
   Gres=gpu:h100:4(S:0),gpu:h100:4(S:1)
   State=ALLOCATED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=h100

NodeName=login-01 Arch=x86_64 CoresPerSocket=16
   CPUAlloc=0 CPUEfctv=32 CPUTot=32 CPULoad=0.50
   AvailableFeatures=(null)
   Gres=(null)
   State=IDLE ThreadsPerCore=2
   Partitions=cpu
"""


def test_scontrol_show_node(tmp_path):
    p = tmp_path / "nodes.txt"
    p.write_text(SCONTROL_NODES)
    df = read_inventory(p, "ai1")
    rows = {r["node"]: r for r in df.to_dicts()}
    assert (rows["gpu-001"]["gpu_model"], rows["gpu-001"]["gpus"], rows["gpu-001"]["partition"],
            rows["gpu-001"]["rack"], rows["gpu-001"]["cpus"]) == ("h100", 8, "h100", "rack07", 112)
    assert rows["gpu-002"]["gpus"] == 8  # two typed entries, one per socket
    assert rows["login-01"]["gpus"] == 0


def test_sacctmgr_events(tmp_path):
    p = tmp_path / "events.psv"
    p.write_text("Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
                 "ai1||2026-10-01T00:00:00|Unknown||Cluster Registered TRES|\n"
                 "ai1|gpu-[001-002]|2026-10-02T01:00:00|2026-10-02T05:30:00|IDLE+DRAIN|thermal: GPU over temp|root(0)\n"
                 "ai1|gpu-003|2026-10-03T08:00:00|Unknown|DOWN*|Not responding|slurm(64030)\n")
    df = read_events(p, "ai1")
    assert df.select("node", "state", "reason").rows() == [
        ("gpu-001", "DRAIN", "thermal: GPU over temp"), ("gpu-002", "DRAIN", "thermal: GPU over temp"),
        ("gpu-003", "DOWN", "Not responding")]
    assert df["end_ts"][2] is None and df["start_ts"][0] == datetime(2026, 10, 2, 1, tzinfo=UTC)
    bad = tmp_path / "bad.psv"
    bad.write_text("JobID|State\n1|COMPLETED\n")  # sacct's header: named as such (issue 31)
    with pytest.raises(OpsError, match="bad.psv: sacct output, which --events does not take: give it to "
                                       "`ops-report etl sacct`"):
        read_events(bad, "ai1")
    bad.write_text("Cluster|Node|Start\nai1|n1|2026-10-01\n")
    with pytest.raises(OpsError, match="not `sacctmgr list event --parsable2` output"):
        read_events(bad, "ai1")
    bad.write_text("Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\nai1|n1|yesterday|Unknown|DOWN|x|y\n")
    with pytest.raises(OpsError, match="bad.psv line 2: cannot read time 'yesterday'"):
        read_events(bad, "ai1")


def test_scontrol_reservations(tmp_path):
    p = tmp_path / "resv.txt"
    p.write_text("ReservationName=llm_run StartTime=2026-10-10T00:00:00 EndTime=2026-10-17T00:00:00 "
                 "Duration=7-00:00:00\n   Nodes=gpu-[001-090] NodeCnt=90 CoreCnt=10080 Features=(null) "
                 "PartitionName=h100 Flags=SPEC_NODES\n   TRES=cpu=10080\n   Users=(null) Groups=(null) "
                 "Accounts=ProjA,projx Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a\n\n"
                 "ReservationName=maint StartTime=2026-10-20T06:00:00 EndTime=2026-10-20T12:00:00 Duration=06:00:00\n"
                 "   Nodes=gpu-005 NodeCnt=1 CoreCnt=112 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES\n"
                 "   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE\n")
    df = read_reservations(p, "ai1")
    r = df.to_dicts()
    assert r[0]["name"] == "llm_run" and len(r[0]["nodes"]) == 90 and r[0]["nodes"][-1] == "gpu-090"
    assert r[0]["accounts"] == ["proja", "projx"] and r[0]["flags"] == "SPEC_NODES"
    assert r[1]["users"] == ["root"] and r[1]["accounts"] == [] and r[1]["partition"] == ""


def test_inventory_errors_and_idempotent_reload(tmp_path, wh):
    bad = tmp_path / "inv.csv"
    bad.write_text("node,gpu_model,gpus,partition\nn1,h100,eight,gpu\n")
    with pytest.raises(OpsError, match="node n1: gpus 'eight' is not a number"):
        read_inventory(bad, "ai1")
    bad.write_text("node,gpus\nn1,8\n")
    with pytest.raises(OpsError, match="missing gpu_model, partition"):
        read_inventory(bad, "ai1")
    good = tmp_path / "nodes.txt"
    good.write_text(SCONTROL_NODES)
    for _ in range(2):
        assert load_capacity(wh, inventory=good, cluster="ai1") == {"node_inventory": 3}
    assert wh.query_rows("SELECT count(), sum(gpus) FROM node_inventory FINAL") == [(3, 16)]


def test_slurm_decoding_functions(wh):
    """The SQL functions that read slurmdbd's encodings, on values seen in a 22.05 database, against what
    sacct printed for them (and sacct's rule that an exit code of 128+ loses 128: src/sacct/print.c)."""
    got = wh.query_rows(
        "SELECT slurm_exit_text(toUInt32(36608)), slurm_exit_text(toUInt32(15)), slurm_exit_text(toUInt32(768)), "
        "slurm_exit_text(toUInt32(9)), slurm_state_text(1024, 4294967294), slurm_state_text(4, 0), "
        "slurm_state_text(6, 4294967294), slurm_mem_text(toUInt64(128000)), slurm_mem_text(toUInt64(250000)), "
        "slurm_tres_text('1=1,3=18446744073709551614,4=1,5=1,1001=8,1003=8', "
        "map(1, 'cpu', 3, 'energy', 4, 'node', 5, 'billing', 1001, 'gres/gpu', 1003, 'gres/gpu:h200')), "
        "slurm_time_text(0), slurm_time_text(1796008043), slurm_step_text(-5)")[0]
    assert got == ("15:0", "0:15", "3:0", "0:9", "REQUEUED", "CANCELLED by 0", "TIMEOUT", "125G", "250000M",
                   "billing=1,cpu=1,gres/gpu:h200=8,gres/gpu=8,node=1", "Unknown", "2026-11-30T03:07:23", "batch")


def test_capacity_by_partition_counts_a_node_in_each_of_its_partitions(tmp_path, wh):
    """The scontrol records above: gpu-001 (8 H100) in h100 and debug, gpu-002 (8 H100) in h100, login-01 (no
    GPUs) in cpu, for 2026-10-01 (no events loaded, nothing run: all free). 'partition' rows count a node under
    its first partition and add up to the cluster's 16 × 24 = 384 GPU-hours; 'partition_member' rows count it
    in each: debug is gpu-001's 8 × 24 = 192, h100 both nodes' 384, so the members hold 576 > 384 (never a
    cluster total), and their law holds."""
    from ops_warehouse.analytics.checks import run_checks
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.etl.grains import refresh_capacity

    nodes = tmp_path / "nodes.txt"
    nodes.write_text(SCONTROL_NODES)
    load_capacity(wh, inventory=nodes, cluster="ai1")
    window = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 2, tzinfo=UTC))
    refresh_capacity(wh, "ai1", *window)
    got = {(r["level"], r["key"]): (r["capacity_gpu_h"], r["free_gpu_h"])
           for r in run_mart(wh, "utilization", cluster="ai1", window=window).to_dicts()
           if r["level"] != "gpu_model"}
    assert got == {("cluster", ""): (384.0, 384.0), ("partition", "h100"): (384.0, 384.0),
                   ("partition", "cpu"): (0.0, 0.0), ("partition_member", "h100"): (384.0, 384.0),
                   ("partition_member", "debug"): (192.0, 192.0), ("partition_member", "cpu"): (0.0, 0.0)}
    laws = {o.law.name: o.status for o in run_checks(
        wh, cluster="ai1", window=window, project="",
        names=["partition_members_within_cluster"])}
    assert laws == {"partition_members_within_cluster": "holds"}
