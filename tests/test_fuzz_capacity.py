"""Hostile input for the capacity parsers: ``scontrol show node``, the site inventory CSV, ``sacctmgr list
event --parsable2`` and ``scontrol show reservation`` (etl/capacity_sources.py).

These sources are small and feed every capacity number, so by design (the module's docstring) a record that
cannot be read fails the whole file with one line naming the file and the record, instead of being
quarantined: a guessed node would be wrong in every report. The property is therefore: a file of good
records (built on the layouts of tests/test_capacity_sources.py, which are Slurm 23.02's output) gives
exactly those records with their values; the same file with any bad record raises OpsError, one line, naming
the file; nothing else is ever raised.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops_warehouse.errors import OpsError
from ops_warehouse.config import Config
from ops_warehouse.etl.capacity_sources import load_capacity, read_events, read_inventory, read_reservations
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.fuzz_support import print_figures

FUZZ = dict(deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
UTC = timezone.utc
FIGURES: Counter = Counter()
SQL = ["'; DROP TABLE node_inventory; --", "x' OR '1'='1", "{s:String}", "\\N"]
INVALID_UTF8 = [b"\xff", b"\xc3(", b"\xe2\x98", b"\xed\xa0\x80"]
T0 = datetime(2026, 10, 1, tzinfo=UTC)


@pytest.fixture(scope="module", autouse=True)
def figures():
    yield from print_figures("capacity", FIGURES)


def _outcome(read, path: Path, n_bad: int, what: str):
    """The parser's frame when no record is bad; else the OpsError it must raise (one line, naming the file)."""
    FIGURES[f"{what}: files"] += 1
    FIGURES[f"{what}: files with a bad record"] += bool(n_bad)
    try:
        df = read()
    except OpsError as e:
        assert n_bad, f"good file refused: {e}"
        msg = str(e)
        assert "\n" not in msg and path.name in msg, msg
        return None
    assert not n_bad, "a bad record was accepted"
    return df


def _bad_bytes(draw, text: str) -> bytes:
    b = text.encode()
    at = draw(st.integers(0, len(b)))
    return b[:at] + draw(st.sampled_from(INVALID_UTF8)) + b[at:]


# ------------------------------------------------------------------------------------------ scontrol nodes
GRES = [("gpu:h100:8(S:0-1)", 8, "h100"), ("gpu:h100:4(S:0),gpu:h100:4(S:1)", 8, "h100"), ("gpu:a100:2", 2, "a100"),
        ("gpu:8", 8, ""), ("(null)", 0, ""), ("gpu:h200:8(S:0-1),nic:2", 8, "h200"), ("gpumem:40G", 0, "")]
BAD_GRES = ["gpu:h100:eight", "gpu:h100:99999", "gpu:a:40000,gpu:b:40000", "gpu:h100:-1", "gpu"]


def _node_block(name, cpus, gres, feats, parts, reason) -> str:
    return (f"NodeName={name} Arch=x86_64 CoresPerSocket=56\n   CPUAlloc=0 CPUEfctv={cpus} CPUTot={cpus} "
            f"CPULoad=0.04\n   AvailableFeatures={feats}\n   ActiveFeatures={feats}\n   Gres={gres}\n"
            f"   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
            f"   Partitions={parts}\n   Reason={reason}\n")


@st.composite
def scontrol_case(draw):
    blocks, want, n_bad = [], {}, 0
    for i in range(draw(st.integers(1, 8))):
        name = f"gpu-{i:03d}"
        gres, gpus, model = draw(st.sampled_from(GRES))
        cpus = draw(st.integers(0, 2**32 - 1))
        rack = f"rack{draw(st.integers(0, 99)):02d}"
        feats = draw(st.sampled_from([f"h100,{rack},ib", f"{rack}", "(null)"]))
        parts = draw(st.sampled_from(["h100,debug", "gpu", "a-b_c"]))
        reason = draw(st.sampled_from(SQL + ["thermal: GPU over temp [root@2026-10-02T01:00:00]", ""]))
        block = _node_block(name, cpus, gres, feats, parts, reason)
        if i and draw(st.integers(0, 5)) == 0:
            kind = draw(st.sampled_from(["cpus", "gres", "no_name", "utf8"]))
            if kind == "cpus":
                block = block.replace(f"CPUTot={cpus}", f"CPUTot={draw(st.sampled_from(['abc', '-1', '4294967296', '1e3']))}")
            elif kind == "gres":
                block = block.replace(f"Gres={gres}", f"Gres={draw(st.sampled_from(BAD_GRES))}")
            elif kind == "no_name":
                block = block.replace(f"NodeName={name} ", "")
            blocks.append(_bad_bytes(draw, block) if kind == "utf8" else block.encode())
            n_bad += 1
            FIGURES[f"scontrol nodes bad kind {kind}"] += 1
            continue
        blocks.append(block.encode())
        want[name] = (model, gpus, cpus, parts.split(",")[0], rack if rack in feats else "")
    return b"\n".join(blocks), want, n_bad


