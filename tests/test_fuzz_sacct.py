"""Hostile input for the Slurm accounting parsers (sacct text, sacct --json, normalize, hostlists, TRES,
durations), through the real entry point ``load_sacct`` into an embedded warehouse.

Every generated file is made of REAL records (Open XDMoD's phillips.log, Habrok's ☃-delimited --parsable
dump, a Slurm 22.05 cluster's --parsable2 output and --json, SARC's --json of four Slurm versions; see
tests/conftest.py and tests/data/README.md) at known positions among records made bad on purpose
(truncated, wrong delimiter, fields dropped, invalid UTF-8, absurd numbers and dates, garbage, huge lines)
and records changed in ways that must still load (delimiters, SQL and any Unicode in job names and
accounts, huge names). The test knows by construction which physical lines are bad and what every good one
must load as (the clean file's own row, with the changed name), and checks:

- nothing raises (an ``OpsError`` for a whole unreadable file is the only allowed exception);
- every bad line is in the quarantine exactly once, with a reason;
- every good line loads exactly once with the expected values (none lost, none duplicated);
- lines read = lines loaded + lines quarantined.

Generation is derandomized (the same cases every run). FIGURES counts what was tried; run with ``-s`` to
see them.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops_warehouse.errors import OpsError
from ops_warehouse.etl import sacct_json, sacct_text
from ops_warehouse.etl.normalize import QUARANTINE_SCHEMA, normalize
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.sacct_text import XDMOD_FIELDS, parse_fields
from tests.conftest import HB, HB_FIELDS, LIVE, SARC, SHREDDER, XDMOD
from tests.fuzz_support import empty, print_figures, scratch_warehouse

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

FUZZ = dict(deadline=None, derandomize=True, database=None, print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
CLUSTER = "fz"
FIGURES: Counter = Counter()

SQL = [
    "'; DROP TABLE slurm_job_run; --", "x' OR '1'='1", "\"; DELETE FROM etl_quarantine WHERE 1=1; --",
    "Robert'); DROP TABLE Students;--", "{s:String}", "{{local}}", "$(rm -rf /)", "%s%s%n", "\\N", "NULL",
    "`x`", "\\'", "1; SELECT * FROM system.users", "/* */ UNION SELECT 1", "a\\", "ab'cd\"ef",
]
# values each check of normalize must refuse, by field (no delimiter or newline in any)
ABSURD = {
    "jobid": ["abc", "12x", "99999999999999999999999", "7_99999999999999999999", "7+99999999999", "7_[5-1]",
              "7_[0-99999999999999999999]", "7_[0-9000000000000000000,0-9000000000000000000]", "-1",
              "１２３", "7_[]", "7+-1", "0x1F", "' OR 1=1 --"],
    "time": ["2016-13-45T99:99:99", "9999-12-31T23:59:59", "1969-07-20T20:17:40", "0000-00-00T00:00:00",
             "2016-12-22 07:15:12", "-2016-12-22T07:15:12", "2016-02-30T00:00:00", "now", "1482390912",
             "2016-12-22T07:15:12.5+05:00", "2201-01-02T00:00:00", "2150-01-01T00:00:00", "2106-02-07T06:28:16",
             "'; DROP TABLE x; --"],
    "count": ["-1", "99999999999", "abc", "1.5", "1e308", "NaN", "99999999999999999999999", "0x10"],
    "uid": ["-5", "4294967296", "root", "1e3", "99999999999999999999"],
    "exitcode": ["0:99999999999", "abc", "1:2:3", "99999999999:0", "0:x", ":", "2147483648:0"],
    "timelimit": ["-5", "1e30", "forever", "99999999999999-00:00:00", "12:xx", "NaN", "-1-00:00:00"],
    "elapsed": ["-1", "forever", "1e20", "99999-00:00:00", "inf", "NaN", "1:2:3:4"],
    "state": ["WEIRD", "COMPLETED';", "completed", "RUNNING|", "'; DROP TABLE slurm_job_run; --", "FAILED\x00"],
    "alloctres": ["cpu=1,gres/gpu=99999999999999999999,node=1", "gres/gpu=5000000000",
                  "gres/gpu:a100=4294967296,gres/gpu:h100=1", "gres/gpu:a=9000000000000000000,gres/gpu:b=9000000000000000000"],
    "nodelist": ["gpu[001-", "n[5-1]", "a[0-999]b[0-999]c[0-999]", "n[0-99999999999999999999]", "x[[1]]",
                 "n[1-2]]", "n[a-b]", "n[0-100001]"],
}
FIELD_KIND = {
    "jobid": "jobid", "submit": "time", "eligible": "time", "start": "time", "end": "time", "nnodes": "count",
    "ncpus": "count", "reqcpus": "uid", "uid": "uid", "exitcode": "exitcode", "timelimit": "timelimit",
    "timelimitraw": "timelimit", "elapsed": "elapsed", "elapsedraw": "elapsed", "state": "state",
    "alloctres": "alloctres", "nodelist": "nodelist",
}
INVALID_UTF8 = [b"\xff", b"\xfe", b"\xc3", b"\xe2\x98", b"\xed\xa0\x80", b"\xc0\x80", b"\x80", b"\xf8\x88\x80\x80\x80"]
COMPARE_SKIP = {"source", "source_line"}


# ---------------------------------------------------------------------------------------------- layouts
@dataclass
class Spec:
    name: str
    path: Path
    delimiter: str
    fields: list[str] | None  # None: the file has a header line
    header: str | None
    trailing: bool
    lines: list[str]  # record lines of the real file, as read
    names: list[str] = field(default_factory=list)  # field names in file order
    ref: dict[int, tuple[str, dict]] = field(default_factory=dict)  # record index -> (table, expected row)

    def split(self, line: str) -> list[str]:
        body = line[: -len(self.delimiter)] if self.trailing else line
        parts = body.split(self.delimiter)
        n, j = len(self.names), self.names.index("jobname")
        surplus = len(parts) - n  # names holding the delimiter fold back into JobName, as the reader does
        return parts[:j] + [self.delimiter.join(parts[j:j + surplus + 1])] + parts[j + surplus + 1:]

    def join(self, fields: list[str]) -> str:
        return self.delimiter.join(fields) + (self.delimiter if self.trailing else "")


def _rows(df: pl.DataFrame) -> dict[int, dict]:
    return {r["source_line"]: {k: v for k, v in r.items() if k not in COMPARE_SKIP} for r in df.iter_rows(named=True)}


@cache
def spec(name: str) -> Spec:
    if name == "xdmod":
        s = Spec(name, XDMOD / "phillips.log", "|", parse_fields(XDMOD_FIELDS), None, False, [])
        # the shredder's multibyte names join the pool
        text = (XDMOD / "phillips.log").read_text("utf-8") + (SHREDDER / "utf8-multibyte-chars.log").read_text("utf-8")
    elif name == "habrok":
        s = Spec(name, HB, "☃", parse_fields(HB_FIELDS), None, True, [])
        text = HB.read_text("utf-8")
    else:
        s = Spec(name, LIVE / "sacct.psv", "|", None, None, False, [])
        text = (LIVE / "sacct.psv").read_text("utf-8")
        s.header, text = text.split("\n", 1)
    s.lines = [ln for ln in text.split("\n") if ln.strip()]
    s.names = s.fields or [h.lower() for h in s.header.split("|")]
    # what each clean record loads as, on its own line number (its index + the header)
    clean = Path(tempfile.mkdtemp(prefix="ops-fuzz-")) / f"clean-{name}.txt"
    clean.write_text("\n".join(([s.header] if s.header else []) + s.lines) + "\n", "utf-8")
    runs, steps, q = _parse(clean, s)
    assert q.height == 0
    off = 2 if s.header else 1
    for table, df in (("run", runs), ("step", steps)):
        for line_no, row in _rows(df).items():
            assert line_no - off not in s.ref, "one row per clean record"
            s.ref[line_no - off] = (table, row)
    assert len(s.ref) == len(s.lines)
    return s


def _parse(path: Path, s: Spec, chunk_bytes: int = sacct_text.CHUNK_BYTES
           ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """read_text + normalize, the loader's parse without the warehouse: (runs, steps, quarantine)."""
    rs, ss, qs = [], [], []
    for records, bad, raw in sacct_text.read_text(path, s.delimiter, s.fields, chunk_bytes=chunk_bytes):
        runs, steps, q = normalize(records, tz="UTC", cluster=CLUSTER, source="fuzz", raw=raw)
        rs.append(runs)
        ss.append(steps)
        qs += [bad.cast(QUARANTINE_SCHEMA), q]
    if not rs:
        return pl.DataFrame(), pl.DataFrame(), pl.DataFrame(schema=QUARANTINE_SCHEMA)
    return pl.concat(rs), pl.concat(ss), pl.concat(qs)


