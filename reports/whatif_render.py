"""What-if replays as tables (reports/, plain data in, text out): the observed window, the unchanged replay
with its error, and each changed cluster side by side; the monthly report's "What the next purchase buys"
section and `ops-report whatif` both come from :func:`sections`."""

from __future__ import annotations

import html
import json

from ops_warehouse.reports import chart_library


def _n(v, digits: int = 0) -> str:
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def _by(rows: list[dict], key: str) -> dict:
    return {r[key]: r for r in rows}


def sections(w: dict) -> list[tuple[str, str, list[str], list[list[str]], str | None]]:
    """(title, lead, header, rows, chart) for a what-if result (analytics/whatif.py, whatif_report)."""
    summ = w["summary"]
    scen = [r["scenario"] for r in summ]
    rep = _by(summ, "scenario").get("replay", {})
    cur = w.get("currency", "")
    head = ["", *scen]
    metrics = [
        ("nodes", "nodes", 0), ("capacity GPU-h", "capacity_gpu_h", 0),
        ("allocated GPU-h", "allocated_gpu_h", 0), ("allocated ÷ capacity", "allocated_of_capacity", None),
        ("unallocated GPU-h", "unallocated_gpu_h", 0), ("jobs submitted", "jobs", 0), ("not started by the end", "jobs_not_started", 0),
        ("wait, all jobs (h)", "wait_hours", 0), ("wait p50 (h)", "wait_p50_hours", 2), ("wait p90 (h)", "wait_p90_hours", 1),
        (f"capex {cur}".strip(), "capex", 0), (f"capex per allocated GPU-h {cur}".strip(), "capex_per_allocated_gpu_h", 3),
        ("nodes added", "added_nodes", 0), ("wait-hours saved", "wait_hours_saved", 0),
        ("wait-hours saved per added node", "wait_hours_saved_per_added_node", 1),
        (f"cost per wait-hour saved {cur}".strip(), "cost_per_wait_hour_saved", 2),
    ]
    rows = []
    for label, key, d in metrics:
        rows.append([label, *[_pct(r[key]) if d is None else _n(r[key], d) for r in summ]])
    err = rep.get("allocated_of_capacity_error_pts")
    waits = w["waits"]
    werr = [f"{r['size_class']} GPUs {_n(r['wait_p50_ratio'], 2)}×" for r in waits
            if r["scenario"] == "replay" and r["wait_p50_ratio"] is not None]
    lead = (f"{w['cluster']}, {w['window'][0]} .. {w['window'][1]}: every job of the window replayed with the backfill "
            "scheduler (planning/backfill.py) on the cluster as it was ('replay') and as changed. How far to trust "
            f"it: the unchanged replay's allocated ÷ capacity GPU-hours is {_n(err, 2)} points from what happened"
            + (f"; its median waits are {', '.join(werr)} the observed ones" if werr else "")
            + ". The replay knows each job's run time, starts jobs in submission order with EASY backfill, "
            "and does not model priorities, fair share, preemption or failures (docs/whatif.md). Allocated ÷ "
            "capacity is not the monthly report's utilization (allocated ÷ available), and the capex per allocated "
            "GPU-hour leaves out the energy its cost per allocated GPU-hour includes; not started: jobs submitted before "
            "the window's end, in it or earlier, that had not started by it.")
    out = [("What the next purchase buys", lead, head, rows, "whatif")]
    sizes = []
    for r in waits:
        if r["size_class"] not in sizes:
            sizes.append(r["size_class"])
    wb = {(r["scenario"], r["size_class"]): r for r in waits}
    wrows = [[s, *[f"{_n(wb[(sc, s)]['wait_p50_hours'], 2)} / {_n(wb[(sc, s)]['wait_p90_hours'], 1)}"
                   if (sc, s) in wb else "–" for sc in scen]] for s in sizes]
    out.append(("Queue waits by size class (p50 / p90 hours)", "Jobs submitted in the window, by GPUs asked for.",
                ["GPUs", *scen], wrows, None))
    pj = w["projects"]
    projects = []
    for r in pj:
        if r["project"] not in projects:
            projects.append(r["project"])
    pb = {(r["scenario"], r["project"]): r for r in pj}
    prow = [[p, *[_n(pb[(sc, p)]["gpu_h"]) if (sc, p) in pb else "–" for sc in scen]] for p in projects]
    out.append(("GPU-hours served per project", "", ["project", *scen], prow, None))
    return out


def to_markdown(w: dict, chart_file: str | None = None) -> str:
    lines = [f"# What-if: {w['cluster']} {w['window'][0]} .. {w['window'][1]}", ""]
    for title, lead, head, rows, chart in sections(w):
        lines += [f"## {title}", "", lead, ""] if lead else [f"## {title}", ""]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
        lines.append("")
        if chart and chart_file:
            lines += [f"![{title}]({chart_file})", ""]
    passes = ", ".join(f"{k}: {v['passes']:,} scheduling passes" for k, v in w["replay_stats"].items())
    lines.append(f"Replayed with {passes}.")
    return "\n".join(lines) + "\n"


def to_html(w: dict, chart: str | None = None) -> str:
    body = [f"<h1>What-if: {html.escape(w['cluster'])} {w['window'][0]} .. {w['window'][1]}</h1>"]
    for title, lead, head, rows, ch in sections(w):
        body.append(f"<h2>{html.escape(title)}</h2>")
        if lead:
            body.append(f"<p>{html.escape(lead)}</p>")
        body.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
        body += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows]
        body.append("</table>")
        if ch and chart:
            body.append(chart_library.chart_img(chart, title))
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>What-if</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px}table{border-collapse:"
            "collapse}th,td{border-bottom:1px solid #ddd;padding:.2em .6em;text-align:right}th:first-child,"
            "td:first-child{text-align:left}img{max-width:100%}</style></head><body>" + "".join(body) + "</body></html>\n")


def chart(w: dict) -> str | None:
    """The waits-by-size-class and utilization-by-day chart of a what-if result (reports/charts.py): SVG."""
    return chart_library.charts().whatif({"whatif": w})


def to_json(w: dict) -> str:
    return json.dumps(w, default=str, indent=1) + "\n"