@settings(max_examples=100, **FUZZ)
@given(case=scontrol_case())
def test_scontrol_nodes_fuzz(case, tmp_path):
    data, want, n_bad = case
    p = tmp_path / "nodes.txt"
    p.write_bytes(data)
    df = _outcome(lambda: read_inventory(p, "fz"), p, n_bad, "scontrol nodes")
    if df is not None:
        got = {r["node"]: (r["gpu_model"], r["gpus"], r["cpus"], r["partition"], r["rack"]) for r in df.to_dicts()}
        assert got == want
        FIGURES["scontrol nodes: good records loaded"] += len(got)


# ------------------------------------------------------------------------------------------- inventory CSV
@st.composite
def inventory_case(draw):
    rows, want, n_bad = ["node,gpu_model,gpus,partition,rack,in_service_date,cpus,retired_date"], {}, 0
    for i in range(draw(st.integers(1, 10))):
        node, model, gpus = f"n{i:04d}", draw(st.sampled_from(["h100", "b200", "", "a100-80gb"])), draw(st.integers(0, 65535))
        cpus, day = draw(st.integers(0, 2**32 - 1)), T0.date() - timedelta(days=draw(st.integers(0, 5000)))
        fields = [node, model, str(gpus), "gpu", "r1", day.isoformat(), str(cpus), ""]
        if draw(st.integers(0, 12)) == 0:
            kind = draw(st.sampled_from(["gpus", "cpus", "date", "ragged", "no_node", "quote", "utf8"]))
            if kind == "gpus":
                fields[2] = draw(st.sampled_from(["eight", "-1", "70000", "1.5", ""]))
            elif kind == "cpus":
                fields[6] = draw(st.sampled_from(["abc", "-4", "4294967296"]))
            elif kind == "date":
                fields[draw(st.sampled_from([5, 7]))] = draw(st.sampled_from(["2026-13-01", "9999-01-01", "yesterday"]))
            elif kind == "ragged":
                fields.append("extra")
            elif kind == "no_node":
                fields[0] = ""
            elif kind == "quote":
                fields[1] = '"h100'
            row = ",".join(fields)
            rows.append(_bad_bytes(draw, row).decode("utf-8", "surrogateescape") if kind == "utf8" else row)
            n_bad += 1
            FIGURES[f"inventory bad kind {kind}"] += 1
            continue
        rows.append(",".join(fields))
        want[node] = (model, gpus, cpus, datetime.combine(day, datetime.min.time(), UTC))
    return "\n".join(rows).encode("utf-8", "surrogateescape") + b"\n", want, n_bad


@settings(max_examples=100, **FUZZ)
@given(case=inventory_case())
def test_inventory_csv_fuzz(case, tmp_path):
    data, want, n_bad = case
    p = tmp_path / "inventory.csv"
    p.write_bytes(data)
    df = _outcome(lambda: read_inventory(p, "fz"), p, n_bad, "inventory csv")
    if df is not None:
        got = {r["node"]: (r["gpu_model"], r["gpus"], r["cpus"], r["in_service_ts"]) for r in df.to_dicts()}
        assert got == want
        FIGURES["inventory csv: good records loaded"] += len(got)