# ------------------------------------------------------------------------------------------- generation
@dataclass
class Case:
    lines: list[bytes]  # physical lines after the header
    tags: list[tuple]  # per line: ("good", record index, overrides) | ("bad", kind) | ("blank",)
    header: bytes | None
    crlf: bool

    def __repr__(self) -> str:  # failing cases print short: huge lines cut
        cut = [ln if len(ln) < 300 else ln[:150] + b"...(%d bytes)..." % len(ln) + ln[-50:] for ln in self.lines]
        return f"Case(lines={cut!r}, tags={self.tags!r}, header={self.header!r}, crlf={self.crlf})"

    def data(self) -> bytes:
        eol = b"\r\n" if self.crlf else b"\n"
        head = [self.header] if self.header is not None else []
        return eol.join(head + self.lines) + eol

    def first_line_no(self) -> int:
        return 2 if self.header is not None else 1


def _blank(b: bytes) -> bool:
    try:
        return not b.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


names_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=40)
garbage_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), min_size=1,
                       max_size=120).filter(lambda t: any(c.isascii() and c.isalnum() for c in t))


@st.composite
def sacct_case(draw, s: Spec, same_counts: bool = False):
    """A file of real records, some made bad, some changed but still good, in random order.

    ``same_counts``: only changes that keep every line's field count (absurd values, names without the
    delimiter), so a one-byte-delimiter file takes the multi-threaded read."""
    d, n, j = s.delimiter, len(s.names), s.names.index("jobname")
    items: list[list[tuple[bytes, tuple]]] = []
    picks = draw(st.lists(st.integers(0, len(s.lines) - 1), min_size=1, max_size=14, unique=True))
    for i in picks:
        fields = s.split(s.lines[i])
        table, _ = s.ref[i]
        kinds = ["none", "sql", "unicode"] if same_counts else [
            "none", "none", "sql", "unicode", "delimiter", "huge", "newline"]
        kind = draw(st.sampled_from(kinds))
        over: dict[str, str] = {}
        name_col = "job_name" if table == "run" else "step_name"
        if kind == "sql":
            col = draw(st.sampled_from([c for c in ("jobname", "account", "user") if c in s.names]))
            value = draw(st.sampled_from([v for v in SQL if d not in v or col == "jobname"]))
            fields[s.names.index(col)] = value
            if col == "jobname" or table == "run":
                over[{"jobname": name_col, "account": "account", "user": "user"}[col]] = value
        elif kind in ("unicode", "delimiter"):
            name = draw(names_text)
            if kind == "delimiter":
                name = d.join([name[:5], name[5:], ""] if draw(st.booleans()) else [d, name, d * 2])
            elif same_counts:
                name = name.replace(d, "").replace("\x00", "")
            fields[j] = name
            over[name_col] = name
        elif kind == "huge":
            fields[j] = "N" * draw(st.integers(100_000, 2_000_000))
            over[name_col] = fields[j]
        elif kind == "newline":
            a = draw(st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True))
            b = draw(st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True))
            head = s.join(fields[:j] + [a]) if j == n - 1 else d.join(fields[:j] + [a])
            tail = d.join([b] + fields[j + 1:]) + (d if s.trailing and j < n - 1 else "")
            # JobName last (Open XDMoD's order): the head is a whole record with the name cut at the newline;
            # elsewhere both halves have too few fields
            head_tag = ("good", i, {name_col: a}) if j == n - 1 else ("bad", "newline-head")
            items.append([(head.encode(), head_tag), (tail.encode(), ("bad", "newline-tail"))])
            continue
        items.append([(s.join(fields).encode(), ("good", i, over))])
    for _ in range(draw(st.integers(0 if same_counts else 1, 30))):
        i = draw(st.integers(0, len(s.lines) - 1))
        line, fields = s.lines[i], s.split(s.lines[i])
        kind = draw(st.sampled_from(["absurd"] if same_counts else [
            "truncate", "wrong_delimiter", "drop_fields", "invalid_utf8", "absurd", "absurd", "absurd",
            "garbage", "binary", "huge", "delimiters_only", "sql_line"]))
        if kind == "truncate":
            cuts = [m.start() for m in re.finditer(re.escape(d), line)]
            limit = cuts[n - 2] if len(cuts) >= n - 1 else len(line)
            raw = line[: draw(st.integers(0, max(0, limit - 1)))].encode()
        elif kind == "wrong_delimiter":
            raw = line.replace(d, draw(st.sampled_from([",", ";", "\t", ":", " ", "☃" if d == "|" else "|"]))).encode()
        elif kind == "drop_fields":
            drop = set(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n - 1, unique=True)))
            raw = s.join([f for k, f in enumerate(fields) if k not in drop]).encode()
        elif kind == "invalid_utf8":
            b = line.encode()
            at = draw(st.integers(0, len(b)))
            raw = b[:at] + draw(st.sampled_from(INVALID_UTF8)) + b[at:]
            try:
                raw.decode("utf-8")
                raw = raw + b"\xff"
            except UnicodeDecodeError:
                pass
        elif kind == "absurd":
            checked = [k for k, c in enumerate(s.names) if c in FIELD_KIND
                       and not (c == "state" and "." in fields[s.names.index("jobid")])]  # steps: any state
            k = draw(st.sampled_from(checked))
            fields[k] = draw(st.sampled_from(ABSURD[FIELD_KIND[s.names[k]]]))
            if s.names[k] == "jobid" and "jobidraw" in s.names:
                fields[s.names.index("jobidraw")] = fields[k] if draw(st.booleans()) else fields[s.names.index("jobidraw")]
            raw = s.join(fields).encode()
        elif kind == "garbage":
            raw = draw(garbage_text).replace(d, "").encode() or b"x"
        elif kind == "binary":
            raw = draw(st.binary(min_size=1, max_size=200)).replace(b"\n", b"").replace(b"\r", b"")
            raw = raw.replace(d.encode(), b"") + b"\xff"
        elif kind == "huge":
            raw = draw(st.sampled_from(["x", "'", "\x00", "é"])).encode() * draw(st.integers(100_000, 3_000_000))
        elif kind == "delimiters_only":
            raw = (d * draw(st.integers(1, 200_000))).encode()
        else:
            raw = draw(st.sampled_from(SQL)).replace(d, "").encode() + b";"
        items.append([(raw, ("bad", kind))])
    for _ in range(draw(st.integers(0, 2))):
        items.append([(draw(st.sampled_from([b"", b"   ", b"\t"])), ("blank",))])
    order = draw(st.permutations(range(len(items))))
    lines, tags, seen = [], [], set()
    for k in order:
        for raw, tag in items[k]:
            if tag[0] == "bad" and (raw in seen or _blank(raw)):
                continue  # the quarantine keeps one row per (source, line text, reason)
            seen.add(raw)
            lines.append(raw)
            tags.append(tag)
    crlf = draw(st.booleans()) and not same_counts
    return Case(lines, tags, s.header.encode() if s.header else None, crlf)


