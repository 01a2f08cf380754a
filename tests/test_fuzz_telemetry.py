"""Hostile input for the telemetry file parsers: Prometheus text / OpenMetrics (``load_text_files``) and
VictoriaMetrics' export JSON lines (``load_vm_export``), into an embedded warehouse.

The good records are the real dcgm-exporter samples of tests/data/metrics/dcgm-exporter-scrape-t4.txt
(DataDog integrations-core fixture, BSD-3-Clause) that the metric catalog maps to a GPU gauge, each given its
own timestamp (and, as a change that must still load, another GPU index or value); around them: the same
lines made bad (cut inside the labels, a value or timestamp that is not a number, a gpu label that is not a
GPU index, invalid UTF-8, garbage, huge lines), and the real lines the loader skips by design (metrics the
catalog does not know, the scrape's unlabelled dummy block). The test checks that nothing raises, that every
bad line is in etl_quarantine with a reason, and that exactly the good samples are in gpu_sample with their
values (none lost, none extra).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops_warehouse.etl import vm_export_source
from ops_warehouse.etl.metric_catalog import GPU_COLUMNS, catalog
from ops_warehouse.etl.openmetrics_source import load_text_files, parse_text
from ops_warehouse.etl.vm_export_source import load_vm_export, parse_export
from tests.conftest import DATA
from tests.fuzz_support import empty, print_figures, scratch_warehouse

SCRAPE = DATA / "metrics" / "dcgm-exporter-scrape-t4.txt"
DAY = date(2026, 10, 1)
T0 = datetime(2026, 10, 1, 6, 0, tzinfo=timezone.utc)
FUZZ = dict(deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
FIGURES: Counter = Counter()
CAT = catalog(None)
INVALID_UTF8 = [b"\xff", b"\xfe", b"\xc3(", b"\xe2\x98", b"\xed\xa0\x80", b"\xc0\x80", b"\x80"]
BAD_GPU = ["abc", "-1", "99999", "1.5", "", " 0", "0x1", "GPU-0", "'; DROP TABLE gpu_sample; --"]


@dataclass(frozen=True)
class Sample:
    metric: str
    labels: str  # the label block as printed, braces included
    value: float


@cache
def pool() -> tuple[list[Sample], list[str]]:
    """(good samples: real lines of a catalog GPU gauge; real lines the loader skips by design)."""
    samples, q = parse_text(SCRAPE)
    assert q.height == 0
    lines = SCRAPE.read_text().split("\n")
    good, skipped = [], []
    for r in samples.iter_rows(named=True):
        line = lines[r["line_no"] - 1]
        m = CAT.get(r["metric"])
        if m and m.grain == "gpu" and m.kind == "gauge" and r["Hostname"] and r["gpu"]:
            labels = re.match(r"^[^{\s]+(\{.*\})\s", line).group(1)
            good.append(Sample(r["metric"], labels, r["value"]))
        elif not m or not r["Hostname"]:
            skipped.append(line)
    assert len(good) >= 8 and len(skipped) >= 20
    return good, skipped


# the ranges a value must keep to load (sql/functions/sample_value_range.sql, docs/telemetry.md): one outside
# them is quarantined as an exporter's bad value, so a changed value that must still load is drawn inside them
_RANGES = {"gpu_util_pct": 100.0, "sm_active": 1.0, "gr_engine_active": 1.0, "tensor_active": 1.0,
           "dram_active": 1.0, "power_w": 2000.0}


def _in_column(metric: str, value: float) -> float:
    """A value the metric's warehouse column holds (the integer columns: whole, from 0 to 2^32-1) and its
    range accepts (never negative but a temperature; utilization, activities and power below their top)."""
    col, scale = CAT[metric].column, CAT[metric].scale
    if col in ("throttle_reasons", "xid_last"):
        return float(int(abs(value)) % 2**32)
    if col == "temp_c":
        return value
    if col in _RANGES:
        return abs(value * scale) % _RANGES[col] / scale
    return abs(value)


def _hostname(labels: str) -> str:
    return re.search(r'Hostname="([^"]*)"', labels).group(1)


def _with_gpu(labels: str, gpu: str) -> str:
    return re.sub(r'gpu="[^"]*"', lambda _: f'gpu="{gpu}"', labels)


@dataclass
class Good:
    metric: str
    host: str
    gpu: int
    ts: datetime
    value: float


@st.composite
def text_case(draw):
    """(file bytes, tags per line: ("good", Good) | ("bad", kind) | ("skip",), openmetrics)."""
    good_pool, skipped = pool()
    om = draw(st.booleans())
    items: list[tuple[bytes, tuple]] = []
    n_good = draw(st.integers(1, 12))
    for k in range(n_good):
        s = draw(st.sampled_from(good_pool))
        gpu = draw(st.sampled_from(["0", "1", "7", "15"]))
        value = s.value if draw(st.booleans()) else _in_column(s.metric, draw(st.floats(-1e12, 1e12, allow_nan=False)))
        ts = T0 + timedelta(seconds=k + 1, milliseconds=draw(st.sampled_from([0, 500])) if not om else 0)
        stamp = f"{ts.timestamp():.3f}" if om else str(int(ts.timestamp() * 1000))
        line = f"{s.metric}{_with_gpu(s.labels, gpu)} {value!r} {stamp}"
        items.append((line.encode(), ("good", Good(s.metric, _hostname(s.labels), int(gpu), ts, value))))
    for _ in range(draw(st.integers(0, 20))):
        s = draw(st.sampled_from(good_pool))
        line = f"{s.metric}{s.labels} {s.value!r}"
        kind = draw(st.sampled_from(["cut_labels", "bad_value", "bad_timestamp", "bad_gpu", "invalid_utf8",
                                     "garbage", "no_space", "extra_field", "huge", "bad_metric_name", "bad_count"]))
        if kind == "cut_labels":
            raw = line[: line.index("{") + draw(st.integers(1, len(s.labels) - 1))].encode()
        elif kind == "bad_value":
            raw = line.rsplit(" ", 1)[0].encode() + b" " + draw(st.sampled_from(
                [b"abc", b"1.2.3", b"--1", b"1,5", b"one", b"0x", b"'1'"]))
        elif kind == "bad_timestamp":
            raw = line.encode() + b" " + draw(st.sampled_from(
                [b"abc", b"1e300", b"-5", b"99999999999999999999", b"NaN", b"+Inf", b"5e15", b"1.7e13x"]))
        elif kind == "bad_gpu":
            raw = f"{s.metric}{_with_gpu(s.labels, draw(st.sampled_from(BAD_GPU)))} {s.value!r}".encode()
        elif kind == "invalid_utf8":
            b = line.encode()
            at = draw(st.integers(0, len(b)))
            raw = b[:at] + draw(st.sampled_from(INVALID_UTF8)) + b[at:] + b"\xff"
        elif kind == "garbage":
            raw = b"9" + draw(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                                      max_size=80)).encode()
        elif kind == "no_space":
            raw = line.replace("} ", "}", 1).encode()
        elif kind == "extra_field":
            raw = (line + " 1000 extra").encode()
        elif kind == "huge":
            raw = b"{" + b"x" * draw(st.integers(100_000, 2_000_000))
        elif kind == "bad_count":
            s = draw(st.sampled_from([x for x in good_pool if CAT[x.metric].column == "throttle_reasons"]))
            raw = f"{s.metric}{s.labels} {draw(st.sampled_from(['-1', '4294967296', '1.5', 'NaN', '+Inf']))}".encode()
        else:
            raw = draw(st.sampled_from(["1", "-", "{", "="])).encode() + line.encode()
        items.append((raw, ("bad", kind)))
    for _ in range(draw(st.integers(0, 6))):
        items.append((draw(st.sampled_from(skipped)).encode(), ("skip",)))
    for _ in range(draw(st.integers(0, 3))):
        items.append((draw(st.sampled_from([b"", b"# HELP x y", b"# TYPE DCGM_FI_DEV_GPU_TEMP gauge", b"   "])),
                      ("skip",)))
    order = draw(st.permutations(range(len(items))))
    lines = _unique_bad([items[k] for k in order])
    if om:
        lines.append((b"# EOF", ("skip",)))
    return b"\n".join(raw for raw, _ in lines) + b"\n", [tag for _, tag in lines], om


def _unique_bad(lines: list[tuple[bytes, tuple]]) -> list[tuple[bytes, tuple]]:
    """The quarantine keeps one row per (source, line text, reason): a bad line twice is left out."""
    seen, out = set(), []
    for raw, tag in lines:
        if tag[0] == "bad" and raw in seen:
            continue
        seen.add(raw)
        out.append((raw, tag))
    return out


def _good_rows(tags) -> set[tuple]:
    return {(g.host, g.gpu, g.ts.replace(tzinfo=None, microsecond=0), CAT[g.metric].column,
             g.value * CAT[g.metric].scale) for tag in tags if tag[0] == "good" for g in [tag[1]]}


def _bad_lines(tags) -> set[int]:
    return {k + 1 for k, tag in enumerate(tags) if tag[0] == "bad"}


def _count(prefix: str, tags) -> None:
    FIGURES[f"{prefix}: files"] += 1
    for tag in tags:
        FIGURES[f"{prefix}: {tag[0]} records"] += 1


@pytest.fixture(scope="module")
def twh(tmp_path_factory):
    yield from scratch_warehouse(tmp_path_factory, "fuzztel")


@pytest.fixture(scope="module", autouse=True)
def figures():
    yield from print_figures("telemetry", FIGURES)


def _fresh(w) -> None:
    empty(w, ("gpu_sample", "xid_event", "node_sample", "etl_quarantine"))


def _loaded(w) -> set[tuple]:
    res = w.client.query(f"SELECT node, gpu, ts, {', '.join(GPU_COLUMNS)} FROM gpu_sample FINAL")
    out = set()
    for row in res.result_rows:
        node, gpu, ts, *values = row
        ts = ts.astimezone(timezone.utc).replace(tzinfo=None) if ts.tzinfo else ts
        out |= {(node, gpu, ts, col, v) for col, v in zip(GPU_COLUMNS, values) if v is not None}
    return out


def _same(got: set[tuple], want: set[tuple]) -> bool:
    """Equal up to the float32 columns' rounding."""
    if len(got) != len(want):
        return False
    key = lambda r: r[:4]  # noqa: E731
    g, w = {key(r): r[4] for r in got}, {key(r): r[4] for r in want}
    return g.keys() == w.keys() and all(abs(g[k] - w[k]) <= 1e-6 * max(1.0, abs(w[k])) for k in g)


