"""Counters continue across loads (issue 31): a scrape saved by cron every few minutes and loaded as it
arrives gives the rows one load of all the scrapes gives. Each load's first sample of a counter series steps
against the series' last raw value an earlier load kept (counter_edge, sql/migrations/0018_counter_edge.sql).

Real scrapes (tests/data/metrics/, sources in tests/data/README.md): dcgm-exporter's T4 scrape, node_exporter's
infiniband fixture and HPE lustre_exporter's job_stats. A later scrape is the real file with its counters
moved on by amounts chosen here, so every expected figure is the raw value's difference worked out in the
test. Before this, a text load's first sample of each series was unknown (energy NULL, NIC bytes 0) and a
job_stats entry's first sample counted whole in every file, so two scrapes counted a job's bytes twice."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.generate import generate
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import DATA, rows

M = DATA / "metrics"
DCGM_T4 = M / "dcgm-exporter-scrape-t4.txt"
IB = M / "node_exporter" / "e2e-output-infiniband.txt"
HPE = M / "lustre_exporter-hpe" / "scrape-v2.0.0-fixtures.prom"
AT = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
DAY = date(2026, 10, 1)
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\d+)?\s*$")  # a timestamp left off


def _later(src: Path, dst: Path, at: datetime, change) -> Path:
    """``src``'s sample lines at ``at`` (ms timestamps), each value replaced by change(name, labels, value)."""
    ms = int(at.timestamp() * 1000)
    out = []
    for line in src.read_text(encoding="utf-8").splitlines():
        m = _SAMPLE.match(line)
        if line.startswith("#") or not m:
            continue
        v = change(m.group(1), m.group(2) or "", float(m.group(3)))
        out.append(f"{m.group(1)}{m.group(2) or ''} {v!r} {ms}\n")
    dst.write_text("".join(out), encoding="utf-8")
    return dst


def _gpu0(wh) -> list[tuple]:
    return rows(wh, "SELECT ts, energy_j FROM gpu_sample FINAL WHERE node = '424773df46e0' ORDER BY ts")


def test_a_gpus_energy_steps_across_two_loads_and_not_across_a_week(wh, tmp_path):
    # the T4 scrape: TOTAL_ENERGY_CONSUMPTION 128996013 mJ; a minute later 4,500 J more (a T4 at 75 W)
    e = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    t1, t8 = AT + timedelta(minutes=1), AT + timedelta(days=8)
    later = _later(DCGM_T4, tmp_path / "t1.txt", t1, lambda n, lab, v: v + 4_500_000 if n == e else v)
    load_text_files(wh, [DCGM_T4], DAY, DAY, at=AT, cluster="c")
    load_text_files(wh, [later], DAY, DAY, cluster="c")
    naive = [t.replace(tzinfo=None) for t in (AT, t1)]
    assert _gpu0(wh) == [(naive[0], None), (naive[1], 4500.0)]
    # eight days later (more than the 7 days a series' edge is looked back for): its first step is unknown
    week = _later(later, tmp_path / "t8.txt", t8, lambda n, lab, v: v + 1_000_000 if n == e else v)
    load_text_files(wh, [week], t8.date(), t8.date(), cluster="c")
    assert _gpu0(wh)[-1] == (t8.replace(tzinfo=None), None)


def test_an_xid_showing_in_two_loads_is_one_event(wh, tmp_path):
    # the gauge holds the last Xid: 79 shows at t1 and still at t2, scraped into two files loaded apart
    x = "DCGM_FI_DEV_XID_ERRORS"
    t1, t2 = AT + timedelta(minutes=1), AT + timedelta(minutes=2)
    s1 = _later(DCGM_T4, tmp_path / "t1.txt", t1, lambda n, lab, v: 79 if n == x and "424773df46e0" in lab else v)
    s2 = _later(s1, tmp_path / "t2.txt", t2, lambda n, lab, v: v)
    for s in (DCGM_T4, s1, s2):
        load_text_files(wh, [s], DAY, DAY, at=AT, cluster="c")
    assert rows(wh, "SELECT node, gpu, ts, xid FROM xid_event FINAL") == [
        ("424773df46e0", 0, t1.replace(tzinfo=None), 79)]