def _expected(s: Spec, case: Case) -> tuple[dict[int, tuple[str, dict]], set[int], int]:
    """(line number -> (table, row) of good lines, line numbers of bad lines, non-blank lines read)."""
    good, bad, read = {}, set(), 0
    first = case.first_line_no()
    for k, tag in enumerate(case.tags):
        line_no = first + k
        if tag[0] == "blank":
            continue
        read += 1
        if tag[0] == "bad":
            bad.add(line_no)
        else:
            table, row = s.ref[tag[1]]
            good[line_no] = (table, {**row, **tag[2]})
    return good, bad, read


def _without_orphans(good: dict[int, tuple[str, dict]], bad: set[int]) -> tuple[dict, set[int]]:
    """What load_sacct makes of the lines: steps load with their job only (etl/sacct_contract.py), so a
    good step line with no good line of its job (same cluster and JobID) before it is quarantined."""
    jobs, out, bad = set(), {}, set(bad)
    for line_no in sorted(good):
        table, row = good[line_no]
        key = (row["cluster"], row["job_id"])
        if table == "run":
            jobs.add(key)
        elif key not in jobs:
            bad.add(line_no)
            continue
        out[line_no] = (table, row)
    return out, bad


def _count(case: Case, good: dict, bad: set, layout: str) -> None:
    FIGURES[f"sacct-text {layout}: files"] += 1
    FIGURES[f"sacct-text {layout}: good records"] += len(good)
    FIGURES[f"sacct-text {layout}: bad records"] += len(bad)
    for tag in case.tags:
        if tag[0] == "bad":
            FIGURES[f"sacct-text bad kind {tag[1]}"] += 1