# ------------------------------------------------------------------------------------------ sacctmgr events
@st.composite
def events_case(draw):
    lines, want, n_bad = ["Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User"], [], 0
    for _ in range(draw(st.integers(1, 10))):
        lo = draw(st.integers(0, 50))
        n = draw(st.integers(1, 3))
        nodes = [f"gpu-{k:03d}" for k in range(lo, lo + n)]
        expr = nodes[0] if n == 1 else f"gpu-[{lo:03d}-{lo + n - 1:03d}]"
        start = T0 + timedelta(minutes=draw(st.integers(0, 100_000)))
        end = None if draw(st.booleans()) else start + timedelta(minutes=draw(st.integers(1, 5000)))
        state, norm = draw(st.sampled_from([("DOWN*", "DOWN"), ("IDLE+DRAIN", "DRAIN"), ("MIXED+DRAIN", "DRAIN"),
                                            ("MAINT", "MAINT"), ("FAIL", "DOWN"), ("IDLE", "IDLE")]))
        reason = draw(st.sampled_from(SQL + ["Not responding", "bad|gpu|reason", "", "é ☃ 🙂"]))
        fields = ["ai1", expr, start.strftime("%Y-%m-%dT%H:%M:%S"), end.strftime("%Y-%m-%dT%H:%M:%S") if end else "Unknown",
                  state, reason, "root(0)"]
        if draw(st.integers(0, 6)) == 0:
            kind = draw(st.sampled_from(["start", "end", "nodes", "cut", "utf8", "no_start", "backwards"]))
            if kind == "start":
                fields[2] = draw(st.sampled_from(["yesterday", "2026-13-01T00:00:00", "9999-01-01T00:00:00", "1969-01-01T00:00:00"]))
            elif kind == "end":
                fields[3] = draw(st.sampled_from(["soon", "2026-02-30T00:00:00", "2150-01-01T00:00:00"]))
            elif kind == "nodes":
                fields[1] = draw(st.sampled_from(["gpu-[001-", "a[0-999]b[0-999]c[0-999]", "n[5-1]", "x]"]))
            elif kind == "no_start":
                fields[2] = draw(st.sampled_from(["Unknown", ""]))
            elif kind == "backwards":  # ends before it starts (issue 49 item 5: stored as a 0-hour fault before)
                fields[3] = (start - timedelta(minutes=draw(st.integers(1, 5000)))).strftime("%Y-%m-%dT%H:%M:%S")
            line = "|".join(fields[:draw(st.integers(1, 4))] if kind == "cut" else fields)
            lines.append(_bad_bytes(draw, line).decode("utf-8", "surrogateescape") if kind == "utf8" else line)
            n_bad += 1
            FIGURES[f"events bad kind {kind}"] += 1
            continue
        if draw(st.integers(0, 8)) == 0:
            lines.append("ai1||2026-10-01T00:00:00|Unknown||Cluster Registered TRES|")  # cluster-level: not a node
        lines.append("|".join(fields))
        want += [(nd, start, end, norm, reason) for nd in nodes]
    return "\n".join(lines).encode("utf-8", "surrogateescape") + b"\n", want, n_bad


@pytest.mark.slow  # more than 4.5 s on 2 vCPUs: out of the inner loop (docs/testing.md)
@settings(max_examples=100, **FUZZ)
@given(case=events_case())
def test_sacctmgr_events_fuzz(case, tmp_path):
    data, want, n_bad = case
    p = tmp_path / "events.psv"
    p.write_bytes(data)
    df = _outcome(lambda: read_events(p, "fz"), p, n_bad, "sacctmgr events")
    if df is not None:
        got = [(r["node"], r["start_ts"], r["end_ts"], r["state"], r["reason"]) for r in df.to_dicts()]
        assert got == want
        FIGURES["sacctmgr events: good records loaded"] += len(got)


# ------------------------------------------------------------------------------------ scontrol reservations
@st.composite
def reservations_case(draw):
    blocks, want, n_bad = [], {}, 0
    for i in range(draw(st.integers(1, 6))):
        name = f"resv_{i}"
        start = T0 + timedelta(hours=draw(st.integers(0, 5000)))
        end = start + timedelta(hours=draw(st.integers(1, 500)))
        lo, n = draw(st.integers(1, 50)), draw(st.integers(1, 4))
        nodes = f"gpu-[{lo:03d}-{lo + n - 1:03d}]"
        accounts = draw(st.sampled_from(["ProjA,projx", "(null)", "a"]))
        block = (f"ReservationName={name} StartTime={start:%Y-%m-%dT%H:%M:%S} EndTime={end:%Y-%m-%dT%H:%M:%S} "
                 f"Duration=1-00:00:00\n   Nodes={nodes} NodeCnt={n} CoreCnt=112 Features=(null) "
                 f"PartitionName=h100 Flags=SPEC_NODES\n   TRES=cpu=112\n   Users=(null) Groups=(null) "
                 f"Accounts={accounts} Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a\n")
        if draw(st.integers(0, 5)) == 0:
            kind = draw(st.sampled_from(["no_name", "start", "no_end", "nodes", "utf8", "backwards"]))
            if kind == "start":
                block = block.replace(f"StartTime={start:%Y-%m-%dT%H:%M:%S}", "StartTime=" + draw(st.sampled_from(
                    ["now", "2026-13-01T00:00:00", "9999-12-31T00:00:00"])))
            elif kind == "no_end":
                block = block.replace(f"EndTime={end:%Y-%m-%dT%H:%M:%S}", "EndTime=Unknown")
            elif kind == "backwards":  # ends before it starts: stored and missing from the report before
                block = block.replace(f"EndTime={end:%Y-%m-%dT%H:%M:%S}",
                                      f"EndTime={start - timedelta(hours=draw(st.integers(1, 500))):%Y-%m-%dT%H:%M:%S}")
            elif kind == "nodes":
                block = block.replace(f"Nodes={nodes}", "Nodes=" + draw(st.sampled_from(["gpu-[001-", "x[[1]]", "n[0-99999999999999999999]"])))
            elif kind == "no_name":
                block = block.replace(f"ReservationName={name} ", "")
            blocks.append(_bad_bytes(draw, block) if kind == "utf8" else block.encode())
            n_bad += 1
            FIGURES[f"reservations bad kind {kind}"] += 1
            continue
        blocks.append(block.encode())
        want[name] = (start, end, [f"gpu-{k:03d}" for k in range(lo, lo + n)],
                      [] if accounts == "(null)" else accounts.lower().split(","))
    if draw(st.integers(0, 10)) == 0 and not blocks:
        blocks.append(b"No reservations in the system")
    return b"\n".join(blocks), want, n_bad


