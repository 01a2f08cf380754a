"""Prometheus' matrix answers (``query_range``) decoded into polars frames without a Python object per sample.

A day of 1,000 GPUs is ~20 M points in ~550 MB of JSON; ``json.loads`` of it took 4-25 s per 37 MB answer
and held every point as Python lists (the 3.6-3.9 GB of issue 50), polars' and the engine's JSON readers 2-4 s.
Then ``wide`` puts a batch's metrics side by side on a key x step grid. The
answer's shape is fixed by the API, so it is cut where the JSON grammar allows no doubt and the numbers are
read by polars in one call per answer:

- a series starts at ``{"metric":`` (a quote inside a JSON string is always escaped, so no label value holds
  that text);
- its ``,"values":[`` ends the labels (read with ``json.loads``: one small object per series), and the first
  ``]}`` after it ends the values (they hold only numbers and quoted numbers);
- the values with ``[`` and ``]`` deleted are ``t,"v",t,"v",…``: a one-column CSV whose rows end at commas,
  which polars' CSV reader parses into floats (``NaN``, ``+Inf`` and ``-Inf`` included; 0.1 s for a 9.8 MB
  answer's numbers, numpy's ``fromstring`` 0.13 s). A number it cannot read fails the parse, a missing or extra one the count of
  numbers read against the count of pairs: either fails the load in one line naming the metric.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from ops_warehouse.errors import OpsError

_SERIES = b'{"metric":'
_VALUES = b',"values":['


@dataclass
class Matrix:
    """One answer: each series' labels and point count, and every point's whole second and value, in series order."""

    labels: list[dict]
    counts: np.ndarray
    ts_s: np.ndarray
    values: np.ndarray

    def frame(self, name: str, keep: Sequence[str] | None = None) -> pl.DataFrame:
        """One row per sample: the label columns (every label but ``__name__``, or only those of ``keep`` that
        some series has), ``timestamp`` (UTC) and the value in a column named ``name``."""
        if not self.values.size:
            return pl.DataFrame()
        names = sorted({k for d in self.labels for k in d if k != "__name__"})
        if keep is not None:
            names = [k for k in names if k in keep]
        series = pl.DataFrame({k: [d.get(k) for d in self.labels] for k in names}, schema={k: pl.String for k in names})
        rows = series[np.repeat(np.arange(len(self.labels)), self.counts)]
        return pl.DataFrame([*rows.get_columns(), _timestamps(self.ts_s), pl.Series(name, self.values)])


def _timestamps(ts_s: np.ndarray) -> pl.Series:
    return pl.Series("timestamp", ts_s * 1000).cast(pl.Datetime("ms")).dt.replace_time_zone("UTC")


def decode_matrix(raw: bytes, name: str) -> Matrix:
    """The answer of a query_range (``name``: the metric, for the errors). Written compactly, as Prometheus
    and VictoriaMetrics write it, it is cut as above; written otherwise (spaces, as a proxy may re-indent it),
    it is read with ``json.loads``: slower, the same result."""
    start = raw.find(b'"result":[')
    parts = raw[start + 10:].split(_SERIES)[1:] if start >= 0 else None
    if parts is None or any(_VALUES not in p for p in parts):
        return _decode_json(raw, name)
    labels, values, counts = [], [], []
    for part in parts:  # a loop per series, none per sample
        j = part.find(_VALUES)
        end = part.find(b"]}", j)
        labels.append(json.loads(part[:j]))
        v = part[j + len(_VALUES):end]
        counts.append(v.count(b"],[") + 1 if v else 0)
        if v:
            values.append(v)
    # t,"v",t,"v",…: a CSV of one column whose rows end at commas (quotes are CSV's own)
    return _matrix(name, labels, counts, b",".join(values).translate(None, b"[]"))


def _decode_json(raw: bytes, name: str) -> Matrix:
    try:
        doc = json.loads(raw)
        result = doc["data"]["result"]
        labels = [r["metric"] for r in result]
        pairs = [r["values"] for r in result]
    except (ValueError, KeyError, TypeError):
        raise OpsError(f"prometheus query_range ({name}): the answer is not a matrix: {raw[:100]!r}") from None
    if not isinstance(result, list) or doc["data"].get("resultType") != "matrix":
        raise OpsError(f"prometheus query_range ({name}): the answer is not a matrix: {raw[:100]!r}")
    text = ",".join(f'{t!r},"{v}"' for p in pairs for t, v in p).encode()  # the compact form's numbers
    return _matrix(name, labels, [len(p) for p in pairs], text)


def _matrix(name: str, labels: list[dict], counts: list[int], text: bytes) -> Matrix:
    n = sum(counts)
    flat = np.empty(0)
    if n:
        try:
            x = pl.read_csv(io.BytesIO(text), has_header=False, new_columns=["x"], separator="\t", eol_char=",",
                            schema_overrides={"x": pl.Float64}).get_column("x")
            if not x.null_count():  # an empty field
                flat = x.to_numpy()
        except pl.exceptions.PolarsError:
            pass
        if flat.size != 2 * n or np.isnan(flat[0::2]).any():
            raise OpsError(f"prometheus query_range ({name}): the answer's values are not [time, \"number\"] pairs")
    # evaluated 1 ms past the step: the sample belongs to the step ending at the whole second
    return Matrix(labels, np.asarray(counts, dtype=np.int64), flat[0::2].astype(np.int64), flat[1::2].copy())


def wide(parts: dict[str, list[Matrix]], keys: Sequence[str], extra: Sequence[str] = (),
         rank: Sequence[str] = ()) -> pl.DataFrame | None:
    """Metrics side by side: a row per ``keys`` and time that some metric has, a column per metric (null where
    it has no point), the ``extra`` labels of the key's first series. Where several series of a metric share
    a key, the one with the fewest non-empty ``rank`` labels gives the value (dcgm-exporter repeats a GPU's
    series per pod: the device-level one wins), the first of those in the answers' order among equals.

    Built on a grid of key × step (query_range's points are on its steps), in numpy: no join of string keys."""
    ids: dict[tuple, int] = {}
    first: list[dict] = []
    per_metric = []
    for name, ms in parts.items():
        key_of, pods, ts = [], [], []
        for m in ms:
            for d in m.labels:  # a loop per series
                k = tuple(d.get(c) for c in keys)
                if k not in ids:
                    ids[k] = len(ids)
                    first.append(d)
                key_of.append(ids[k])
                pods.append(sum(1 for c in rank if d.get(c)))
            ts.append(m.ts_s)
        counts = np.concatenate([m.counts for m in ms])
        per_metric.append((name, np.repeat(np.asarray(key_of, dtype=np.int64), counts),
                           np.repeat(np.asarray(pods, dtype=np.int64), counts), np.concatenate(ts),
                           np.concatenate([m.values for m in ms])))
    if not ids or not any(v.size for *_, v in per_metric):
        return None
    t_all = np.concatenate([t for _, _, _, t, _ in per_metric])
    t0 = int(t_all.min())
    step = int(np.gcd.reduce(t_all - t0)) or 1  # the points' common step (a multiple of it where they skip some)
    n_slots = (int(t_all.max()) - t0) // step + 1
    cells = len(ids) * n_slots
    have = np.zeros(cells, dtype=bool)
    columns = []
    for name, key, pods, t, v in per_metric:
        cell = key * n_slots + (t - t0) // step
        got = np.zeros(cells, dtype=bool)
        got[cell] = True
        if np.count_nonzero(got) < cell.size:
            # cells given twice: the first point of each in (rank, answer order), by a stable sort
            order = np.lexsort((np.arange(cell.size), pods, cell))
            cell, v = cell[order], v[order]
            keep = np.ones(cell.size, dtype=bool)
            keep[1:] = cell[1:] != cell[:-1]
            cell, v = cell[keep], v[keep]
        col = np.zeros(cells)
        col[cell] = v
        have |= got
        columns.append((name, col, got))
    at = np.flatnonzero(have)
    key, slot = at // n_slots, at % n_slots
    labels = pl.DataFrame({c: [d.get(c) for d in first] for c in [*keys, *extra]},
                          schema={c: pl.String for c in [*keys, *extra]})[key]
    present = [c for c in extra if labels.get_column(c).null_count() < labels.height]
    out = pl.DataFrame([*labels.select(*keys, *present).get_columns(), _timestamps(t0 + slot * step)])
    return out.with_columns(
        pl.when(pl.Series(got[at])).then(pl.Series(col[at])).alias(name) for name, col, got in columns)