@settings(max_examples=80, **FUZZ)
@given(case=text_case())
def test_openmetrics_parse_fuzz(case, tmp_path_factory):
    data, tags, _ = case
    path = tmp_path_factory.getbasetemp() / "fuzz.prom"
    path.write_bytes(data)
    samples, q = parse_text(path, T0)
    good_lines = {k + 1 for k, tag in enumerate(tags) if tag[0] == "good"}
    assert set(q.get_column("line_no").to_list()) >= _bad_lines(tags) - _bad_gpu_lines(tags)
    assert set(q.get_column("line_no").to_list()) <= _bad_lines(tags)
    assert good_lines <= set(samples.get_column("line_no").to_list())
    got = {r["line_no"]: r for r in samples.iter_rows(named=True)}
    for k, tag in enumerate(tags):
        if tag[0] == "good":
            g, r = tag[1], got[k + 1]
            assert (r["metric"], r["Hostname"], int(r["gpu"]), r["timestamp"], r["value"]) == (
                g.metric, g.host, g.gpu, g.ts, g.value)
    _count("openmetrics (parse)", tags)


def _bad_gpu_lines(tags) -> set[int]:
    """Bad lines only the load (with the catalog) tells apart: a gpu label or a count its column cannot hold."""
    return {k + 1 for k, tag in enumerate(tags) if tag in (("bad", "bad_gpu"), ("bad", "bad_count"))}


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
@settings(max_examples=15, **FUZZ)
@given(case=text_case())
def test_openmetrics_load_fuzz(case, twh):
    w, d = twh
    _fresh(w)
    data, tags, _ = case
    path = d / "fuzz.prom"
    path.write_bytes(data)
    c = load_text_files(w, [path], DAY, DAY, at=T0, cluster="fz")
    q = w.query_rows("SELECT line_no, reason FROM etl_quarantine FINAL WHERE source = {s:String}",
                     {"s": str(path.resolve())})
    assert sorted(x[0] for x in q) == sorted(_bad_lines(tags)) and all(x[1] for x in q)
    assert c["quarantined"] == len(_bad_lines(tags))
    want = _good_rows(tags)
    assert _same(_loaded(w), {(h.lower(), g, ts, col, v) for h, g, ts, col, v in want})
    _count("openmetrics (warehouse)", tags)


