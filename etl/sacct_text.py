"""sacct text output -> rows of named string fields, streamed in chunks.

Handles ``--parsable2`` and ``--parsable`` (trailing delimiter), any ``--delimiter`` (``|``, ``☃``), a
header line or a ``--fields`` list for headerless dumps (Open XDMoD's shredder format), job names that
contain the delimiter (the surplus is folded back into JobName), invalid UTF-8 and short lines
(quarantined with their line number and reason). The field list is checked against the input contract
(etl/sacct_contract.py) before any row is read.
"""

from __future__ import annotations

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
CHUNK_BYTES = 32 << 20


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


def iter_blocks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """(first line number, bytes of whole lines) blocks of a file."""
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
              chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[pl.DataFrame, pl.DataFrame, pl.Expr]]:
    """Stream (records, quarantine, raw) per chunk from a sacct text file.

    Records carry ``line_no`` and one column per field; ``raw`` is the expression giving a record's input
    line, evaluated only for records that end in the quarantine."""
    layout = None
    for first_no, block in iter_blocks(path, chunk_bytes):
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
        fast = split_block_fast(block, start, layout)
        if fast is not None:
            yield fast, pl.DataFrame(schema={"line_no": pl.UInt64, "reason": pl.String, "raw": pl.String}), \
                raw_line(layout)
            continue
        lines, bad_utf8 = decode_lines(block, start)
        records, bad = split_lines(lines, start, layout)
        if bad_utf8:
            bad = pl.concat([bad, pl.DataFrame(bad_utf8, schema=bad.schema, orient="row")])
        yield records, bad, pl.col("raw")
