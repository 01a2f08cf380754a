"""What-if capacity planning (issue 18): replay a window's job history on a changed cluster.

Reads the window's jobs, nodes and reservations (marts whatif_history, whatif_nodes, whatif_reservations),
applies each change (nodes of a GPU model added or removed, a project's reservations resized, the load
scaled), replays the jobs with the backfill scheduler (planning/backfill.py; one process per scenario when
there are several), and hands the observed month, the unchanged replay and every changed one to the engine in
two temporary tables of its session (whatif_run, whatif_node: nothing is written to the warehouse; a server
user needs readonly=2, the right to make temporary tables, and no insert rights). Every figure comes from
the marts whatif_summary, whatif_waits, whatif_projects and whatif_daily; this module computes none.
"""

from __future__ import annotations

import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from multiprocessing import get_all_start_methods, get_context

import numpy as np
import polars as pl
from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.errors import OpsError
from ops_warehouse.migrations import warehouse_cost_model
from ops_warehouse.planning.backfill import NEVER, Jobs, Nodes, Replay, Reservation, Running, replay

_SPEC = re.compile(r"^([A-Za-z0-9_.-]+):(\d+)$")
NO_LIMIT_S = 10**9  # a job without a time limit
PENDING_RUNTIME_S = 86400  # a job still pending at the end of the history: it asked for its limit, or a day


@dataclass(frozen=True)
class Change:
    """One scenario: ``add``/``remove`` nodes per GPU model, ``reservation`` nodes per project (0: none),
    ``scale_load`` the submitted jobs × (a copy of a job a few minutes later for each whole step above 1, a
    random share of jobs for the fraction; under 1, that share of jobs dropped)."""
    add: tuple[tuple[str, int], ...] = ()
    remove: tuple[tuple[str, int], ...] = ()
    reservation: tuple[tuple[str, int], ...] = ()
    scale_load: float = 1.0
    name: str = ""

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        parts = [f"+{n} {m}" for m, n in self.add] + [f"-{n} {m}" for m, n in self.remove]
        parts += [f"reservation {p}:{n}" for p, n in self.reservation]
        if self.scale_load != 1.0:
            parts.append(f"load x{self.scale_load:g}")
        return ", ".join(parts) or "unchanged"


# The most nodes one change may name: several times the largest GPU machines built so far (some 10,000 to
# 25,000 nodes), so no site's plan is refused, while a typo's 99999999999 is: the replay holds a row per node
# (a name, free GPUs, times); 100,000 added nodes took 0.5 GB and 4 CPU s on a small month, 10^8 ran out of
# memory (23 GB RSS for 10^11).
MAX_NODES = 100_000


def parse_change(add: list[str] | tuple = (), remove: list[str] | tuple = (), reservation: list[str] | tuple = (),
                 scale_load: float = 1.0, name: str = "") -> Change:
    """A Change from the command line's forms: ``h200:16`` (GPU model and nodes), ``A:0`` (project and nodes)."""
    def pairs(specs, what: str) -> tuple[tuple[str, int], ...]:
        out = []
        for s in specs:
            m = _SPEC.match(str(s).strip())
            if not m:
                raise OpsError(f"--{what} {s!r}: expected NAME:NODES, e.g. h200:16")
            digits = m.group(2).lstrip("0") or "0"  # long digit strings are refused before int() reads them
            if len(digits) > len(str(MAX_NODES)) or int(digits) > MAX_NODES:
                shown = repr(str(s)) if len(str(s)) <= 40 else repr(str(s)[:37]) + "..."
                raise OpsError(f"--{what} {shown}: too many nodes; expected NAME:NODES with 0 to {MAX_NODES:,} nodes")
            out.append((m.group(1), int(digits)))
        return tuple(out)

    if not 0 < scale_load <= 10:
        raise OpsError(f"--scale-load {scale_load:g}: expected a factor above 0 and at most 10")
    return Change(pairs(add, "add"), pairs(remove, "remove"), pairs(reservation, "reservation"), float(scale_load),
                  name)


@dataclass
class Inputs:
    """The window's history as arrays the scheduler takes (built once, shared by every scenario)."""
    t0: int
    t1: int
    nodes: pl.DataFrame            # node, partition, gpu_model, gpus, in_service, retired, unusable
    partitions: list[str]
    accounts: list[str]
    place: pl.DataFrame            # the jobs to place, in submission order
    running: pl.DataFrame          # jobs running at t0: node, gpus, end
    reservations: pl.DataFrame     # name, start, end, nodes, accounts, projects
    history: pl.DataFrame          # every job of the window as observed
    projects: dict[str, str] = field(default_factory=dict)


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