# -------------------------------------------------------------------------------- VictoriaMetrics export
@st.composite
def vm_case(draw):
    good_pool, _ = pool()
    items: list[tuple[bytes, tuple]] = []
    t = 0
    for _ in range(draw(st.integers(1, 8))):
        s = draw(st.sampled_from(good_pool))
        labels = dict(re.findall(r'(\w+)="([^"]*)"', s.labels))
        labels["gpu"] = draw(st.sampled_from(["0", "1", "3"]))
        n = draw(st.integers(1, 3))
        values = [s.value if draw(st.booleans()) else _in_column(s.metric, draw(st.floats(-1e9, 1e9, allow_nan=False)))
                  for _ in range(n)]
        stamps = [T0 + timedelta(seconds=t + i + 1) for i in range(n)]
        t += n
        line = json.dumps({"metric": {"__name__": s.metric, **labels}, "values": values,
                           "timestamps": [int(x.timestamp() * 1000) for x in stamps]})
        items.append((line.encode(), ("good", [Good(s.metric, labels["Hostname"], int(labels["gpu"]), ts, v)
                                               for ts, v in zip(stamps, values)])))
    for _ in range(draw(st.integers(0, 10))):
        s = draw(st.sampled_from(good_pool))
        labels = dict(re.findall(r'(\w+)="([^"]*)"', s.labels))
        base = {"metric": {"__name__": s.metric, **labels}, "values": [s.value], "timestamps": [1759298400000]}
        kind = draw(st.sampled_from(["truncated", "not_json", "mismatch", "string_values", "bad_timestamp",
                                     "no_name", "metric_not_object", "array", "invalid_utf8", "bad_gpu", "huge",
                                     "deep"]))
        if kind == "truncated":
            text = json.dumps(base)
            raw = text[: draw(st.integers(1, len(text) - 1))].encode()
        elif kind == "not_json":
            raw = draw(st.sampled_from([b"hello", b"{metric: 1}", b"{'a': 1}", b"NaN", b"{\"metric\": }"]))
        elif kind == "mismatch":
            raw = json.dumps({**base, "values": [1.0, 2.0]}).encode()
        elif kind == "string_values":
            raw = json.dumps({**base, "values": draw(st.sampled_from([["1"], [None], [True], "1", [[1]]]))}).encode()
        elif kind == "bad_timestamp":
            raw = json.dumps({**base, "timestamps": [draw(st.sampled_from(
                [10**20, -5, 1.5, "1759298400000", None, 2**63, 5 * 10**15]))]}).encode()
        elif kind == "no_name":
            raw = json.dumps({**base, "metric": labels}).encode()
        elif kind == "metric_not_object":
            raw = json.dumps({**base, "metric": s.metric}).encode()
        elif kind == "array":
            raw = json.dumps([base]).encode()
        elif kind == "invalid_utf8":
            raw = json.dumps(base).encode().replace(b'"Hostname": "', b'"Hostname": "\xff', 1)
        elif kind == "bad_gpu":
            raw = json.dumps({**base, "metric": {**base["metric"], "gpu": draw(st.sampled_from(BAD_GPU))}}).encode()
        elif kind == "huge":
            raw = b'{"metric": {"__name__": "' + b"x" * draw(st.integers(100_000, 1_000_000))
        else:
            raw = b"[" * 50_000 + b"]" * 50_000
        items.append((raw, ("bad", kind)))
    for _ in range(draw(st.integers(0, 2))):
        items.append((b"", ("skip",)))
    order = draw(st.permutations(range(len(items))))
    lines = _unique_bad([items[k] for k in order])
    return b"\n".join(raw for raw, _ in lines) + b"\n", [tag for _, tag in lines]


