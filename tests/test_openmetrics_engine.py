"""The embedded engine's parse of Prometheus text / OpenMetrics files (etl/openmetrics_engine.py): the file's
bytes never enter Python whole (what kept the memory of a 2-hour window at 2.6 GB), the rows are those DuckDB
reads from the same lines, and the lines the engine's cut does not take keep the polars rules."""

from __future__ import annotations

import pathlib
from datetime import date, datetime, timezone

import duckdb
import pytest

from ops_warehouse.etl import openmetrics_engine
from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.generate import generate
from tests.conftest import rows

DAY = date(2026, 10, 1)


def _duckdb_gpu_figures(path: pathlib.Path) -> tuple:
    """(GPU rows, sum of power, sum of temperature, GPUs) of a generated OpenMetrics file, read by DuckDB from
    the raw lines (its own regexes: seconds timestamps, one series per GPU)."""
    lines = (f"SELECT unnest(string_split(content, chr(10))) AS l FROM read_text('{path}')")
    dcgm = (f"SELECT regexp_extract(l, '^([A-Z_]+)\\{{', 1) AS metric, regexp_extract(l, 'Hostname=\"([^\"]*)\"', 1) "
            f"AS host, regexp_extract(l, '[{{,]gpu=\"([0-9]+)\"', 1) AS gpu, "
            f"CAST(regexp_extract(l, '\\}} (\\S+) ([0-9]+)$', 1) AS DOUBLE) AS v, "
            f"CAST(regexp_extract(l, '\\}} (\\S+) ([0-9]+)$', 2) AS BIGINT) AS ts FROM ({lines}) "
            f"WHERE l LIKE 'DCGM_FI_%'")
    return duckdb.sql(
        f"SELECT count(DISTINCT (host, gpu, ts)), sum(v) FILTER (metric = 'DCGM_FI_DEV_POWER_USAGE'), "
        f"sum(v) FILTER (metric = 'DCGM_FI_DEV_GPU_TEMP'), count(DISTINCT (host, gpu)) FROM ({dcgm})").fetchall()[0]