def _check_parsed(s: Spec, case: Case, path: Path, chunk_bytes: int) -> None:
    good, bad, read = _expected(s, case)
    runs, steps, q = _parse(path, s, chunk_bytes)
    got_rows: dict[int, list[tuple[str, dict]]] = {}
    for table, df in (("run", runs), ("step", steps)):
        if df.height:
            for r in df.iter_rows(named=True):
                got_rows.setdefault(r["source_line"], []).append(
                    (table, {k: v for k, v in r.items() if k not in COMPARE_SKIP}))
    q_lines = q.get_column("line_no").to_list()
    assert sorted(q_lines) == sorted(bad), "every bad line quarantined once, no good line quarantined"
    assert all(q.get_column("reason").str.len_chars() > 0)
    assert set(got_rows) == set(good), "no good line lost"
    for line_no, rows_ in got_rows.items():
        assert len(rows_) == 1, f"line {line_no} loaded {len(rows_)} times"
        assert rows_[0] == good[line_no], f"line {line_no} loaded with other values"
    assert runs.height + steps.height + q.height == read
    FIGURES["sacct-text: quarantined"] += q.height
    FIGURES["sacct-text: loaded"] += runs.height + steps.height


def _compare_value(v):
    if isinstance(v, datetime):
        return (v.astimezone(timezone.utc) if v.tzinfo else v.replace(tzinfo=timezone.utc)).replace(microsecond=0)
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def _check_loaded(wh, s_ref: dict[int, tuple[str, dict]], bad: set[int], read: int, r, source: str) -> None:
    """The warehouse holds exactly the good records (expected values) and the bad lines, for ``source``."""
    assert r.records_read == read and r.quarantined == len(bad)
    assert r.jobs_loaded + r.steps_loaded == len(s_ref)
    q = wh.query_rows("SELECT line_no, reason, raw FROM etl_quarantine FINAL WHERE source = {s:String}", {"s": source})
    assert sorted(x[0] for x in q) == sorted(bad)
    assert all(x[1] for x in q)
    got: dict[int, list] = {}
    for table, want_table in (("slurm_job_run", "run"), ("slurm_job_step", "step")):
        res = wh.client.query(f"SELECT * FROM {table} FINAL WHERE source = {{s:String}}", parameters={"s": source})
        for row in res.result_rows:
            d = dict(zip(res.column_names, row))
            got.setdefault(d["source_line"], []).append((want_table, d))
    assert set(got) == set(s_ref), "no good record lost"
    for line_no, rows_ in got.items():
        assert len(rows_) == 1, f"line {line_no} loaded {len(rows_)} times"
        table, d = rows_[0]
        want_table, want = s_ref[line_no]
        assert table == want_table
        diff = {k: (d[k], v) for k, v in want.items() if _compare_value(d[k]) != _compare_value(v)}
        assert not diff, f"line {line_no}: {diff}"


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def fwh(tmp_path_factory):
    yield from scratch_warehouse(tmp_path_factory, "fuzzwh")