def _vm_good_rows(tags) -> set[tuple]:
    return {(g.host.lower(), g.gpu, g.ts.replace(tzinfo=None), CAT[g.metric].column, g.value * CAT[g.metric].scale)
            for tag in tags if tag[0] == "good" for g in tag[1]}


@settings(max_examples=80, **FUZZ)
@given(case=vm_case())
def test_vm_export_parse_fuzz(case):
    data, tags = case
    samples, q = parse_export(data)
    bad = _bad_lines(tags) - _bad_gpu_lines(tags)
    assert set(q.get_column("line_no").to_list()) == bad and all(q.get_column("reason").str.len_chars() > 0)
    got = {(r["line_no"], r["timestamp"]): r for r in samples.iter_rows(named=True)}
    n = 0
    for k, tag in enumerate(tags):
        if tag[0] == "good":
            for g in tag[1]:
                r = got[(k + 1, g.ts)]
                assert (r["metric"], r["Hostname"], int(r["gpu"]), r["value"]) == (g.metric, g.host, g.gpu, g.value)
                n += 1
    assert samples.height == n + sum(1 for k in _bad_gpu_lines(tags))
    # polars reads the whole file in one pass exactly when every line is a well-formed series
    fast = vm_export_source._series_fast(data) is not None
    assert fast == (not bad and all(tag[0] != "skip" for tag in tags))
    FIGURES["vm-export (parse): files read in one polars pass"] += fast
    _count("vm-export (parse)", tags)


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
@settings(max_examples=12, **FUZZ)
@given(case=vm_case())
def test_vm_export_load_fuzz(case, twh):
    w, d = twh
    _fresh(w)
    data, tags = case
    path = d / "fuzz.jsonl"
    path.write_bytes(data)
    c = load_vm_export(w, path, DAY, DAY, cluster="fz")
    q = w.query_rows("SELECT line_no, reason FROM etl_quarantine FINAL WHERE source = {s:String}",
                     {"s": str(path.resolve())})
    assert sorted(x[0] for x in q) == sorted(_bad_lines(tags)) and all(x[1] for x in q)
    assert c["quarantined"] == len(_bad_lines(tags))
    assert _same(_loaded(w), _vm_good_rows(tags))
    _count("vm-export (warehouse)", tags)