def _arrays(inp: Inputs, change: Change | None, seed: int = 0):
    """(Nodes, Jobs, Running, reservations, the node frame, the job frame) of a scenario."""
    nodes = inp.nodes
    if change is not None:
        for model, n in change.remove:
            have = nodes.filter(pl.col("gpu_model").str.to_lowercase() == model.lower())
            if have.height < n:
                raise OpsError(f"--remove {model}:{n}: the cluster has {have.height} {model} nodes")
            gone = set(have.sort("node")["node"].tail(n))
            nodes = nodes.with_columns(retired=pl.when(pl.col("node").is_in(gone)).then(inp.t0)
                                       .otherwise(pl.col("retired")))
        for model, n in change.add:
            like = nodes.filter(pl.col("gpu_model").str.to_lowercase() == model.lower())
            if like.height == 0:
                raise OpsError(f"--add {model}:{n}: the cluster has no {model} nodes to take a partition and a GPU "
                               f"count from (models: {', '.join(sorted(set(nodes['gpu_model'])))})")
            proto = like.row(0, named=True)
            new = pl.DataFrame({"node": [f"{proto['gpu_model']}-added-{i + 1:03d}" for i in range(n)]}).with_columns(
                partition=pl.lit(proto["partition"]), gpu_model=pl.lit(proto["gpu_model"]),
                gpus=pl.lit(proto["gpus"]).cast(nodes.schema["gpus"]), in_service=pl.lit(inp.t0).cast(pl.Int64),
                retired=pl.lit(NEVER).cast(pl.Int64))
            nodes = pl.concat([nodes, new.with_columns(
                [pl.lit(None).cast(nodes.schema[c]).alias(c) for c in nodes.columns if c not in new.columns])
                .select(nodes.columns)]).sort("partition", "node")
    node_idx = {n: i for i, n in enumerate(nodes["node"])}
    un = nodes.select(pl.int_range(pl.len()).alias("i"), "unusable").explode("unusable").drop_nulls("unusable")
    # each interval a (start, end) struct: its fields by position (iterating a struct gives its field names)
    nostart = un.select(pl.col("i").cast(pl.Int64), pl.col("unusable").struct[0].cast(pl.Int64),
                        pl.col("unusable").struct[1].cast(pl.Int64)).to_numpy().reshape(-1, 3).astype(np.int64)
    part_idx = {p: i for i, p in enumerate(inp.partitions)}
    N = Nodes(partition=nodes["partition"].replace_strict(part_idx, return_dtype=pl.Int64).to_numpy(),
              gpus=nodes["gpus"].to_numpy().astype(np.int64), in_service=nodes["in_service"].to_numpy(),
              retired=nodes["retired"].to_numpy(), nostart=nostart)
    jobs = inp.place
    if change is not None and change.scale_load != 1.0:
        jobs = _scale(jobs, change.scale_load, inp.t0, seed)
    acct = {a: i for i, a in enumerate(inp.accounts)}
    ran = jobs["start"].is_not_null().to_numpy()
    end = jobs["end"].fill_null(0).to_numpy().astype(np.int64)
    limit = jobs["timelimit_s"].to_numpy().astype(np.int64)
    limit = np.where(limit > 0, limit, NO_LIMIT_S)
    runtime = np.where(ran, end - jobs["start"].fill_null(0).to_numpy().astype(np.int64),
                       np.minimum(limit, PENDING_RUNTIME_S))
    cancelled = ~ran & jobs["end"].is_not_null().to_numpy()  # never ran, and its end is when it was cancelled
    J = Jobs(submit=jobs["submit"].to_numpy().astype(np.int64), gpus=jobs["gpus"].to_numpy().astype(np.int64),
             partition=jobs["part"].replace_strict(part_idx, return_dtype=pl.Int64).to_numpy(),
             runtime=np.maximum(runtime, 1).astype(np.int64), limit=limit,
             account=jobs["account_l"].replace_strict(acct, return_dtype=pl.Int64).to_numpy(),
             held_until=np.where(cancelled, end, NEVER))
    R = Running(node=np.array([node_idx[n] for n in inp.running["node"]], dtype=np.int64),
                gpus=inp.running["gpus"].to_numpy().astype(np.int64), end=inp.running["end"].to_numpy().astype(np.int64))
    sizes = dict(change.reservation) if change is not None else {}
    resv = []
    for r in inp.reservations.iter_rows(named=True):
        keep = [n for n in r["nodes"] if n in node_idx]
        for p in set(r["projects"]):
            if p in sizes:
                keep = keep[:sizes[p]]
        if not keep:
            continue
        mask = np.zeros(len(node_idx), dtype=bool)
        mask[[node_idx[n] for n in keep]] = True
        resv.append(Reservation(mask, frozenset(acct[a] for a in r["accounts"] if a in acct), r["start"], r["end"]))
    return N, J, R, tuple(resv), nodes, jobs