def test_nic_bytes_step_from_one_cron_scrape_to_the_next(wh, tmp_path):
    # node_exporter's mlx4_0 ports 1 and 2; five minutes later port 2 has received 3 MiB more, port 1 nothing
    rx = "node_infiniband_port_data_received_bytes_total"
    t1 = AT + timedelta(minutes=5)
    later = _later(IB, tmp_path / "t1.txt", t1,
                   lambda n, lab, v: v + 3 * 2**20 if n == rx and 'port="2"' in lab else v)
    for s in (IB, later):
        load_text_files(wh, [s], DAY, DAY, at=AT, cluster="c", instance="ib01:9100")
    got = rows(wh, "SELECT ts, nic_device, nic_rx_bytes FROM node_sample FINAL ORDER BY ts")
    assert got[1] == (t1.replace(tzinfo=None), ["mlx4_0", "mlx4_0:2"], [0.0, 3.0 * 2**20])


def _job_write_bytes(wh) -> dict[int, float]:
    return dict(rows(wh, "SELECT job_id, sum(bytes) FROM lustre_job_io FINAL WHERE operation = 'write_bytes' "
                         "GROUP BY job_id"))


def test_lustre_job_stats_from_two_scrapes_count_each_byte_once_and_a_reset_whole(wh, tmp_path):
    """HPE lustre_exporter's job_stats (jobs 23..57). Five minutes later every job has written 1 MiB more on
    each OST series; ten minutes later job 23's entries were purged and began again (1 KiB written since). A
    job's write bytes: its first scrape's raw value (the entry began at zero for the job), plus 1 MiB per
    series, plus for job 23 the 1 KiB after the reset, whichever way the scrapes are loaded."""
    w = "lustre_job_write_bytes_total"
    first: dict[int, float] = {}
    series: dict[int, int] = {}
    for line in HPE.read_text(encoding="utf-8").splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == w:
            job = int(re.search(r'jobid="(\d+)"', m.group(2)).group(1))
            first[job] = first.get(job, 0.0) + float(m.group(3))
            series[job] = series.get(job, 0) + 1
    assert sorted(first) == list(range(23, 58))
    t1, t2 = AT + timedelta(minutes=5), AT + timedelta(minutes=10)
    s1 = _later(HPE, tmp_path / "t1.prom", t1, lambda n, lab, v: v + 2**20 if n == w else v)
    s2 = _later(s1, tmp_path / "t2.prom", t2,
                lambda n, lab, v: 1024.0 if n == w and 'jobid="23"' in lab else v)
    want = {j: first[j] + series[j] * 2**20 + (series[j] * 1024 if j == 23 else 0) for j in first}
    for s in (HPE, s1, s2):
        load_text_files(wh, [s], DAY, DAY, at=AT, cluster="c1", instance="oss01:9169")
    assert _job_write_bytes(wh) == want
    load_text_files(wh, [s1], DAY, DAY, at=AT, cluster="c1", instance="oss01:9169")  # a scrape loaded again
    assert _job_write_bytes(wh) == want


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
def test_a_days_scrape_files_loaded_one_at_a_time_give_the_rows_of_one_load(cfg, tmp_path):
    """The generator's OpenMetrics day (12 files of 2 hours, 5-minute steps, 3 nodes with GPUs, NICs, Lustre
    and IPMI; a planted Xid included) loaded in one load and in 12 loads, in order, into two warehouses: every
    table's rows are the same, energy, NIC and Lustre steps at the files' edges included."""
    site = tmp_path / "site"
    generate(site, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=1, jobs_per_day=60, nodes=3, seed=2,
             metrics_step_s=300, telemetry=("openmetrics",))
    files = sorted((site / "telemetry" / "openmetrics").glob("*.om"))
    assert len(files) == 12
    out = []
    for name, loads in (("one", [files]), ("each", [[f] for f in files])):
        cfg.dsn = f"chdb://{tmp_path / name}"
        w = open_warehouse(cfg)
        for batch in loads:
            load_text_files(w, batch, DAY, DAY, cluster="c")
        out.append([w.query_rows(q) for q in (
            "SELECT * EXCEPT (source) FROM gpu_sample FINAL ORDER BY node, gpu, ts",
            "SELECT * EXCEPT (source) FROM node_sample FINAL ORDER BY node, ts",
            "SELECT node, gpu, ts, xid FROM xid_event FINAL ORDER BY node, gpu, ts")])
        close_embedded()
    one, each = out
    assert len(one[0]) == 3 * 8 * 288 and len(one[1]) == 3 * 288
    # every file's first step is known: the day's only unknown energy step is its first sample's
    assert sum(r[16] is None for r in each[0]) == 3 * 8
    assert one == each
