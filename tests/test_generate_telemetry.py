"""The telemetry writer on a hand-made two-node cluster: every expected number below is worked out from the
frames and the H100's facts (idle 70 W, TDP 700 W, 81,559 MiB), not read back from the generator.

Period: 2025-03-01 23:00 to 2025-03-02 03:00 UTC at 60 s (240 steps, two UTC days, three 2-hour windows).
Minutes below count from 23:00.

* job 1: h100-001 GPUs 0-3, minutes 10-40, util 90, power_frac 0.8, fb 0.7, NCCL hang from minute 30,
  a 40 GB checkpoint every 600 s (one fits before the hang: minute 20, 80 s long);
* job 2 (multi-node): h100-001 and h100-002 GPUs 4-7, minutes 50-110, util 80, power_frac 0.6; h100-002 is
  a straggler (slowdown 0.5);
* Xid 79 on h100-001 GPU 5 at minute 20.5; throttling on h100-002 GPU 1 from minute 15 to 25;
* h100-002 down from minute 120 to 150 (its exporters are gone), then rebooted.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import require

from ops_warehouse.generate.model import (
    GPU_ALLOC_SCHEMA, GPU_MODELS, INVENTORY_SCHEMA, NODE_EVENT_SCHEMA, THROTTLE_SCHEMA, XID_SCHEMA, ClusterSpec,
    Partition)
from ops_warehouse.generate.telemetry import METRICS, family_schema, write_telemetry

UTC = timezone.utc
T0 = datetime(2025, 3, 1, 23, 0, tzinfo=UTC)
END = T0 + timedelta(hours=4)
STEP = 60
H100 = GPU_MODELS["h100"]
N1, N2 = "h100-001", "h100-002"
SPEC = ClusterSpec(partitions=(Partition("h100", "h100", 2, "h100-"),))


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def uuid(n: int, g: int) -> str:
    return f"GPU-{n:04x}{g:04x}-1111-2222-3333-444455556666"


def alloc_row(job, node, gpu, start, end, util, pf, *, hang=None, ckpt=0, ckpt_bytes=0.0, slowdown=1.0):
    return dict(job_id=job, node=node, gpu=gpu, start_ts=at(start), end_ts=at(end), gpu_util=util,
                sm_active=0.6, tensor_active=0.4, dram_active=0.3, fb_used_frac=0.7, power_frac=pf,
                hang_from_ts=None if hang is None else at(hang), ckpt_period_s=ckpt, ckpt_bytes=ckpt_bytes,
                slowdown=slowdown)


def frames(in_service=None):
    inv = pl.DataFrame({
        "node": [N1, N2], "partition": ["h100"] * 2, "gpu_model": ["h100"] * 2,
        "model_name": [H100.model_name] * 2, "gpus": [8, 8], "rack": ["r01"] * 2,
        "in_service_ts": [datetime(2024, 1, 1, tzinfo=UTC), in_service or datetime(2024, 1, 1, tzinfo=UTC)],
        "gpu_uuids": [[uuid(n, g) for g in range(8)] for n in (1, 2)]}, schema=INVENTORY_SCHEMA)
    rows = [alloc_row("1", N1, g, 10, 40, 90.0, 0.8, hang=30, ckpt=600, ckpt_bytes=40e9) for g in range(4)]
    rows += [alloc_row("2", N1, g, 50, 110, 80.0, 0.6) for g in range(4, 8)]
    rows += [alloc_row("2", N2, g, 50, 110, 80.0, 0.6, slowdown=0.5) for g in range(4, 8)]
    alloc = pl.DataFrame(rows, schema=GPU_ALLOC_SCHEMA)
    events = pl.DataFrame([dict(node=N2, start_ts=at(120), end_ts=at(150), state="down", reason="Not responding")],
                          schema=NODE_EVENT_SCHEMA)
    xids = pl.DataFrame([dict(node=N1, gpu=5, ts=at(20.5), xid=79)], schema=XID_SCHEMA)
    throttle = pl.DataFrame([dict(node=N2, gpu=1, start_ts=at(15), end_ts=at(25))], schema=THROTTLE_SCHEMA)
    return dict(spec=SPEC, inventory=inv, gpu_alloc=alloc, node_events=events, xids=xids, throttle=throttle)


def generate(out: Path, seed: int = 7, **kw) -> dict:
    return write_telemetry(out, **frames(**kw), start=T0, end=END, step_s=STEP, seed=seed,
                           formats=("parquet", "openmetrics"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("telemetry")
    counts = generate(out)
    return out / "telemetry", counts


def family(run, fam: str) -> pl.DataFrame:
    folder, _ = run
    return pl.read_parquet(sorted((folder / fam).glob("*.parquet"))).with_columns(
        minute=((pl.col("timestamp") - pl.lit(T0)).dt.total_seconds() // 60).cast(pl.Int64))


def gpu(run, node: str, g: int) -> pl.DataFrame:
    return family(run, "dcgm").filter(pl.col("Hostname") == node, pl.col("gpu") == str(g)).sort("timestamp")


def col(df: pl.DataFrame, name: str, lo: int, hi: int) -> list:
    return df.filter(pl.col("minute").is_between(lo, hi, closed="left"))[name].to_list()


def deltas(df: pl.DataFrame, name: str) -> pl.DataFrame:
    return df.with_columns(d=pl.col(name).diff())


# -------------------------------------------------------------------------------------------- files, schema

def test_files_per_day_and_schemas(run):
    folder, counts = run
    for fam in ("dcgm", "nic", "lustre", "ipmi"):
        names = sorted(p.name for p in (folder / fam).iterdir())
        assert names == ["2025-03-01.parquet", "2025-03-02.parquet"]
        df = pl.read_parquet(folder / fam / names[0])
        assert df.schema == pl.Schema(family_schema(fam))
    # 60 + 180 steps; h100-002 silent for 30 of them
    assert counts["dcgm"]["rows"] == 240 * 8 + 210 * 8
    assert counts["nic"]["rows"] == (240 + 210) * 10
    assert counts["ipmi"]["rows"] == counts["lustre"]["rows"] == 450
    assert counts["dcgm"]["samples"] == counts["dcgm"]["rows"] * 13
    d = family(run, "dcgm")
    assert set(d.filter(pl.col("Hostname") == N2, pl.col("gpu") == "3")["UUID"]) == {uuid(2, 3)}
    assert set(d["device"]) == {f"nvidia{i}" for i in range(8)}
    assert set(d["modelName"]) == {"NVIDIA H100 80GB HBM3"}
    n = family(run, "nic")
    assert set(n["device"]) == {f"mlx5_{i}" for i in range(10)} and set(n["port"]) == {"1"}
    assert set(n["instance"]) == {f"{N1}:9100", f"{N2}:9100"}
    lu = family(run, "lustre")
    assert set(lu["component"]) == {"client"} and lu["target"].str.starts_with("lustre01-ffff").all()
    assert lu["target"].n_unique() == 2  # one llite mount per node


# ----------------------------------------------------------------------------------------------- GPU physics

def test_utilization_follows_the_allocation(run):
    g0 = gpu(run, N1, 0)
    busy = col(g0, "DCGM_FI_DEV_GPU_UTIL", 10, 20) + col(g0, "DCGM_FI_DEV_GPU_UTIL", 22, 30)
    assert len(busy) == 18 and all(abs(u - 90) <= 5 for u in busy)
    assert col(g0, "DCGM_FI_DEV_GPU_UTIL", 0, 10) == [0] * 10
    assert col(g0, "DCGM_FI_DEV_GPU_UTIL", 40, 240) == [0] * 200
    sm = col(g0, "DCGM_FI_PROF_SM_ACTIVE", 10, 20)
    assert all(abs(s - 0.6) < 0.03 for s in sm)
    assert all(abs(t - 0.4) < 0.03 for t in col(g0, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 10, 20))
    # a GPU the job does not hold stays at 0
    assert set(col(gpu(run, N1, 6), "DCGM_FI_DEV_GPU_UTIL", 0, 50)) == {0}


def test_power_and_memory(run):
    g0 = gpu(run, N1, 0)
    # 70 W + 0.8 x (700 - 70) W = 574 W while running
    assert all(abs(p - 574.0) < 20 for p in col(g0, "DCGM_FI_DEV_POWER_USAGE", 10, 20))
    # free GPUs sit at the model's idle power, with no memory used
    for node, g in ((N1, 7), (N2, 0)):
        df = gpu(run, node, g)
        idle = col(df, "DCGM_FI_DEV_POWER_USAGE", 0, 45)
        assert all(abs(p - H100.idle_w) < 2.0 for p in idle)
        assert set(col(df, "DCGM_FI_DEV_FB_USED", 0, 45)) == {0}
    fb = col(g0, "DCGM_FI_DEV_FB_USED", 10, 40)
    assert all(abs(m - 0.7 * 81559) < 0.01 * 81559 for m in fb)
    total = g0.select(pl.col("DCGM_FI_DEV_FB_USED") + pl.col("DCGM_FI_DEV_FB_FREE")).to_series()
    assert total.n_unique() == 1 and 80_000 < total[0] <= 81559
    # hotter under load, idle temperature when free
    assert min(col(g0, "DCGM_FI_DEV_GPU_TEMP", 10, 20)) > max(col(g0, "DCGM_FI_DEV_GPU_TEMP", 0, 10)) + 15
    assert all(abs(t - H100.idle_temp_c) <= 5 for t in col(g0, "DCGM_FI_DEV_GPU_TEMP", 0, 10))


def test_nccl_hang_keeps_memory_but_drops_util_and_power(run):
    g0 = gpu(run, N1, 0)
    assert col(g0, "DCGM_FI_DEV_GPU_UTIL", 30, 40) == [0] * 10
    assert all(p < 110 for p in col(g0, "DCGM_FI_DEV_POWER_USAGE", 30, 40))  # near idle (70 W)
    assert all(m > 0.69 * 81559 for m in col(g0, "DCGM_FI_DEV_FB_USED", 30, 40))
    assert all(s < 0.02 for s in col(g0, "DCGM_FI_PROF_SM_ACTIVE", 30, 40))
    # no collective traffic on its rail while hung: background only (1.5 kB/s x 60 s)
    rail = family(run, "nic").filter(pl.col("instance") == f"{N1}:9100", pl.col("device") == "mlx5_0").sort("timestamp")
    d = col(deltas(rail, "node_infiniband_port_data_transmitted_bytes_total"), "d", 31, 40)
    assert d == [90_000.0] * 9


def test_straggler_runs_slower(run):
    fast, slow = gpu(run, N1, 4), gpu(run, N2, 4)
    assert all(abs(u - 80) <= 5 for u in col(fast, "DCGM_FI_DEV_GPU_UTIL", 50, 110))
    assert all(abs(u - 40) <= 5 for u in col(slow, "DCGM_FI_DEV_GPU_UTIL", 50, 110))
    # 70 + 0.6 x 630 = 448 W; the straggler 70 + 0.3 x 630 = 259 W
    assert all(abs(p - 448) < 20 for p in col(fast, "DCGM_FI_DEV_POWER_USAGE", 50, 110))
    assert all(abs(p - 259) < 20 for p in col(slow, "DCGM_FI_DEV_POWER_USAGE", 50, 110))


def test_energy_counter_integrates_power(run):
    g0 = gpu(run, N1, 0)
    e = g0.select("minute", "DCGM_FI_DEV_POWER_USAGE", d=pl.col("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION").diff())
    e = e.slice(1)  # includes the step across midnight (the two days' files)
    assert e.height == 239
    assert (e["d"] - e["DCGM_FI_DEV_POWER_USAGE"] * STEP * 1000).abs().max() <= 1.0
    assert (e["d"] > 0).all()


def test_checkpoint_dips_the_job_gpus(run):
    g0 = gpu(run, N1, 0)
    # checkpoint at minute 20 for 80 s: the samples at minutes 20 and 21 fall inside it
    assert all(u < 25 for u in col(g0, "DCGM_FI_DEV_GPU_UTIL", 20, 22))
    assert all(p < 300 for p in col(g0, "DCGM_FI_DEV_POWER_USAGE", 20, 22))


def test_xid_gauge_steps_at_the_xid(run):
    g5 = gpu(run, N1, 5)
    assert col(g5, "DCGM_FI_DEV_XID_ERRORS", 0, 21) == [0] * 21
    assert col(g5, "DCGM_FI_DEV_XID_ERRORS", 21, 240) == [79] * 219  # first sample after 20.5 min, kept
    others = family(run, "dcgm").filter(~((pl.col("Hostname") == N1) & (pl.col("gpu") == "5")))
    assert set(others["DCGM_FI_DEV_XID_ERRORS"]) == {0}


def test_throttling_only_inside_its_interval(run):
    g1 = gpu(run, N2, 1)
    inside = g1.filter(pl.col("minute").is_between(15, 25, closed="left"))
    assert inside.height == 10
    for r in inside.iter_rows(named=True):
        bits = r["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"]
        assert bits in (0x20, 0x68)  # SW thermal, or HW slowdown + SW + HW thermal
        assert 84 <= r["DCGM_FI_DEV_GPU_TEMP"] <= 94
        assert r["DCGM_FI_DEV_SM_CLOCK"] <= 0.70 * 345 + 15
    outside = family(run, "dcgm").filter(
        ~((pl.col("Hostname") == N2) & (pl.col("gpu") == "1") & pl.col("minute").is_between(15, 25, closed="left")))
    assert set(outside["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"]) == {0}
    assert set(col(g1, "DCGM_FI_DEV_SM_CLOCK", 0, 15) + col(g1, "DCGM_FI_DEV_SM_CLOCK", 25, 50)) == {345}


# ------------------------------------------------------------------------------------------- node events

def test_down_node_is_silent_then_reboots(run):
    for fam, label in (("dcgm", None), ("nic", "instance"), ("lustre", "instance"), ("ipmi", "instance")):
        df = family(run, fam)
        mine = df.filter(pl.col("Hostname") == N2) if label is None else \
            df.filter(pl.col(label).str.starts_with(N2 + ":"))
        minutes = set(mine["minute"])
        assert minutes == set(range(240)) - set(range(120, 150)), fam
        # the other node keeps reporting
        other = df.filter(pl.col("Hostname") == N1) if label is None else \
            df.filter(pl.col(label).str.starts_with(N1 + ":"))
        assert set(other["minute"]) == set(range(240))
    # counters restart near 0 after the reboot
    g = gpu(run, N2, 0)
    before, after = col(g, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 119, 120)[0], \
        col(g, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 150, 151)[0]
    assert before > 1e8 and after == pytest.approx(H100.idle_w * STEP * 1000, rel=0.05)
    rail = family(run, "nic").filter(pl.col("instance") == f"{N2}:9100", pl.col("device") == "mlx5_3")
    assert col(rail, "node_infiniband_port_data_received_bytes_total", 150, 151)[0] < \
        col(rail, "node_infiniband_port_data_received_bytes_total", 119, 120)[0]
    assert col(rail, "node_infiniband_port_data_received_bytes_total", 150, 151)[0] == 90_000.0


def test_node_not_in_service_yet(tmp_path):
    counts = generate(tmp_path, in_service=at(200))
    ipmi = pl.read_parquet(sorted((tmp_path / "telemetry" / "ipmi").glob("*.parquet")))
    n2 = ipmi.filter(pl.col("instance") == f"{N2}:9290")
    assert n2.height == 40  # minutes 200-239
    assert counts["dcgm"]["rows"] == 240 * 8 + 40 * 8
    e = pl.read_parquet(sorted((tmp_path / "telemetry" / "dcgm").glob("*.parquet"))).filter(
        pl.col("Hostname") == N2, pl.col("gpu") == "0")["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert e[0] == pytest.approx(H100.idle_w * STEP * 1000, rel=0.05)


# ------------------------------------------------------------------------------------- network, storage, power

def test_checkpoint_bursts_on_storage_nics_and_lustre(run):
    nic = family(run, "nic").filter(pl.col("instance") == f"{N1}:9100").sort("timestamp")
    tx = pl.col("node_infiniband_port_data_transmitted_bytes_total")
    s8 = deltas(nic.filter(pl.col("device") == "mlx5_8"), tx.meta.output_name())
    s9 = deltas(nic.filter(pl.col("device") == "mlx5_9"), tx.meta.output_name())
    # 40 GB over [20:00, 21:20): 60 s of it in the step ending at minute 21, 20 s in the one ending at 22,
    # split over the two storage NICs; plus 20 kB/s of log writes and 1.5 kB/s background per NIC
    for s in (s8, s9):
        d = dict(zip(s["minute"], s["d"]))
        assert d[21] == pytest.approx(15e9 + 0.6e6 + 90e3, rel=1e-6)
        assert d[22] == pytest.approx(5e9 + 0.6e6 + 90e3, rel=1e-6)
        assert all(d[m] < 1e7 for m in range(1, 240) if m not in (21, 22))
    lu = deltas(family(run, "lustre").filter(pl.col("instance") == f"{N1}:9169").sort("timestamp"),
                "lustre_write_bytes_total")
    d = dict(zip(lu["minute"], lu["d"]))
    assert d[21] == pytest.approx(30e9 + 1.2e6, rel=1e-6)
    assert d[22] == pytest.approx(10e9 + 1.2e6, rel=1e-6)
    # steady reads while job 1 runs: 25 MB/s per GPU x 4 GPUs x 60 s, within the +-20 % jitter
    rd = deltas(family(run, "lustre").filter(pl.col("instance") == f"{N1}:9169").sort("timestamp"),
                "lustre_read_bytes_total")
    r = dict(zip(rd["minute"], rd["d"]))
    assert all(0.8 * 6e9 <= r[m] <= 1.2 * 6e9 for m in range(11, 20))
    assert all(r[m] == 0 for m in range(1, 10))


def test_multi_node_jobs_use_the_rails_far_more(run):
    nic = family(run, "nic").filter(pl.col("instance") == f"{N1}:9100").sort("timestamp")
    name = "node_infiniband_port_data_transmitted_bytes_total"
    single = col(deltas(nic.filter(pl.col("device") == "mlx5_0"), name), "d", 11, 20)  # job 1, one node
    multi = col(deltas(nic.filter(pl.col("device") == "mlx5_4"), name), "d", 51, 110)  # job 2, two nodes
    assert min(multi) > 100 * max(single)
    assert min(single) > 100 * 90e3  # but more than the background


def test_ipmi_is_base_plus_gpu_power(run):
    gpus = family(run, "dcgm").group_by("Hostname", "minute").agg(pl.col("DCGM_FI_DEV_POWER_USAGE").sum().alias("g"))
    ipmi = family(run, "ipmi").with_columns(Hostname=pl.col("instance").str.split(":").list.first())
    j = ipmi.join(gpus, on=["Hostname", "minute"], how="inner")
    assert j.height == 450
    rest = j["ipmi_dcmi_power_consumption_watts"] - j["g"]
    assert rest.min() > 1300 and rest.max() < 1800


# ------------------------------------------------------------------------------------------- OpenMetrics

def om_files(run) -> list[Path]:
    folder, _ = run
    return sorted((folder / "openmetrics").glob("*.om"))


def test_openmetrics_one_file_per_2h_window(run):
    names = [p.name for p in om_files(run)]
    # 2025-03-01 22:00, 2025-03-02 00:00 and 02:00 UTC
    assert names == ["1740866400.om", "1740873600.om", "1740880800.om"]


def test_openmetrics_content(run):
    _, counts = run
    sample = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\} (\S+) (\d+)$')
    total = 0
    for p in om_files(run):
        w0 = int(p.stem)
        text = p.read_text()
        assert text.endswith("\n# EOF\n") and text.count("# EOF") == 1
        types = re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M)
        families = [t[0] for t in types]
        assert len(families) == len(set(families)) == len(METRICS)
        kinds = dict(types)
        assert kinds["node_infiniband_port_data_received_bytes"] == "counter"
        assert kinds["lustre_write_bytes"] == "counter"
        assert kinds["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "gauge"
        current, last_ts = None, {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                current = line.split()[2]
                continue
            if line.startswith("#"):
                continue
            m = sample.match(line)
            assert m, line
            name, labels, value, ts = m.groups()
            float(value)
            assert name == (current + "_total" if kinds[current] == "counter" else current)
            assert w0 <= int(ts) < w0 + 7200 and int(ts) % 60 == 0  # seconds, inside its window
            key = (name, labels)
            assert last_ts.get(key, -1) < int(ts)  # each series in time order
            last_ts[key] = int(ts)
            total += 1
    assert total == counts["openmetrics"]["samples"]
    assert total == sum(counts[f]["samples"] for f in ("dcgm", "nic", "lustre", "ipmi"))


def test_openmetrics_series_are_contiguous(run):
    text = om_files(run)[1].read_text()
    series = [ln.rsplit(" ", 2)[0] for ln in text.splitlines() if not ln.startswith("#")]
    changes = sum(1 for a, b in zip(series, series[1:]) if a != b) + 1
    assert changes == len(set(series))


def test_openmetrics_labels_match_dcgm_exporter(run):
    text = om_files(run)[0].read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    # dcgm-exporter 4.x's order (tests/data/kernel_log/dcgm-exporter-phx8-2fa.prom): pci_bus_id after UUID
    assert line.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="' + uuid(1, 0) + '",pci_bus_id="00000000:18:00.0",'
                           'device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="h100-001"} 0 1740870000')


@require(shutil.which("promtool") is not None, "promtool (Debian package prometheus)")
def test_promtool_accepts_the_files(run, tmp_path):
    for p in om_files(run):
        r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(p), str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    r = subprocess.run(["promtool", "tsdb", "list", str(tmp_path)], capture_output=True, text=True, timeout=60)
    samples = sum(int(ln.split()[4]) for ln in r.stdout.splitlines()[1:])
    assert samples == run[1]["openmetrics"]["samples"]


# ------------------------------------------------------------------------------------------- determinism

def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes(run, tmp_path):
    generate(tmp_path / "a")
    generate(tmp_path / "b", seed=8)
    folder, _ = run
    a = digest(tmp_path / "a" / "telemetry")
    assert a == digest(folder)
    b = digest(tmp_path / "b" / "telemetry")
    assert a.keys() == b.keys() and a["dcgm/2025-03-02.parquet"] != b["dcgm/2025-03-02.parquet"]


def test_empty_frames_give_an_idle_cluster(tmp_path):
    f = frames()
    f |= {k: f[k].clear() for k in ("gpu_alloc", "node_events", "xids", "throttle")}
    counts = write_telemetry(tmp_path, **f, start=T0, end=at(90), step_s=STEP, formats=("parquet",))
    assert counts["dcgm"]["rows"] == 90 * 16 and counts["nic"]["rows"] == 90 * 20
    d = pl.read_parquet(sorted((tmp_path / "telemetry" / "dcgm").glob("*.parquet")))
    assert set(d["DCGM_FI_DEV_GPU_UTIL"]) == {0} and set(d["DCGM_FI_DEV_FB_USED"]) == {0}
    assert (d["DCGM_FI_DEV_POWER_USAGE"] - H100.idle_w).abs().max() < 2.0


def test_a_day_is_written_while_the_next_is_computed(run, tmp_path, monkeypatch):
    """The period spans two UTC days (2025-03-01 23:00 to 03:00): the first day's files are written (polars,
    out of the GIL) while numpy computes the second, where a loop took turns (issue 51: the demo's 31 days).
    The writer of the first day's first file waits until the second day's computation has begun: before, with
    the writes in the loop, it never began while the writer waited. Same files, byte for byte, either way."""
    import threading

    from ops_warehouse.generate import telemetry as tel

    second_day_begun = threading.Event()
    waited: list[bool] = []
    writers: set[str] = set()
    real_day, real_write = tel._World.day, tel._write_parquet

    def day(self, k0, k1, day_no):
        if k0 > 0:
            second_day_begun.set()
        return real_day(self, k0, k1, day_no)

    def write(path, *a, **k):
        writers.add(threading.current_thread().name)
        if path.name == "2025-03-01.parquet" and not waited:
            waited.append(second_day_begun.wait(timeout=15))
        return real_write(path, *a, **k)

    monkeypatch.setattr(tel._World, "day", day)
    monkeypatch.setattr(tel, "_write_parquet", write)
    done = []
    counts = write_telemetry(tmp_path, **frames(), start=T0, end=END, step_s=STEP, seed=7,
                             formats=("parquet", "openmetrics"), progress=lambda i, n: done.append((i, n)))
    assert waited == [True]
    assert threading.current_thread().name not in writers
    assert done == [(1, 2), (2, 2)]  # each day reported once its files are written, in order
    # 60 of the first day's minutes (23:00-00:00) and 180 of the second's, 16 GPUs, h100-002 silent 30 minutes
    assert counts["dcgm"]["rows"] == 240 * 16 - 30 * 8 and counts["dcgm"]["files"] == 2
    assert digest(tmp_path / "telemetry") == digest(run[0])


def test_day_files_are_lz4(run):
    """lz4, not zstd: a day's files in about two thirds of zstd's CPU for 1.4 times the bytes (docs/generator.md);
    the engine and polars read either."""
    import pyarrow.parquet as pq

    folder, _ = run
    for p in sorted(folder.glob("*/*.parquet")):
        meta = pq.ParquetFile(p).metadata
        assert {meta.row_group(0).column(c).compression for c in range(meta.num_columns)} == {"LZ4"}, p  # LZ4_RAW, as pyarrow names it
