"""sacct text output -> rows of named string fields, streamed in chunks.

Handles ``--parsable2`` and ``--parsable`` (trailing delimiter), any ``--delimiter`` (``|``, ``☃``), a
header line or a ``--fields`` list for headerless dumps (Open XDMoD's shredder format), job names that
contain the delimiter (the surplus is folded back into JobName), invalid UTF-8 and short lines
(quarantined with their line number and reason). The field list is checked against the input contract
(etl/sacct_contract.py) before any row is read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl import sacct_contract
from ops_warehouse.etl.frames import fmt
from ops_warehouse.etl.sacct_contract import SACCT_FORMAT

# The field list Open XDMoD runs sacct with (and the shared fixtures were written with).
XDMOD_FIELDS = (
    "jobid,jobidraw,cluster,partition,qos,account,group,gid,user,uid,submit,eligible,start,end,elapsed,"
    "exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqtres,alloctres,timelimit,nodelist,jobname"
)
KNOWN_FIELDS = set(XDMOD_FIELDS.split(",")) | set(SACCT_FORMAT.split(",")) | {"ntasks"}
# sacct fields that are another name for one the loader reads: AllocCPUS is NCPUS (sacct's own words);
# AllocNodes is NNodes for a job that ran (NNodes of a pending job is the count it asked for)
ALIASES = {"alloccpus": "ncpus", "allocnodes": "nnodes"}
# 16 MiB of text a chunk: the load's peak RSS is about the engine's own plus four chunks' worth (the block read
# ahead, its frames in normalize, the last chunk's frames being inserted); 32 MiB peaked 1,076 MB at 1 M jobs,
# 16 MiB 868 MB, as fast within the noise (docs/benchmarks.md, issue 50)
CHUNK_BYTES = 16 << 20


@dataclass
class Layout:
    fields: list[str]  # canonical lower-case names, in file order
    delimiter: str
    trailing: bool  # --parsable: every line ends with the delimiter
    header_lines: int


def parse_fields(spec: str) -> list[str]:
    fields = [f.strip().lower() for f in spec.split(",") if f.strip()]
    if not fields:
        raise OpsError("--fields is empty")
    return fields


def _column_names(fields: list[str]) -> list[str]:
    """Field names as frame columns: an empty name, a repeated one or one of the reader's own columns
    (line_no, raw, _...) becomes an ignored ``_fieldN``. Such headers made the frame builder raise a
    DuplicateError; found by tests/test_fuzz_sacct.py. (sacct prints a field asked for twice twice, with the
    same value, so the first is kept.)"""
    out: list[str] = []
    for i, f in enumerate(fields):
        if f in ALIASES and ALIASES[f] not in fields:
            f = ALIASES[f]
        out.append(f"_field{i}" if not f or f in out or f in ("line_no", "raw") or f.startswith("_") else f)
    return out


def detect_layout(first_line: str, delimiter: str, fields: list[str] | None,
                  sample: list[str] | None = None) -> Layout:
    """The layout from the header line, or for a headerless dump (``fields``) from its first lines:
    ``sample`` (default the first line alone)."""
    if not delimiter or "\n" in delimiter or "\r" in delimiter:
        raise OpsError(f"--delimiter must be one or more characters other than a line break, not {delimiter!r}")
    first_line = first_line.removeprefix("\ufeff")  # a byte order mark (a file saved by a Windows editor)
    if fields is None:
        head = [h.strip().lower() for h in first_line.rstrip("\r\n").split(delimiter)]
        trailing = len(head) > 1 and head[-1] == ""
        if trailing:
            head = head[:-1]
        if "jobid" not in head and "jobidraw" not in head:
            raise OpsError(
                f"no sacct header line (first line has no JobID field with delimiter {delimiter!r}); "
                "for headerless dumps pass --fields (e.g. --fields xdmod)"
            )
        return Layout(_column_names(head), delimiter, trailing, 1)
    # --parsable (a trailing delimiter) or not: what most of the first lines say. The first line alone
    # decided before, and one bad first line made every record of a --parsable dump fold wrongly into the
    # quarantine (tests/test_fuzz_sacct.py).
    votes = Counter()
    for line in (sample or [first_line])[:1000]:
        line = line.rstrip("\r\n")
        n = len(line.split(delimiter))
        if n == len(fields) + 1 and line.endswith(delimiter):
            votes[True] += 1
        elif n == len(fields) and not line.endswith(delimiter):  # else maybe --parsable, a field short
            votes[False] += 1
    return Layout(_column_names(fields), delimiter, votes[True] > votes[False], 0)


def decode_lines(block: bytes, first_line_no: int) -> tuple[list[str], list[tuple[int, str, str]]]:
    """Lines of a block; invalid UTF-8 lines come back separately (rare, so a Python pass is fine there)."""
    try:
        return block.decode("utf-8").split("\n"), []
    except UnicodeDecodeError:
        good, bad = [], []
        for i, raw in enumerate(block.split(b"\n")):
            try:
                good.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                good.append("")  # keeps numbering; the line is reported as bad below
                # backslashreplace keeps the bytes (b"\x80" -> "\\x80"): two different bad lines stay different
                bad.append((first_line_no + i, "invalid UTF-8", raw.decode("utf-8", "backslashreplace")))
        return good, bad


def iter_blocks(path: Path, chunk_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(first line number, bytes of whole lines) blocks of a file, of about ``chunk_bytes`` (CHUNK_BYTES)."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    line_no = 1
    with open(path, "rb") as f:
        # pieces of a line longer than a chunk wait in a list and are joined once its end arrives: joining
        # at every read would copy a huge line again and again (quadratic in its length)
        waiting: list[bytes] = []
        while True:
            data = f.read(chunk_bytes)
            if not data:
                break
            cut = data.rfind(b"\n")
            if cut < 0:
                waiting.append(data)
                continue
            block = b"".join([*waiting, data[:cut]]) if waiting else data[:cut]
            waiting = [data[cut + 1 :]] if cut + 1 < len(data) else []
            yield line_no, block
            line_no += block.count(b"\n") + 1
        if waiting:
            yield line_no, b"".join(waiting)


def split_lines(lines: list[str], first_line_no: int, layout: Layout) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(records with one string column per field + line_no + raw, quarantine rows)."""
    d = layout.delimiter
    n = len(layout.fields)
    df = pl.DataFrame({"raw": lines}, schema={"raw": pl.String}).with_row_index("line_no", offset=first_line_no)
    df = df.with_columns(pl.col("line_no").cast(pl.UInt64), raw=pl.col("raw").str.strip_suffix("\r"))
    df = df.filter(pl.col("raw").str.strip_chars() != "")
    body = pl.col("raw")
    if layout.trailing:
        body = pl.when(body.str.ends_with(d)).then(body.str.slice(0, body.str.len_chars() - len(d))).otherwise(body)
    df = df.with_columns(_f=body.str.split(d)).with_columns(_n=pl.col("_f").list.len())
    surplus = pl.col("_n") - n
    can_fold = "jobname" in layout.fields
    ok = (pl.col("_n") == n) | ((pl.col("_n") > n) & pl.lit(can_fold))
    bad = df.filter(~ok).select(
        "line_no",
        reason=fmt("{} fields, expected {} (delimiter {})", pl.col("_n"), pl.lit(n), pl.lit(repr(d))),
        raw="raw",
    )
    good = df.filter(ok)
    cols = []
    j = layout.fields.index("jobname") if can_fold else n
    for i, name in enumerate(layout.fields):
        if i < j:
            cols.append(pl.col("_f").list.get(i).alias(name))
        elif i == j:
            cols.append(pl.col("_f").list.slice(i, surplus + 1).list.join(d).alias(name))
        else:
            cols.append(pl.col("_f").list.get(surplus + i).alias(name))
    records = good.select("line_no", "raw", *cols)
    return records, bad