@pytest.fixture(scope="module", autouse=True)
def figures():
    yield from print_figures("sacct", FIGURES)


def _fresh(w) -> None:
    empty(w, ("slurm_job_run", "slurm_job_step", "etl_quarantine"))


LAYOUTS = ["xdmod", "habrok", "live"]


# ------------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sacct_text_parse_fuzz(layout, tmp_path, monkeypatch):
    """Many files, parsed and normalized as the loader does (no warehouse: fast)."""
    s = spec(layout)
    path = tmp_path / "f.txt"
    fast = Counter()
    real_fast = sacct_text.split_block_fast

    def counting(block, first, lay):
        out = real_fast(block, first, lay)
        fast[out is not None] += 1
        return out

    monkeypatch.setattr(sacct_text, "split_block_fast", counting)

    @settings(max_examples=50, **FUZZ)
    @given(case=st.one_of(sacct_case(s), sacct_case(s, same_counts=True)),
           chunk_bytes=st.sampled_from([sacct_text.CHUNK_BYTES, 1 << 20, 1 << 14]))
    def run(case, chunk_bytes):
        """chunk_bytes: small reads put chunk boundaries inside the file (line numbers must carry over)."""
        path.write_bytes(case.data())
        good, bad, _ = _expected(s, case)
        _count(case, good, bad, layout)
        _check_parsed(s, case, path, chunk_bytes)

    run()
    FIGURES[f"sacct-text {layout}: blocks read by the multi-threaded path"] += fast[True]
    if layout != "habrok":  # the snowman is not one byte: always the line path
        assert fast[True] > 5, "the count-keeping cases should take the multi-threaded read"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sacct_text_load_fuzz(layout, fwh):
    """Fewer files, through load_sacct into the warehouse: quarantine table and loaded values."""
    w, d = fwh
    s = spec(layout)
    path = d / f"{layout}.txt"

    @settings(max_examples=12, **FUZZ)
    @given(case=sacct_case(s))
    def run(case):
        _fresh(w)
        path.write_bytes(case.data())
        good, bad, read = _expected(s, case)
        good, bad = _without_orphans(good, bad)
        _count(case, good, bad, layout + " (warehouse)")
        r = load_sacct(w, path, delimiter=s.delimiter, fields=s.fields, tz="UTC", cluster=CLUSTER, source="fuzz")
        _check_loaded(w, good, bad, read, r, "fuzz")

    run()


