"""The monthly report as Markdown (terminals, mail), one self-contained HTML file (charts inline) and JSON
(docs/monthly.md: the versioned schema). All three are built from the same sections of the report dict."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from urllib.parse import quote

from ops_warehouse.files import safe_name, write_file
from ops_warehouse.reports import chart_library, whatif_render


# the charts (SVG text, numpy) are imported by the first chart drawn (reports/chart_library.py): a JSON
# report or Markdown on the terminal draws none
def draw_all(r: dict) -> dict[str, str]:
    return chart_library.charts().draw_all(r)


def _chart_titles() -> dict[str, str]:
    return {n: t for n, t, _ in chart_library.charts().CHARTS}


def _num(v, digits: int = 0) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and v != v:
        return "–"
    return f"{v:,.{digits}f}"


def _attribution(util: list[dict]) -> str:
    """How the samples were given to the runs (utilization.sql's observed_own_gpu_share)."""
    share = next((u.get("observed_own_gpu_share") for u in util if u["level"] == "cluster"), None)
    if share is None:
        return "no sample inside an allocation"
    if share >= 0.9995:
        return "each run's own GPUs, named by dcgm-exporter's hpc_job label"
    if share <= 0.0005:
        return "each run's share of its nodes' samples: sacct does not say which GPUs a run held"
    return (f"{_pct(share)} of the observed time by the runs' own GPUs (dcgm-exporter's hpc_job label), the rest "
            "by each run's share of its nodes' samples")


def _pct(v, digits: int = 1) -> str:
    return "–" if v is None else f"{100 * v:.{digits}f}%"


def _hours(seconds) -> str:
    if seconds is None:
        return "–"
    s = float(seconds)
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h")


def _bytes(v, unit: str, digits: int) -> str:
    """Bytes in a decimal unit (TB, PB) for display."""
    return _num(None if v is None else v / _BYTE_UNITS[unit], digits)


_BYTE_UNITS = {"TB": 10 ** 12, "PB": 10 ** 15}


def _delta(now, before, pct_points: bool = False) -> str:
    if now is None or before is None:
        return "–"
    if pct_points:
        return f"{100 * (now - before):+.1f} pp"
    return "–" if not before else f"{100 * (now / before - 1):+.1f}%"


def _one(rows: list[dict], **match) -> dict:
    for r in rows:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return {}


def _partial(r: dict) -> str:
    """' (partial, through 2026-10-15 12:00 UTC)' for a month still in progress in the loaded data, else ''."""
    through = (r.get("period") or {}).get("partial_through")
    if not through:
        return ""
    return f" (partial, through {datetime.fromisoformat(through):%Y-%m-%d %H:%M} UTC)"


def sections(r: dict) -> list[tuple[str, str, list[str], list[list[str]], str | None]]:
    """(title, lead text, table header, table rows, chart name) per section, in report order. Every cell
    is text: a missing value is "–" in every renderer, never an error half-way through writing the files."""
    return [(title, lead, head, [["–" if c is None else str(c) for c in row] for row in rows], chart)
            for title, lead, head, rows, chart in _sections(r)]


_Section = tuple[str, str, list[str], list[list[str]], str | None]  # title, lead, header, rows, chart


@dataclass(frozen=True)
class _Context:
    """What several sections read of the report: the cluster's utilization and cost rows of the month and the
    month before, the scope's efficiency rows, who the report is for, the currency."""
    cl: dict
    cl_prev: dict
    cost_all: dict
    cost_prev: dict
    eff: dict
    eff_prev: dict
    who: str
    cur: str


def _context(r: dict) -> _Context:
    cost_all = _one(r["cost"], model="all")
    return _Context(cl=_one(r["utilization"], level="cluster"),
                    cl_prev=_one(r["utilization_previous"], level="cluster"),
                    cost_all=cost_all, cost_prev=_one(r["cost_previous"], model="all"),
                    eff=r["efficiency"][0] if r["efficiency"] else {},
                    eff_prev=r["efficiency_previous"][0] if r["efficiency_previous"] else {},
                    who=f"project {r['project']}" if r["scope"] == "project" else "the whole cluster",
                    cur=cost_all.get("currency") or "")


def _sections(r: dict) -> list[_Section]:
    """Each section's function of _SECTIONS in turn: none, one or several sections each (a section without
    rows to show, the users of a cluster report, is left out by its function)."""
    ctx = _context(r)
    return [section for _, fn in _SECTIONS for section in fn(r, ctx)]


def _summary(r: dict, ctx: _Context) -> list[_Section]:
    cl, cl_prev, cost_all, cost_prev, who, cur = ctx.cl, ctx.cl_prev, ctx.cost_all, ctx.cost_prev, ctx.who, ctx.cur
    partial = _partial(r)
    if partial:
        partial += (": every figure stops where the loaded job history does; the rest of the month is not "
                    "counted as available capacity")
    lead = (f"{r['cluster']}, {r['month']}{partial}, {who}. Utilization of the available GPU-hours: "
            f"**{_pct(cl.get('utilization'))}** ({_delta(cl.get('utilization'), cl_prev.get('utilization'), True)} "
            f"vs {r['previous_month']}" + ("" if r["previous_month_has_data"] else ": no jobs loaded") + ").")
    rows = [["capacity (GPU-hours)", _num(cl.get("capacity_gpu_h")), _num(cl_prev.get("capacity_gpu_h"))],
            ["available", _num(cl.get("available_gpu_h")), _num(cl_prev.get("available_gpu_h"))],
            ["allocated", _num(cl.get("allocated_gpu_h")), _num(cl_prev.get("allocated_gpu_h"))],
            ["utilization", _pct(cl.get("utilization")), _pct(cl_prev.get("utilization"))],
            ["total cost", f"{_num(cost_all.get('total_cost'))} {cur}", f"{_num(cost_prev.get('total_cost'))} {cur}"]]
    if r["scope"] == "project":
        # no row: the project held no GPU in that month (nothing to show where no jobs are loaded at all)
        nothing = {"allocated_gpu_h": 0.0, "share_of_available": 0.0, "cost": 0.0}
        own = _one(r["chargeback_totals"], project=r["project"]) or nothing
        own_prev = _one(r["chargeback_totals_previous"], project=r["project"]) or (
            nothing if r["previous_month_has_data"] else {})
        rows += [[f"project {r['project']}: allocated GPU-hours", _num(own.get("allocated_gpu_h")),
                  _num(own_prev.get("allocated_gpu_h"))],
                 [f"project {r['project']}: share of available", _pct(own.get("share_of_available")),
                  _pct(own_prev.get("share_of_available"))],
                 [f"project {r['project']}: cost (chargeback)", f"{_num(own.get('cost'))} {cur}",
                  f"{_num(own_prev.get('cost'))} {cur}"]]
    return [("Summary", lead, ["", r["month"], r["previous_month"]], rows, None)]


def _utilization(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[u["level"] if u["level"] == "cluster" else f"{u['level']} {u['key']}", _num(u["capacity_gpu_h"]),
             _num(u["down_gpu_h"]), _num(u["drained_gpu_h"]), _num(u["allocated_gpu_h"]),
             _num(u["reserved_idle_gpu_h"]), _num(u["free_gpu_h"]), _num(u["allocated_idle_gpu_h"]),
             _pct(u["utilization"])] for u in r["utilization"]
            if u["level"] not in ("partition", "partition_member")]
    return [("Utilization and idle capacity",
             f"GPU-hours of the whole cluster. Allocated-but-idle: allocated GPU time whose GPU samples read "
             f"under {r['idle_util_pct']:g}% utilization, per sample inside each run's allocation "
             f"({_attribution(r['utilization'])}).",
             ["", "capacity", "down", "drained", "allocated", "reserved unused", "free", "allocated idle",
              "utilization"], rows, "capacity_timeline")]


def _job_sizes(r: dict, ctx: _Context) -> list[_Section]:
    who = ctx.who
    rows = [[s["size_class"], _num(s["jobs"]), _pct(s["job_share"]), _num(s["gpu_h"]), _pct(s["gpu_h_share"])]
            for s in r["job_sizes"]]
    return [("Job sizes", f"GPU jobs of {who} started in the month; GPU-hours held in it.",
             ["GPUs", "jobs", "share of jobs", "GPU-hours", "share of GPU-hours"], rows, "size_shares")]


def _run_times(r: dict, ctx: _Context) -> list[_Section]:
    who = ctx.who
    rows = [[t["size_class"], _num(t["jobs_ended"]), _hours(t["run_p50_s"]), _hours(t["run_p90_s"]),
             _hours(t["run_p99_s"]), _num(t["jobs_started"]), _hours(t["wait_p50_s"]), _hours(t["wait_p90_s"])]
            for t in r["run_times"]]
    return [("Run times and queue waits", f"Jobs of {who}: run time of those that ended, wait of those "
             "that started in the month.", ["GPUs", "ended", "run p50", "run p90", "run p99", "started",
                                             "wait p50", "wait p90"], rows, "runtime_cdf")]


def _efficiency(r: dict, ctx: _Context) -> list[_Section]:
    eff, eff_prev, who = ctx.eff, ctx.eff_prev, ctx.who
    rows = [["GPU utilization (%)", _num(eff.get("gpu_util_pct"), 1), _num(eff_prev.get("gpu_util_pct"), 1)],
            ["SM active", _num(eff.get("sm_active"), 3), _num(eff_prev.get("sm_active"), 3)],
            ["tensor active", _num(eff.get("tensor_active"), 3), _num(eff_prev.get("tensor_active"), 3)],
            ["DRAM active", _num(eff.get("dram_active"), 3), _num(eff_prev.get("dram_active"), 3)],
            ["GPU energy (kWh)", _num(eff.get("gpu_energy_kwh")), _num(eff_prev.get("gpu_energy_kwh"))],
            ["delivered tensor compute (PFLOP-days)", _num(eff.get("delivered_pflop_days"), 1),
             _num(eff_prev.get("delivered_pflop_days"), 1)],
            ["NIC received (PB)", _bytes(eff.get("nic_rx_bytes"), "PB", 2), _bytes(eff_prev.get("nic_rx_bytes"), "PB", 2)],
            ["storage written (TB)", _bytes(eff.get("storage_write_bytes"), "TB", 1),
             _bytes(eff_prev.get("storage_write_bytes"), "TB", 1)]]
    return [("Efficiency", f"Time-weighted over the GPU time of {who}'s jobs with telemetry.",
             ["", r["month"], r["previous_month"]], rows, "gpu_heatmap")]


def _efficiency_by_project(r: dict, ctx: _Context) -> list[_Section]:
    if not r["efficiency_by_project"]:
        return []
    rows = [[e["project_key"], _num(e["gpu_h"]), _num(e["gpu_util_pct"], 1), _num(e["sm_active"], 3),
             _num(e["tensor_active"], 3), _num(e["gpu_energy_kwh"])] for e in r["efficiency_by_project"]]
    return [("Efficiency by project", "", ["project", "GPU-hours", "GPU util %", "SM active",
                                           "tensor active", "energy kWh"], rows, None)]


def _largest_jobs(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[str(j["job_id"]), j["user"], j["state"], _num(j["gpus"]), _num(j["gpu_h"]),
             _num(j["gpu_util_pct"], 1), _num(j["tensor_active"], 3),
             f"{j['slowest_node'] or '–'} ({_num(j['slowest_node_util_pct'], 0)}% vs {_num(j['median_node_util_pct'], 0)}%)"]
            for j in r["largest_jobs"]]
    return [("Largest jobs", "By GPU-hours in the month; the slowest node against the median of the job's "
             "nodes shows stragglers.", ["job", "user", "state", "GPUs", "GPU-hours", "GPU util %",
                                         "tensor", "slowest node"], rows, "gantt")]


def _end_states(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[s["state"], _num(s["runs"]), _pct(s["run_share"]), _num(s["gpu_h"]), _pct(s["gpu_h_share"])]
            for s in r["end_states"]]
    return [("Reliability: how runs ended", "", ["state", "runs", "share", "GPU-hours", "share of GPU-hours"],
             rows, "failures")]


def _failures_by_size(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[f["size_class"], _num(f["runs_ended"]), _num(f["node_days"], 1), _num(f["hw_failures"]),
             _num(f["failures_per_1000_node_days"], 2), _num(f["mttf_observed_h"], 1), _num(f["mttf_model_h"], 1),
             _num(f["hw_lost_gpu_h"]), _num(f["node_fail_run_gpu_h"]), _num(f["xid_failed_run_gpu_h"])]
            for f in r["failures_by_size"]]
    return [("Reliability: hardware failures by job size",
             f"A hardware failure: NODE_FAIL, or FAILED within {r['xid_failure_minutes']:g} minutes after a "
             "hardware Xid on the job's nodes. GPU-h lost: the work since each failed run's last checkpoint "
             "(the goodput rule); the last two columns are the failed runs' whole GPU-hours. Model MTTF = "
             "1 / (nodes × the cluster's failures per node-day: "
             f"{_num(next(iter(r['failures_by_size']), {}).get('cluster_failures_per_1000_node_days'), 2)} per "
             "1,000 node-days, in every report of the month) (Kokolis et al., HPCA 2025).",
             ["GPUs", "runs", "node-days", "failures", "per 1,000 node-days", "MTTF observed h", "MTTF model h",
              "GPU-h lost", "GPU-h of NODE_FAIL runs", "GPU-h of runs failed after Xid"], rows, None)]


def _node_failures(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[n["node"], _num(n["down_events"]), _num(n["drain_events"]), _num(n["down_hours"], 1),
             _num(n["drained_hours"], 1), "yes" if n["repeated"] else "", n["reasons"]] for n in r["node_failures"]]
    rate = r["node_failures"][0]["cluster_down_per_1000_node_days"] if r["node_failures"] else None
    return [("Reliability: nodes", f"DOWN events per 1,000 in-service node-days: {_num(rate, 2)}.",
             ["node", "down", "drains", "down h", "drained h", "repeated", "reasons"], rows, None)]


def _xid_codes(r: dict, ctx: _Context) -> list[_Section]:
    # by code (xid_codes.sql), with the nodes that logged it: a code on many nodes is a fleet problem (a driver,
    # a firmware), one repeating on a node is that node's (its GPUs are in node health below)
    rows = [[str(x["xid"]), "yes" if x["hardware"] else "", _num(x["events"]), _num(x["nodes"]), _num(x["gpus"]),
             _when(x["first_ts"]), _when(x["last_ts"])] for x in r["xid_codes"]]
    return [("Reliability: Xid events by code",
             "From the kernel log's NVRM: Xid lines and dcgm-exporter's Xid gauge (an Xid both saw counts once).",
             ["Xid", "hardware", "events", "nodes", "GPUs", "first", "last"], rows, None)]


def _throttling(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[t["node"], str(t["gpu"]), _num(t["throttled_hours"], 1), _num(t["temp_c_max"], 0)]
            for t in r["throttling"][:30]]
    return [("Reliability: thermal and power throttling", "", ["node", "GPU", "throttled h", "max °C"], rows, None)]


def _stragglers(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[s_["node"], _num(s_["multi_node_runs"]), _num(s_["runs_behind"]), _num(s_["util_vs_peers"], 2),
             _num(s_["util_pct"], 1)] for s_ in r["stragglers"][:30]]
    return [("Reliability: straggler nodes", "A node is behind in a multi-node job when its GPUs' utilization "
             f"is under {r['behind_ratio']:g} of the median of the job's nodes: every GPU of a synchronous job "
             "waits for it.",
             ["node", "multi-node runs", "behind", "util vs peers", "util %"], rows, None)]


def _hung_jobs(r: dict, ctx: _Context) -> list[_Section]:
    """Hung jobs, with their suspect nodes (schema 2.1)."""
    who = ctx.who
    fine = r.get("fine_telemetry") or {}
    rule = (f"all its GPUs under {r['idle_util_pct']:g}% utilization and its nodes' NICs under "
            f"{r['hang_nic_bytes_per_s'] / 1e6:g} MB/s for at least {r['hang_minutes']:g} minutes before it ended "
            "TIMEOUT, CANCELLED, FAILED or NODE_FAIL (the NCCL-hang signature)")
    if not fine.get("covered"):
        lead = (f"**Unknown**: the month has no per-sample GPU telemetry (past `[telemetry] fine_ttl_days`, or "
                f"never loaded), so hangs cannot be looked for. A hung run: {rule}.")
    else:
        lead = (f"{len(r['hung_jobs'])} hung runs of {who}: {rule}. Looked for in the samples from "
                f"{_when(fine['first_sample_ts'])} to {_when(fine['last_sample_ts'])} (every {fine['step_s']} s): "
                "a hang's length is exact to within one step.")
    rows = [[str(h["job_id"]), h["user"], h["state"], _num(h["gpus"]), _nodes(h["nodes"]), _when(h["hang_start_ts"]),
             _num(h["hang_minutes"]), _num(h["hung_gpu_h"], 1), _nodes(h["suspect_nodes"])]
            for h in r["hung_jobs"][:20]]
    return [("Hung jobs", lead + (" Suspect nodes: in two or more of the month's hangs (a NIC, cable or GPU "
                                  "that stalls NCCL; swap them for reserve nodes)." if rows else ""),
             ["job", "user", "state", "GPUs", "nodes", "hang from", "minutes", "GPU-h hung", "suspect nodes"],
             rows, None)]


def _idle_gpu_users(r: dict, ctx: _Context) -> list[_Section]:
    """GPUs held idle (schema 2.1): the total and the top users of each project."""
    who = ctx.who
    total = _one(r["idle_gpu_users"], level="all")
    cur = total.get("currency") or ""
    lead = (f"Runs of {who} that held GPUs at a mean utilization under {r['idle_util_pct']:g}% over at least "
            f"{r['idle_min_minutes']:g} minutes of telemetry: {_num(total.get('runs'))} runs, "
            f"**{_num(total.get('gpu_h'))} GPU-hours** ({_num(total.get('whole_node_gpu_h'))} on whole "
            f"nodes, measured per run; {_num(total.get('shared_gpu_h'))} on shared nodes, where sacct gives no "
            f"GPU indices and the node's mean stands for the run's), write-off {_num(total.get('capex'))} {cur}. "
            "Top users per project:")
    rows = [[u["project"], u["user"], _num(u["runs"]), _num(u["gpu_h"]), _pct(u["share_of_project"]),
             _num(u["capex"]), str(u["worst_job_id"])]
            for u in r["idle_gpu_users"] if u["level"] == "user" and u["rank_in_project"] <= 3]
    return [("Idle GPUs: users", lead, ["project", "user", "runs", "idle GPU-h", "share of project's",
                                        f"cost {cur}", "worst run"], rows, "waste")]


def _idle_gpu_jobs(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[str(j["job_id"]), j["user"], j["project"], _num(j["gpus"]), _num(j["gpu_h"], 1),
             _num(j["gpu_util_pct"], 1), _num(j["observed_minutes"]), j["attribution"]]
            for j in r["idle_gpu_jobs"][:15]]
    return [("Idle GPUs: the worst runs", "", ["job", "user", "project", "GPUs", "GPU-hours", "GPU util %",
                                               "minutes observed", "attribution"], rows, None)]


def _whatif(r: dict, ctx: _Context) -> list[_Section]:
    if not r.get("whatif"):
        return []
    return whatif_render.sections(r["whatif"])


def _node_health(r: dict, ctx: _Context) -> list[_Section]:
    swap = [n for n in r["node_health"] if n["swap"]]
    rows = [[str(n["rank"]), n["node"], n["gpu_model"], _num(n["score"], 1), "yes" if n["swap"] else "", n["reasons"]]
            for n in r["node_health"][:max(len(swap), 10)]]
    return [("Node health: the swap list",
             f"{len(swap)} of {len(r['node_health'])} nodes to swap for reserve nodes before the next reservation "
             f"(score {r['swap_min_score']:g} or more). {r['node_score_rule']} "
             "`ops-report nodes` lists every node.",
             ["rank", "node", "GPU model", "score", "swap", "reasons"], rows, None)]


def _goodput(r: dict, ctx: _Context) -> list[_Section]:
    who = ctx.who
    g = _one(r["goodput"], project_key="")
    large = r.get("campaign_min_gpus", 64)
    rows = [[e["project_key"] or "all", _num(e["campaigns"]), _num(e["unknown_campaigns"]), _num(e["large_campaigns"]),
             _pct(e["ettr"]), _pct(e["ettr_all"]), _num(e["gpu_h"]), _num(e["lost_gpu_h"]),
             _num(e["lost_hang_gpu_h"]), _num(e["lost_node_fail_gpu_h"]), _num(e["lost_failed_gpu_h"]),
             _num(e["lost_timeout_gpu_h"]), _num(e["lost_other_gpu_h"]), _num(e["initial_wait_hours"]),
             _num(e["restart_wait_hours"]), _num(e["restart_startup_hours"], 1), _num(e["restart_overhead_gpu_h"])]
            for e in r["goodput"]]
    return [("Goodput: effective training time ratio",
             f"Campaigns of {who}: a run with its requeues and the resubmissions of the same user, account, job "
             f"name and GPU count each submitted within {r['campaign_gap_hours']:g} h after an interrupted run "
             "ended; a COMPLETED run closes its campaign, array tasks are jobs of their own. ETTR = (running time "
             "− work lost since the last checkpoint − restarts' start-up) ÷ (last end − first start), weighted by "
             f"GPUs, over the campaigns of {large} GPUs or more: **{_pct(g.get('ettr'))}** for {who} "
             f"({_pct(g.get('ettr_all'))} over every campaign). The wait before a campaign first ran is the "
             "scheduler's, reported apart (initial wait h); the waits after interruptions are in ETTR's wall "
             f"time. A checkpoint is a Lustre write burst of {r['ckpt_write_bytes_per_s'] / 1e6:g} MB/s or more "
             "on the run's nodes; a campaign with an interrupted run and no telemetry is unknown, counted apart. "
             "Work lost by cause: hangs (the hung runs above), node failures, the job's own failure, time limit, "
             "other (cancelled, preempted). Restart GPU-h: the restarted runs' GPUs × their start-up until the "
             "GPUs were busy again (a wait in the queue holds no GPU: it is in hours only). Published: Kokolis "
             "et al. (HPCA 2025).",
             ["project", "campaigns", "unknown", f"≥ {large} GPUs", "ETTR", "ETTR, all", "GPU-hours", "GPU-h lost",
              "hangs", "node failures", "failed", "time limit", "other", "initial wait h", "restart wait h",
              "start-up h", "restart GPU-h"], rows, "goodput")]


def _campaigns(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[c["user"], c["job_name"], _num(c["runs"]), _num(c["interrupted_runs"]), _num(c["gpus"]),
             _hours(c["initial_wait_s"]), _hours(c["wall_s"]), _hours(c["restart_wait_s"]), _hours(c["lost_s"]),
             _pct(c["ettr"]), _num(c["gpu_h"])]
            for c in r["campaigns"]]
    return [("Goodput: the largest campaigns", "", ["user", "job name", "runs", "interrupted", "GPUs",
                                                     "initial wait", "wall", "restart wait", "lost work", "ETTR",
                                                     "GPU-hours"], rows, None)]


def _energy(r: dict, ctx: _Context) -> list[_Section]:
    who = ctx.who
    scope = _one(r["energy"], project_key="")
    hourly = scope.get("carbon_hourly_share") or 0
    carbon = (f"carbon at {r['carbon_g_per_kwh']:g} gCO2e/kWh ([energy] carbon_g_per_kwh)"
              if r.get("carbon_g_per_kwh") is not None else "no constant carbon intensity configured "
              "([energy] carbon_g_per_kwh)")
    if hourly:
        carbon = (f"carbon at the grid's hourly intensity for {_pct(hourly)} of the facility energy "
                  f"(`ops-report etl carbon`), the rest: {carbon}")
    rows = [[e["project_key"] or "all", _num(e["gpu_h"]), _num(e["gpu_kwh"]), _num(e["rest_kwh"]),
             _num(e["facility_kwh"]), _num(e["kg_co2e"]), _num(e["kwh_per_gpu_h"], 3),
             _num(e["facility_kwh_per_pflop_day"], 1)] for e in r["energy"]]
    return [("Energy and carbon",
             f"Runs of {who}: GPU energy from the GPUs' energy counters ({_pct(scope.get('gpu_counter_share'))}; "
             "the rest from power samples), the rest of each node from its IPMI power (measured for "
             f"{_pct(scope.get('node_power_measured_share'))} of the GPU-hours), facility = IT × PUE; {carbon}. "
             "A node's energy is shared among the runs on it by their allocated GPU time.",
             ["project", "GPU-hours", "GPU kWh", "rest of node kWh", "facility kWh", "kg CO2e", "IT kWh per GPU-h",
              "facility kWh per PFLOP-day"], rows, "energy")]


def _reservations(r: dict, ctx: _Context) -> list[_Section]:
    rows = [[v["reservation"], ", ".join(v["accounts"]), _num(v["reserved_gpu_h"]), _num(v["used_gpu_h"]),
             _num(v["idle_gpu_h"]), _pct(v["use_ratio"])] for v in r["reservations"]]
    return [("Reservations", "Usable reserved GPU-hours in the month and the part jobs in the reservation used.",
             ["reservation", "accounts", "reserved", "used", "idle", "use"], rows, None)]


def _cost(r: dict, ctx: _Context) -> list[_Section]:
    cur = ctx.cur
    rows = [[c["model"], _num(c["capacity_gpu_h"]), _num(c["allocated_gpu_h"]), _num(c["facility_energy_kwh"]),
             _num(c["capex"]), _num(c["energy_cost"]), _num(c["total_cost"]), _num(c["cost_per_available_gpu_h"], 2),
             _num(c["cost_per_allocated_gpu_h"], 2), _num(c["cost_per_busy_gpu_h"], 2), _num(c["idle_cost"]),
             _num(c["cost_per_pflop_day"], 0), c.get("energy_basis") or "–"] for c in r["cost"]]
    return [("Cost and effectiveness", f"Whole cluster, in {cur}: capex is the write-off of the nodes in service, "
             "energy the IT energy measured × PUE: each node's own (IPMI) where it reported power, else its "
             "GPUs' (the energy basis column says which). Busy: GPU-hours with work.",
             ["GPU model", "capacity GPU-h", "allocated GPU-h", "energy kWh", "capex", "energy", "total",
              "per available GPU-h", "per allocated GPU-h", "per busy GPU-h", "idle capex", "per PFLOP-day",
              "energy basis"],
             rows, None)]


def _month_over_month(r: dict, ctx: _Context) -> list[_Section]:
    cl, cl_prev, cost_all, cost_prev = ctx.cl, ctx.cl_prev, ctx.cost_all, ctx.cost_prev
    eff, eff_prev, who, cur = ctx.eff, ctx.eff_prev, ctx.who, ctx.cur
    f_now, f_prev = _one(r["failures_by_size"], size_class="all"), _one(r["failures_by_size_previous"], size_class="all")
    mom = [("utilization", cl.get("utilization"), cl_prev.get("utilization"), _pct, True),
           ("allocated GPU-hours", cl.get("allocated_gpu_h"), cl_prev.get("allocated_gpu_h"), _num, False),
           ("free GPU-hours", cl.get("free_gpu_h"), cl_prev.get("free_gpu_h"), _num, False),
           ("reserved but unused GPU-hours", cl.get("reserved_idle_gpu_h"), cl_prev.get("reserved_idle_gpu_h"), _num, False),
           ("allocated but idle GPU-hours", cl.get("allocated_idle_gpu_h"), cl_prev.get("allocated_idle_gpu_h"), _num, False),
           ("down + drained GPU-hours", cl.get("unavailable_gpu_h"), cl_prev.get("unavailable_gpu_h"), _num, False),
           (f"total cost ({cur})", cost_all.get("total_cost"), cost_prev.get("total_cost"), _num, False),
           (f"cost per allocated GPU-hour ({cur})", cost_all.get("cost_per_allocated_gpu_h"),
            cost_prev.get("cost_per_allocated_gpu_h"), lambda v: _num(v, 2), False),
           (f"cost per delivered PFLOP-day ({cur})", cost_all.get("cost_per_pflop_day"),
            cost_prev.get("cost_per_pflop_day"), _num, False),
           (f"GPU utilization of {who}'s jobs (%)", eff.get("gpu_util_pct"), eff_prev.get("gpu_util_pct"),
            lambda v: _num(v, 1), False),
           (f"hardware failures of {who}'s runs", f_now.get("hw_failures"), f_prev.get("hw_failures"), _num, False),
           (f"GPU-hours lost to hardware failures, since checkpoints ({who})", f_now.get("hw_lost_gpu_h"),
            f_prev.get("hw_lost_gpu_h"), _num, False)]
    rows = [[name, fmt(a), fmt(b), _delta(a, b, pp)] for name, a, b, fmt, pp in mom]
    return [("Month over month", "" if r["previous_month_has_data"] else f"No jobs are loaded for {r['previous_month']}.",
             ["", r["month"], r["previous_month"], "change"], rows, None)]


def _chargeback(r: dict, ctx: _Context) -> list[_Section]:
    cur = ctx.cur
    prev = {(p["project"], p["gpu_model"]): p for p in r["chargeback_previous"]}
    # a run on nodes the inventory does not list has no GPU model (an inventory of another cluster, or late)
    rows = [[p["project"], p["gpu_model"] or "(not in the inventory)", _num(p["runs"]), _num(p["allocated_gpu_h"]),
             _pct(p["share_of_model_allocation"]), _num(p["cost"]),
             _delta(p["allocated_gpu_h"], prev.get((p["project"], p["gpu_model"]), {}).get("allocated_gpu_h"))]
            for p in r["chargeback"]]
    return [("Chargeback: use and cost by project", "Cost at the GPU model's cost per allocated GPU-hour.",
             ["project", "GPU model", "runs", "GPU-hours", "share of model", f"cost {cur}",
              f"GPU-h vs {r['previous_month']}"], rows, None)]


def _users(r: dict, ctx: _Context) -> list[_Section]:
    if not r["users"]:
        return []
    # how well each used the GPUs (sql/marts/user_efficiency.sql, docs/efficiency.md): a user without GPU
    # time in the month has none of those figures
    rows = [[u["user"], _num(u["jobs_started"]), _num(u["gpu_h"]), _num(u["completed"]), _num(u["failed"]),
             u.get("grade") or "–", _num(u.get("gpu_util_pct"), 1), _num(u.get("idle_gpu_h")), ", ".join((u.get("worst_job_ids") or [])[:1]) or "–"]
            for u in r["users"]]
    return [("Users of the project", "Grade A-F on pooled GPU utilization and the share of GPU-hours held by "
             "idle runs (docs/efficiency.md); the most wasteful run: `ops-report job JOBID`.",
             ["user", "jobs", "GPU-hours", "completed", "failed", "grade", "GPU util %", "idle GPU-h",
              "most wasteful run"], rows, None)]


# the report's sections in their order, each by the function that writes it
_SECTIONS = [("summary", _summary), ("utilization", _utilization), ("job_sizes", _job_sizes),
             ("run_times", _run_times), ("efficiency", _efficiency),
             ("efficiency_by_project", _efficiency_by_project), ("largest_jobs", _largest_jobs),
             ("end_states", _end_states), ("failures_by_size", _failures_by_size),
             ("node_failures", _node_failures), ("xid_codes", _xid_codes), ("throttling", _throttling),
             ("stragglers", _stragglers), ("hung_jobs", _hung_jobs), ("idle_gpu_users", _idle_gpu_users),
             ("idle_gpu_jobs", _idle_gpu_jobs), ("whatif", _whatif), ("node_health", _node_health),
             ("goodput", _goodput), ("campaigns", _campaigns), ("energy", _energy), ("reservations", _reservations),
             ("cost", _cost), ("month_over_month", _month_over_month), ("chargeback", _chargeback),
             ("users", _users)]


def _when(v) -> str:
    if v is None:
        return "–"
    t = datetime.fromisoformat(v) if isinstance(v, str) else v
    return f"{t:%m-%d %H:%M}"


def _nodes(nodes: list[str], most: int = 4) -> str:
    return ", ".join(nodes[:most]) + (f" … ({len(nodes)})" if len(nodes) > most else "")


def _title(r: dict) -> str:
    who = f"project {r['project']}" if r["scope"] == "project" else "cluster"
    return f"Monthly report {r['month']}{_partial(r)}: {r['cluster']}, {who}"


def to_markdown(r: dict, chart_files: dict[str, str] | None = None) -> str:
    lines = [f"# {_title(r)}", ""]
    for title, lead, head, rows, chart in sections(r):
        lines += [f"## {title}", ""]
        if lead:
            lines += [lead, ""]
        if rows:
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
            lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
        else:
            lines.append("(nothing in this month)")
        lines.append("")
        if chart and chart_files and chart in chart_files:
            lines += [f"![{title}]({chart_files[chart]})", ""]
    lines.append(f"Generated {r['generated_at']} by ops-report monthly (schema {r['schema_version']}).")
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1a202c;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}th,td{border-bottom:1px solid #e2e8f0;
padding:.25em .6em;text-align:right}th:first-child,td:first-child{text-align:left}th{background:#f7fafc}
img{max-width:100%;height:auto;display:block;margin:.5em 0 1.5em}h2{border-top:2px solid #2b6cb0;padding-top:.4em}
.wrap{overflow-x:auto}"""


def to_html(r: dict, charts: dict[str, str] | None = None) -> str:
    charts = draw_all(r) if charts is None else charts
    names = _chart_titles() if charts else {}
    body = [f"<h1>{html.escape(_title(r))}</h1>"]
    for title, lead, head, rows, chart in sections(r):
        body.append(f"<h2>{html.escape(title)}</h2>")
        if lead:
            body.append("<p>" + html.escape(lead).replace("**", "") + "</p>")
        if rows:
            body.append('<div class="wrap"><table><tr>' + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
            body += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows]
            body.append("</table></div>")
        else:
            body.append("<p>(nothing in this month)</p>")
        if chart and chart in charts:
            body.append(chart_library.chart_img(charts[chart], names[chart], f"chart-{chart}"))
    body.append(f"<p><small>Generated {html.escape(r['generated_at'])} by ops-report monthly "
                f"(schema {r['schema_version']}).</small></p>")
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(_title(r))}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")


def _json_default(v):
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    raise TypeError(type(v).__name__)


def to_json(r: dict) -> str:
    return json.dumps(_finite(r), default=_json_default, indent=1, allow_nan=False, sort_keys=False) + "\n"


def write(r: dict, out_dir: Path, formats: list[str]) -> list[Path]:
    """Write the formats asked for; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # the cluster and project names come from the data: one file-name component each (core/files.py)
    scope = safe_name(r["project"], "project") if r["scope"] == "project" else "cluster"
    stem = f"monthly-{safe_name(r['cluster'], 'cluster')}-{scope}-{safe_name(r['month'], 'month')}"
    written = []
    cdir = out_dir / f"{stem}-charts"
    charts = {}
    if {"md", "html"} & set(formats):  # a JSON report draws no chart
        charts = draw_all(r)
    if "json" in formats:
        written.append(write_file(out_dir / f"{stem}.json", to_json(r)))  # whole, or the previous file kept
    if "md" in formats:
        files = {}
        if charts:
            cdir.mkdir(exist_ok=True)
            for name, svg in charts.items():
                path = cdir / f"{name}.svg"
                if not (path.is_file() and path.read_bytes() == svg.encode()):  # a chart as it was is left alone
                    write_file(path, svg)
                files[name] = quote(f"{cdir.name}/{name}.svg")  # a link: the names' '%' as %25
        written.append(write_file(out_dir / f"{stem}.md", to_markdown(r, files)))
    if "html" in formats:
        written.append(write_file(out_dir / f"{stem}.html", to_html(r, charts)))
    return written


def _finite(v):
    """JSON has no NaN: a statistic that could not be computed is null."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v
