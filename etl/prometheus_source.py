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
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from datetime import date, datetime, timedelta, timezone

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.grains import refresh_hourly
from ops_warehouse.etl.lustre_jobs import JOB_LABELS, JOB_METRICS
from ops_warehouse.etl.metric_catalog import POD_LABELS, Metric, catalog
from ops_warehouse.etl.retry import Retry, Transient, first_line
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, telemetry_counts, window_text
from ops_warehouse.etl.telemetry_insert import insert_frames
from ops_warehouse.etl.watermarks import set_watermark
from ops_warehouse.warehouse import redact

BATCH_NODES = 32
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
        q = urllib.parse.urlencode(params, doseq=True)
        return self.retry.call(lambda: self._once(path, q, post), f"prometheus at {redact(self.url)} unreachable")

    def _once(self, path: str, q: str, post: bool) -> dict:
        # query_range goes as POST (long selectors); label values are GET-only in Prometheus 2.x
        req = (urllib.request.Request(f"{self.url}{path}", data=q.encode(), method="POST",
                                      headers={"Content-Type": "application/x-www-form-urlencoded"})
               if post else urllib.request.Request(f"{self.url}{path}?{q}"))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                raw = r.read()
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
        try:
            body = json.loads(raw)
        except ValueError:
            raise OpsError(f"prometheus {path}: the answer is not the API's JSON: {raw[:100]!r}") from None
        if body.get("status") != "success":
            raise OpsError(f"prometheus {path}: {body.get('error', body)}")
        return body["data"]

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        return self.get(f"/api/v1/label/{label}/values", {"match[]": match, "start": start, "end": end})

    def query_range(self, expr: str, start: float, end: float, step_s: int) -> list[dict]:
        return self.get("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": step_s}, post=True)["result"]


def _why(e: BaseException, timeout_s: float) -> str:
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(e, http.client.IncompleteRead):
        return f"answer cut off after {len(e.partial)} bytes"
    return first_line(e)


def _expr(name: str, m: Metric, step_s: int, node_label: str, nodes: list[str]) -> str:
    match = "".join(f',{k}="{_lv(v)}"' for k, v in m.match)
    sel = f'{name}{{{node_label}=~"{"|".join(_re(n) for n in nodes)}"{match}}}'
    fn = "last_over_time" if m.kind == "counter" else ("max_over_time" if m.column == "xid_last" else "avg_over_time")
    return f"{fn}({sel}[{step_s}s])"


