"""The monthly report's charts, drawn with matplotlib (Agg, no screen) from the report dict; PNG bytes.

Each chart is a function of the report alone, so the HTML, the Markdown and a notebook draw the same
pictures. A chart with nothing to show returns None and the renderers leave it out.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

QUANTILES = np.arange(1, 101) / 100
_STACK = [("allocated_gpu_h", "allocated", "#2b6cb0"), ("reserved_idle_gpu_h", "reserved, unused", "#d69e2e"),
          ("free_gpu_h", "free", "#cbd5e0"), ("drained_gpu_h", "drained", "#ed8936"), ("down_gpu_h", "down", "#c53030")]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def size_shares(r: dict) -> bytes | None:
    rows = r["job_sizes"]
    if not rows:
        return None
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.bar(x - 0.2, [100 * (row["job_share"] or 0) for row in rows], 0.4, label="share of jobs", color="#4a5568")
    ax.bar(x + 0.2, [100 * (row["gpu_hour_share"] or 0) for row in rows], 0.4, label="share of GPU-hours",
           color="#2b6cb0")
    ax.set_xticks(x, [row["size_class"] for row in rows])
    ax.set_xlabel("GPUs per job")
    ax.set_ylabel("%")
    ax.set_title("Jobs vs GPU-hours by job size")
    ax.legend()
    return _png(fig)


def runtime_cdf(r: dict) -> bytes | None:
    rows = [row for row in r["run_times"] if row["jobs_ended"]]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for row in rows:
        q = np.maximum(np.asarray(row["cdf_s"], float), 1) / 3600
        ax.step(q, QUANTILES * 100, where="post", label=f"{row['size_class']} GPUs ({row['jobs_ended']})")
    ax.set_xscale("log")
    ax.set_xlabel("run time (hours, log scale)")
    ax.set_ylabel("% of jobs ended")
    ax.set_title("Run-time CDF by job size")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def capacity_timeline(r: dict) -> bytes | None:
    rows = r["utilization_daily"]
    if not rows:
        return None
    days = [row["day"] for row in rows]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    bottom = np.zeros(len(rows))
    for key, label, color in _STACK:
        v = np.array([row[key] or 0 for row in rows], float)
        ax.bar(days, v, bottom=bottom, label=label, color=color, width=0.9)
        bottom += v
    if r["scope"] == "project":
        ax.plot(days, [row["project_allocated_gpu_h"] for row in rows], color="black", marker=".",
                label=f"project {r['project']}")
    ax.set_ylabel("GPU-hours per day")
    ax.set_title("Capacity: allocated, idle, down")
    ax.legend(fontsize=8, ncol=3, loc="lower left")
    fig.autofmt_xdate()
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
    fig, ax = plt.subplots(figsize=(max(4, 1 + gpus * 0.5), max(3, 0.14 * len(nodes) + 1.2)))
    im = ax.imshow(m, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest")
    step = max(1, len(nodes) // 40)
    ax.set_yticks(range(0, len(nodes), step), [f"{nodes[i][0]} {nodes[i][1]}" for i in range(0, len(nodes), step)],
                  fontsize=6)
    ax.set_xticks(range(gpus))
    ax.set_xlabel("GPU")
    ax.set_title("Mean GPU utilization (%) by rack, node, GPU")
    fig.colorbar(im, ax=ax)
    return _png(fig)


def gantt(r: dict) -> bytes | None:
    jobs = [j for j in r["largest_jobs"] if j["start_ts"] is not None]
    if not jobs:
        return None
    nodes = sorted({n for j in jobs for n in j["nodes"]})
    row = {n: i for i, n in enumerate(nodes)}
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(9, max(3, 0.13 * len(nodes) + 1.5)))
    for k, j in enumerate(jobs):
        end = j["end_ts"] or j["start_ts"]
        for n in j["nodes"]:
            ax.barh(row[n], (end - j["start_ts"]).total_seconds() / 86400, left=matplotlib.dates.date2num(j["start_ts"]),
                    color=cmap(k % 20), height=0.8)
        mid = matplotlib.dates.date2num(j["start_ts"]) + (end - j["start_ts"]).total_seconds() / 86400 / 2
        ax.text(mid, np.mean([row[n] for n in j["nodes"]]), str(j["job_id"]), ha="center", va="center", fontsize=6)
    step = max(1, len(nodes) // 40)
    ax.set_yticks(range(0, len(nodes), step), nodes[::step], fontsize=6)
    ax.xaxis_date()
    ax.set_title(f"The {len(jobs)} largest jobs over nodes (by GPU-hours)")
    fig.autofmt_xdate()
    return _png(fig)


def failures(r: dict) -> bytes | None:
    states = r["end_states"]
    if not states:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    a1.barh([s["state"] for s in states], [s["gpu_hours"] or 0 for s in states], color="#4a5568")
    a1.set_xlabel("GPU-hours")
    a1.set_title("How runs ended (GPU-hours)")
    codes = sorted(r["xid_codes"], key=lambda x: x["xid"])
    if codes:
        a2.bar([str(x["xid"]) for x in codes], [x["events"] for x in codes], color="#c53030")
    a2.set_xlabel("Xid")
    a2.set_title("Xid events by code")
    return _png(fig)


CHARTS = [("capacity_timeline", "Capacity over the month", capacity_timeline),
          ("size_shares", "Job sizes", size_shares),
          ("runtime_cdf", "Run times", runtime_cdf),
          ("gpu_heatmap", "GPU utilization heatmap", gpu_heatmap),
          ("gantt", "Largest jobs", gantt),
          ("failures", "Failures", failures)]


def draw_all(r: dict) -> dict[str, bytes]:
    out = {}
    for name, _, fn in CHARTS:
        png = fn(r)
        if png:
            out[name] = png
    return out
