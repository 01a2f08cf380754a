"""The monthly report's charts, written as SVG text (reports/svg.py) from the report dict.

Each chart is a function of the report alone, so the HTML, the Markdown and the what-if page show the same
pictures. A chart with nothing to show returns None and the renderers leave it out.

Until round 10 the charts were drawn with matplotlib into PNGs: its import (0.4 CPU-s) and nine charts
(0.85 CPU-s) were a third of a monthly report's time, so much that the charts were cached by their input's
digest and drawn in forked workers (docs/benchmarks.md, issue 51). Written directly, the ten charts of a
256-GPU month take under 10 ms in one process (less than the digests of their inputs did): no cache, no
workers. The pictures keep matplotlib's layout: its sizes (inches at 96 dpi), margins, colours, titles, labels
and legends.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

import numpy as np

from ops_warehouse.reports.svg import Axes, Figure, legend_height, log_decades, nice_ticks, text, tick_label

DPI = 96
QUANTILES = np.arange(1, 101) / 100
_STACK = [("allocated_gpu_h", "allocated", "#2b6cb0"), ("reserved_idle_gpu_h", "reserved, unused", "#d69e2e"),
          ("free_gpu_h", "free", "#cbd5e0"), ("drained_gpu_h", "drained", "#ed8936"), ("down_gpu_h", "down", "#c53030")]
# matplotlib's default colour cycle (tab10) and its tab20 map, which the charts were drawn with
CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
TAB20 = ["#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd",
         "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7", "#bcbd22", "#dbdb8d",
         "#17becf", "#9edae5"]
# viridis at 0, 0.1, ..., 1 (matplotlib's), interpolated between
VIRIDIS = ["#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884", "#44bf70", "#7ad151",
           "#bddf26", "#fde725"]
_EPOCH = date(1970, 1, 1)


def _figure(w_in: float, h_in: float) -> Figure:
    return Figure(w_in * DPI, h_in * DPI)


def _axes(fig: Figure, xlim, ylim, left: float = 0.09, right: float = 0.98, bottom: float = 0.14,
          top: float = 0.9, **log) -> Axes:
    """One axes within fixed margins (fractions of the figure, matplotlib's subplots_adjust)."""
    return fig.add(left * fig.width, (1 - top) * fig.height, (right - left) * fig.width, (top - bottom) * fig.height,
                   xlim, ylim, **log)


def _pair(fig: Figure, lims, left: float, right: float, bottom: float, top: float = 0.9,
          wspace: float = 0.3) -> list[Axes]:
    """Two axes side by side, ``wspace`` of an axes' width between them (matplotlib's subplots(1, 2))."""
    w = (right - left) / (2 + wspace)
    return [fig.add((left + k * w * (1 + wspace)) * fig.width, (1 - top) * fig.height, w * fig.width,
                    (top - bottom) * fig.height, xlim, ylim, **log) for k, (xlim, ylim, log) in enumerate(lims)]


def _yaxis(ax: Axes, lo: float, hi: float) -> None:
    at = nice_ticks(lo, hi)
    ax.yticks(at, [tick_label(v) for v in at])


def _xaxis(ax: Axes, lo: float, hi: float) -> None:
    at = nice_ticks(lo, hi)
    ax.xticks(at, [tick_label(v) for v in at])


def _top(values, floor: float = 1.0, margin: float = 1.05) -> float:
    """The upper limit of a value axis: the largest value (at least ``floor``) and 5% above it."""
    v = np.asarray(values, float)
    return max(float(np.nanmax(v)) if v.size else 0.0, floor) * margin


def _padded(lo: float, hi: float) -> tuple[float, float]:
    """matplotlib's autoscale: 5% of the span beyond each end."""
    pad = (hi - lo) * 0.05 or 0.5
    return lo - pad, hi + pad


def _days(values) -> np.ndarray:
    """Dates or datetimes (naive: UTC) as days since 1970-01-01, fractional."""
    out = []
    for v in values:
        if isinstance(v, datetime):
            if v.tzinfo is not None:
                v = v.astimezone(timezone.utc).replace(tzinfo=None)
            out.append((v - datetime(1970, 1, 1)).total_seconds() / 86400)
        else:
            out.append(float((v - _EPOCH).days))
    return np.asarray(out, float)


def _date_ticks(ax: Axes, first: float, last: float, rotate: float = 30) -> None:
    """Day ticks about a week apart over [first, last], labelled YYYY-MM-DD."""
    first, last = int(np.floor(first)), int(np.ceil(last))
    step = max(1, (last - first) // 6 or 1)
    at = np.arange(first, last + 1, step)
    ax.xticks(at, [str(np.datetime64(int(d), "D")) for d in at], rotate=rotate)


def _cat_ticks(ax: Axes, labels: list[str], horizontal: bool = False, size_pt: float = 10,
               rotate: float = 0) -> None:
    if horizontal:
        ax.yticks(np.arange(len(labels)), labels, size_pt)
    else:
        ax.xticks(np.arange(len(labels)), labels, size_pt, rotate)


def _bars(ax: Axes, heights, *, bottom=None, color, width: float = 0.8, offset: float = 0.0,
          horizontal: bool = False, opacity: float | None = None) -> None:
    """Bars at 0, 1, ... (plus ``offset``) from ``bottom`` (default 0), ``width`` wide."""
    n = len(heights)
    x = np.arange(n) + offset
    b = np.zeros(n) if bottom is None else np.asarray(bottom, float)
    top = b + np.asarray(heights, float)
    if horizontal:
        ax.rects(b, top, x - width / 2, x + width / 2, color, opacity)
    else:
        ax.rects(x - width / 2, x + width / 2, b, top, color, opacity)


def _margin_for(labels: list[str], fontsize: float, width_in: float) -> float:
    """A left margin (fraction of the figure) that holds tick labels of this many characters."""
    chars = max((len(s) for s in labels), default=0)
    return min(0.45, (chars * fontsize * 0.7 + 20) / 72 / width_in)


def _cat_lim(n: int) -> tuple[float, float]:
    """A category axis' limits: the bars at 0 .. n-1, 0.8 wide, with matplotlib's 5% margins."""
    return _padded(-0.4, max(n, 1) - 0.6)


def _colour(values, vmin: float = 0, vmax: float = 100) -> list[str]:
    """viridis colours of values in [vmin, vmax] (clipped); NaN (no data) white."""
    v = np.clip((np.asarray(values, float) - vmin) / (vmax - vmin), 0, 1) * (len(VIRIDIS) - 1)
    rgb = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in VIRIDIS], float)
    k = np.minimum(np.nan_to_num(v).astype(int), len(VIRIDIS) - 2)
    f = (np.nan_to_num(v) - k)[:, None]
    mix = np.rint(rgb[k] * (1 - f) + rgb[k + 1] * f).astype(int)
    out = [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in mix.tolist()]
    return [c if ok else "#ffffff" for c, ok in zip(out, ~np.isnan(v))]