def split_block_fast(block: bytes, first_line_no: int, layout: Layout) -> pl.DataFrame | None:
    """The common case in one multi-threaded pass: every line has exactly the expected field count, a
    one-byte delimiter, valid UTF-8, no CR. Returns None when any of that does not hold (the caller then
    takes the line-by-line path, which folds delimiters in job names and quarantines bad lines)."""
    d = layout.delimiter.encode()
    if len(d) != 1 or not block or b"\r" in block or b"\x00" in block:
        return None
    per_line = len(layout.fields) - 1 + (1 if layout.trailing else 0)
    n_lines = block.count(b"\n") + 1
    # read_csv refuses a line with too many fields; with the total exact, no line can then have too few
    if block.count(d) != n_lines * per_line:
        return None
    names = list(layout.fields) + (["_trailing"] if layout.trailing else [])
    try:
        df = pl.read_csv(block, separator=layout.delimiter, has_header=False, quote_char=None,
                         infer_schema=False, new_columns=names, encoding="utf8", raise_if_empty=False)
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError, UnicodeDecodeError):
        return None
    if df.height != n_lines:
        return None
    if layout.trailing:
        df = df.drop("_trailing")
    return df.with_row_index("line_no", offset=first_line_no).with_columns(pl.col("line_no").cast(pl.UInt64))