def _scale(jobs: pl.DataFrame, factor: float, t0: int, seed: int) -> pl.DataFrame:
    """The jobs submitted from t0 on, × factor: each copied once for every whole step above 1 (and a random share
    for the fraction), a copy submitted 1-60 minutes after its original; under 1, a random share dropped."""
    rng = np.random.default_rng(seed)
    mine = jobs.filter(pl.col("submit") >= t0)
    before = jobs.filter(pl.col("submit") < t0)
    whole, frac = int(factor), factor - int(factor)
    keep = rng.random(mine.height) < (frac if factor < 1 else 1.0)
    out = [before, mine.filter(pl.Series(keep))] if factor < 1 else [before, mine]
    copies = max(whole - 1, 0) + (1 if factor > 1 and frac > 0 else 0)
    for c in range(copies):
        take = np.ones(mine.height, bool) if c < whole - 1 else rng.random(mine.height) < frac
        shift = rng.integers(60, 3600, mine.height)
        d = pl.Series(shift[take])
        # the copy as observed, moved later by its shift: the same run time (or the same cancelled wait)
        out.append(mine.filter(pl.Series(take)).with_columns(
            submit=pl.col("submit") + d, start=pl.col("start") + d, end=pl.col("end") + d,
            job_id=pl.col("job_id") + f"+{c + 1}"))
    return pl.concat(out).sort("submit", "job_id_raw", "job_id")


def _run(args) -> Replay:
    nodes, jobs, running, resv, t0, t1, keys, plan_by = args
    return replay(nodes, jobs, t0=t0, horizon=t1, running=running, reservations=resv, keys=keys, plan_by=plan_by)


def replay_scenarios(inp: Inputs, changes: list[Change], *, processes: int = 0, plan_by: str = "limit"
                     ) -> dict[str, tuple]:
    """{label: (node frame, job frame, Replay)} for the unchanged replay ('replay') and every change, in
    parallel processes when there are several (``processes`` 0: one per scenario, at most the CPUs);
    ``plan_by``: the scheduler's backfill plans (planning/backfill.py)."""
    import os

    scen = [("replay", None)] + [(c.label, c) for c in changes]
    built = {label: _arrays(inp, c) for label, c in scen}
    args = [(b[0], b[1], b[2], b[3], inp.t0, inp.t1, b[5]["job_id_raw"].to_numpy().astype(np.int64), plan_by)
            for b in built.values()]
    n = processes or min(len(args), os.cpu_count() or 1)
    if n > 1 and len(args) > 1 and "fork" in get_all_start_methods():
        # forked, as the report's charts are: a child only runs the scheduler (numpy), never the engine whose
        # threads the parent holds; spawn would run the caller's script again in each child (a notebook's or
        # a script without a __main__ guard, which would then wait for the warehouse the parent holds)
        with ProcessPoolExecutor(max_workers=n, mp_context=get_context("fork")) as ex:
            results = list(ex.map(_run, args))
    else:
        results = [_run(a) for a in args]
    return {label: (b[4], b[5], r) for (label, b), r in zip(built.items(), results)}


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
    (sql/checks/whatif_names_agree.sql)."""
    import time

    through = run_mart(wh, "data_through", cluster=cluster, window=window).row(0, named=True)["through_ts"]
    if through is not None:
        through = through if through.tzinfo else through.replace(tzinfo=timezone.utc)
        window = (window[0], max(window[0], min(window[1], through)))
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
    client = wh.client
    for name, cols in _TABLES.items():
        client.command(f"DROP TEMPORARY TABLE IF EXISTS {name}")
        client.command(f"CREATE TEMPORARY TABLE {name} ({cols}) ENGINE = Memory")
    try:
        client.insert_arrow("whatif_run", pl.concat(runs).to_arrow())
        client.insert_arrow("whatif_node", pl.concat(nodes).to_arrow())
        res = {name: run_mart(wh, f"whatif_{name}", cluster=cluster, window=window, project=project)
               for name in ("summary", "waits", "projects", "daily")}
        if also is not None:
            res["also"] = also(wh, window)
    finally:
        for name in _TABLES:
            client.command(f"DROP TEMPORARY TABLE IF EXISTS {name}")
    res["scenarios"] = ["observed", *out]
    res["replay_stats"] = {label: {"passes": r.events, "jobs_tried": r.tries} for label, (_, _, r) in out.items()}
    res["replay_s"] = replay_s
    return res


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