def size_shares(r: dict) -> str | None:
    rows = r["job_sizes"]
    if not rows:
        return None
    x = np.arange(len(rows))
    jobs = [100 * (row["job_share"] or 0) for row in rows]
    hours = [100 * (row["gpu_h_share"] or 0) for row in rows]
    fig = _figure(7, 3.6)
    top = max(jobs + hours + [1]) * 1.05
    ax = _axes(fig, _cat_lim(len(rows)), (0, top), bottom=0.15)
    ax.rects(x - 0.4, x, np.zeros(len(rows)), jobs, "#4a5568")
    ax.rects(x, x + 0.4, np.zeros(len(rows)), hours, "#2b6cb0")
    _cat_ticks(ax, [row["size_class"] for row in rows])
    _yaxis(ax, 0, top)
    ax.xlabel("GPUs per job")
    ax.ylabel("%", 35)
    ax.title("Jobs vs GPU-hours by job size")
    ax.legend([("share of jobs", "patch", "#4a5568"), ("share of GPU-hours", "patch", "#2b6cb0")], "upper center")
    return fig.svg()


def runtime_cdf(r: dict) -> str | None:
    rows = [row for row in r["run_times"] if row["jobs_ended"]]
    if not rows:
        return None
    curves = [np.maximum(np.asarray(row["cdf_s"], float), 1) / 3600 for row in rows]
    lo, hi = min(q.min() for q in curves), max(q.max() for q in curves)
    fig = _figure(7, 3.6)
    ax = _axes(fig, (lo / 1.5, hi * 1.5), (-4, 104), bottom=0.15, xlog=True)
    decades = log_decades(lo, hi)
    ax.grid(decades, nice_ticks(0, 100))
    for k, (row, q) in enumerate(zip(rows, curves)):
        ax.line(q, QUANTILES * 100, CYCLE[k % len(CYCLE)], step=True)
    ax.xticks(decades, [f"{d:g}" for d in decades])
    _yaxis(ax, 0, 100)
    ax.xlabel("run time (hours, log scale)")
    ax.ylabel("% of jobs ended")
    ax.title("Run-time CDF by job size")
    # a CDF climbs to the right: that corner is empty
    ax.legend([(f"{row['size_class']} GPUs ({row['jobs_ended']})", "line", CYCLE[k % len(CYCLE)])
               for k, row in enumerate(rows)], "lower right", 8)
    return fig.svg()