def test_vm_export_empty_and_blank_files(twh):
    w, d = twh
    for data in (b"", b"\n\n", b"   \n"):
        p = d / "empty.jsonl"
        p.write_bytes(data)
        assert load_vm_export(w, p, DAY, DAY, cluster="fz")["quarantined"] == 0
    for data in (b"", b"\n\n# EOF\n", b"# only a comment\n"):
        p = d / "empty.prom"
        p.write_bytes(data)
        assert load_text_files(w, [p], DAY, DAY, at=T0, cluster="fz")["quarantined"] == 0


# ------------------------------------------------------------------------------------------------ corpus
def _corpus():
    from pathlib import Path

    root = Path(__file__).parent / "fuzz_corpus"
    want = json.loads((root / "expected.json").read_text())
    return root, want


@pytest.mark.parametrize("section", ["openmetrics", "vm_export"])
def test_telemetry_corpus(section, twh):
    """Hand-written nasty files (tests/fuzz_corpus/expected.json says what each must give)."""
    w, _ = twh
    root, want = _corpus()
    for name, expect in sorted(want[section].items()):
        _fresh(w)
        p = root / name
        if section == "openmetrics":
            c = load_text_files(w, [p], DAY, DAY, at=T0, cluster="fz")
        else:
            c = load_vm_export(w, p, DAY, DAY, cluster="fz")
        reasons = [list(x) for x in w.query_rows(
            "SELECT line_no, reason FROM etl_quarantine FINAL WHERE source = {s:String} ORDER BY line_no",
            {"s": str(p.resolve())})]
        got = {"gpu_rows": c["gpu_rows"], "quarantined": c["quarantined"], "reasons": reasons}
        assert got == expect, name
        FIGURES[f"corpus: {section} files"] += 1
