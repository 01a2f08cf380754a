"""Slurm hostlist expressions -> node names, vectorized in polars.

``gpu[001-004,010]`` -> gpu001 … gpu004, gpu010; ``cpn-f13-03-[01-02],cpn-f13-04-[01-02]`` -> four nodes;
several brackets in one name (``r[1-2]n[01-02]``) expand as a product; zero padding follows the range's
first bound, as Slurm does. One bracket is expanded per pass over all rows, never a Python loop per row.
"""

from __future__ import annotations

import polars as pl

# Largest single range we expand; anything bigger is not a real node list.
MAX_RANGE = 100_000
# Most names one expression may stand for: brackets multiply (``a[0-999]b[0-999]c[0-999]`` is 10^9 names from
# 25 bytes, which exhausted memory before this bound; found by tests/test_fuzz_sacct.py). The largest
# machines have under 200k nodes.
MAX_NODES = 1_000_000

# no bracket outside a range: ``n[1-2]]`` expanded to n1], n2] (tests/test_fuzz_sacct.py)
_ITEM = r"[^,\[\]]*\[[^\]]*\][^,\[\]]*(?:\[[^\]]*\][^,\[\]]*)*|[^,\[\]]+"
_RANGE = r"^(\d+)(?:-(\d+))?$"


def expand(df: pl.DataFrame, column: str, index: str) -> pl.DataFrame:
    """For each ``index`` row, ``nodes`` (list of names, hostlist order) and ``hostlist_ok`` (bool)."""
    empty = pl.col(column).is_null() | pl.col(column).is_in(["", "None assigned", "(null)"])
    base = df.select(index, pl.col(column).alias("_hl"), empty.alias("_empty"))
    # Well-formed: items separated by commas at bracket depth 0, brackets closed.
    items = (
        base.filter(~pl.col("_empty"))
        .with_columns(_item=pl.col("_hl").str.extract_all(_ITEM))
        .with_columns(_joined=pl.col("_item").list.join(","))
    )
    bad_idx = items.filter(pl.col("_joined") != pl.col("_hl")).get_column(index)
    items = (
        items.filter(pl.col("_joined") == pl.col("_hl"))
        .select(index, "_item")
        .with_columns(_ord=pl.int_ranges(0, pl.col("_item").list.len()))
        .explode("_item", "_ord")
        .with_columns(_ord=pl.col("_ord").cast(pl.String).str.zfill(6))
    )
    done = []
    while items.height:
        has = pl.col("_item").str.contains(r"\[", literal=False)
        done.append(items.filter(~has))
        todo = items.filter(has)
        if not todo.height:
            break
        parts = (
            todo.with_columns(
                _pre=pl.col("_item").str.extract(r"^([^\[]*)\[", 1),
                _inner=pl.col("_item").str.extract(r"^[^\[]*\[([^\]]*)\]", 1),
                _post=pl.col("_item").str.extract(r"^[^\[]*\[[^\]]*\](.*)$", 1),
            )
            .with_columns(_r=pl.col("_inner").str.split(","))
            .with_columns(_rord=pl.int_ranges(0, pl.col("_r").list.len()))
            .explode("_r", "_rord")
            .with_columns(
                _lo_s=pl.col("_r").str.extract(_RANGE, 1),
                _hi_s=pl.coalesce(pl.col("_r").str.extract(_RANGE, 2), pl.col("_r").str.extract(_RANGE, 1)),
            )
            .with_columns(_lo=pl.col("_lo_s").cast(pl.Int64, strict=False), _hi=pl.col("_hi_s").cast(pl.Int64, strict=False))
        )
        broken = parts.filter(
            pl.col("_lo").is_null() | pl.col("_hi").is_null() | (pl.col("_hi") < pl.col("_lo"))
            | ((pl.col("_hi") - pl.col("_lo")) > MAX_RANGE)
        ).get_column(index)
        # names each expression would stand for after this pass (items already done, plus the new ones)
        n_new = parts.filter(~pl.col(index).is_in(broken.implode())).group_by(index).agg(
            _n=(pl.col("_hi") - pl.col("_lo") + 1).sum())
        n_done = pl.concat(done).group_by(index).agg(_d=pl.len()) if done else None
        if n_done is not None:
            n_new = n_new.join(n_done, on=index, how="left").with_columns(_n=pl.col("_n") + pl.col("_d").fill_null(0))
        broken = pl.concat([broken, n_new.filter(pl.col("_n") > MAX_NODES).get_column(index)])
        bad_idx = pl.concat([bad_idx, broken])
        parts = parts.filter(~pl.col(index).is_in(broken.implode()))
        expanded = (
            parts.with_columns(_n=pl.int_ranges(pl.col("_lo"), pl.col("_hi") + 1))
            .with_columns(_nord=pl.int_ranges(0, pl.col("_n").list.len()))
            .explode("_n", "_nord")
            .select(
                index,
                (pl.col("_pre") + pl.col("_n").cast(pl.String).str.zfill(pl.col("_lo_s").str.len_chars())
                 + pl.col("_post")).alias("_item"),
                (pl.col("_ord") + "." + pl.col("_rord").cast(pl.String).str.zfill(6) + "."
                 + pl.col("_nord").cast(pl.String).str.zfill(6)).alias("_ord"),
            )
        )
        items = expanded
    nodes = (
        pl.concat(done) if done else pl.DataFrame(schema={index: base.schema[index], "_item": pl.String, "_ord": pl.String})
    )
    nodes = nodes.filter(~pl.col(index).is_in(bad_idx.implode())).sort(index, "_ord").group_by(index, maintain_order=True).agg(
        nodes=pl.col("_item")
    )
    out = (
        base.select(index)
        .join(nodes, on=index, how="left")
        .with_columns(
            nodes=pl.col("nodes").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            hostlist_ok=~pl.col(index).is_in(bad_idx.implode()),
        )
    )
    return out


def expand_one(hostlist: str) -> list[str]:
    """Convenience for callers with a single expression (tests, the CLI)."""
    df = pl.DataFrame({"i": [0], "h": [hostlist]})
    row = expand(df, "h", "i").row(0, named=True)
    if not row["hostlist_ok"]:
        raise ValueError(f"not a hostlist expression: {hostlist!r}")
    return list(row["nodes"])
