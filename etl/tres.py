"""TRES strings (``billing=8,cpu=8,gres/gpu:v100=1,gres/gpu=1,mem=10G,node=1``) -> counts, as polars exprs.

GPU count follows Open XDMoD: the ``gres/gpu=N`` total when present, else the sum of the typed
``gres/gpu:TYPE=N`` entries; ``gres/gpumem``/``gres/gpuutil`` are usage figures, not GPUs.
"""

from __future__ import annotations

import polars as pl

_U32 = 2**32 - 1
_MEM_FACTOR_MIB = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


def _key(tres: pl.Expr, key: str) -> pl.Expr:
    return tres.str.extract(rf"(?:^|,){key}=(\d+)(?:,|$)", 1).cast(pl.Int64, strict=False)


def gpus(tres: pl.Expr) -> pl.Expr:
    """GPUs of a TRES string; null when a GPU count is beyond any GPU count (does not fit UInt32): such a
    record is quarantined by normalize. (Strict casts here raised on such input; a lenient cast alone would
    have read 0 GPUs. Found by tests/test_fuzz_sacct.py.)"""
    total_txt = tres.str.extract(r"(?:^|,)gres/gpu=(\d+)(?:,|$)", 1)
    typed = tres.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=\d+").list.eval(
        pl.element().str.extract(r"=(\d+)$", 1).cast(pl.UInt32, strict=False).cast(pl.Int64))
    typed_sum = typed.list.sum()
    typed_bad = typed.list.eval(pl.element().is_null()).list.any() | (typed_sum > _U32)
    return (
        pl.when(total_txt.is_not_null()).then(total_txt.cast(pl.UInt32, strict=False).cast(pl.Int64))
        .when(typed_bad).then(None)
        .when(typed_sum > 0).then(typed_sum)
        .otherwise(0)
        .cast(pl.UInt32)
    )


def gpus_simple(tres: pl.Expr) -> pl.Expr:
    """The ``gres/gpu=N`` total; 0 without any gres/gpu; null when only typed entries exist, or the total is
    beyond a GPU count (see gpus)."""
    total = tres.str.extract(r"(?:^|,)gres/gpu=(\d+)(?:,|$)", 1)
    return pl.when(total.is_not_null()).then(total.cast(pl.UInt32, strict=False)) \
        .when(~tres.str.contains("gres/gpu:", literal=True)).then(0).cast(pl.UInt32)


def gpu_type_simple(tres: pl.Expr) -> pl.Expr:
    """The first typed GPU model; exact whenever a job holds one GPU type (see gpu_type)."""
    return tres.str.extract(r"(?:^|,)gres/gpu:([^=,]+)=", 1).fill_null("")


def gpu_type(tres: pl.Expr) -> pl.Expr:
    """The GPU model(s) of typed gres, '+'-joined when a job holds several; '' when untyped."""
    return (
        tres.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=")
        .list.eval(pl.element().str.extract(r"gres/gpu:([^=,]+)=", 1))
        .list.unique()
        .list.sort()
        .list.join("+")
        .fill_null("")
    )


def mem_mib(tres: pl.Expr) -> pl.Expr:
    value = tres.str.extract(r"(?:^|,)mem=([\d.]+)[KMGTP]?(?:,|$)", 1).cast(pl.Float64, strict=False)
    unit = tres.str.extract(r"(?:^|,)mem=[\d.]+([KMGTP]?)(?:,|$)", 1)
    factor = unit.replace_strict(_MEM_FACTOR_MIB, default=None, return_dtype=pl.Float64)
    return value * factor


def size_mib(text: pl.Expr) -> pl.Expr:
    """A size as sacct prints one (MaxRSS ``1828196K``, ``1.5G``; a bare number is bytes, sacct's unit for
    them) in MiB; null when empty or unreadable."""
    t = text.str.strip_chars()
    value = t.str.extract(r"^([\d.]+)[KMGTP]?$", 1).cast(pl.Float64, strict=False)
    unit = t.str.extract(r"^[\d.]+([KMGTP]?)$", 1)
    factor = unit.replace_strict({**_MEM_FACTOR_MIB, "": 1 / 1024**2}, default=None, return_dtype=pl.Float64)
    return value * factor


def count(tres: pl.Expr, key: str) -> pl.Expr:
    """An integer TRES such as cpu, node or billing (null when absent, or beyond Int64)."""
    return _key(tres, key)


def count_unreadable(tres: pl.Expr, key: str) -> pl.Expr:
    """True where the TRES holds ``key=N`` but N is beyond Int64 (count() reads null there, as if absent)."""
    return tres.str.extract(rf"(?:^|,){key}=(\d+)(?:,|$)", 1).is_not_null() & count(tres, key).is_null()
