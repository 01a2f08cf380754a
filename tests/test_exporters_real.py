"""The metric catalog and the Lustre job_stats load against real exporters' output (tests/data/metrics/,
sources and licenses in tests/data/README.md): node_exporter's infiniband collector, HPE lustre_exporter and
whamcloud lustrefs-exporter (client stats and job_stats with plain and SLURM_JOB<id>[:uid:host] jobids),
prometheus-community ipmi_exporter's DCMI power, dcgm-exporter with and without Kubernetes pod labels.

Every expected figure is worked out here from the raw lines with a separate, plain parser (_raw), not by
the loader's code."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from ops_warehouse.etl.lustre_jobs import JOB_METRICS, parse_jobid
from ops_warehouse.etl.metric_catalog import DEFAULT_CATALOG
from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.etl.sacct_load import load_sacct
from tests import prometheus_harness as ph
from tests.conftest import DATA, require, rows

M = DATA / "metrics"
IB = M / "node_exporter" / "e2e-output-infiniband.txt"
HPE = M / "lustre_exporter-hpe" / "scrape-v2.0.0-fixtures.prom"
WHAMCLOUD = M / "lustrefs-exporter" / "metrics_endpoint_is_idempotent.prom"
IPMI_ON = M / "ipmi_exporter" / "pr160-host-with-power-measurement.txt"
IPMI_OFF = M / "ipmi_exporter" / "pr160-host-without-power-measurement.txt"
IPMI_ISSUE7 = M / "ipmi_exporter" / "issue7-grep-dcmi.txt"
DCGM_T4 = M / "dcgm-exporter-scrape-t4.txt"
DCGM_K8S = M / "dcgm-exporter" / "datadog-label-remap.txt"
AT = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
DAY = date(2026, 10, 1)
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)\s*$")


def _raw(path: Path) -> list[tuple[str, dict, float]]:
    """(name, labels, value) of every sample line, read plainly (no escapes occur in these files)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line)
        if line.startswith("#") or not m:
            continue
        out.append((m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")), float(m.group(3))))
    return out


def _job_totals(path: Path) -> dict[int, dict[str, float]]:
    """Per Slurm job id: OST write/read bytes and requests, MDT operations, from the raw job_stats lines."""
    out: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, lab, v in _raw(path):
        if name not in JOB_METRICS or not parse_jobid(lab.get("jobid", ""))[0]:
            continue
        t = out[parse_jobid(lab["jobid"])[0]]
        key = {"lustre_job_write_bytes_total": "write_bytes", "lustre_job_read_bytes_total": "read_bytes",
               "lustre_job_write_samples_total": "write_ops", "lustre_job_read_samples_total": "read_ops"}.get(name)
        if key:
            t[key] += v
        elif lab["component"] == "mdt":
            t["metadata_ops"] += v
    return out


def test_jobid_forms():
    # jobid_var=SLURM_JOB_ID (HPE fixture), jobid_name "SLURM_JOB%j" and "SLURM_JOB%j:%u:%H" (whamcloud
    # fixture), "%j:%u:%H"; processes outside a job ("%e.%u", "%e:%u:%H") are no Slurm job
    assert parse_jobid("23") == (23, None, "")
    assert parse_jobid("SLURM_JOB10") == (10, None, "")
    assert parse_jobid("SLURM_JOB10:0:es18kxe-co-client") == (10, 0, "es18kxe-co-client")
    assert parse_jobid("4711:1000:gpu001") == (4711, 1000, "gpu001")
    assert parse_jobid("bash.0") == parse_jobid("fio:0:es-2-virt3-cosp") == parse_jobid("python3:0:h") == (0, None, "")


def test_catalog_names_are_real_exporters_names():
    """Each node-level catalog name occurs in a saved real scrape (the DCGM names: in dcgm-exporter's counter
    lists and the T4 scrape, tests/test_telemetry_text.py)."""
    seen = {name for p in (IB, HPE, WHAMCLOUD, IPMI_ON, IPMI_ISSUE7) for name, _, _ in _raw(p)}
    node = {n for n, m in DEFAULT_CATALOG.items() if m.grain == "node" and not n.startswith("node_network_")}
    assert node <= seen, node - seen
    assert "lustre_client_read_bytes_total" not in DEFAULT_CATALOG  # no exporter publishes it


def test_node_exporter_infiniband_ports_are_device_and_port(wh, tmp_path):
    # node_exporter's e2e fixture: mlx4_0 has two ports; keyed by device alone they collided into one
    rx = "node_infiniband_port_data_received_bytes_total"
    raw = [(lab["device"], lab["port"]) for n, lab, _ in _raw(IB) if n == rx]
    assert raw == [("mlx4_0", "1"), ("mlx4_0", "2")]
    later = tmp_path / "later.txt"  # the same ports one minute later, 1 MiB more received on port 2 only
    t1 = int((AT + timedelta(minutes=1)).timestamp() * 1000)
    later.write_text("".join(f'{rx}{{device="{d}",port="{p}"}} {v + (2**20 if p == "2" else 0):.0f} {t1}\n'
                             for n, lab, v in _raw(IB) if n == rx for d, p in [(lab["device"], lab["port"])]))
    load_text_files(wh, [IB, later], DAY, DAY, at=AT, cluster="c", instance="ib01.example.org:9100")
    got = rows(wh, "SELECT node, ts, nic_device, nic_rx_bytes FROM node_sample FINAL ORDER BY ts")
    assert [g[2] for g in got] == [["mlx4_0", "mlx4_0:2"]] * 2  # 2 ports: the number of raw series
    assert got[0][0] == "ib01" and got[1][3] == [0.0, 2.0**20]


def test_a_node_without_gpus_counts_in_telemetry_and_the_clusters_nic_bytes(wh, tmp_path):
    """A node with NIC samples and no GPU samples (issue 31: it never appeared in `ops-report telemetry`, nor
    in the cluster's NIC totals): node_exporter's infiniband ports on ib01, 1 MiB more received on port 2 a
    minute later (derived from the real file, as above), beside dcgm-exporter's T4 scrape of GPU host
    424773df46e0 (GPU 0 at 0%), which has no node samples."""
    from ops_warehouse.analytics.telemetry import telemetry

    rx = "node_infiniband_port_data_received_bytes_total"
    later = tmp_path / "later.txt"
    t1 = int((AT + timedelta(minutes=1)).timestamp() * 1000)
    later.write_text("".join(f'{rx}{{device="{d}",port="{p}"}} {v + (2**20 if p == "2" else 0):.0f} {t1}\n'
                             for n, lab, v in _raw(IB) if n == rx for d, p in [(lab["device"], lab["port"])]))
    load_text_files(wh, [IB, later], DAY, DAY, at=AT, cluster="c", instance="ib01.example.org:9100")
    load_text_files(wh, [DCGM_T4], DAY, DAY, at=AT, cluster="c")
    gpu_hosts = sorted({lab["Hostname"] for _, lab, _ in _raw(DCGM_T4) if "Hostname" in lab})
    assert gpu_hosts == ["424773df46e0", "551bdf382151", "ip-11111"]  # GPU 0 of each
    by_node = {r["node"]: r for r in telemetry(wh, DAY, DAY, "node").to_dicts()}
    assert set(by_node) == {"ib01", *gpu_hosts}
    assert by_node["ib01"]["nic_rx_bytes"] == 2**20 and by_node["ib01"]["gpu_util_mean"] is None
    assert [by_node[h]["nic_rx_bytes"] for h in gpu_hosts] == [None] * 3
    assert by_node["424773df46e0"]["gpu_util_mean"] == 0  # the one host whose scrape has DCGM_FI_DEV_GPU_UTIL
    assert [(r["cluster"], r["nic_rx_bytes"], r["gpu_util_mean"]) for r in telemetry(wh, DAY, DAY, "cluster").to_dicts()
            ] == [("c", 2**20, 0)]
    models = {r["gpu_model"]: r["nic_rx_bytes"] for r in telemetry(wh, DAY, DAY, "gpu_model").to_dicts()}
    assert models.pop("(no GPUs)") == 2**20 and set(models.values()) == {None}
    assert [r["gpu"] for r in telemetry(wh, DAY, DAY, "gpu").to_dicts()] == [f"{h}:0" for h in gpu_hosts]


def test_hpe_lustre_exporter_client_bytes_count_client_series_only(wh, tmp_path):
    # lustre_write_bytes_total comes for the client (component="client") and for the OST: a node's I/O is
    # the client's. A minute later every series has written 1 MiB more (derived from the real file).
    series = [(lab, v) for n, lab, v in _raw(HPE) if n == "lustre_write_bytes_total"]
    assert sorted(lab["component"] for lab, _ in series) == ["client", "ost"]
    later = tmp_path / "later.prom"
    t1 = int((AT + timedelta(minutes=1)).timestamp() * 1000)
    later.write_text("".join(
        "lustre_write_bytes_total{" + ",".join(f'{k}="{x}"' for k, x in lab.items()) + f"}} {v + 2**20:.0f} {t1}\n"
        for lab, v in series))
    load_text_files(wh, [HPE, later], DAY, DAY, at=AT, cluster="c", instance="client01:9169")
    assert rows(wh, "SELECT node, ts, lustre_write_bytes FROM node_sample FINAL "
                    "WHERE lustre_write_bytes IS NOT NULL") == [
        ("client01", (AT + timedelta(minutes=1)).replace(tzinfo=None), 2.0**20)]


def _sacct(tmp_path: Path, job_id: int, start: str, end: str) -> Path:
    header = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|User|Submit|Eligible|Start|End|ElapsedRaw|"
              "TimelimitRaw|ExitCode|State|NNodes|NCPUS|AllocTRES|NodeList|JobName")
    p = tmp_path / f"sacct-{job_id}.psv"
    p.write_text(f"{header}\n{job_id}|{job_id}|c1|gpu|normal|proja|grp|alice|{start}|{start}|{start}|{end}|3600|"
                 f"600|0:0|COMPLETED|1|8|billing=8,cpu=8,gres/gpu=1,mem=16G,node=1|gpu001|train\n", encoding="utf-8")
    return p


def test_hpe_lustre_exporter_job_stats_per_job_and_joined_to_the_job(wh, tmp_path):
    want = _job_totals(HPE)
    assert sorted(want) == list(range(23, 58))  # jobid_var=SLURM_JOB_ID: plain ids 23..57
    c = load_text_files(wh, [HPE], DAY, DAY, at=AT, cluster="c1", instance="oss01:9169")
    assert c["job_io_rows"] == rows(wh, "SELECT count() FROM lustre_job_io FINAL")[0][0] > 0
    got = {j: (w, r, wo, ro, md) for j, w, r, wo, ro, md in rows(
        wh, "SELECT job_id, sumIf(bytes, operation = 'write_bytes'), sumIf(bytes, operation = 'read_bytes'), "
            "sumIf(ops, operation = 'write_bytes' AND component = 'ost'), "
            "sumIf(ops, operation = 'read_bytes' AND component = 'ost'), sumIf(ops, component = 'mdt') "
            "FROM lustre_job_io FINAL GROUP BY job_id")}
    for j, t in want.items():
        assert got[j] == (t["write_bytes"], t["read_bytes"], t["write_ops"], t["read_ops"], t["metadata_ops"]), j
    assert got[23][0] == 155_500_642_304  # the value of the one lustre_job_write_bytes_total line of job 23
    assert rows(wh, "SELECT DISTINCT fs, host, uid FROM lustre_job_io FINAL") == [("lustrefs", "", None)]
    # the job history: job 43 ran 11:00-12:30; its I/O row carries the job's user, account and times
    load_sacct(wh, _sacct(tmp_path, 43, "2026-10-01T11:00:00", "2026-10-01T12:30:00"))
    (r,) = rows(wh, "SELECT job_id_raw, job_id, fs, user, account, state, write_bytes, write_ops, metadata_ops "
                    "FROM fct_lustre_job_io WHERE job_id_raw = 43")
    assert r == (43, "43", "lustrefs", "alice", "proja", "COMPLETED", want[43]["write_bytes"], want[43]["write_ops"],
                 want[43]["metadata_ops"])
    # no sacct line for the other 34 jobs: their I/O stays, without job attributes
    assert rows(wh, "SELECT count(), countIf(user IS NULL) FROM fct_lustre_job_io") == [(35, 34)]


def test_lustrefs_exporter_slurm_job_forms_add_up_per_job(wh, tmp_path):
    raw = _raw(WHAMCLOUD)
    forms = {lab["jobid"] for _, lab, _ in raw if "jobid" in lab}
    assert len(forms) == 16 and {parse_jobid(f)[0] for f in forms} == {10, 20, 29, 35, 51, 59, 79, 97}
    want = _job_totals(WHAMCLOUD)
    load_text_files(wh, [WHAMCLOUD], DAY, DAY, at=AT, cluster="c1", instance="oss02:9100")
    got = dict(rows(wh, "SELECT job_id, sumIf(bytes, operation = 'write_bytes') FROM lustre_job_io FINAL "
                        "GROUP BY job_id"))
    assert got == {j: t["write_bytes"] for j, t in want.items()}
    # job 10: 204800000 bytes under "SLURM_JOB10" and 11025514496 under "SLURM_JOB10:0:es18kxe-co-client"
    assert got[10] == 204_800_000 + 11_025_514_496
    assert rows(wh, "SELECT jobid, uid, host, fs FROM lustre_job_io FINAL "
                    "WHERE job_id = 10 AND operation = 'write_bytes' ORDER BY jobid") == [
        ("SLURM_JOB10", None, "", "es01a"), ("SLURM_JOB10:0:es18kxe-co-client", 0, "es18kxe-co-client", "es01a")]
    load_sacct(wh, _sacct(tmp_path, 10, "2026-10-01T08:00:00", "2026-10-01T13:00:00"))
    assert rows(wh, "SELECT user, client_hosts, write_bytes FROM fct_lustre_job_io WHERE job_id_raw = 10") == [
        ("alice", ["es18kxe-co-client"], got[10])]
    # a reload of the same scrape replaces its rows
    n = rows(wh, "SELECT count(), sum(bytes) FROM lustre_job_io FINAL")
    load_text_files(wh, [WHAMCLOUD], DAY, DAY, at=AT, cluster="c1", instance="oss02:9100")
    assert rows(wh, "SELECT count(), sum(bytes) FROM lustre_job_io FINAL") == n


def test_job_stats_counters_step_and_restart(wh, tmp_path):
    # three scrapes of job 23's OST write bytes (the real first value, then +1 GiB, then a purge and restart
    # at 4096): steps are the whole first value, 1 GiB, and 4096
    (name, lab, v0), = [(n, lab, v) for n, lab, v in _raw(HPE)
                        if n == "lustre_job_write_bytes_total" and lab["jobid"] == "23"]
    sel = "{" + ",".join(f'{k}="{x}"' for k, x in lab.items()) + "}"
    t = [int((AT + timedelta(minutes=k)).timestamp() * 1000) for k in range(3)]
    p = tmp_path / "job23.prom"
    p.write_text(f"{name}{sel} {v0:.0f} {t[0]}\n{name}{sel} {v0 + 2**30:.0f} {t[1]}\n{name}{sel} 4096 {t[2]}\n")
    load_text_files(wh, [p], DAY, DAY, cluster="c1")
    assert rows(wh, "SELECT ts, bytes FROM lustre_job_io FINAL ORDER BY ts") == [
        (AT.replace(tzinfo=None) + timedelta(minutes=k), b) for k, b in enumerate([v0, 2.0**30, 4096.0])]


def test_ipmi_exporter_dcmi_power(wh):
    # prometheus-community ipmi_exporter, remote targets: Prometheus labels them with the BMC target
    for path, target in ((IPMI_ON, "node01"), (IPMI_OFF, "node02"), (IPMI_ISSUE7, "node03")):
        load_text_files(wh, [path], DAY, DAY, at=AT, cluster="c", instance=target)
    watts = {lab.get("instance", p.name): v for p in (IPMI_ON, IPMI_ISSUE7)
             for n, lab, v in _raw(p) if n == "ipmi_dcmi_power_consumption_watts"}
    assert sorted(watts.values()) == [90.0, 372.0]
    # the host without Power Measurement has no DCMI sample (ipmi_exporter 1.7 leaves it out): no row
    assert rows(wh, "SELECT node, node_power_w FROM node_sample FINAL ORDER BY node") == [
        ("node01", 372.0), ("node03", 90.0)]


def test_dcgm_series_with_and_without_pod_labels_are_one_gpu_row(wh, tmp_path):
    # DataDog's T4 scrape (no Kubernetes labels) and its label_remap fixture (the same GPU's GPU_UTIL with
    # namespace/pod/container, as dcgm-exporter's Kubernetes mode labels it): one row per GPU
    gpus = {(lab["Hostname"], lab["gpu"]) for p in (DCGM_T4, DCGM_K8S) for n, lab, _ in _raw(p)
            if n in DEFAULT_CATALOG and "Hostname" in lab}
    c = load_text_files(wh, [DCGM_T4, DCGM_K8S], DAY, DAY, at=AT, cluster="dd")
    assert c["gpu_rows"] == len(gpus) == 3
    assert rows(wh, "SELECT node, gpu, count() FROM gpu_sample FINAL GROUP BY node, gpu ORDER BY node") == [
        (h, int(g), 1) for h, g in sorted(gpus)]
    # per-process mode (dcgm-exporter kubernetes.go): the device-level GPU_UTIL beside per-pod shares, in
    # either order; the row keeps the device's value, as Prometheus-side exported_pod labels do too
    (dev,) = [line for line in DCGM_T4.read_text().splitlines() if line.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="0"')]
    base, _ = dev.rsplit(" ", 1)
    pods = [base[:-1] + f',namespace="ml",pod="train-{k}",container="main"}} {v}' for k, v in ((0, 30), (1, 55))]
    prom = base[:-1] + ',exported_namespace="ml",exported_pod="train-0",exported_container="main",pod="dcgm-x"} 30'
    for k, lines in enumerate(([f"{base} 85", *pods], [*pods, f"{base} 85"], [prom, f"{base} 85"])):
        p = tmp_path / f"pp{k}.txt"
        p.write_text("\n".join(lines) + "\n")
        load_text_files(wh, [p], DAY, DAY, at=AT + timedelta(minutes=k + 1), cluster="pp")
    assert rows(wh, "SELECT gpu_util_pct FROM gpu_sample FINAL WHERE cluster = 'pp' ORDER BY ts") == [(85.0,)] * 3


@pytest.mark.parametrize("drop", ["ost", "none"])
def test_job_stats_in_exporter_parquet_files(wh, tmp_path, drop):
    """The file source: a day folder of job_stats files (exporter-shaped Parquet with a jobid column) loads
    like the text source, the day before seeding the counters."""
    import polars as pl

    from ops_warehouse.etl.lustre_jobs import job_frame
    from ops_warehouse.etl.openmetrics_source import read_samples
    from ops_warehouse.etl.telemetry_load import load_parquet_dir

    f = job_frame(read_samples(HPE, AT))
    if drop == "ost":
        f = f.filter(pl.col("component") != "ost")
    day0 = f.with_columns(pl.col("timestamp") - timedelta(days=1))
    root = tmp_path / "site" / "telemetry" / "lustre_jobstats"
    root.mkdir(parents=True)
    day0.write_parquet(root / "2026-09-30.parquet")
    num = [c for c in f.columns if c in JOB_METRICS]
    f.with_columns(pl.col(num) * 2).write_parquet(root / "2026-10-01.parquet")  # each counter doubled a day later
    c = load_parquet_dir(wh, tmp_path / "site", DAY, DAY, cluster="c1")
    want = sum(t["write_bytes"] for t in _job_totals(HPE).values()) if drop == "none" else 0
    assert rows(wh, "SELECT sum(bytes) FROM lustre_job_io FINAL WHERE operation = 'write_bytes'")[0][0] == want
    assert c["job_io_rows"] > 0


def test_cli_loads_job_stats_and_a_target_without_instance_label(tmp_path):
    from tests.cli_runner import cli

    dsn = f"chdb://{tmp_path / 'wh'}"
    out = cli("--warehouse", dsn, "etl", "metrics", "--from", "2026-10-01", "--to", "2026-10-01",
              "--file", str(WHAMCLOUD), "--file", str(IPMI_ON), "--at", "2026-10-01T12:00:00Z",
              "--instance", "oss02:9100").stdout
    n_jobs = len({(parse_jobid(lab["jobid"])[0], lab["jobid"], lab["operation"], lab["component"])
                  for name, lab, v in _raw(WHAMCLOUD) if name in JOB_METRICS and v != 0})
    assert f"1 node samples, 0 Xid events, {n_jobs} Lustre job I/O rows, quarantined 0" in out, out


@require(ph.available(), "prometheus/promtool")
def test_job_stats_through_a_real_prometheus(cfg, tmp_path):
    """The whamcloud scrape at 10:00 and a minute later (job 10's "SLURM_JOB10" series 1 MiB further), backfilled
    into Debian's Prometheus with promtool and loaded through query_range: the totals of the raw lines, plus
    the MiB."""
    from ops_warehouse.etl.prometheus_source import load_prometheus
    from ops_warehouse.warehouse import close_embedded, open_warehouse

    t0 = int(datetime(2026, 10, 1, 10, 0, tzinfo=timezone.utc).timestamp())
    fams = defaultdict(list)
    for name, lab, v in _raw(WHAMCLOUD):
        if name in JOB_METRICS:
            sel = "{" + ",".join(f'{k}="{x}"' for k, x in sorted(lab.items())) + "}"
            bump = 2**20 if name == "lustre_job_write_bytes_total" and lab["jobid"] == "SLURM_JOB10" else 0
            fams[name].append(f"{name}{sel} {v:.0f} {t0}\n{name}{sel} {v + bump:.0f} {t0 + 60}\n")
    om = tmp_path / "jobs.om"
    om.write_text("".join(f"# TYPE {n[:-len('_total')]} counter\n" + "".join(lines) for n, lines in fams.items())
                  + "# EOF\n")
    ph.backfill([om], tmp_path / "tsdb")
    p = ph.Prometheus(tmp_path / "tsdb").start()
    try:
        cfg.dsn = f"chdb://{tmp_path / 'wh'}"
        w = open_warehouse(cfg)
        c = load_prometheus(w, p.url, DAY, DAY, step_s=60, cluster="c1")
        got = dict(w.query_rows("SELECT job_id, sumIf(bytes, operation = 'write_bytes') FROM lustre_job_io FINAL "
                                "GROUP BY job_id"))
        close_embedded()
    finally:
        p.stop()
    want = {j: t["write_bytes"] for j, t in _job_totals(WHAMCLOUD).items()}
    want[10] += 2**20
    assert got == want and c["job_io_rows"] > 0
