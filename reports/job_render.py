"""`ops-report job JOBID` as text, JSON or HTML: each run of the job with its figures, its GPUs and the
expert's notes, and in HTML a chart per GPU of its utilization over the run (inline SVG). Every figure is a
column of sql/marts/job_detail.sql, run_gpus.sql, job_notes.sql or run_gpu_series.sql (docs/efficiency.md);
this module only words and draws them. It takes the plain data of ``JobReport.as_dict()``."""

from __future__ import annotations

import html
import json
from datetime import datetime

# what each note says, worded for the user (the rules are job_notes.sql's)
NOTE_TEXT = {
    "idle_gpu": "GPU idle the whole run (mean utilization)",
    "cpu_bound": "CPU-bound: CPUs {threshold:g} % or more busy while the GPUs waited",
    "low_gpu_memory": "GPU memory under {threshold:g} % used",
    "hang_at_end": "hang at the end (GPUs and network idle until killed)",
    "node_behind": "node behind its peers (GPU utilization vs the run's median node)",
    "no_checkpoint": "no checkpoint seen in an interrupted run of {threshold:g} h or more",
    "long_wait": "waited longer than 90 % of its size class",
}


def _num(v, digits: int = 1) -> str:
    return "–" if v is None or v != v else f"{v:,.{digits}f}"


def _pct(frac) -> str:
    return "–" if frac is None or frac != frac else f"{frac * 100:.1f} %"


def _dur(s) -> str:
    if s is None:
        return "–"
    s = int(s)
    return f"{s // 86400}-{s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 86400 \
        else f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _note_line(n: dict) -> str:
    what = NOTE_TEXT.get(n["note"], n["note"]).format(threshold=n["threshold"] or 0)
    return f"{what}: {_num(n['figure'])} {n['unit']} (threshold {_num(n['threshold'])}; {n['detail']})"


# which telemetry the figures came from, in words
_GRAIN_TEXT = {"sample": "per sample", "hour": "hourly rollup: the samples expired", "": "no telemetry"}
_ATTRIBUTION_TEXT = {"gpu": "named by the hpc_job label", "node share": "by the node's share (no label)"}
_GPU_HEAD = ("  node       GPU  util%  peak%     SM  tensor   DRAM  mem peak/total MiB   power W  energy kWh"
             "  throttled s  grain   attribution")


def _run_lines(r: dict, gpus: list[dict], notes: list[dict]) -> list[str]:
    superseded = "  [requeued: superseded]" if r["is_superseded"] else ""
    out = [
        f"run {r['run']} of {r['runs']} (submitted {r['submit_ts']}){superseded}",
        f"  user {r['user']}  account {r['account']}  project {r['project']}  partition {r['partition']}"
        f"  qos {r['qos']}",
        f"  name {r['job_name']}  state {r['state']}  exit {r['exit_code']}:{r['exit_signal']}",
        f"  start {r['start_ts']}  end {r['end_ts']}  wait {_dur(r['wait_s'])}  run {_dur(r['wall_s'])}"
        f"  limit {_dur(r['timelimit_s'])}",
        f"  nodes {r['nnodes']} ({','.join(r['nodes'] or [])})  CPUs {r['ncpus']}  GPUs {r['gpus']} {r['gpu_type']}",
        f"  CPU efficiency {_pct(r['cpu_eff'])} ({_num(r['cpu_time_s'], 0)} CPU-s)  memory efficiency "
        f"{_pct(r['mem_eff'])} (max RSS {_num(r['max_rss_mib'], 0)} of {_num(r['req_mem_mib'], 0)} MiB requested)",
        f"  GPU-hours {_num(r['gpu_h'], 2)}  utilization {_num(r['gpu_util_pct'])} %"
        f" (peak {_num(r['util_peak_pct'])} %)  SM {_pct(r['sm_active'])}  tensor {_pct(r['tensor_active'])}"
        f"  DRAM {_pct(r['dram_active'])}",
        f"  GPU memory peak {_num(r['fb_peak_mib'], 0)} of {_num(r['fb_total_mib'], 0)} MiB"
        f" ({_pct(r['fb_peak_share'])})  energy {_num(r['energy_kwh'], 2)} kWh"
        f"  throttled {_num(r['throttled_s'], 0)} s",
        f"  telemetry read at grain: {r['grain'] or 'none'} ({_GRAIN_TEXT.get(r['grain'] or '', 'mixed')})"
        f"; GPUs {_ATTRIBUTION_TEXT.get(r['attribution'], r['attribution'] or '–')}",
    ]
    if gpus:
        out.append(_GPU_HEAD)
        for g in gpus:
            out.append(
                f"  {g['node']:<10} {g['gpu']:>3} {_num(g['util_mean_pct']):>6} {_num(g['util_peak_pct']):>6}"
                f" {_num(g['sm_active'], 2):>6} {_num(g['tensor_active'], 2):>7} {_num(g['dram_active'], 2):>6}"
                f"  {_num(g['fb_peak_mib'], 0):>8}/{_num(g['fb_total_mib'], 0):<8}"
                f" {_num(g['power_mean_w']):>9} {_num(g['energy_kwh'], 3):>11} {_num(g['throttled_s'], 0):>12}"
                f"  {g['grain']:<7} {g['attribution']}")
    out.append("  notes:" if notes else "  notes: none")
    out += [f"  - {_note_line(n)}" for n in notes]
    return out


