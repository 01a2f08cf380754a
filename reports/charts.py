"""The monthly report's charts, drawn with matplotlib (Agg, no screen) from the report dict; PNG bytes.

Each chart is a function of the report alone, so the HTML, the Markdown and a notebook draw the same
pictures. A chart with nothing to show returns None and the renderers leave it out.

Drawing is most of a report's time, so the charts are drawn cheaply: figures are made without pyplot (no
figure manager), many bars are one collection of rectangles rather than an artist each (the Gantt chart of
the largest jobs has a bar per job and node, hundreds in a month), the margins are fixed per chart rather
than measured by drawing the figure twice (tight_layout), and the pictures are 96 dpi. Most of a chart's
drawing was matplotlib placing text it works out at draw time (issue 51, docs/benchmarks.md): so the ticks are
fixed (:func:`_ticks`; a log axis has its decades as plain numbers, no minor ticks and no mathtext), the
titles sit at a fixed height (not placed above the tick labels' measured boxes), the legends at a named
corner (not the "best" place searched over the data) and bars are one collection. A chart whose input
has not changed since it was drawn (the same report rendered again, for another format or by another run
of the same month) is not drawn again, and the others are drawn in parallel processes where the machine
has more than one core (:func:`draw_all`).
"""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing
import os
import signal
import struct
import zlib
from datetime import date, datetime

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator  # noqa: E402

DPI = 96
QUANTILES = np.arange(1, 101) / 100
_STACK = [("allocated_gpu_h", "allocated", "#2b6cb0"), ("reserved_idle_gpu_h", "reserved, unused", "#d69e2e"),
          ("free_gpu_h", "free", "#cbd5e0"), ("drained_gpu_h", "drained", "#ed8936"), ("down_gpu_h", "down", "#c53030")]


def _figure(w: float, h: float, left: float = 0.09, right: float = 0.98, bottom: float = 0.14, top: float = 0.9,
            **subplots):
    """A figure of w × h inches with fixed margins (fractions of the figure): no layout pass at save time."""
    fig = Figure(figsize=(w, h))
    fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top, **subplots)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _rects(ax, x0, x1, y0, y1, colors, *, label: str | None = None, sticky_x: float | None = None,
           sticky_y: float | None = None) -> None:
    """Rectangles [x0, x1] × [y0, y1] (arrays) as one collection, the axes' limits updated to show them."""
    x0, x1, y0, y1 = (np.asarray(a, float) for a in (x0, x1, y0, y1))
    verts = np.stack([np.stack([x0, y0], 1), np.stack([x0, y1], 1), np.stack([x1, y1], 1), np.stack([x1, y0], 1)], 1)
    rects = PolyCollection(verts, facecolors=colors, edgecolors="none", label=label)
    if sticky_x is not None:  # an axis the bars grow from: autoscaling leaves no margin below it, as bar() does
        rects.sticky_edges.x.append(sticky_x)
    if sticky_y is not None:
        rects.sticky_edges.y.append(sticky_y)
    ax.add_collection(rects)
    if len(verts):
        ax.update_datalim(verts.reshape(-1, 2))
    ax.autoscale_view()


def _title(ax, text: str, **kw) -> None:
    # y given: the title stays at the axes' top (where it lands without ticks above) instead of matplotlib
    # measuring every tick label's box at draw time to place it
    ax.set_title(text, y=1.0, **kw)


def _ticks(axis, at, labels) -> None:
    """Ticks at fixed places with fixed labels and no minor ticks: nothing for the axis to work out."""
    axis.set_major_locator(FixedLocator(np.asarray(at, float)))
    axis.set_major_formatter(FixedFormatter([str(x) for x in labels]))
    axis.set_minor_locator(NullLocator())


def _log_ticks(axis, lo: float, hi: float) -> None:
    """A log axis over [lo, hi] ticked at its powers of ten, labelled as plain numbers (0.01, 1, 100): the
    default log ticks set each label as mathtext and draw eight minor ticks a decade."""
    decades = 10.0 ** np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
    _ticks(axis, decades, [f"{d:g}" for d in decades])