def _lv(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _device_series(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """One series per GPU and time: the one with the fewest Kubernetes workload labels (the device-level series;
    dcgm-exporter repeats a GPU's series per pod: etl/openmetrics_source.py families())."""
    keys = [k for k in keys if k in df.columns]
    pods = [c for c in POD_LABELS if c in df.columns]
    if not pods:
        return df.unique(subset=keys, keep="first", maintain_order=True)
    rank = pl.sum_horizontal([(pl.col(c).fill_null("") != "").cast(pl.UInt32) for c in pods])
    return df.with_columns(_pods=rank).sort("_pods", maintain_order=True).unique(
        subset=keys, keep="first", maintain_order=True).drop("_pods")


def _re(node: str) -> str:
    # node names as a regex alternation, anchored; instance labels carry a port
    return "".join("\\\\" + c if c in ".+*?()[]{}|^$\\" else c for c in node) + "(:[0-9]+)?"


def _frame(results: list[dict], name: str) -> pl.DataFrame:
    """One row per sample, built column-wise: a loop per series, none per sample."""
    if not results:
        return pl.DataFrame()
    labels = pl.DataFrame([r["metric"] for r in results])
    values = pl.Series("values", [r["values"] for r in results], dtype=pl.List(pl.List(pl.String)), strict=False)
    df = labels.with_columns(values).explode("values").filter(pl.col("values").is_not_null())
    # evaluated 1 ms past the step: the sample belongs to the step ending at the whole second
    return df.select(
        pl.exclude("values", "__name__"),
        pl.from_epoch(pl.col("values").list.get(0).cast(pl.Float64).cast(pl.Int64) * 1000, "ms")
        .dt.replace_time_zone("UTC").alias("timestamp"),
        pl.col("values").list.get(1).cast(pl.Float64).alias(name),
    )


@logged_load("telemetry", lambda a: f"prometheus:{redact(a['url'])} {window_text(a)}", telemetry_counts)
def load_prometheus(wh, url: str, date_from: date, date_to: date, *, step_s: int = 60, cluster: str | None = None,
                    progress=None, client: PromClient | None = None) -> dict:

    client = client or PromClient(url)
    cat = catalog(getattr(wh.cfg, "metric_catalog", None))
    cluster = cluster_for_rows(wh, cluster)
    counts = {"gpu_rows": 0, "node_rows": 0, "xid_events": 0, "days": 0, "queries": 0}
    days = (date_to - date_from).days + 1
    for k in range(days):
        d = date_from + timedelta(days=k)
        w0 = datetime.combine(d, datetime.min.time(), timezone.utc)
        window = (w0, w0 + timedelta(days=1))
        # one step before the day seeds the counters
        start, end = w0.timestamp() - step_s + 0.001, window[1].timestamp() - step_s + 0.001
        families: dict[str, list[pl.DataFrame]] = {"gpu": [], "nic": [], "node": []}
        for name, m in cat.items():
            node_label = "Hostname" if m.grain == "gpu" else "instance"
            nodes = client.label_values(node_label, name, start, end)
            batches = []
            for b in range(0, len(nodes), BATCH_NODES):
                res = client.query_range(_expr(name, m, step_s, node_label, nodes[b:b + BATCH_NODES]),
                                         start, end, step_s)
                counts["queries"] += 1
                f = _frame(res, name)
                if f.height:
                    batches.append(f)
            if batches:
                # the node batches of one metric stack; different metrics are joined side by side below
                fam = "gpu" if m.grain == "gpu" else ("nic" if m.per_device else "node")
                f = pl.concat(batches, how="diagonal_relaxed")
                if fam == "gpu":
                    f = _device_series(f, ["timestamp", "Hostname", "gpu"])
                families[fam].append(f)
        jobs = []
        for name in JOB_METRICS:  # Lustre job_stats, from the servers' exporters: no node batches
            res = client.query_range(f"last_over_time({name}[{step_s}s])", start, end, step_s)
            counts["queries"] += 1
            f = _frame(res, name)
            if f.height:
                jobs.append(f.select("timestamp", *[pl.col(c).fill_null("") if c in f.columns else
                                                    pl.lit("").alias(c) for c in JOB_LABELS],
                                     pl.lit(name).alias("metric"), pl.col(name).alias("value")))
        job = None
        if jobs:
            job = pl.concat(jobs).pivot(on="metric", index=["timestamp", *JOB_LABELS], values="value",
                                        aggregate_function="last")
        keys = {"gpu": ["timestamp", "Hostname", "gpu"], "nic": ["timestamp", "instance", "device", "port"],
                "node": ["timestamp", "instance"]}
        wide = {}
        for fam, parts in families.items():
            if not parts or fam == "node":  # node-level metrics of different exporters: joined per node later
                continue
            w = None
            for p in parts:
                cols = [c for c in p.columns if c in keys[fam] or c in cat or c in ("modelName", "UUID", "pci_bus_id")]
                p = p.select(cols)
                if w is None:
                    w = p
                else:
                    on = [c for c in keys[fam] if c in p.columns and c in w.columns]
                    extra = [c for c in ("modelName", "UUID", "pci_bus_id") if c in p.columns and c in w.columns]
                    w = w.join(p.drop(extra), on=on, how="full", coalesce=True)
            wide[fam] = w
        c = insert_frames(wh, {"gpu": [wide.get("gpu")], "node": [wide.get("nic"), *families["node"]], "job": [job]},
                          cat, cluster, f"prometheus:{client.url}", window, step_s=step_s)
        refresh_hourly(wh, *window)
        set_watermark(wh, f"prometheus:{client.url}", window[1])
        for key, n in c.items():
            counts[key] = counts.get(key, 0) + n
        counts["days"] += 1
        if progress:
            progress(k + 1, days)
    return counts