def _of(rows: list[dict], r: dict) -> list[dict]:
    return [x for x in rows if x["job_id"] == r["job_id"] and x["submit_ts"] == r["submit_ts"]]


def job_text(d: dict) -> str:
    lines = [f"job {d['job_id']} on {d['cluster']}: {len(d['runs'])} run{'s' if len(d['runs']) != 1 else ''}"]
    for r in d["runs"]:
        lines += [""] + _run_lines(r, _of(d["gpus"], r), _of(d["notes"], r))
    return "\n".join(lines) + "\n"


def job_json(d: dict) -> str:
    return json.dumps(d, indent=1, default=str) + "\n"


def _svg(points: list[dict], t0: float, t1: float, w: int = 360, h: int = 80) -> str:
    """A GPU's utilization (0-100 %) over the run as a polyline: drawing, no figure."""
    span = max(t1 - t0, 1.0)
    xy = []
    for p in points:
        if p["util_pct"] is None:
            continue
        t = datetime.fromisoformat(p["point_ts"]).timestamp()
        xy.append(f"{(t - t0) / span * w:.1f},{h - p['util_pct'] / 100 * h:.1f}")
    return (f'<svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="GPU utilization">'
            f'<rect width="{w}" height="{h}" fill="#f4f4f4"/>'
            f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{" ".join(xy)}"/></svg>')


def job_html(d: dict) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>job {e(d['job_id'])}</title>"
             "<style>body{font-family:sans-serif}td,th{padding:2px 6px;text-align:right}"
             "td:first-child{text-align:left}.g{display:inline-block;margin:4px}</style></head><body>",
             f"<h1>Job {e(d['job_id'])} on {e(d['cluster'])}</h1>"]
    for r in d["runs"]:
        gpus, notes = _of(d["gpus"], r), _of(d["notes"], r)
        parts.append(f"<h2>Run {r['run']} of {r['runs']}</h2><pre>{e(chr(10).join(_run_lines(r, [], notes)))}</pre>")
        if gpus:
            cols = ("node", "gpu", "util_mean_pct", "util_peak_pct", "sm_active", "tensor_active", "dram_active",
                    "fb_peak_mib", "fb_total_mib", "power_mean_w", "energy_kwh", "throttled_s", "grain",
                    "attribution")
            parts.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>")
            for g in gpus:
                parts.append("<tr>" + "".join(
                    f"<td>{e(_num(g[c], 2) if isinstance(g[c], float) else str(g[c]))}</td>" for c in cols) + "</tr>")
            parts.append("</table>")
        series = _of(d["series"], r)
        if series and r["start_ts"]:
            t0 = datetime.fromisoformat(r["start_ts"]).timestamp()
            t1 = datetime.fromisoformat(r["end_ts"]).timestamp() if r["end_ts"] else t0
            parts.append(f"<h3>GPU utilization over the run ({e(r['grain'])} grain)</h3>")
            for g in gpus:
                pts = [p for p in series if p["node"] == g["node"] and p["gpu"] == g["gpu"]]
                parts.append(f"<div class='g'><div>{e(g['node'])} GPU {g['gpu']}</div>{_svg(pts, t0, t1)}</div>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_job(d: dict, fmt: str) -> str:
    return {"text": job_text, "json": job_json, "html": job_html}[fmt](d)
