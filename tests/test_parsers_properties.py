"""Property tests (hypothesis) for the hostlist, TRES and duration parsers, plus Open XDMoD's own
AllocTRES -> GPU count cases (xdmod/alloc-tres-gpu-count.json)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ops_warehouse.etl import durations, hostlist, tres
from tests.conftest import XDMOD

prefixes = st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True)
suffixes = st.from_regex(r"(s[0-9])?", fullmatch=True)


@st.composite
def hostlist_item(draw):
    """A bracketed item and the names it stands for, built independently of the parser."""
    prefix, suffix = draw(prefixes), draw(suffixes)
    width = draw(st.integers(1, 4))
    lo_max = 10**width - 1
    ranges, names = [], []
    for _ in range(draw(st.integers(1, 3))):
        lo = draw(st.integers(0, lo_max))
        hi = draw(st.integers(lo, min(lo + 5, lo_max)))
        ranges.append(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}")
        names += [f"{prefix}{n:0{width}d}{suffix}" for n in range(lo, hi + 1)]
    return f"{prefix}[{','.join(ranges)}]{suffix}", names


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
@given(st.lists(st.one_of(hostlist_item(), prefixes.map(lambda p: (p + "x", [p + "x"]))), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
def test_hostlist_expands_to_the_names_it_was_built_from(items):
    expr = ",".join(e for e, _ in items)
    expected = [n for _, names in items for n in names]
    assert hostlist.expand_one(expr) == expected


@given(st.text(alphabet="ab[]-,0123456789", max_size=20))
@settings(max_examples=300, deadline=None)
def test_hostlist_never_crashes_on_junk(text):
    df = pl.DataFrame({"i": [0], "h": [text]})
    out = hostlist.expand(df, "h", "i")
    assert out.height == 1


@given(total=st.integers(0, 5000), typed=st.dictionaries(st.sampled_from(["h100", "h200", "b200", "a100"]),
                                                         st.integers(1, 64), max_size=3),
       with_total=st.booleans(), cpu=st.integers(1, 4096), mem_g=st.integers(1, 4096))
@settings(max_examples=200, deadline=None)
def test_tres_gpu_count_and_type(total, typed, with_total, cpu, mem_g):
    parts = [f"billing={cpu}", f"cpu={cpu}"]
    parts += [f"gres/gpu:{t}={n}" for t, n in sorted(typed.items())]
    if with_total:
        parts.append(f"gres/gpu={total}")
    parts += ["gres/gpumem=40G", "gres/gpuutil=90", f"mem={mem_g}G", "node=1"]
    s = ",".join(parts)
    df = pl.DataFrame({"t": [s]}).select(g=tres.gpus(pl.col("t")), ty=tres.gpu_type(pl.col("t")),
                                         m=tres.mem_mib(pl.col("t")), c=tres.count(pl.col("t"), "cpu"))
    g, ty, m, c = df.row(0)
    assert g == (total if with_total else sum(typed.values()))
    assert ty == "+".join(sorted(typed))
    assert m == mem_g * 1024 and c == cpu


def test_xdmod_alloc_tres_gpu_counts():
    cases = json.loads((XDMOD / "alloc-tres-gpu-count.json").read_text())
    df = pl.DataFrame({"t": [t for t, _ in cases]}).select(g=tres.gpus(pl.col("t")))
    assert df.get_column("g").to_list() == [n for _, n in cases]


@given(d=st.integers(0, 400), h=st.integers(0, 23), m=st.integers(0, 59), s=st.integers(0, 59),
       form=st.sampled_from(["dhms", "hms", "ms", "raw", "dh", "dhm"]))
@settings(max_examples=300, deadline=None)
def test_durations(d, h, m, s, form):
    if form == "dhms":
        text, want = f"{d}-{h:02d}:{m:02d}:{s:02d}", d * 86400 + h * 3600 + m * 60 + s
    elif form == "hms":
        text, want = f"{h + 24 * (d % 5):02d}:{m:02d}:{s:02d}", (h + 24 * (d % 5)) * 3600 + m * 60 + s
    elif form == "ms":
        text, want = f"{m:02d}:{s:02d}.{h:03d}", m * 60 + s + h / 1000
    elif form == "dh":
        text, want = f"{d}-{h}", d * 86400 + h * 3600
    elif form == "dhm":
        text, want = f"{d}-{h}:{m:02d}", d * 86400 + h * 3600 + m * 60
    else:
        text, want = str(d * 1000 + s), (d * 1000 + s) * 60  # TimelimitRaw: minutes
    got = pl.DataFrame({"x": [text]}).select(durations.duration_s(pl.col("x"), 60)).item()
    assert abs(got - want) < 1e-6


def test_duration_specials():
    got = pl.DataFrame({"x": ["UNLIMITED", "Partition_Limit", "", None, "INVALID", "12:xx"]}).select(
        durations.duration_s(pl.col("x"), 60)).to_series().to_list()
    assert got == [None] * 6


# --- hostile input (issue 7: tests/test_fuzz_*.py fuzz the loaders; these fuzz the pieces) -------------------
@given(st.text(alphabet="ab[]-,0123456789%", max_size=30))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_hostlist_junk_gives_names_without_brackets_or_a_refusal(text):
    out = hostlist.expand(pl.DataFrame({"i": [0], "h": [text]}), "h", "i").row(0, named=True)
    if out["hostlist_ok"]:
        assert len(out["nodes"]) <= hostlist.MAX_NODES
        assert not any(c in n for n in out["nodes"] for c in "[],")


@given(st.lists(st.one_of(st.integers(0, 300), st.integers(10**5, 10**7)), min_size=2, max_size=4))
@settings(max_examples=60, deadline=None, derandomize=True)
def test_hostlist_bracket_products_are_bounded(highs):
    """``a[0-999]b[0-999]c[0-999]`` is 10^9 names from 25 bytes: refused, not expanded into memory."""
    expr = "".join(f"p{k}[0-{h}]" for k, h in enumerate(highs))
    total = 1
    for h in highs:
        total *= h + 1
    out = hostlist.expand(pl.DataFrame({"i": [0], "h": [expr]}), "h", "i").row(0, named=True)
    fits = total <= hostlist.MAX_NODES and max(highs) <= hostlist.MAX_RANGE
    assert out["hostlist_ok"] == fits
    assert len(out["nodes"]) == (total if fits else 0)


@given(counts=st.lists(st.integers(0, 10**25), min_size=1, max_size=3), total=st.none() | st.integers(0, 10**25))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_tres_gpu_counts_beyond_any_gpu_count_read_null_never_raise(counts, total):
    parts = ["cpu=4"] + [f"gres/gpu:t{k}={n}" for k, n in enumerate(counts)]
    if total is not None:
        parts.append(f"gres/gpu={total}")
    s = ",".join(parts)
    got = pl.DataFrame({"t": [s]}).select(g=tres.gpus(pl.col("t")), s=tres.gpus_simple(pl.col("t"))).row(0)
    want = total if total is not None else sum(counts)
    want = want if want <= 2**32 - 1 and (total is not None or max(counts) <= 2**32 - 1) else None
    assert got[0] == want
    if total is not None:
        assert got[1] == want


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_duration_and_time_parsers_never_raise_on_junk(text):
    df = pl.DataFrame({"x": [text]}).select(
        d=durations.duration_s(pl.col("x"), 60), t=durations.parse_time(pl.col("x"), "Europe/Amsterdam"),
        m=durations.time_missing(pl.col("x")))
    assert df.height == 1


@given(st.binary(max_size=300), st.sampled_from([1, 2, 3, 7, 64]))
@settings(max_examples=300, deadline=None)
def test_iter_blocks_gives_every_line_once_with_its_number_whatever_the_chunk_size(data, chunk_bytes):
    """Blocks of whole lines, however the reads cut them (a line longer than many chunks included)."""
    import tempfile
    from pathlib import Path

    from ops_warehouse.etl.sacct_text import iter_blocks

    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    p = Path(f.name)
    try:
        got = [(n + i, line) for n, block in iter_blocks(p, chunk_bytes) for i, line in enumerate(block.split(b"\n"))]
    finally:
        p.unlink()
    want = list(enumerate(data.split(b"\n"), start=1)) if data else []
    if data.endswith(b"\n"):
        want = want[:-1]
    assert got == want