@pytest.mark.parametrize("part_bytes", [None, 4096])
def test_text_load_never_reads_the_file_in_python_and_gives_duckdbs_rows(wh, tmp_path, monkeypatch, part_bytes):
    if part_bytes:  # the lines in parts of 4 kB of text: the pivot of each part sees all of its times' samples
        monkeypatch.setattr(openmetrics_engine, "_PART_BYTES", part_bytes)
    site = tmp_path / "site"
    generate(site, start=datetime(2026, 10, 1, tzinfo=timezone.utc), days=1, jobs_per_day=20, nodes=2, seed=3,
             metrics_step_s=300, telemetry=("openmetrics",))
    path = sorted((site / "telemetry" / "openmetrics").glob("*.om"))[0]
    n, power, temp, gpus = _duckdb_gpu_figures(path)
    assert n > 100 and gpus >= 8

    read_bytes = pathlib.Path.read_bytes

    def refuse(self):  # the whole file as bytes in Python: what made the peak grow with the window
        if self.suffix == ".om":
            raise AssertionError(f"{self} read whole by Python")
        return read_bytes(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", refuse)
    c = load_text_files(wh, [path], DAY, DAY, cluster="c")
    assert c["gpu_rows"] == n and c["quarantined"] == 0
    got = rows(wh, "SELECT count(), sum(power_w), sum(temp_c), uniqExact(node, gpu) FROM gpu_sample FINAL")[0]
    assert got[0] == n and got[3] == gpus
    assert got[1] == pytest.approx(power, rel=1e-6) and got[2] == pytest.approx(temp, rel=1e-6)


T0 = 1790812800000  # 2026-10-01 00:00 UTC in ms (Prometheus text: no # EOF)
L = 'gpu="0",Hostname="n1",modelName="NVIDIA H100 80GB HBM3"'


# the pivot's paths: the whole file in one part of the lines (its group key row and time packed in a number), in
# parts of 64 bytes of text (every time its own part: lines the polars parse takes back must meet their row's in
# the same part), and a fallback time before 1970 (the key not packed: (row, time))
PIVOT_PATHS = [pytest.param(None, None, id="one-part"), pytest.param(64, None, id="parts-of-64-bytes"),
               pytest.param(64, datetime(1969, 12, 31, tzinfo=timezone.utc), id="key-not-packed")]


@pytest.mark.parametrize("part_bytes, at", PIVOT_PATHS)
def test_lines_the_engine_does_not_cut_keep_the_polars_rules(wh, tmp_path, monkeypatch, part_bytes, at):
    if part_bytes:
        monkeypatch.setattr(openmetrics_engine, "_PART_BYTES", part_bytes)
    text = "\n".join([
        "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).",                               # 1 comment
        f"DCGM_FI_DEV_POWER_USAGE{{{L}}} 100 {T0}",                                        # 2 the engine's cut
        f'DCGM_FI_DEV_POWER_USAGE{{gpu="1",Hostname="n1",modelName="NVIDIA H100 80GB HBM3"}}\t200\t{T0}',  # 3 tabs
        f"DCGM_FI_DEV_GPU_TEMP{{{L}}} 40 {T0}   ",                                          # 4 trailing blanks
        f"DCGM_FI_DEV_GPU_TEMP{{{L}}} 41 {T0 + 60000}",                                     # 5 given again on 6
        f"DCGM_FI_DEV_GPU_TEMP{{{L}}} 42 {T0 + 60000}",                                     # 6 kept
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="x",Hostname="n1"}} 5 {T0}',                            # 7 gpu not an index
        f"DCGM_FI_DEV_XID_ERRORS{{{L}}} 4294967296 {T0}",                                   # 8 not a count
        "\udcff",                                                                          # 9 invalid UTF-8
        f"DCGM_FI_DEV_POWER_USAGE{{{L}}} abc {T0}",                                         # 10 bad value
        "garbage line",                                                                    # 11 bad value
        f"DCGM_FI_DEV_GPU_UTIL{{{L}}} 30 {T0}",                                             # 12 device-level
        f'DCGM_FI_DEV_GPU_UTIL{{{L},pod="p1",namespace="ns"}} 99 {T0}',                     # 13 a pod's share
        "",
    ])
    path = tmp_path / "scrape.prom"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    c = load_text_files(wh, [path], DAY, DAY, cluster="c", at=at)
    assert c["gpu_rows"] == 3 and c["quarantined"] == 6
    t = datetime(2026, 10, 1)
    assert rows(wh, "SELECT node, gpu, ts, power_w, temp_c, gpu_util_pct, xid_last FROM gpu_sample FINAL "
                    "ORDER BY gpu, ts") == [
        # line 2's power, line 4's temperature (taken back from the polars parse into the same row), the
        # device-level utilization over the pod's later line, no Xid (line 8 quarantined)
        ("n1", 0, t, 100.0, 40.0, 30.0, None),
        ("n1", 0, t.replace(minute=1), None, 42.0, None, None),
        ("n1", 1, t, 200.0, None, None, None)]
    assert rows(wh, "SELECT line_no, reason FROM etl_quarantine FINAL ORDER BY line_no") == [
        (5, "another value of the series at the same time on line 6 (kept)"),
        (7, "bad gpu label 'x' of DCGM_FI_DEV_GPU_UTIL"),
        (8, "value 4294967296.0 of DCGM_FI_DEV_XID_ERRORS is not a count"),
        (9, "invalid UTF-8"),
        (10, "bad value"),
        (11, "bad value")]


def test_crlf_lines_load_like_lf_lines(wh, tmp_path):
    # the engine's cut drops a CRLF line's CR from its tail, as the polars parse strips it from the line
    path = tmp_path / "crlf.prom"
    path.write_bytes(f"DCGM_FI_DEV_POWER_USAGE{{{L}}} 100 {T0}\r\n"
                     f"DCGM_FI_DEV_POWER_USAGE{{{L}}} 101 {T0 + 60000}\r\n".encode())
    c = load_text_files(wh, [path], DAY, DAY, cluster="c")
    assert c["gpu_rows"] == 2 and c["quarantined"] == 0
    t = datetime(2026, 10, 1)
    assert rows(wh, "SELECT node, gpu, ts, power_w FROM gpu_sample FINAL ORDER BY ts") == [
        ("n1", 0, t, 100.0), ("n1", 0, t.replace(minute=1), 101.0)]