def capacity_timeline(r: dict) -> str | None:
    rows = r["utilization_daily"]
    if not rows:
        return None
    days = _days([row["day"] for row in rows])
    values = {key: np.array([row[key] or 0 for row in rows], float) for key, _, _ in _STACK}
    total = sum(values.values())
    fig = _figure(8, 3.6)
    ax = _axes(fig, _padded(days.min() - 0.45, days.max() + 0.45), (0, 1), left=0.1, bottom=0.2)
    # the legend (three to a row, 6 px inside the axes' upper edge) gets headroom of its own, 6 px more, above
    # the tallest bar: in the lower left, where it was, it hid the first days' bars (the stack starts at zero)
    legend_px = legend_height(len(_STACK) + (r["scope"] == "project"), 8, ncol=3) + 12
    ax.ylim = (0.0, max(total.max(), 1) * 1.05 / (1 - legend_px / ax.height))
    bottom = np.zeros(len(rows))
    entries = []
    for key, label, color in _STACK:
        ax.rects(days - 0.45, days + 0.45, bottom, bottom + values[key], color)
        bottom = bottom + values[key]
        entries.append((label, "patch", color))
    if r["scope"] == "project":
        ax.line(days, [row["project_allocated_gpu_h"] or 0 for row in rows], "black", marker=True)
        entries.append((f"project {r['project']}", "line+dot", "black"))
    _date_ticks(ax, days.min(), days.max())
    _yaxis(ax, *ax.ylim)
    ax.ylabel("GPU-hours per day", 55)
    ax.title("Capacity: allocated, idle, down")
    ax.legend(entries, "upper left", 8, ncol=3)
    return fig.svg()