# ----------------------------------------------------------------------------------------------- sacct --json
@cache
def json_pool() -> list[tuple[dict, int]]:
    """(job, number of steps) of every real --json job: a 22.05 cluster's and SARC's four Slurm versions."""
    jobs = [j for j in json.loads((LIVE / "sacct.json").read_text())["jobs"]]
    for f in sorted(SARC.glob("*.json")):
        jobs += json.loads(f.read_text())["jobs"]
    return [(j, len(j.get("steps") or [])) for j in jobs]


@cache
def json_ref(i: int) -> list[dict]:
    """The rows job i of the pool loads as on its own (run first, then steps)."""
    job, _ = json_pool()[i]
    records, bad = sacct_json.read_json(json.dumps({"jobs": [job]}))
    runs, steps, q = normalize(records, tz="UTC", cluster=CLUSTER, source="ref")
    assert bad.height == 0 and q.height == 0
    return [{k: v for k, v in r.items() if k not in COMPARE_SKIP} for df in (runs, steps) for r in df.iter_rows(named=True)]


def _set(path: list, value):
    def f(job):
        job = copy.deepcopy(job)
        if not path:
            return value
        o = job
        for k in path[:-1]:
            o = o.setdefault(k, {}) if isinstance(o.get(k), dict) or k not in o else o[k]
        o[path[-1]] = value
        return job
    return f


# each makes the whole job unreadable: neither it nor its steps may load
BAD_JOB = [
    _set([], 5), _set([], None), _set([], []), _set([], "job"),
    _set(["job_id"], "abc"), _set(["job_id"], 1.5), _set(["job_id"], None), _set(["job_id"], True),
    _set(["job_id"], -1), _set(["job_id"], [1]), _set(["job_id"], float("nan")),
    _set(["time"], "yesterday"), _set(["time"], [1]),
    _set(["time", "submission"], 10**20), _set(["time", "submission"], -10**15), _set(["time", "submission"], "x"),
    _set(["time", "submission"], float("inf")), _set(["time", "submission"], [1]),
    _set(["time", "submission"], {"set": True, "number": "x"}),
    _set(["name"], {"a": 1}), _set(["name"], ["a"]), _set(["state", "current"], {"x": 1}),
    _set(["tres", "allocated"], "cpu=1"), _set(["steps"], "abc"), _set(["steps"], [1, 2]),
    _set(["array"], {"job_id": 5, "task_id": 10**30}),
    lambda job: _set(["het"], {"job_id": 5, "job_offset": "x"})(_set(["array"], {"job_id": 0})(job)),
    _set(["nodes"], ["a", "b"]), _set(["allocation_nodes"], {"x": 1}), _set(["reservation"], [1]),
    _set(["cluster"], {"name": "x"}), _set(["account"], ["a"]),
]
JSON_NAMES = st.one_of(st.sampled_from(SQL), names_text, st.just("line1\nline2"), st.just("tab\there"),
                       st.integers(100_000, 1_000_000).map(lambda k: "J" * k))


@st.composite
def json_case(draw):
    pool = json_pool()
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=10))
    jobs, expect = [], []  # expect per job: ("good", pool index, name) | ("bad",)
    used_keys = set()
    for i in picks:
        job, _ = pool[i]
        if draw(st.booleans()) or (job["job_id"], job.get("cluster")) in used_keys:
            jobs.append(draw(st.sampled_from(BAD_JOB))(job))
            expect.append(("bad",))
            continue
        used_keys.add((job["job_id"], job.get("cluster")))
        job = copy.deepcopy(job)
        name = None
        if draw(st.booleans()):
            name = draw(JSON_NAMES)
            job["name"] = name
        if draw(st.booleans()):
            job["account"] = draw(st.sampled_from([v for v in SQL]))
            expect.append(("good", i, name, job["account"]))
        else:
            expect.append(("good", i, name, None))
        jobs.append(job)
    return {"jobs": jobs, "meta": {"fuzz": True}}, expect


