"""Telemetry from the Prometheus HTTP API (Prometheus 2.x/3.x, VictoriaMetrics): ``query_range``,
downsampled by the server, into the same frames the file source produces.

Per catalog metric and per day (at most 1,440 points per series at 60 s, under the 11,000-point limit),
in batches of nodes: gauges as ``avg_over_time(m[step])``; counters as ``last_over_time(m[step])`` (the raw
counter at the end of each step; the loader turns it into per-step amounts with its own reset handling:
``increase()`` extrapolates to the window edges and is not exact over one-sample windows); the Xid gauge
as ``max_over_time``. Queries are evaluated 1 ms after each step boundary so a window ``(t-step, t]``
holds the samples of one step and not the one at its left edge. Timeouts, refused, reset or cut-off
connections and 5xx answers are retried with backoff (etl/retry.py), 4xx answers not; a server that stays
away fails the load with one line. A day is written only once all its queries answered: a load that fails
leaves the days before it loaded and the rest for the next run.

Fast enough for a backfill (issue 50): the answers are decoded by etl/prom_matrix.py (numpy reads the numbers;
no Python object per sample), the GPU metrics are fetched node batch by node batch and each batch's rows
inserted while the next batch's answers are fetched on a thread of their own and decoded on another (_Ahead),
so the server's time, the decoding and the insert overlap and memory holds one batch, not the day.

VictoriaMetrics (found by itself: etl/vm_export_steps.py) is read through its bulk export instead: a request
per node batch for every metric's raw samples, streamed to disk, downsampled to the step by the engine by the
same three rules (sql/staging/vm_export_steps.sql), then the same frames and insert: the same tables.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta, timezone
from functools import partial
from pathlib import Path

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.etl.lustre_jobs import JOB_LABELS, JOB_METRICS
from ops_warehouse.etl.metric_catalog import POD_LABELS, Metric, catalog
from ops_warehouse.etl.prom_matrix import Matrix, decode_matrix, wide
from ops_warehouse.etl.retry import Retry, Transient, first_line
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, telemetry_counts, window_text
from ops_warehouse.etl.telemetry_insert import insert_frames
from ops_warehouse.etl.vm_export_steps import export_matrices, export_params, is_victoriametrics
from ops_warehouse.etl.watermarks import set_watermark
from ops_warehouse.warehouse import redact

# 16 nodes (128 GPUs, ~184 k rows a day at 60 s) a batch keeps a load under 1 GB: 32 peaked at 1.3 GB, the
# engine's insert of the batch most of it (bench/bench_prometheus.py)
BATCH_NODES = 16
# the export path's batch: the engine's parse of a batch's raw samples adds to the insert's peak (a day of 128
# nodes: 16 peaked at 1,025 MB, 14 at 979 MB; 12 took longer than query_range, a batch's insert a fixed cost)
EXPORT_BATCH_NODES = 14
LOOKAHEAD = 4  # answers fetched ahead of the one being inserted (~5 MB each at 16 nodes of 8 GPUs)
# the server's own query timeout: 503 from the evaluation, but 422 ("expanding series: context deadline
# exceeded") when it strikes while the series are being selected (Prometheus 2.x): a timeout either way
_TIMED_OUT = re.compile(r"context deadline exceeded|query timed out")


class PromClient:
    """GET/POST against the HTTP API. Retried with backoff (etl/retry.py): 5xx answers (and 408/429, which say
    "try later", and the 422 of a server-side query timeout), timeouts, connections refused, reset or cut off
    mid-answer. Not retried: other 4xx answers (our query is wrong, or we may not ask), an answer that is not
    the API's JSON, a URL that cannot work."""

    def __init__(self, url: str, timeout_s: float = 60, retries: int = 4, backoff_s: float = 1.0,
                 retry: Retry | None = None):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.retry = retry or Retry(retries, backoff_s, f"prometheus {redact(self.url)}")

    def get(self, path: str, params: dict, post: bool = False) -> dict:
        return _data(path, self.get_raw(path, params, post))

    def get_raw(self, path: str, params: dict, post: bool = False) -> bytes:
        """The answer's bytes, once the server said success (the caller decodes them)."""
        q = urllib.parse.urlencode(params, doseq=True)
        raw = self.retry.call(lambda: self._once(path, q, post), f"prometheus at {redact(self.url)} unreachable")
        if b'"status":"success"' not in raw[:64]:
            _data(path, raw)  # says what went wrong
        return raw

    def get_to_file(self, path: str, params: dict, dest: Path) -> None:
        """The answer streamed to ``dest`` a MiB at a time (an export can be large: never held in memory);
        retried as get_raw is, each try writing the file anew."""
        q = urllib.parse.urlencode(params, doseq=True)
        self.retry.call(lambda: self._once(path, q, True, dest), f"prometheus at {redact(self.url)} unreachable")

    def _once(self, path: str, q: str, post: bool, dest: Path | None = None) -> bytes:
        # query_range goes as POST (long selectors); label values are GET-only in Prometheus 2.x
        req = (urllib.request.Request(f"{self.url}{path}", data=q.encode(), method="POST",
                                      headers={"Content-Type": "application/x-www-form-urlencoded"})
               if post else urllib.request.Request(f"{self.url}{path}?{q}"))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                if dest is None:
                    return r.read()
                with open(dest, "wb") as f:
                    while chunk := r.read(1 << 20):
                        f.write(chunk)
                return b""
        except urllib.error.HTTPError as e:
            why = ""
            try:
                why = e.read()[:300].decode("utf-8", "replace")
                why = json.loads(why).get("error", why)
            except (OSError, ValueError, http.client.HTTPException, AttributeError):
                pass
            why = " ".join(str(why or e.reason).split())
            if e.code >= 500 or e.code in (408, 429) or _TIMED_OUT.search(why):
                raise Transient(f"HTTP {e.code}: {why}") from None
            raise OpsError(f"prometheus {path} refused the query (HTTP {e.code}): {why}") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, OSError) and not isinstance(e.reason, ssl.SSLCertVerificationError):
                raise Transient(_why(e.reason, self.timeout_s)) from None
            raise OpsError(f"prometheus at {redact(self.url)}: {e.reason}") from None
        except (http.client.InvalidURL, ValueError) as e:
            raise OpsError(f"prometheus at {redact(self.url)}: {e}") from None
        except (OSError, http.client.HTTPException) as e:  # timed out, reset or cut off while reading the answer
            raise Transient(_why(e, self.timeout_s)) from None

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        return self.get(f"/api/v1/label/{label}/values", {"match[]": match, "start": start, "end": end})

    def query_range(self, expr: str, start: float, end: float, step_s: int) -> list[dict]:
        return _data("/api/v1/query_range", self.query_range_raw(expr, start, end, step_s))["result"]

    def query_range_raw(self, expr: str, start: float, end: float, step_s: int) -> bytes:
        """The answer undecoded, for etl/prom_matrix.py."""
        return self.get_raw("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                     "step": step_s}, post=True)


def _data(path: str, raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except ValueError:
        raise OpsError(f"prometheus {path}: the answer is not the API's JSON: {raw[:100]!r}") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise OpsError(f"prometheus {path}: {body.get('error', body) if isinstance(body, dict) else body!r}")
    return body["data"]


def _why(e: BaseException, timeout_s: float) -> str:
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(e, http.client.IncompleteRead):
        return f"answer cut off after {len(e.partial)} bytes"
    return first_line(e)


def _selector(name: str, m: Metric, node_label: str, nodes: list[str]) -> str:
    match = "".join(f',{k}="{_lv(v)}"' for k, v in m.match)
    return f'{name}{{{node_label}=~"{"|".join(_re(n) for n in nodes)}"{match}}}'


def _expr(name: str, m: Metric | None, step_s: int, selector: str) -> str:
    # the export path's engine applies the same three rules (sql/staging/vm_export_steps.sql)
    fn = ("last_over_time" if m is None or m.kind == "counter"
          else "max_over_time" if m.column == "xid_last" else "avg_over_time")
    return f"{fn}({selector}[{step_s}s])"


def _lv(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _re(node: str) -> str:
    # node names as a regex alternation, anchored; instance labels carry a port
    return "".join("\\\\" + c if c in ".+*?()[]{}|^$\\" else c for c in node) + "(:[0-9]+)?"


@logged_load("telemetry", lambda a: f"prometheus:{redact(a['url'])} {window_text(a)}", telemetry_counts)
def load_prometheus(wh, url: str, date_from: date, date_to: date, *, step_s: int = 60, cluster: str | None = None,
                    progress=None, client: PromClient | None = None, export: bool | None = None) -> dict:
    """``export``: read VictoriaMetrics' raw samples (/api/v1/export) and downsample them in the engine instead
    of asking query_range; None (the default): when the server is VictoriaMetrics (etl/vm_export_steps.py)."""
    client = client or PromClient(url)
    if export is None:
        export = is_victoriametrics(client.url)
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster_for_rows(wh, cluster)
    counts = {"gpu_rows": 0, "node_rows": 0, "xid_events": 0, "days": 0, "queries": 0}
    days = (date_to - date_from).days + 1
    with _Ahead() as ahead:
        for k in range(days):
            d = date_from + timedelta(days=k)
            w0 = datetime.combine(d, datetime.min.time(), timezone.utc)
            window = (w0, w0 + timedelta(days=1))
            for key, n in _load_day(wh, client, ahead, cat, cluster, window, step_s, export).items():
                counts[key] = counts.get(key, 0) + n
            refresh_hourly(wh, *window)
            set_watermark(wh, f"prometheus:{client.url}", window[1])
            counts["days"] += 1
            if progress:
                progress(k + 1, days)
    return counts


class _Ahead:
    """The next answers fetched on a thread of their own and decoded on another while this one inserts the
    last ones: the server's time, the decoding and the insert overlap. The fetching thread only waits on the
    server, so the next request leaves as soon as an answer is read, not once it is decoded (a day of 128
    nodes: ~9 s of the server's answers and ~4 CPU-s of decoding were one after the other on one thread). One
    request at a time (a server's retries stay in order, and a failure leaves nothing in flight), at most
    LOOKAHEAD answers held."""

    def __init__(self):
        self.fetching = ThreadPoolExecutor(1, thread_name_prefix="prometheus-fetch")
        self.decoding = ThreadPoolExecutor(1, thread_name_prefix="prometheus-decode")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for pool in (self.fetching, self.decoding):
            pool.shutdown(wait=exc[0] is None, cancel_futures=True)

    def each(self, calls: list[tuple[Callable[[], bytes | Path], Callable]]):
        """The calls' answers in order: each (fetch, decode) pair's decode(fetch()), each fetch started before
        the answers before it are decoded or used."""
        def start(call):
            fetch, decode = call
            got = self.fetching.submit(fetch)
            # the decoding thread takes the answers in the order they were asked for (one thread each)
            return self.decoding.submit(lambda: decode(got.result()))

        pending: deque = deque()
        calls = iter(calls)
        for call in calls:
            pending.append(start(call))
            if len(pending) >= LOOKAHEAD:
                break
        while pending:
            answer = pending.popleft().result()
            nxt = next(calls, None)
            if nxt is not None:
                pending.append(start(nxt))
            yield answer


def _load_day(wh, client: PromClient, ahead: _Ahead, cat: dict[str, Metric], cluster: str,
              window: tuple[datetime, datetime], step_s: int, export: bool = False) -> dict:
    # one step before the day seeds the counters
    start, end = window[0].timestamp() - step_s + 0.001, window[1].timestamp() - step_s + 0.001
    nodes_of = {name: client.label_values("Hostname" if m.grain == "gpu" else "instance", name, start, end)
                for name, m in cat.items()}
    # node batch by node batch, the GPU metrics first, then the node-level ones, then Lustre job_stats: a
    # batch's rows are inserted while the next batch is fetched, so memory holds a batch, not the day
    plan: list[tuple[str, str, str]] = []  # (batch, metric, expression)
    for grain, label in (("gpu", "Hostname"), ("node", "instance")):
        names = {name: m for name, m in cat.items() if (m.grain == "gpu") == (grain == "gpu")}
        # every exporter of a node in one batch: its node_sample row is made of all of them at once
        nodes = sorted({_node_key(n) for name in names for n in nodes_of[name]})
        per = EXPORT_BATCH_NODES if export else BATCH_NODES
        for b in range(0, len(nodes), per):
            batch = set(nodes[b:b + per])
            for name, m in names.items():
                mine = [n for n in nodes_of[name] if _node_key(n) in batch]
                if mine:
                    plan.append((f"{grain} {b}", name, _selector(name, m, label, mine)))
    for name in JOB_METRICS:  # Lustre job_stats, from the servers' exporters: no node batches
        plan.append(("job", name, name))
    if export:
        return _load_day_export(wh, client, ahead, cat, cluster, window, step_s, plan)

    counts = {"queries": len(plan), "xid_events": 0}
    parts: dict[str, list[Matrix]] = {}
    calls = [(partial(client.query_range_raw, _expr(name, cat.get(name), step_s, sel), start, end, step_s),
              partial(_decode, name=name)) for _, name, sel in plan]
    for k, m in enumerate(ahead.each(calls)):
        batch, name, _ = plan[k]
        if m.values.size:
            parts.setdefault(name, []).append(m)
        if k + 1 < len(plan) and plan[k + 1][0] == batch:
            continue
        _insert_batch(wh, _frames(batch.split()[0], parts, cat), cat, cluster, client, window, step_s, counts)
        parts = {}
    return counts


def _insert_batch(wh, frames: dict, cat: dict[str, Metric], cluster: str, client: PromClient,
                  window: tuple[datetime, datetime], step_s: int, counts: dict) -> None:
    """A node batch's frames into the warehouse, its counts added to ``counts``."""
    if not frames:
        return
    c = insert_frames(wh, frames, cat, cluster, f"prometheus:{client.url}", window, step_s=step_s)
    # xid_events is the window's count after the insert (the batches before included): the last one's
    xid = c.pop("xid_events", 0)
    counts["xid_events"] = xid if "gpu" in frames else counts["xid_events"]
    _add(counts, c)


def _load_day_export(wh, client: PromClient, ahead: _Ahead, cat: dict[str, Metric], cluster: str,
                     window: tuple[datetime, datetime], step_s: int, plan: list[tuple[str, str, str]]) -> dict:
    """The day from VictoriaMetrics' /api/v1/export: a request per node batch (every metric of the batch at
    once), streamed to disk on the fetching thread while the engine downsamples and inserts the batch before
    (etl/vm_export_steps.py). The samples of (day - 2 steps, day end - step]: the steps query_range would
    give, the one before the day (the counters' seed) included."""
    lo_ms = (round(window[0].timestamp()) - 2 * step_s) * 1000
    hi_ms = (round(window[1].timestamp()) - step_s) * 1000
    batches: dict[str, list[str]] = {}
    for batch, _, sel in plan:
        batches.setdefault(batch, []).append(sel)
    counts = {"queries": len(batches), "xid_events": 0}
    with tempfile.TemporaryDirectory(prefix="vm-export-") as tmp:
        # the engine downsamples on this thread (one engine, one caller): nothing to decode on the other
        calls = [(partial(_fetch_export, client, sels, lo_ms, hi_ms, Path(tmp) / f"{k}.jsonl"), _as_is)
                 for k, sels in enumerate(batches.values())]
        for batch, path in zip(batches, ahead.each(calls)):
            parts = {name: [m] for name, m in export_matrices(wh, path, cat, step_s, lo_ms, hi_ms).items()
                     if m.values.size}
            path.unlink()
            _insert_batch(wh, _frames(batch.split()[0], parts, cat), cat, cluster, client, window, step_s, counts)
    return counts


def _fetch_export(client: PromClient, selectors: list[str], lo_ms: int, hi_ms: int, dest: Path) -> Path:
    client.get_to_file("/api/v1/export", export_params(selectors, lo_ms, hi_ms), dest)
    return dest


def _node_key(label: str) -> str:
    # the node an exporter's node label names, as sql/functions/slurm_node.sql reads it (port and domain off):
    # only to put a node's exporters in one batch
    return re.sub(r":[0-9]+$", "", label).split(".")[0]


def _frames(grain: str, parts: dict[str, list[Matrix]], cat: dict[str, Metric]) -> dict:
    """A batch's answers as the frames insert_frames takes."""
    if grain == "gpu":
        gpu = wide(parts, ("Hostname", "gpu"), _GPU_EXTRA, POD_LABELS)
        return {"gpu": [gpu]} if gpu is not None else {}
    if grain == "job":
        jobs = [f.select("timestamp", *[pl.col(c).fill_null("") if c in f.columns else pl.lit("").alias(c)
                                        for c in JOB_LABELS], pl.lit(name).alias("metric"), pl.col(name).alias("value"))
                for name, ms in parts.items() for f in (m.frame(name) for m in ms)]
        if not jobs:
            return {}
        return {"job": [pl.concat(jobs).pivot(on="metric", index=["timestamp", *JOB_LABELS], values="value",
                                              aggregate_function="last")]}
    nic = wide({n: ms for n, ms in parts.items() if cat[n].per_device}, ("instance", "device", "port"))
    # node-level metrics of different exporters stay apart: joined per node by the engine
    node = [pl.concat([m.frame(name) for m in ms], how="diagonal_relaxed")
            for name, ms in parts.items() if not cat[name].per_device]
    return {"node": [nic, *node]} if nic is not None or node else {}


def _decode(raw: bytes, name: str) -> Matrix:
    # on the decoding thread: polars' parse lets go of the GIL while the engine inserts and the next answer is read
    return decode_matrix(raw, name)


def _as_is(path: Path) -> Path:
    return path


# the labels a GPU's rows carry besides its keys (of its first series)
_GPU_EXTRA = ("modelName", "UUID", "pci_bus_id")


def _add(counts: dict, more: dict) -> None:
    for key, n in more.items():
        counts[key] = counts.get(key, 0) + n