def raw_line(layout: Layout) -> pl.Expr:
    """The input line of a fast-path record, rebuilt from its fields (exact: the field count was exact)."""
    parts = [pl.col(f).fill_null("") for f in layout.fields]
    expr = pl.concat_str(parts, separator=layout.delimiter)
    return expr + layout.delimiter if layout.trailing else expr


def read_text(path: Path, delimiter: str = "|", fields: list[str] | None = None,
              chunk_bytes: int | None = None) -> Iterator[tuple[pl.DataFrame, pl.DataFrame, pl.Expr]]:
    """Stream (records, quarantine, raw) per chunk from a sacct text file.

    Records carry ``line_no`` and one column per field; ``raw`` is the expression giving a record's input
    line, evaluated only for records that end in the quarantine.

    A header line after the first (two sacct outputs concatenated) starts its own layout for the lines after
    it: read with the first one, a second field order loaded users as projects and Start as Submit (issue 27).
    A header identical to the layout in force changes nothing; neither is a record. A last line without its
    newline (a file cut while it was written or copied) is quarantined, ``truncated last line``: loaded, it
    replaced the whole record with a part of it (ElapsedRaw 45 for 4590, a job name cut short)."""
    layout = None
    cut_last = _ends_without_newline(path)
    for first_no, block, last in _with_last(iter_blocks(path, chunk_bytes)):
        start = first_no
        if layout is None:
            # skip leading blank lines, then read the header (or take --fields)
            while block[:1] in (b"\n",) or block[:2] == b"\r\n":
                cut = block.find(b"\n")
                block, start = block[cut + 1:], start + 1
            if not block.strip():
                continue
            block = block.removeprefix(b"\xef\xbb\xbf")  # a byte order mark
            cut = block.find(b"\n")
            first = (block if cut < 0 else block[:cut]).decode("utf-8", "replace")
            sample = [ln.decode("utf-8", "replace") for ln in block.split(b"\n", 1000)[:1000]] if fields else None
            layout = detect_layout(first, delimiter, fields, sample)
            # the input contract, on the field list before any row is read (etl/sacct_contract.py)
            sacct_contract.check_fields(layout.fields, f"{path} ({'--fields' if fields else 'header'})")
            if layout.header_lines:
                block, start = (b"" if cut < 0 else block[cut + 1:]), start + 1
                if not block:
                    continue
        truncated = None
        if last and cut_last:
            cut = block.rfind(b"\n")
            tail_no, tail = start + block.count(b"\n"), block[cut + 1:]
            block = block[:cut] if cut >= 0 else b""
            if tail.strip():
                truncated = pl.DataFrame({"line_no": [tail_no], "reason": ["truncated last line"],
                                          "raw": [tail.decode("utf-8", "backslashreplace").removesuffix("\r")]},
                                         schema=_BAD_SCHEMA)
        if block:
            read = _read_block(block, start, layout)
            heads = _header_lines(block, layout.delimiter) if _may_hold_a_header(read, layout) else []
            if not heads:
                yield read
            for seg_start, segment, seg_layout in _layouts(block, start, layout, path, heads) if heads else ():
                layout = seg_layout
                if segment:
                    yield _read_block(segment, seg_start, layout)
        if truncated is not None:
            names = ["line_no", "raw", *layout.fields]
            empty = pl.DataFrame(schema={n: pl.UInt64 if n == "line_no" else pl.String for n in names})
            yield empty, truncated, pl.col("raw")


_BAD_SCHEMA = {"line_no": pl.UInt64, "reason": pl.String, "raw": pl.String}


def _read_block(block: bytes, start: int, layout: Layout) -> tuple[pl.DataFrame, pl.DataFrame, pl.Expr]:
    fast = split_block_fast(block, start, layout)
    if fast is not None:
        return fast, pl.DataFrame(schema=_BAD_SCHEMA), raw_line(layout)
    lines, bad_utf8 = decode_lines(block, start)
    records, bad = split_lines(lines, start, layout)
    if bad_utf8:
        bad = pl.concat([bad, pl.DataFrame(bad_utf8, schema=bad.schema, orient="row")])
    return records, bad, pl.col("raw")