def _json_expected(expect) -> tuple[dict[int, list[dict]], set[int]]:
    good, bad = {}, set()
    for k, e in enumerate(expect, start=1):
        if e[0] == "bad":
            bad.add(k)
            continue
        rows_ = [dict(r) for r in json_ref(e[1])]
        if e[2] is not None:
            rows_[0]["job_name"] = e[2]
        if e[3] is not None:
            rows_[0]["account"] = e[3]
        good[k] = rows_
    return good, bad


@settings(max_examples=60, **FUZZ)
@given(case=json_case())
def test_sacct_json_parse_fuzz(case):
    doc, expect = case
    good, bad = _json_expected(expect)
    # escaped and raw UTF-8 text both
    records, q0 = sacct_json.read_json(json.dumps(doc, ensure_ascii=len(doc["jobs"]) % 2 == 0))
    runs, steps, q = normalize(records, tz="UTC", cluster=CLUSTER, source="fuzz")
    q = pl.concat([q0, q])
    got: dict[int, list[dict]] = {}
    for df in (runs, steps):
        for r in df.iter_rows(named=True):
            got.setdefault(r["source_line"], []).append({k: v for k, v in r.items() if k not in COMPARE_SKIP})
    assert set(got) == set(good), "no good job lost, no bad job loaded"
    for k, rows_ in got.items():
        assert rows_ == good[k]
    assert set(q.get_column("line_no").to_list()) == bad and all(q.get_column("reason").str.len_chars() > 0)
    FIGURES["sacct-json: documents"] += 1
    FIGURES["sacct-json: good jobs"] += len(good)
    FIGURES["sacct-json: good records (jobs + steps)"] += sum(map(len, good.values()))
    FIGURES["sacct-json: bad jobs"] += len(bad)


@settings(max_examples=10, **FUZZ)
@given(case=json_case())
def test_sacct_json_load_fuzz(case, fwh):
    w, d = fwh
    _fresh(w)
    doc, expect = case
    good, bad = _json_expected(expect)
    path = d / "f.json"
    path.write_text(json.dumps(doc), "utf-8")
    r = load_sacct(w, path, tz="UTC", cluster=CLUSTER, source="fuzzjson")
    assert r.jobs_loaded + r.steps_loaded == sum(map(len, good.values()))
    q = w.query_rows("SELECT DISTINCT line_no FROM etl_quarantine FINAL WHERE source = 'fuzzjson'")
    assert {x[0] for x in q} == bad
    n = w.query_rows("SELECT uniqExact(source_line) FROM slurm_job_run FINAL WHERE source = 'fuzzjson'")[0][0]
    assert n == len(good)
    names = dict(w.query_rows("SELECT source_line, job_name FROM slurm_job_run FINAL WHERE source = 'fuzzjson'"))
    assert names == {k: rows_[0]["job_name"] for k, rows_ in good.items()}
    FIGURES["sacct-json (warehouse): documents"] += 1


