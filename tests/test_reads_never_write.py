"""Reads never write: the loads keep the hourly capacity grain up to date for the hours they change, and a
report, `ops-report summary` or any API call only reads (no refresh, no insert: an analyst needs no insert
rights, and a report never races a load).

The site, worked by hand: nodes n1 and n2 with 8 H100 each, in service since 2026-09-01. Jobs (sacct text
written here):
  J1  n1, 8 GPUs, 2026-10-01 00:00 .. 02:00 COMPLETED        16 GPU-h
  J2  n2, 4 GPUs, 2026-10-01 01:00 .. 04:30 COMPLETED        14 GPU-h
The history starts in October and its as-of time is J2's end, 04:30: the grain covers 00:00 .. 04:30, so
capacity = 2 nodes x 8 GPUs x 4.5 h = 72 GPU-h, allocated = 16 + 14 = 30 GPU-h, utilization 30/72.
A second load adds
  J3  n1, 8 GPUs, 2026-10-01 04:00 .. 06:00 COMPLETED        16 GPU-h
and moves the as-of time to 06:00: capacity 2 x 8 x 6 = 96, allocated 46, with no refresh asked for.

The commands run in this process (tests/cli_runner.py `cli`: the same `main()`, each opening and closing the
warehouse as its own process would): what is written is the question here, not the process.
"""

from __future__ import annotations

import json

import pytest

import ops_warehouse as ow
from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import table_checksums
from tests.cli_runner import cli

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

HEADER = ("JobIDRaw|JobID|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|Start|End|ElapsedRaw|"
          "TimelimitRaw|NNodes|NCPUS|AllocTRES|ReqTRES|NodeList|Reservation")


def job(i: int, node: str, gpus: int, start: str, end: str, elapsed_s: int) -> str:
    tres = f"billing={gpus},cpu={gpus},gres/gpu:h100={gpus},gres/gpu={gpus},mem=1000M,node=1"
    return (f"{i}|{i}|j{i}|alice|proja|h100|normal|COMPLETED|0:0|{start}|{start}|{start}|{end}|{elapsed_s}|600|1|"
            f"{gpus}|{tres}|{tres}|{node}|")


def grain_state(path) -> tuple:
    wh = open_warehouse(Config(dsn=f"chdb://{path}"), migrate=False)
    try:
        (cap, alloc, last), = wh.query_rows(
            "SELECT sum(capacity_gpu_s) / 3600, sum(allocated_gpu_s) / 3600, max(refreshed_at) "
            "FROM capacity_node_hour FINAL WHERE cluster = 'r1'")
        return cap, alloc, last, table_checksums(wh)
    finally:
        close_embedded()


@pytest.fixture
def site(tmp_path):
    inv = tmp_path / "inventory.csv"
    inv.write_text("node,gpu_model,gpus,partition,in_service_date\n"
                   "n1,h100,8,h100,2026-09-01T00:00:00\nn2,h100,8,h100,2026-09-01T00:00:00\n")
    first = tmp_path / "sacct-1.psv"
    first.write_text("\n".join([HEADER, job(1, "n1", 8, "2026-10-01T00:00:00", "2026-10-01T02:00:00", 7200),
                                job(2, "n2", 4, "2026-10-01T01:00:00", "2026-10-01T04:30:00", 12600)]) + "\n")
    dsn = f"chdb://{tmp_path / 'wh'}"
    env = {"OPS_CONFIG": "", "OPS_WAREHOUSE": ""}
    cli("--warehouse", dsn, "etl", "sacct", "--cluster", "r1", "--timezone", "UTC", str(first), env=env)
    cli("--warehouse", dsn, "etl", "capacity", "--inventory", str(inv), "--cluster", "r1", env=env)
    return tmp_path, dsn, env


def test_the_loads_keep_the_grain_and_reports_only_read(site):
    base, dsn, env = site
    cap, alloc, refreshed, before = grain_state(base / "wh")
    assert (cap, alloc) == (pytest.approx(72), pytest.approx(30))
    # a report, a summary and every mart through the API: nothing written
    cli("--warehouse", dsn, "monthly", "--cluster", "--month", "2026-10", "--format", "json", "--out",
        str(base / "out"), env=env)
    report = json.loads(next((base / "out").glob("*.json")).read_text())
    util = next(u for u in report["utilization"] if u["level"] == "cluster")
    assert (util["capacity_gpu_h"], util["allocated_gpu_h"]) == (pytest.approx(72), pytest.approx(30))
    assert util["utilization"] == pytest.approx(30 / 72)
    cli("--warehouse", dsn, "summary", "--from", "2026-10-01", "--to", "2026-10-01", "--format", "json", env=env)
    api = ow.connect(dsn)
    try:
        for name in ("utilization", "idle_capacity", "utilization_daily", "cost", "chargeback", "reservations",
                     "node_failures", "failures_by_size", "efficiency", "job_sizes", "run_times"):
            getattr(api, name)("2026-10")
    finally:
        close_embedded()
    cap2, alloc2, refreshed2, after = grain_state(base / "wh")
    assert refreshed2 == refreshed  # no refresh: the newest refresh is still the capacity load's
    assert after == before


def test_a_later_load_moves_the_grain_without_being_asked(site):
    base, dsn, env = site
    later = base / "sacct-2.psv"
    later.write_text("\n".join([HEADER, job(3, "n1", 8, "2026-10-01T04:00:00", "2026-10-01T06:00:00", 7200)]) + "\n")
    cli("--warehouse", dsn, "etl", "sacct", "--cluster", "r1", "--timezone", "UTC", str(later), env=env)
    cap, alloc, _, _ = grain_state(base / "wh")
    assert (cap, alloc) == (pytest.approx(96), pytest.approx(46))