@settings(max_examples=100, **FUZZ)
@given(case=reservations_case())
def test_scontrol_reservations_fuzz(case, tmp_path):
    data, want, n_bad = case
    p = tmp_path / "resv.txt"
    p.write_bytes(data)
    df = _outcome(lambda: read_reservations(p, "fz"), p, n_bad, "scontrol reservations")
    if df is not None:
        got = {r["name"]: (r["start_ts"], r["end_ts"], r["nodes"], r["accounts"]) for r in df.to_dicts()}
        assert got == want
        FIGURES["scontrol reservations: good records loaded"] += len(got)


def test_capacity_garbage_files(tmp_path):
    """Whole files of the wrong kind, empty, binary: OpsError or nothing, never another exception."""
    for i, data in enumerate([b"", b"\n\n", b"\xff\xfe\x00N\x00o\x00d\x00e", b"NodeName=", b"node,gpus\n",
                              b"Cluster|NodeName|TimeStart\n", b"{" * 10_000, b"x" * 2_000_000,
                              b"NodeName=a CPUTot=" + b"9" * 5000, b"ReservationName=r StartTime=" + b"9" * 5000]):
        p = tmp_path / f"g{i}"
        p.write_bytes(data)
        for read in (read_inventory, read_events, read_reservations):
            try:
                read(p, "fz")
            except OpsError as e:
                assert "\n" not in str(e)
            FIGURES["capacity: garbage files x parsers"] += 1


def test_capacity_load_of_fuzzed_good_files(tmp_path):
    """Good generated files through load_capacity into the warehouse: every record there, twice loaded once."""
    w = open_warehouse(Config(dsn=f"chdb://{tmp_path / 'wh'}"))
    try:
        inv = tmp_path / "nodes.txt"
        inv.write_text("".join(_node_block(f"gpu-{i:03d}", 112, g, f"rack{i:02d}", "h100", "'; DROP TABLE x; --")
                               + "\n" for i, (g, _, _) in enumerate(GRES)))
        ev = tmp_path / "events.psv"
        ev.write_text("Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
                      "ai1|gpu-[000-006]|2026-10-02T01:00:00|Unknown|DOWN*|a|b|c|root(0)\n")
        rs = tmp_path / "resv.txt"
        rs.write_text("ReservationName=x'y StartTime=2026-10-10T00:00:00 EndTime=2026-10-11T00:00:00\n"
                      "   Nodes=gpu-[000-006] Accounts=A,b Users=(null) Flags=MAINT\n\nNo reservations here\n")
        for _ in range(2):
            got = load_capacity(w, inventory=inv, events=ev, reservations=rs, cluster="fz")
        assert got == {"node_inventory": len(GRES), "node_event": 7, "reservation": 1}
        assert w.query_rows("SELECT count(), sum(gpus) FROM node_inventory FINAL") == [
            (len(GRES), sum(n for _, n, _ in GRES))]
        assert w.query_rows("SELECT reason FROM node_event FINAL LIMIT 1") == [("a|b|c",)]
        assert w.query_rows("SELECT name, accounts FROM reservation FINAL") == [("x'y", ["a", "b"])]
    finally:
        close_embedded()


CORPUS = Path(__file__).parent / "fuzz_corpus"


@pytest.mark.parametrize("name,want", sorted(json.loads((CORPUS / "expected.json").read_text())["capacity"].items()))
def test_capacity_corpus(name, want):
    p = CORPUS / name
    read = {"inventory": read_inventory, "events": read_events, "reservations": read_reservations}[want["parser"]]
    if "error" in want:
        with pytest.raises(OpsError, match=re.escape(want["error"])):
            read(p, "fz")
    else:
        assert read(p, "fz").height == want["rows"]
    FIGURES["corpus: capacity files"] += 1
