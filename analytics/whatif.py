"""What-if capacity planning (issue 18): replay a window's job history on a changed cluster.

Reads the window's jobs, nodes and reservations (marts whatif_history, whatif_nodes, whatif_reservations),
has planning/scenarios.py apply each change and replay the jobs with the backfill scheduler
(planning/backfill.py), and hands the observed month, the unchanged replay and every changed one to the engine in
two temporary tables of its session (whatif_run, whatif_node: nothing is written to the warehouse; a server
user needs readonly=2, the right to make temporary tables, and no insert rights). Every figure comes from
the marts whatif_summary, whatif_waits, whatif_projects and whatif_daily; this module computes none.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy as np
import polars as pl
from ops_warehouse.analytics.marts import kept_in_block, run_mart
from ops_warehouse.errors import OpsError
from ops_warehouse.migrations import warehouse_cost_model
from ops_warehouse.planning.backfill import NEVER
from ops_warehouse.planning.changes import Change
from ops_warehouse.planning.scenarios import NO_LIMIT_S, PENDING_RUNTIME_S, Inputs, replay_scenarios


def _epoch(col: str) -> pl.Expr:
    return pl.col(col).dt.epoch("s")


def read_inputs(wh, cluster: str, window: tuple[datetime, datetime]) -> Inputs:
    t0, t1 = int(window[0].timestamp()), int(window[1].timestamp())
    hist = run_mart(wh, "whatif_history", cluster=cluster, window=window)
    nodes = run_mart(wh, "whatif_nodes", cluster=cluster, window=window)
    resv = run_mart(wh, "whatif_reservations", cluster=cluster, window=window)
    if nodes.height == 0:
        raise OpsError(f"cluster {cluster!r} has no node inventory loaded: a replay needs the nodes "
                       "(ops-report etl capacity --inventory FILE)")
    if hist.height == 0:
        raise OpsError(f"cluster {cluster!r} has no GPU jobs in {window[0]:%Y-%m-%d} .. {window[1]:%Y-%m-%d}")
    nodes = nodes.with_columns(in_service=_epoch("in_service_ts"),
                               retired=_epoch("retired_ts").fill_null(NEVER)).sort("partition", "node")
    partitions = nodes["partition"].unique(maintain_order=True).to_list()
    accounts = sorted(set(hist["account"].str.to_lowercase()) | {a for r in resv["accounts"] for a in r})
    part_of_node = dict(zip(nodes["node"], nodes["partition"]))
    # a job's partition: the first it names that has nodes, else its nodes', else the largest
    largest = nodes.group_by("partition").len().sort("len", descending=True)["partition"][0]
    hist = hist.with_columns(
        submit=_epoch("submit_ts"), start=_epoch("start_ts"), end=_epoch("end_ts"),
        account_l=pl.col("account").str.to_lowercase(),
    ).with_columns(
        part=pl.col("partition").str.split(",").list.eval(pl.element().filter(pl.element().is_in(partitions)))
        .list.first()
        .fill_null(pl.col("nodes").list.first().replace_strict(part_of_node, default=None))
        .fill_null(largest),
    )
    running = hist.filter(pl.col("start").is_not_null() & (pl.col("start") < t0))
    place = hist.filter(pl.col("start").is_null() | (pl.col("start") >= t0)).sort("submit", "job_id_raw", "job_id")
    run_nodes = (running.select("nodes", "gpus", "end").with_columns(n=pl.col("nodes").list.len())
                 .explode("nodes").filter(pl.col("nodes").is_in(nodes["node"].implode()))
                 .select(node=pl.col("nodes"), gpus=(pl.col("gpus") // pl.col("n")).clip(1), end=pl.col("end")))
    projects = dict(zip(hist["account_l"], hist["project"]))
    resv = resv.with_columns(start=_epoch("start_ts"), end=_epoch("end_ts"),
                             projects=pl.col("accounts").list.eval(pl.element().replace_strict(projects, default=pl.element())))
    return Inputs(t0, t1, nodes, partitions, accounts, place, run_nodes, resv, hist, projects)


def _run_rows(scenario: str, jobs: pl.DataFrame, start: np.ndarray | None) -> pl.DataFrame:
    """whatif_run rows: the jobs as observed (``start`` None) or as replayed (start epoch s, -1: not started;
    a replayed job runs for its observed run time, a pending one for what the replay gave it: its time limit,
    at most PENDING_RUNTIME_S, as _arrays)."""
    ran = jobs["start"].is_not_null().to_numpy()
    limit = jobs["timelimit_s"].to_numpy().astype(np.int64)
    pending_s = np.minimum(np.where(limit > 0, limit, NO_LIMIT_S), PENDING_RUNTIME_S)
    runtime = np.where(ran, (jobs["end"] - jobs["start"]).fill_null(0).to_numpy(), pending_s)
    if start is None:
        start = jobs["start"].fill_null(-1).to_numpy()
    started = start >= 0
    # a job that did not start: its end is when it was cancelled in the queue, none while it waited
    cancelled = ~started & ~ran & jobs["end"].is_not_null().to_numpy()
    s = pl.Series("s", np.where(started, start, 0), dtype=pl.Int64)
    e = pl.Series("e", np.where(started, start + runtime, jobs["end"].fill_null(0).to_numpy()), dtype=pl.Int64)
    return pl.DataFrame({
        "scenario": scenario, "job_id": jobs["job_id"], "account": jobs["account"], "project": jobs["project"],
        "gpus": jobs["gpus"].cast(pl.UInt32),
        "submit_ts": pl.from_epoch(jobs["submit"], "s").dt.replace_time_zone("UTC"),
        "start_ts": pl.from_epoch(s, "s").dt.replace_time_zone("UTC"),
        "end_ts": pl.from_epoch(e, "s").dt.replace_time_zone("UTC"),
    }).with_columns(pl.when(pl.Series(started)).then(pl.col("start_ts")).alias("start_ts"),
                    pl.when(pl.Series(started | cancelled)).then(pl.col("end_ts")).alias("end_ts"))


def _node_rows(scenario: str, nodes: pl.DataFrame) -> pl.DataFrame:
    return nodes.select(
        pl.lit(scenario).alias("scenario"), "node", "gpu_model", pl.col("gpus").cast(pl.UInt32),
        pl.from_epoch("in_service", "s").dt.replace_time_zone("UTC").alias("in_service_ts"),
        pl.when(pl.col("retired") < NEVER).then(pl.from_epoch("retired", "s").dt.replace_time_zone("UTC"))
        .alias("retired_ts"))


_TABLES = {
    "whatif_run": "scenario String, job_id String, account String, project String, gpus UInt32, "
                  "submit_ts DateTime('UTC'), start_ts Nullable(DateTime('UTC')), end_ts Nullable(DateTime('UTC'))",
    "whatif_node": "scenario String, node String, gpu_model String, gpus UInt32, in_service_ts DateTime('UTC'), "
                   "retired_ts Nullable(DateTime('UTC'))",
}


def whatif(wh, *, cluster: str, window: tuple[datetime, datetime], changes: list[Change], project: str = "",
           processes: int = 0, plan_by: str = "limit", also=None) -> dict:
    """The observed window, its unchanged replay and each change replayed: {'summary', 'waits', 'projects',
    'daily'} frames (marts whatif_*), 'scenarios' (labels in order), 'replay_stats' (scheduler passes and
    jobs tried per scenario) and 'replay_s' (the replays' wall seconds, all scenarios together).
    ``also(wh, window)``, when given, runs while the session's what-if tables exist, with the window replayed
    (the laws that read them: analytics/checks.py); its result is 'also'. A window the loaded data does not
    reach to its end (a month in progress) is replayed to where the data stops (data_through.sql), as every
    mart counts it: the what-if's capacity and allocation are then the report's
    (sql/checks/whatif_names_agree.sql). 'replay_s' is 0 where the replays were kept from an earlier call
    in the same :func:`~ops_warehouse.analytics.marts.each_mart_once` block."""
    through = run_mart(wh, "data_through", cluster=cluster, window=window).row(0, named=True)["through_ts"]
    if through is not None:
        through = through if through.tzinfo else through.replace(tzinfo=timezone.utc)
        window = (window[0], max(window[0], min(window[1], through)))
    # the replays depend on the window's jobs, nodes and reservations and the changes, never on the project
    # (only the marts that read them are scoped): inside one each_mart_once block (the demo's two reports)
    # the month is replayed once and the second report reads the same rows (issue 51, round 7)
    kept = kept_in_block(wh)
    key = ("whatif", cluster, window, tuple(changes), plan_by)
    if kept is not None and key in kept:
        run_rows, node_rows, labels, stats, _ = kept[key]
        replay_s = 0.0
    else:
        run_rows, node_rows, labels, stats, replay_s = _replayed(wh, cluster, window, changes, processes, plan_by)
        if kept is not None:
            kept[key] = run_rows, node_rows, labels, stats, replay_s
    client = wh.client
    for name, cols in _TABLES.items():
        client.command(f"DROP TEMPORARY TABLE IF EXISTS {name}")
        client.command(f"CREATE TEMPORARY TABLE {name} ({cols}) ENGINE = Memory")
    try:
        client.insert_arrow("whatif_run", run_rows)
        client.insert_arrow("whatif_node", node_rows)
        res = {name: run_mart(wh, f"whatif_{name}", cluster=cluster, window=window, project=project)
               for name in ("summary", "waits", "projects", "daily")}
        if also is not None:
            res["also"] = also(wh, window)
    finally:
        for name in _TABLES:
            client.command(f"DROP TEMPORARY TABLE IF EXISTS {name}")
    res["scenarios"] = ["observed", *labels]
    res["replay_stats"] = stats
    res["replay_s"] = replay_s
    return res


def _replayed(wh, cluster: str, window: tuple[datetime, datetime], changes: list[Change], processes: int,
              plan_by: str) -> tuple:
    """The whatif_run and whatif_node rows (Arrow tables) of the observed window, its unchanged replay and
    each change, the changes' labels, their replay stats and the replays' wall seconds."""
    inp = read_inputs(wh, cluster, window)
    t = time.perf_counter()
    out = replay_scenarios(inp, changes, processes=processes, plan_by=plan_by)
    replay_s = time.perf_counter() - t
    obs_nodes = inp.nodes
    observed = pl.concat([inp.history.filter(pl.col("start").is_not_null() & (pl.col("start") < inp.t0)),
                          inp.place])
    runs = [_run_rows("observed", observed, None)]
    nodes = [_node_rows("observed", obs_nodes)]
    for label, (nf, jf, r) in out.items():
        jobs = pl.concat([observed.filter(pl.col("start").is_not_null() & (pl.col("start") < inp.t0)), jf])
        start = np.concatenate([jobs["start"].head(jobs.height - jf.height).to_numpy().astype(np.int64), r.start])
        runs.append(_run_rows(label, jobs, start))
        nodes.append(_node_rows(label, nf))
    stats = {label: {"passes": r.events, "jobs_tried": r.tries} for label, (_, _, r) in out.items()}
    return pl.concat(runs).to_arrow(), pl.concat(nodes).to_arrow(), list(out), stats, replay_s


def _rows(df: pl.DataFrame) -> list[dict]:
    return df.to_dicts()


def whatif_report(wh, *, cluster: str, window: tuple[datetime, datetime], changes: list[Change],
                  project: str = "", processes: int = 0) -> dict:
    """:func:`whatif` as plain data for reports/ (rows as dicts): the monthly report's "whatif" key and
    `ops-report whatif`'s output."""
    res = whatif(wh, cluster=cluster, window=window, changes=changes, project=project, processes=processes)
    currency = next((m.get("currency", "") for m in warehouse_cost_model(wh).values()), "")
    return {"cluster": cluster, "window": [f"{window[0]:%Y-%m-%d}", f"{window[1]:%Y-%m-%d}"],
            "project": project or None, "scenarios": res["scenarios"], "currency": currency,
            "changes": [{"name": c.label, "add": [f"{m}:{n}" for m, n in c.add],
                         "remove": [f"{m}:{n}" for m, n in c.remove],
                         "reservation": [f"{p}:{n}" for p, n in c.reservation], "scale_load": c.scale_load}
                        for c in changes],
            "summary": _rows(res["summary"]), "waits": _rows(res["waits"]), "projects": _rows(res["projects"]),
            # no timings: a report of the same facts is the same bytes (the demo's reruns, the charts' digests)
            "daily": _rows(res["daily"]), "replay_stats": res["replay_stats"]}