WHOLE_DOCS = {
    "truncated": lambda t: t[: len(t) // 2],
    "not json": lambda t: "jobs: []",
    "empty": lambda t: "",
    "jobs is an object": lambda t: '{"jobs": {}}',
    "jobs is null": lambda t: '{"jobs": null}',
    "no jobs (slurmrestd error reply)": lambda t: '{"meta": {}, "errors": [{"error": "x"}]}',
    "top-level list": lambda t: "[" + t + "]",
    "nested 100000 deep": lambda t: '{"jobs": [' + "[" * 100_000 + "]" * 100_000 + "]}",
    "5000-digit number": lambda t: '{"jobs": [{"job_id": ' + "9" * 5000 + "}]}",
    "NaN job id": lambda t: '{"jobs": [{"job_id": NaN}]}',
    "invalid UTF-8": lambda t: t.encode().replace(b'"name"', b'"n\xffame"', 1),
    "UTF-16": lambda t: t.encode("utf-16"),
    "trailing garbage": lambda t: t + "\n{garbage",
}


@pytest.mark.parametrize("what", list(WHOLE_DOCS))
def test_sacct_json_whole_document_broken(what, fwh):
    """A broken or wrong-version document: one quarantine row naming why, or an OpsError; never a crash."""
    w, d = fwh
    text = (LIVE / "sacct.json").read_text("utf-8")
    data = WHOLE_DOCS[what](text)
    path = d / "doc.json"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    try:
        r = load_sacct(w, path, fmt="json", tz="UTC", cluster=CLUSTER, source=f"doc:{what}")
    except OpsError as e:
        assert "\n" not in str(e)
        return
    assert r.jobs_loaded + r.steps_loaded == 0 and r.quarantined >= 1
    reasons = w.query_rows("SELECT reason FROM etl_quarantine FINAL WHERE source = {s:String}", {"s": f"doc:{what}"})
    assert reasons and all(x[0] for x in reasons)
    FIGURES["sacct-json: whole broken documents"] += 1


# ------------------------------------------------------------------------------------------------ corpus
CORPUS = Path(__file__).parent / "fuzz_corpus"


def corpus_cases():
    return sorted(json.loads((CORPUS / "expected.json").read_text())["sacct"].items())


@pytest.mark.parametrize("name,want", corpus_cases())
def test_sacct_corpus(name, want, fwh):
    """Hand-written nasty files (tests/fuzz_corpus/expected.json says what each must give)."""
    w, _ = fwh
    path = CORPUS / name
    fields = {"xdmod": parse_fields(XDMOD_FIELDS), "habrok": parse_fields(HB_FIELDS), None: None}[want.get("fields")]
    kw = dict(fmt=want.get("format", "auto"), delimiter=want.get("delimiter", "|"), fields=fields, tz="UTC",
              cluster=CLUSTER, source=f"corpus:{name}")
    if "error" in want:
        with pytest.raises(OpsError, match=want["error"]):
            load_sacct(w, path, **kw)
        return
    r = load_sacct(w, path, **kw)
    got = {"read": r.records_read, "loaded": r.loaded, "quarantined": r.quarantined}
    assert got == {k: want[k] for k in got}, name
    if "jobs" in want:
        loaded = w.query_rows("SELECT job_id, job_name FROM slurm_job_run FINAL WHERE source = {s:String} "
                              "ORDER BY source_line", {"s": f"corpus:{name}"})
        assert [list(x) for x in loaded] == want["jobs"]
    if "reasons" in want:
        reasons = w.query_rows("SELECT line_no, reason FROM etl_quarantine FINAL WHERE source = {s:String} "
                               "ORDER BY line_no", {"s": f"corpus:{name}"})
        assert [list(x) for x in reasons] == want["reasons"]
    FIGURES["corpus: sacct files"] += 1


# ---------------------------------------------------------------------------------------------------- CLI
def test_cli_on_corrupt_files(tmp_path):
    """ops-report etl sacct end to end: corrupt files load with quarantine or fail with one line, never a
    traceback."""
    from tests.cli_runner import cli

    dsn = f"chdb://{tmp_path / 'wh'}"
    live = (LIVE / "sacct.psv").read_bytes()
    header, body = live.split(b"\n", 1)
    nonutf8 = tmp_path / "nonutf8.psv"
    nonutf8.write_bytes(header + b"\n" + body.replace(b"ok_gpu2", b"ok\xff\xfegpu2", 1))
    empty = tmp_path / "empty.psv"
    empty.write_bytes(b"")
    huge = tmp_path / "huge.psv"
    huge.write_bytes(live + b"x" * (8 << 20) + b"\n" + b"|" * 300_000 + b"\n")  # 8 MB (chunk boundaries: test_sacct_text_parse_fuzz)
    p = cli("--warehouse", dsn, "etl", "sacct", str(nonutf8), str(empty), str(huge), check=False)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    # job 1's line is the bad one: its step 1.batch does not load without it (etl/sacct_contract.py)
    assert re.search(r"nonutf8.psv: read 31, loaded 29 .*quarantined 2", p.stdout)
    assert "quarantined 1: invalid UTF-8" in p.stdout and "quarantined 1: step of a job not loaded" in p.stdout
    assert re.search(r"empty.psv: read 0, loaded 0 .*quarantined 0", p.stdout)
    assert re.search(r"huge.psv: read 33, loaded 31 .*quarantined 2", p.stdout)
    garbage = tmp_path / "garbage.psv"
    garbage.write_bytes(b"\xff\xfe\x00J\x00o\x00b\x00I\x00D\x00\n\x001\x00")
    q = cli("--warehouse", dsn, "etl", "sacct", str(garbage), check=False)
    assert q.returncode == 2 and "Traceback" not in q.stderr
    assert q.stderr.strip().count("\n") == 0 and "no sacct header line" in q.stderr
    FIGURES["cli: corrupt files"] += 4