def gpu_heatmap(r: dict) -> str | None:
    rows = r["gpu_heatmap"]
    if not rows:
        return None
    nodes = sorted({(row["rack"], row["node"]) for row in rows})
    index = {n: i for i, n in enumerate(nodes)}
    gpus = max(row["gpu"] for row in rows) + 1
    at = np.array([index[(row["rack"], row["node"])] for row in rows])
    gpu = np.array([row["gpu"] for row in rows])
    m = np.full((len(nodes), gpus), np.nan)
    m[at, gpu] = np.array([np.nan if row["gpu_util_pct"] is None else row["gpu_util_pct"] for row in rows], float)
    step = max(1, len(nodes) // 40)
    ticks = [f"{nodes[i][0]} {nodes[i][1]}" for i in range(0, len(nodes), step)]
    w, h = max(4, 1 + gpus * 0.5), max(3, 0.14 * len(nodes) + 1.2)
    left = _margin_for(ticks, 6, w)
    fig = _figure(w, h)
    # the colour bar takes 8% of the width and a 3% gap beside the cells (matplotlib's colorbar fraction, pad)
    right = 1 - 0.45 / w
    cells = right - left
    ax = _axes(fig, (-0.5, gpus - 0.5), (len(nodes) - 0.5, -0.5), left=left, right=left + cells * 0.89,
               bottom=0.5 / h, top=1 - 0.4 / h)
    col, row = np.meshgrid(np.arange(gpus), np.arange(len(nodes)))
    ax.rects(col.ravel() - 0.5, col.ravel() + 0.5, row.ravel() - 0.5, row.ravel() + 0.5, _colour(m.ravel()))
    ax.yticks(np.arange(0, len(nodes), step), ticks, 6)
    ax.xticks(np.arange(gpus), [str(g) for g in range(gpus)])
    ax.xlabel("GPU", 22)
    ax.title("Mean GPU utilization (%) by rack, node, GPU", 10)
    bar = fig.add(fig.width * (left + cells * 0.92), ax.top, fig.width * cells * 0.05, ax.height, (0, 1), (0, 100))
    stops = "".join(f'<stop offset="{k / (len(VIRIDIS) - 1):g}" stop-color="{c}"/>' for k, c in enumerate(VIRIDIS))
    fig.parts.append(f'<defs><linearGradient id="viridis" x1="0" y1="1" x2="0" y2="0">{stops}</linearGradient></defs>')
    bar.parts.append(f'<rect x="{bar.left:.2f}" y="{bar.top:.2f}" width="{bar.width:.2f}" height="{bar.height:.2f}" '
                     f'fill="url(#viridis)"/>')
    bar.yticks(range(0, 101, 20), [str(v) for v in range(0, 101, 20)], right=True)
    return fig.svg()


def gantt(r: dict) -> str | None:
    jobs = [j for j in r["largest_jobs"] if j["start_ts"] is not None]
    if not jobs:
        return None
    nodes = sorted({n for j in jobs for n in j["nodes"]})
    row = {n: i for i, n in enumerate(nodes)}
    start = _days([j["start_ts"] for j in jobs])
    end = _days([j["end_ts"] or j["start_ts"] for j in jobs])
    per_job = np.array([len(j["nodes"]) for j in jobs])
    y = np.array([row[n] for j in jobs for n in j["nodes"]], float)
    x0, x1 = np.repeat(start, per_job), np.repeat(end, per_job)
    colors = [TAB20[k % 20] for k in np.repeat(np.arange(len(jobs)), per_job).tolist()]  # a colour a job
    step = max(1, len(nodes) // 40)
    h = max(3, 0.13 * len(nodes) + 1.5)
    fig = _figure(9, h)
    ax = _axes(fig, _padded(min(start.min(), end.min()), max(start.max(), end.max())),
               _padded(-0.4, len(nodes) - 0.6),
               left=_margin_for(nodes[::step], 6, 9), right=0.98, bottom=0.9 / h, top=1 - 0.4 / h)
    ax.rects(x0, x1, y - 0.4, y + 0.4, colors)
    # each job's id at the middle of its bars: its time span's and its nodes' rows' mean (a job without nodes:
    # no bar, no id)
    job = np.repeat(np.arange(len(jobs)), per_job)
    mid_row = np.bincount(job, weights=y, minlength=len(jobs)) / np.maximum(per_job, 1)
    mx, my = ax.x((start + end) / 2).tolist(), ax.y(mid_row).tolist()
    ax.parts += [text(a, b, j["job_id"], 6) for a, b, j, n in zip(mx, my, jobs, per_job.tolist()) if n]
    ax.yticks(np.arange(0, len(nodes), step), nodes[::step], 6)
    _date_ticks(ax, min(start.min(), end.min()), max(start.max(), end.max()))
    ax.title(f"The {len(jobs)} largest jobs over nodes (by GPU-hours)")
    return fig.svg()


def failures(r: dict) -> str | None:
    states = r["end_states"]
    if not states:
        return None
    names = [s["state"] for s in states]
    hours = [s["gpu_h"] or 0 for s in states]
    codes = sorted(r["xid_codes"], key=lambda x: x["xid"])
    events = [x["events"] for x in codes]
    fig = _figure(9, 3.6)
    a1, a2 = _pair(fig, [((0, _top(hours)), _cat_lim(len(names)), {}),
                         (_cat_lim(len(codes)), (0, _top(events)), {})],
                   left=_margin_for(names, 10, 9), right=0.98, bottom=0.15)
    _bars(a1, hours, color="#4a5568", horizontal=True)
    _cat_ticks(a1, names, horizontal=True)
    _xaxis(a1, 0, _top(hours))
    a1.xlabel("GPU-hours")
    a1.title("How runs ended (GPU-hours)")
    if codes:
        _bars(a2, events, color="#c53030")
        _cat_ticks(a2, [str(x["xid"]) for x in codes])
    _yaxis(a2, 0, _top(events))
    a2.xlabel("Xid")
    a2.title("Xid events by code")
    return fig.svg()


def waste(r: dict) -> str | None:
    """Idle GPU-hours by project (whole nodes and shared), and GPU-hours lost per hung run."""
    projects = [u for u in r.get("idle_gpu_users", []) if u["level"] == "project"]
    hung = r.get("hung_jobs", [])[:15]
    if not projects and not hung:
        return None
    names = [u["project"] for u in projects]
    whole = np.array([u["whole_node_gpu_h"] or 0 for u in projects], float)
    shared = np.array([u["shared_gpu_h"] or 0 for u in projects], float)
    lost = [h["hung_gpu_h"] or 0 for h in hung]
    fig = _figure(9, 3.4)
    a1, a2 = _pair(fig, [(_cat_lim(len(names)), (0, _top(whole + shared)), {}),
                         (_cat_lim(len(hung)), (0, _top(lost)), {})], left=0.08, right=0.98, bottom=0.2)
    _bars(a1, whole, color="#2b6cb0")
    _bars(a1, shared, bottom=whole, color="#90cdf4")
    _cat_ticks(a1, names)
    _yaxis(a1, 0, _top(whole + shared))
    a1.ylabel("GPU-hours", 40)
    a1.title("GPU-hours held idle, by project")
    if projects:
        a1.legend([("whole nodes", "patch", "#2b6cb0"), ("shared nodes", "patch", "#90cdf4")], "upper right", 8,
                  frame=False)
    _bars(a2, lost, color="#c53030")
    _cat_ticks(a2, [str(h["job_id"]) for h in hung], size_pt=7, rotate=45)
    _yaxis(a2, 0, _top(lost))
    a2.ylabel("GPU-hours", 40)
    a2.title("Hung runs: GPU-hours lost")
    return fig.svg()


def goodput(r: dict) -> str | None:
    """ETTR per project, and each listed campaign's against the published model (Kokolis et al., HPCA 2025) at
    its size, for the checkpoint intervals the generator's and most sites' runs use, at this cluster's own
    failure rate and restart start-up."""
    rows = [e for e in r.get("goodput", []) if e["project_key"] and e["ettr"] is not None]
    camps = [c for c in r.get("campaigns", []) if c["ettr"] is not None]
    if not rows and not camps:
        return None
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
    sizes = [c["gpus"] for c in camps if c["gpus"]]
    lo, hi = min(sizes + [8]), max(sizes + [4096])
    fig = _figure(9, 3.4)
    a1, a2 = _pair(fig, [(_cat_lim(len(rows)), (0, 100), {}), ((lo / 1.4, hi * 1.4), (0, 105), {"xlog": True})],
                   left=0.08, right=0.98, bottom=0.17)
    _bars(a1, [100 * e["ettr"] for e in rows], color="#2b6cb0")
    _cat_ticks(a1, [e["project_key"] for e in rows])
    _yaxis(a1, 0, 100)
    a1.ylabel("ETTR %", 40)
    a1.title(f"ETTR by project (campaigns of {r.get('campaign_min_gpus', 64)}+ GPUs)")
    a2.points([c["gpus"] for c in camps], [100 * c["ettr"] for c in camps], 2.1, "#2b6cb0")
    entries = [("campaigns", "dot", "#2b6cb0")]
    for interval_h, style, dash in ((0.5, ":", "1.5,2.5"), (1, "--", "5.5,2.4"), (2, "-.", "9.6,2.4,1.5,2.4")):
        a2.line(gpus, 100 / (1 + per_h * (interval_h / 2 + startup_h)), "#c53030", dash=dash)
        entries.append((f"model, {interval_h:g} h checkpoints", style, "#c53030"))
    decades = log_decades(lo, hi)
    a2.xticks(decades, [f"{d:g}" for d in decades])
    _yaxis(a2, 0, 105)
    a2.xlabel("GPUs")
    a2.title("ETTR against size: observed and modelled")
    a2.note(0.02, 0.3, [f"model: {rate_day:.2g} failures / 1,000 node-days,",
                        f"{60 * startup_h:.0f} min start-up a restart"])
    a2.legend(entries, "lower right", 7, frame=False)
    return fig.svg()


def energy(r: dict) -> str | None:
    """Facility energy by project, GPUs and the rest of the nodes apart."""
    rows = [e for e in r.get("energy", []) if e["project_key"]]
    if not rows:
        return None
    gpu = np.array([(e["gpu_kwh"] or 0) / 1000 for e in rows], float)
    rest = np.array([(e["rest_kwh"] or 0) / 1000 for e in rows], float)
    top = _top(gpu + rest, floor=0)
    fig = _figure(7, 3.2)
    ax = _axes(fig, _cat_lim(len(rows)), (0, top or 1), left=0.12, bottom=0.15)
    _bars(ax, gpu, color="#2b6cb0")
    _bars(ax, rest, bottom=gpu, color="#a0aec0")
    _cat_ticks(ax, [e["project_key"] for e in rows])
    _yaxis(ax, 0, top or 1)
    ax.ylabel("IT energy, MWh", 50)
    ax.title("Energy by project")
    ax.legend([("GPUs", "patch", "#2b6cb0"), ("rest of node", "patch", "#a0aec0")], "upper right", 8, frame=False)
    return fig.svg()


def whatif(r: dict) -> str | None:
    """What-if scenarios side by side: median and p90 queue wait by size class, and allocated ÷ capacity
    GPU-hours by day (allocated_of_capacity: not the report's utilization, allocated ÷ available)."""
    w = r.get("whatif")
    if not w or not w.get("waits"):
        return None
    scen = [s["scenario"] for s in w["summary"]]
    sizes = list(dict.fromkeys(x["size_class"] for x in w["waits"]))
    by = {(x["scenario"], x["size_class"]): x for x in w["waits"]}
    width = 0.8 / max(len(scen), 1)
    colors = ["#718096", "#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280"]
    p50 = [[by.get((sc, s), {}).get("wait_p50_hours") or 0 for s in sizes] for sc in scen]
    p90 = [[by.get((sc, s), {}).get("wait_p90_hours") or 0 for s in sizes] for sc in scen]
    daily = [[100 * (d["allocated_of_capacity"] or 0) for d in w["daily"] if d["scenario"] == sc] for sc in scen]
    labels = [str(d["day"])[5:10] for d in w["daily"] if d["scenario"] == scen[0]] if scen else []
    top = _top([v for p in p50 + p90 for v in p] + [0], floor=0) or 1
    n_days = max([len(d) for d in daily] + [1])
    fig = _figure(10, 3.6)
    a1, a2 = _pair(fig, [(_cat_lim(len(sizes)), (0, top), {}), (_padded(0, n_days - 1), (0, 105), {})],
                   left=0.07, right=0.98, bottom=0.16, wspace=0.25)
    entries = []
    for k, sc in enumerate(scen):
        offset = (k - (len(scen) - 1) / 2) * width
        color = colors[k % len(colors)]
        _bars(a1, p90[k], color=color, width=width, offset=offset, opacity=0.35)
        _bars(a1, p50[k], color=color, width=width, offset=offset)
        entries.append((sc, "patch", color))
    _cat_ticks(a1, sizes)
    _yaxis(a1, 0, top)
    a1.xlabel("GPUs")
    a1.ylabel("hours", 40)
    a1.title("Queue wait by size class (p50; p90 light)")
    a1.legend(entries, "upper left", 8, frame=False)
    for k, sc in enumerate(scen):
        a2.line(np.arange(len(daily[k])), daily[k], colors[k % len(colors)])
    a2.xticks(np.arange(len(labels)), labels, 7, rotate=90)
    _yaxis(a2, 0, 105)
    a2.ylabel("allocated ÷ capacity %", 40)
    a2.title("Allocated ÷ capacity GPU-hours by day")
    return fig.svg()


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


def draw_all(r: dict) -> dict[str, str]:
    """Every chart of the report that has something to show, by name: SVG text."""
    out = {}
    for name, _, fn in CHARTS:
        svg = fn(r)
        if svg:
            out[name] = svg
    return out