def _date_ticks(axis, days, rotation: float = 30) -> None:
    """Day ticks (matplotlib date numbers) about a week apart over [first, last], labelled YYYY-MM-DD."""
    first, last = int(np.floor(min(days))), int(np.ceil(max(days)))
    step = max(1, (last - first) // 6 or 1)
    at = np.arange(first, last + 1, step)
    _ticks(axis, at, [mdates.num2date(d).strftime("%Y-%m-%d") for d in at])
    for t in axis.get_ticklabels():
        t.set(rotation=rotation, ha="right")


def _bars(ax, labels, heights, *, bottom=None, color, width: float = 0.8, offset: float = 0.0,
          horizontal: bool = False, label_ticks: bool = True, label: str | None = None) -> None:
    """Bars at 0, 1, ... (one collection of rectangles, not a patch each), the categories as tick labels."""
    n = len(labels)
    x = np.arange(n) + offset
    b = np.zeros(n) if bottom is None else np.asarray(bottom, float)
    top = b + np.asarray(heights, float)
    if horizontal:
        _rects(ax, b, top, x - width / 2, x + width / 2, color, label=label, sticky_x=0)
        if label_ticks:
            _ticks(ax.yaxis, np.arange(n), labels)
    else:
        _rects(ax, x - width / 2, x + width / 2, b, top, color, label=label, sticky_y=0)
        if label_ticks:
            _ticks(ax.xaxis, np.arange(n), labels)


def _margin_for(labels: list[str], fontsize: float, width_in: float) -> float:
    """A left margin (fraction of the figure) that holds tick labels of this many characters."""
    chars = max((len(s) for s in labels), default=0)
    return min(0.45, (chars * fontsize * 0.7 + 20) / 72 / width_in)


def size_shares(r: dict) -> bytes | None:
    rows = r["job_sizes"]
    if not rows:
        return None
    x = np.arange(len(rows))
    fig = _figure(7, 3.6, bottom=0.15)
    ax = fig.add_subplot()
    jobs = [100 * (row["job_share"] or 0) for row in rows]
    hours = [100 * (row["gpu_h_share"] or 0) for row in rows]
    _rects(ax, x - 0.4, x, np.zeros(len(rows)), jobs, "#4a5568")
    _rects(ax, x, x + 0.4, np.zeros(len(rows)), hours, "#2b6cb0")
    ax.set_ylim(0, max(jobs + hours + [1]) * 1.05)
    _ticks(ax.xaxis, x, [row["size_class"] for row in rows])
    ax.set_xlabel("GPUs per job")
    ax.set_ylabel("%")
    _title(ax, "Jobs vs GPU-hours by job size")
    ax.legend([Patch(color="#4a5568"), Patch(color="#2b6cb0")], ["share of jobs", "share of GPU-hours"],
              loc="upper center")
    return _png(fig)


def runtime_cdf(r: dict) -> bytes | None:
    rows = [row for row in r["run_times"] if row["jobs_ended"]]
    if not rows:
        return None
    fig = _figure(7, 3.6, bottom=0.15)
    ax = fig.add_subplot()
    lo, hi = np.inf, 0.0
    for row in rows:
        q = np.maximum(np.asarray(row["cdf_s"], float), 1) / 3600
        lo, hi = min(lo, q.min()), max(hi, q.max())
        ax.step(q, QUANTILES * 100, where="post", label=f"{row['size_class']} GPUs ({row['jobs_ended']})")
    ax.set_xscale("log")
    _log_ticks(ax.xaxis, lo, hi)
    ax.set_xlabel("run time (hours, log scale)")
    ax.set_ylabel("% of jobs ended")
    _title(ax, "Run-time CDF by job size")
    ax.legend(fontsize=8, loc="lower right")  # a CDF climbs to the right: that corner is empty
    ax.grid(alpha=0.3)
    return _png(fig)


def capacity_timeline(r: dict) -> bytes | None:
    rows = r["utilization_daily"]
    if not rows:
        return None
    days = mdates.date2num([row["day"] for row in rows])
    fig = _figure(8, 3.6, left=0.1, bottom=0.2)
    ax = fig.add_subplot()
    bottom = np.zeros(len(rows))
    handles, labels = [], []
    for key, label, color in _STACK:
        v = np.array([row[key] or 0 for row in rows], float)
        _rects(ax, days - 0.45, days + 0.45, bottom, bottom + v, color)
        bottom += v
        handles.append(Patch(color=color))
        labels.append(label)
    ax.set_ylim(0, max(bottom.max(), 1) * 1.05)
    if r["scope"] == "project":
        (line,) = ax.plot(days, [row["project_allocated_gpu_h"] for row in rows], color="black", marker=".")
        handles.append(line)
        labels.append(f"project {r['project']}")
    _date_ticks(ax.xaxis, days)
    ax.set_ylabel("GPU-hours per day")
    _title(ax, "Capacity: allocated, idle, down")
    ax.legend(handles, labels, fontsize=8, ncol=3, loc="lower left")
    return _png(fig)


def gpu_heatmap(r: dict) -> bytes | None:
    rows = r["gpu_heatmap"]
    if not rows:
        return None
    nodes = sorted({(row["rack"], row["node"]) for row in rows})
    index = {n: i for i, n in enumerate(nodes)}
    gpus = max(row["gpu"] for row in rows) + 1
    m = np.full((len(nodes), gpus), np.nan)
    for row in rows:
        m[index[(row["rack"], row["node"])], row["gpu"]] = row["gpu_util_pct"]
    step = max(1, len(nodes) // 40)
    ticks = [f"{nodes[i][0]} {nodes[i][1]}" for i in range(0, len(nodes), step)]
    w, h = max(4, 1 + gpus * 0.5), max(3, 0.14 * len(nodes) + 1.2)
    left = _margin_for(ticks, 6, w)
    fig = _figure(w, h, left=left, right=1 - 0.45 / w, bottom=0.5 / h, top=1 - 0.4 / h)
    ax = fig.add_subplot()
    im = ax.imshow(m, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest")
    _ticks(ax.yaxis, range(0, len(nodes), step), ticks)
    ax.tick_params(axis="y", labelsize=6)
    _ticks(ax.xaxis, range(gpus), range(gpus))
    ax.set_xlabel("GPU")
    _title(ax, "Mean GPU utilization (%) by rack, node, GPU", fontsize=10)
    cbar = fig.colorbar(im, ax=ax, fraction=0.08, pad=0.03)
    _ticks(cbar.ax.yaxis, range(0, 101, 20), range(0, 101, 20))
    return _png(fig)


def gantt(r: dict) -> bytes | None:
    jobs = [j for j in r["largest_jobs"] if j["start_ts"] is not None]
    if not jobs:
        return None
    nodes = sorted({n for j in jobs for n in j["nodes"]})
    row = {n: i for i, n in enumerate(nodes)}
    colors = [matplotlib.colormaps["tab20"](k % 20) for k in range(len(jobs))]
    step = max(1, len(nodes) // 40)
    h = max(3, 0.13 * len(nodes) + 1.5)
    fig = _figure(9, h, left=_margin_for(nodes[::step], 6, 9), right=0.98, bottom=0.9 / h, top=1 - 0.4 / h)
    ax = fig.add_subplot()
    x0, x1, y, c = [], [], [], []
    for k, j in enumerate(jobs):
        start = mdates.date2num(j["start_ts"])
        end = mdates.date2num(j["end_ts"] or j["start_ts"])
        for n in j["nodes"]:
            x0.append(start)
            x1.append(end)
            y.append(row[n])
            c.append(colors[k])
        ax.text((start + end) / 2, np.mean([row[n] for n in j["nodes"]]), str(j["job_id"]), ha="center",
                va="center", fontsize=6)
    y = np.asarray(y, float)
    _rects(ax, x0, x1, y - 0.4, y + 0.4, c)
    _ticks(ax.yaxis, range(0, len(nodes), step), nodes[::step])
    ax.tick_params(axis="y", labelsize=6)
    _date_ticks(ax.xaxis, x0 + x1)
    _title(ax, f"The {len(jobs)} largest jobs over nodes (by GPU-hours)")
    return _png(fig)


def failures(r: dict) -> bytes | None:
    states = r["end_states"]
    if not states:
        return None
    names = [s["state"] for s in states]
    fig = _figure(9, 3.6, left=_margin_for(names, 10, 9), right=0.98, bottom=0.15, wspace=0.3)
    a1, a2 = fig.subplots(1, 2)
    _bars(a1, names, [s["gpu_h"] or 0 for s in states], color="#4a5568", horizontal=True)
    a1.set_xlabel("GPU-hours")
    _title(a1, "How runs ended (GPU-hours)")
    codes = sorted(r["xid_codes"], key=lambda x: x["xid"])
    if codes:
        _bars(a2, [str(x["xid"]) for x in codes], [x["events"] for x in codes], color="#c53030")
    a2.set_xlabel("Xid")
    _title(a2, "Xid events by code")
    return _png(fig)


def waste(r: dict) -> bytes | None:
    """Idle GPU-hours by project (whole nodes and shared), and GPU-hours lost per hung run."""
    projects = [u for u in r.get("idle_gpu_users", []) if u["level"] == "project"]
    hung = r.get("hung_jobs", [])[:15]
    if not projects and not hung:
        return None
    fig = _figure(9, 3.4, left=0.08, right=0.98, bottom=0.2, wspace=0.3)
    a1, a2 = fig.subplots(1, 2)
    names = [u["project"] for u in projects]
    whole = [u["whole_node_gpu_h"] or 0 for u in projects]
    _bars(a1, names, whole, color="#2b6cb0", label="whole nodes")
    _bars(a1, names, [u["shared_gpu_h"] or 0 for u in projects], bottom=whole, color="#90cdf4",
          label="shared nodes")
    a1.set_ylabel("GPU-hours")
    _title(a1, "GPU-hours held idle, by project")
    if projects:
        a1.legend(fontsize=8, frameon=False, loc="upper right")
    _bars(a2, [str(h["job_id"]) for h in hung], [h["hung_gpu_h"] for h in hung], color="#c53030")
    a2.set_ylabel("GPU-hours")
    _title(a2, "Hung runs: GPU-hours lost")
    for t in a2.get_xticklabels():
        t.set(rotation=45, ha="right", fontsize=7)
    return _png(fig)


def goodput(r: dict) -> bytes | None:
    """ETTR per project, and each listed campaign's against the published model (Kokolis et al., HPCA 2025) at
    its size, for the checkpoint intervals the generator's and most sites' runs use, at this cluster's own
    failure rate and restart start-up."""
    rows = [e for e in r.get("goodput", []) if e["project_key"] and e["ettr"] is not None]
    camps = [c for c in r.get("campaigns", []) if c["ettr"] is not None]
    if not rows and not camps:
        return None
    fig = _figure(9, 3.4, left=0.08, right=0.98, bottom=0.17, wspace=0.3)
    a1, a2 = fig.subplots(1, 2)
    _bars(a1, [e["project_key"] for e in rows], [100 * e["ettr"] for e in rows], color="#2b6cb0")
    a1.set_ylim(0, 100)
    a1.set_ylabel("ETTR %")
    _title(a1, f"ETTR by project (campaigns of {r.get('campaign_min_gpus', 64)}+ GPUs)")
    a2.scatter([c["gpus"] for c in camps], [100 * c["ettr"] for c in camps], s=14, color="#2b6cb0",
               label="campaigns")
    # the model: a job on N nodes fails N × r times a node-hour (r: the report's DOWN events per node-hour,
    # RSC-2's 2.34 per 1,000 node-days without any) and each failure costs half a checkpoint interval of work
    # plus a restart's start-up (the report's mean, 10 minutes without one): ETTR = 1 / (1 + N r (Δ/2 + u))
    nf = r.get("node_failures") or []
    rate_day = next((n["cluster_down_per_1000_node_days"] for n in nf
                     if n.get("cluster_down_per_1000_node_days")), None) or 2.34
    g = next((e for e in r.get("goodput", []) if not e["project_key"]), {})
    restarts_h, n_restarts = g.get("restart_startup_hours") or 0, g.get("restarts") or 0
    startup_h = restarts_h / n_restarts if n_restarts and restarts_h else 10 / 60
    gpus = np.array([8, 16, 32, 64, 128, 256, 512, 1024, 4096])
    per_h = gpus / 8 * rate_day / 1000 / 24
    for interval_h, style in ((0.5, ":"), (1, "--"), (2, "-.")):
        a2.plot(gpus, 100 / (1 + per_h * (interval_h / 2 + startup_h)), style, color="#c53030",
                label=f"model, {interval_h:g} h checkpoints")
    a2.set_xscale("log")
    sizes = [c["gpus"] for c in camps if c["gpus"]]
    _log_ticks(a2.xaxis, min(sizes + [8]), max(sizes + [4096]))
    a2.set_ylim(0, 105)
    a2.set_xlabel("GPUs")
    _title(a2, "ETTR against size: observed and modelled")
    a2.text(0.02, 0.3, f"model: {rate_day:.2g} failures / 1,000 node-days,\n{60 * startup_h:.0f} min start-up a restart",
            transform=a2.transAxes, fontsize=7)
    a2.legend(fontsize=7, frameon=False, loc="lower right")
    return _png(fig)


def energy(r: dict) -> bytes | None:
    """Facility energy by project, GPUs and the rest of the nodes apart."""
    rows = [e for e in r.get("energy", []) if e["project_key"]]
    if not rows:
        return None
    fig = _figure(7, 3.2, left=0.12, bottom=0.15)
    ax = fig.subplots()
    names = [e["project_key"] for e in rows]
    gpu = [(e["gpu_kwh"] or 0) / 1000 for e in rows]
    _bars(ax, names, gpu, color="#2b6cb0", label="GPUs")
    _bars(ax, names, [(e["rest_kwh"] or 0) / 1000 for e in rows], bottom=gpu, color="#a0aec0",
          label="rest of node")
    ax.set_ylabel("IT energy, MWh")
    _title(ax, "Energy by project")
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    return _png(fig)


def whatif(r: dict) -> bytes | None:
    """What-if scenarios side by side: median and p90 queue wait by size class, and allocated ÷ capacity
    GPU-hours by day (allocated_of_capacity: not the report's utilization, allocated ÷ available)."""
    w = r.get("whatif")
    if not w or not w.get("waits"):
        return None
    scen = [s["scenario"] for s in w["summary"]]
    sizes = list(dict.fromkeys(x["size_class"] for x in w["waits"]))
    fig = _figure(10, 3.6, left=0.07, right=0.98, bottom=0.16, wspace=0.25)
    a1, a2 = fig.subplots(1, 2)
    by = {(x["scenario"], x["size_class"]): x for x in w["waits"]}
    width = 0.8 / max(len(scen), 1)
    colors = ["#718096", "#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280"]
    for k, sc in enumerate(scen):
        offset = (k - (len(scen) - 1) / 2) * width
        p50 = [by.get((sc, s), {}).get("wait_p50_hours") or 0 for s in sizes]
        p90 = [by.get((sc, s), {}).get("wait_p90_hours") or 0 for s in sizes]
        color = matplotlib.colors.to_rgba(colors[k % len(colors)])
        _bars(a1, sizes, p90, color=[(*color[:3], 0.35)], width=width, offset=offset)
        _bars(a1, sizes, p50, color=[color], width=width, offset=offset, label=sc)
    a1.set_xlabel("GPUs")
    a1.set_ylabel("hours")
    _title(a1, "Queue wait by size class (p50; p90 light)")
    a1.legend(fontsize=8, frameon=False, loc="upper left")
    for k, sc in enumerate(scen):
        days = [d for d in w["daily"] if d["scenario"] == sc]
        a2.plot(np.arange(len(days)), [100 * (d["allocated_of_capacity"] or 0) for d in days],
                color=colors[k % len(colors)], label=sc)
    labels = [str(d["day"])[5:10] for d in w["daily"] if d["scenario"] == scen[0]] if scen else []
    _ticks(a2.xaxis, np.arange(len(labels)), labels)
    a2.set_ylim(0, 105)
    a2.set_ylabel("allocated ÷ capacity %")
    _title(a2, "Allocated ÷ capacity GPU-hours by day")
    a2.tick_params(axis="x", labelsize=7, rotation=90)
    return _png(fig)


CHARTS = [("capacity_timeline", "Capacity over the month", capacity_timeline),
          ("size_shares", "Job sizes", size_shares),
          ("runtime_cdf", "Run times", runtime_cdf),
          ("gpu_heatmap", "GPU utilization heatmap", gpu_heatmap),
          ("gantt", "Largest jobs", gantt),
          ("failures", "Failures", failures),
          ("waste", "Idle GPUs and hung runs", waste),
          ("energy", "Energy by project", energy),
          ("goodput", "Effective training time ratio", goodput),
          ("whatif", "What the next purchase buys", whatif)]
# what each chart reads of the report: its input, for knowing whether it changed
_INPUTS = {"capacity_timeline": ("utilization_daily", "scope", "project"), "size_shares": ("job_sizes",),
           "runtime_cdf": ("run_times",), "gpu_heatmap": ("gpu_heatmap",), "gantt": ("largest_jobs",),
           "failures": ("end_states", "xid_codes"), "waste": ("idle_gpu_users", "hung_jobs"),
           "energy": ("energy",),
           # (the model's curves: the cluster's failure rate and restart start-up, the campaigns' size floor)
           "goodput": ("goodput", "campaigns", "node_failures", "campaign_min_gpus"), "whatif": ("whatif",)}
_CODE = hashlib.sha256(open(__file__, "rb").read()).hexdigest()[:16]  # a changed chart is drawn again
_DRAWN: dict[str, bytes | None] = {}  # input digest -> PNG (None: nothing to show), this process


def _default(v):
    return v.isoformat() if isinstance(v, (datetime, date)) else str(v)


def _rounded(v):
    """Floats to 9 significant digits: the engine adds floats in whatever order its threads finish, and a
    last-bit difference draws the same picture."""
    if isinstance(v, float):
        return float(f"{v:.9g}") if v == v else None
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_rounded(x) for x in v]
    return v


def chart_key(name: str, r: dict) -> str:
    """A digest of what chart ``name`` draws from ``r`` (and of this module's code)."""
    data = json.dumps([name, _CODE, _rounded([r.get(k) for k in _INPUTS[name]])], default=_default,
                      sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()


def draw_all(r: dict, cache: dict[str, bytes] | None = None, workers: int | None = None) -> dict[str, bytes]:
    """Every chart of the report that has something to show, by name. A chart whose input digest
    (:func:`chart_key`) is in ``cache`` (digest -> PNG: :func:`drawn_before` of the charts a previous run
    wrote) or that this process drew before is not drawn again. The others are drawn in up to ``workers``
    processes at once (default: one per core this process may use, at most one per chart; 1: here, one
    after the other). Each PNG carries its digest (a text chunk)."""
    keys = {name: chart_key(name, r) for name, _, _ in CHARTS}
    known = {**(cache or {}), **_DRAWN}
    todo = [name for name, key in keys.items() if key not in known]
    if workers is None:
        workers = min(len(todo), _cores())
    if workers > 1 and len(todo) > 1 and "fork" in multiprocessing.get_all_start_methods():
        drawn = dict(zip(todo, _draw_forked(todo, r, workers)))
    else:
        drawn = {name: _draw(name, r) for name in todo}
    out = {}
    for name, key in keys.items():
        if name in drawn:
            png = known[key] = _DRAWN[key] = _with_key(drawn[name], key) if drawn[name] else None
        else:
            png = known[key]
        if png:
            out[name] = png
    return out


_FUNCTIONS = {name: fn for name, _, fn in CHARTS}
_REPORT: dict | None = None  # the report being drawn, for the forked workers


def _draw(name: str, r: dict | None = None) -> bytes | None:
    return _FUNCTIONS[name](_REPORT if r is None else r)


def _draw_forked(names: list[str], r: dict, workers: int) -> list[bytes | None]:
    """Draw ``names`` in forked processes (they start with matplotlib imported and the report in memory;
    only the PNG bytes come back), the largest charts first."""
    global _REPORT
    first = sorted(names, key=lambda n: _COST.index(n) if n in _COST else len(_COST))
    _REPORT = r
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_as_a_worker) as pool:
            got = dict(zip(first, pool.map(_draw, first, chunksize=1)))
    finally:
        _REPORT = None
    return [got[n] for n in names]


def _as_a_worker() -> None:
    # a forked worker inherits the command's SIGTERM handler (core/errors.py: SIGTERM raises Terminated, for a
    # load to undo itself), but the pool ends its workers with SIGTERM when the charts are drawn: each printed
    # a Terminated traceback under every report. A worker has nothing to undo; SIGTERM simply ends it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


_COST = ["gantt", "gpu_heatmap", "runtime_cdf", "failures", "capacity_timeline", "size_shares"]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return 1


def drawn_before(pngs) -> dict[str, bytes]:
    """digest -> PNG of chart files (paths) drawn by :func:`draw_all`: the cache for drawing again."""
    out = {}
    for p in pngs:
        png = p.read_bytes()
        key = png_key(png)
        if key:
            out[key] = png
    return out


_KEY_CHUNK = b"ops-chart"


def _with_key(png: bytes, key: str) -> bytes:
    """The PNG with a tEXt chunk ops-chart=<key> after its header chunk."""
    data = _KEY_CHUNK + b"\0" + key.encode("ascii")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    end_of_ihdr = 8 + 8 + 13 + 4  # signature, IHDR's length and type, its 13 bytes, its CRC
    return png[:end_of_ihdr] + chunk + png[end_of_ihdr:]


def png_key(png: bytes) -> str | None:
    """The ops-chart digest a PNG carries, or None."""
    pos = 8
    while pos + 8 <= len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"tEXt" and png[pos + 8:pos + 8 + n].startswith(_KEY_CHUNK + b"\0"):
            return png[pos + 8 + len(_KEY_CHUNK) + 1:pos + 8 + n].decode("ascii", "replace")
        if kind in (b"IDAT", b"IEND"):
            return None
        pos += 12 + n
    return None