def _may_hold_a_header(read: tuple[pl.DataFrame, pl.DataFrame, pl.Expr], layout: Layout) -> bool:
    """Whether a block, as read, may hold a header line: a record whose JobID (or JobIDRaw) is not a number,
    or a line of another field count that says "jobid". Two vectorized looks at what was read, so that the
    byte search for header lines (_header_lines) runs only on the rare block that needs it."""
    records, bad, _ = read
    ids = [f for f in ("jobid", "jobidraw") if f in layout.fields]
    if ids and records.height and records.select(
            (~pl.col(ids[0]).fill_null("").str.contains(r"^\s*\d")).any()).item():
        return True
    return bool(bad.height) and bad.select(
        pl.col("raw").fill_null("").str.to_lowercase().str.contains("jobid", literal=True).any()).item()


def _ends_without_newline(path: Path) -> bool:
    """The file's last byte is not a newline (an empty file has no last line)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return False
        f.seek(-1, 2)
        return f.read(1) != b"\n"


def _with_last(blocks: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, bool]]:
    """(first line number, block, whether it is the file's last block)."""
    prev = None
    for item in blocks:
        if prev is not None:
            yield (*prev, False)
        prev = item
    if prev is not None:
        yield (*prev, True)


_NAME = re.compile(r"[a-z][a-z0-9_]*")
# a header line names at least two fields the loader knows: a line of words with one JobID among them (a
# hostile record, a lone "JobID") is a record, quarantined as one, not a layout that refuses the file
_HEADER_NAMES = KNOWN_FIELDS | set(ALIASES) | set(sacct_contract.NAMES)


def header_fields(line: bytes, delimiter: str) -> list[str] | None:
    """The field names of a sacct header line, or None when the line is not one: every field a name (letters,
    digits, ``_``; a trailing delimiter for --parsable), JobID or JobIDRaw and another field the loader knows
    among them. A record is never one: its JobID field holds a number (a record whose JobID is not one is
    quarantined for it anyway)."""
    try:
        text = line.decode("utf-8").removesuffix("\r").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return None
    names = [f.strip().lower() for f in text.split(delimiter)]
    if len(names) > 1 and names[-1] == "":
        names = names[:-1]
    if not ("jobid" in names or "jobidraw" in names) or not all(_NAME.fullmatch(f) for f in names) \
            or len(_HEADER_NAMES.intersection(names)) < 2:
        return None
    return names


def _header_lines(block: bytes, delimiter: str) -> list[tuple[int, int]]:
    """(start, end) byte offsets of the header lines in a block. Looked for where "jobid" stands as a whole
    field (a byte search, then a check of the few lines found), so a block of records costs one pass."""
    low = block.lower()
    d = delimiter.encode().lower()  # (bytes.lower: ASCII letters only, as the block's)
    found: list[tuple[int, int]] = []
    pos = low.find(b"jobid")
    while pos >= 0:
        s = low.rfind(b"\n", 0, pos) + 1
        e = low.find(b"\n", pos)
        e = len(low) if e < 0 else e
        after = pos + (8 if low.startswith(b"jobidraw", pos) else 5)
        whole = ((pos >= len(d) and low.startswith(d, pos - len(d)))
                 or not low[s:pos].replace(b"\xef\xbb\xbf", b"").strip()) and (
            low.startswith(d, after) or not low[after:e].strip())
        if not whole:  # "jobid" inside a value: look on along the line
            pos = low.find(b"jobid", pos + 5)
            continue
        if header_fields(block[s:e], delimiter) is not None:
            found.append((s, e))
        pos = low.find(b"jobid", e)
    return found


def _layouts(block: bytes, start: int, layout: Layout, path: Path, heads: list[tuple[int, int]]
             ) -> Iterator[tuple[int, bytes, Layout]]:
    """The block in pieces between its header lines ``heads``, each with the layout in force for it: (first
    line number, bytes, layout)."""
    at, line_no = 0, start
    for s, e in heads:
        yield line_no, block[at:max(at, s - 1)], layout
        line_no += block.count(b"\n", at, s)  # the header's own line number
        head = block[s:e].decode("utf-8").removesuffix("\r").removeprefix("\ufeff")
        new = detect_layout(head, layout.delimiter, None)
        if (new.fields, new.trailing) != (layout.fields, layout.trailing):
            sacct_contract.check_fields(new.fields, f"{path} (header at line {line_no})")
            layout = new
        at, line_no = e + 1, line_no + 1
    yield line_no, block[at:] if at <= len(block) else b"", layout
