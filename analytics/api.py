"""The Python API for analysts: one connection, SQL in and polars out, and the marts of the monthly report
as functions taking a period, a project and filters. The report calls these very functions
(ops_warehouse.analytics.monthly), so a notebook and `ops-report monthly` cannot disagree.

    >>> import ops_warehouse as ow
    >>> wh = ow.connect(DSN)                       # same DSN rules as the CLI: None -> OPS_WAREHOUSE / config
    >>> wh.sql("SELECT count() AS runs FROM slurm_job_run WHERE cluster = {c:String}", c="ai1").item() > 0
    True
    >>> u = wh.utilization("2026-10")              # the whole cluster, by GPU model and partition
    >>> float(u.filter(level="cluster")["utilization"].item()) <= 1
    True
    >>> sizes = wh.job_sizes("2026-10", project="A")
    >>> sizes.columns[:4]
    ['size_class', 'min_gpus', 'jobs', 'gpu_h']

A period is a month (``"2026-10"``, a ``date``, or None for the last complete month with jobs) or any
window ``start=..., end=...`` (``[start, end)``, UTC). Every function returns a polars DataFrame
(``.to_pandas()`` when wanted); times are UTC datetimes, durations are named ``*_s`` or ``*_h``.
"""

from __future__ import annotations

import inspect  # (already imported by dataclasses, which the declarations use)
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ops_warehouse.analytics import declarations
from ops_warehouse.analytics.periods import (
    Period,
    history_span,
    last_complete_month,
    month_window,
    parse_month,
    resolve_cluster,
    utc_day,
    utc_time,
)
from ops_warehouse.config import Config, load_config
from ops_warehouse.errors import OpsError
from ops_warehouse.planning.changes import parse_change
from ops_warehouse.warehouse import embedded_path, open_warehouse

if TYPE_CHECKING:
    import polars as pl


def _analysis() -> SimpleNamespace:
    """The marts, the monthly report and the exports. Their modules import polars (0.3 s) and `import
    ops_warehouse` is what every command and load starts with, so they are imported by the first call that
    needs them."""
    from ops_warehouse.analytics import checks, export, job, marts, monthly, summary, telemetry, whatif  # polars: first call

    return SimpleNamespace(run_mart=marts.run_mart, PARAMETERS=marts.PARAMETERS, run_checks=checks.run_checks,
                           summary=summary.summary, telemetry=telemetry.telemetry, monthly_report=monthly.monthly_report, export_month=export.export_month,
                           whatif=whatif.whatif, job_report=job.job_report)


class _mart_method:  # noqa: N801 (used as a decorator-like name in the class body, as ``property`` is)
    """A method of :class:`Connection` that runs one mart: ``name = _mart_method(doc)`` in the class body.
    Its keywords are the mart's declaration (sql/marts/<name>.sql), read when the method is first looked up
    (not at ``import ops_warehouse``: the declarations cost 0.07 s to read): ``project`` exactly when the
    mart's scope is a project (required when it is only for a project), ``cluster``, ``start``, ``end``, each
    declared filter, and each parameter its result depends on (:func:`declarations.keywords`) with its
    declared value as the default (None: the site's setting). Only the prose is written here."""

    def __init__(self, doc: str):
        self.doc = doc
        self.name = ""
        self._built = None  # (the declaration it was built from, the function)

    def __set_name__(self, owner, name: str):
        self.name = name

    def __get__(self, obj, owner=None):
        fn = self.function()
        return fn if obj is None else fn.__get__(obj, owner)

    def function(self):
        m = declarations.mart(self.name)
        if self._built is None or self._built[0] is not m:
            self._built = (m, _mart_function(m, self.doc))
        return self._built[1]


def _mart_function(m: declarations.Mart, doc: str):
    """The method running mart ``m`` with the keywords its declaration implies (:class:`_mart_method`)."""
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("month", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
    if m.scope == "project":
        params.append(inspect.Parameter("project", kw, **({} if m.project_only else {"default": None})))
    params += [inspect.Parameter(k, kw, default=None) for k in ("cluster", "start", "end", *m.filters)]
    given = [k for k in declarations.keywords(m.name) if k not in m.filters]
    declared = declarations.parameters()  # one value whoever declares it (hang_minutes: hung_jobs')
    params += [inspect.Parameter(k, kw, default=declared.get(k)) for k in given]
    signature = inspect.Signature(params, return_annotation="pl.DataFrame")

    def method(self, *args, **kwargs):
        a = signature.bind(self, *args, **kwargs)  # an unknown keyword or a missing project: TypeError, as Python's
        a.apply_defaults()
        v = a.arguments
        return self.mart(m.name, v["month"], project=v.get("project"), cluster=v["cluster"], start=v["start"],
                         end=v["end"], params={k: v[k] for k in given},
                         **{column: v[k] for k, column in m.filters.items()})

    method.__name__ = m.name
    method.__qualname__ = f"Connection.{m.name}"
    method.__doc__ = doc
    method.__signature__ = signature
    method.__module__ = __name__
    return method


class Connection:
    """A warehouse for analysis. Make one with :func:`connect`.

    It keeps the settings, not the engine: on the embedded warehouse every call opens the engine for its
    work and closes it after (about 0.1 s), so an idle notebook never blocks the nightly load or a manager's
    report, and a call made while one of them runs waits its turn (``[warehouse] wait_s``). Several calls in
    a row can share one opening with ``with wh.session(): ...``. On a ClickHouse server the connection stays
    open (a server serves many clients at once).
    """

    def __init__(self, source):
        # a Config (opened per call) or an open Warehouse its caller closes (the CLI: one command, one turn)
        if isinstance(source, Config):
            self._cfg, self._given = source, None
        else:
            self._cfg, self._given = source.cfg, source
        self._held = None  # the warehouse of the session in progress
        self._depth = 0
        self._server = None  # a server's warehouse, kept open
        self._migrated = False

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def session(self):
        """Hold the warehouse for several calls (one engine opening, one turn); calls inside reuse it.

        >>> with wh.session():
        ...     n = len(wh.clusters()) + len(wh.projects())
        """
        if self._given is not None:
            yield self._given
            return
        if self._held is None:
            if embedded_path(self._cfg.dsn) is None:
                if self._server is None:
                    # a read: grains an earlier version built are refused, not rebuilt (core/warehouse.py)
                    self._server = open_warehouse(self._cfg, create=False)
                self._held = self._server
            else:
                # the schema is brought up to date by the first call only: later calls only read; a path that
                # holds no warehouse is refused, not made (a mistyped path in a notebook)
                self._held = open_warehouse(self._cfg, migrate=not self._migrated, create=False)
            self._migrated = True
        self._depth += 1
        try:
            yield self._held
        finally:
            self._depth -= 1
            if self._depth == 0:
                held, self._held = self._held, None
                if held is not self._server:
                    held.close()

    def close(self) -> None:
        """Close a server connection (an embedded warehouse is closed after every call already)."""
        if self._server is not None:
            self._server.close()
            self._server = None

    @property
    def warehouse(self):
        """The low-level warehouse (ops_warehouse.warehouse.Warehouse) of the session in progress
        (``with wh.session(): wh.warehouse...``), or the one this connection was made with."""
        if self._given is not None:
            return self._given
        if self._held is None:
            raise OpsError("the low-level warehouse is open only inside `with wh.session():`")
        return self._held

    def sql(self, query: str, **params) -> pl.DataFrame:
        """Run a query; ``{name:Type}`` placeholders take ``params`` (never format values into the text).

        >>> wh.sql("SELECT {x:UInt8} + 1 AS y", x=41)["y"].item()
        42
        """
        import polars as pl  # 0.3 s: imported by the first call, not by `import ops_warehouse`

        with self.session() as w:
            w.check_one_read(query)  # reads never write: a DROP or a second statement is refused
            return pl.from_arrow(w.query_arrow(query, params))

    def clusters(self) -> list[str]:
        """The Slurm clusters with jobs in the warehouse.

        >>> wh.clusters()
        ['ai1']
        """
        with self.session() as w:
            return [r[0] for r in w.query_rows("SELECT DISTINCT cluster FROM slurm_job_run ORDER BY cluster")]

    def projects(self, cluster: str | None = None) -> list[str]:
        """The reporting projects with jobs on a cluster (accounts map to projects in the config).

        >>> wh.projects()[:3]
        ['A', 'B', 'C']
        """

        with self.session() as w:
            c = resolve_cluster(w, cluster)
            return [r[0] for r in w.query_rows(
                "SELECT DISTINCT project FROM fct_job_run WHERE cluster = {c:String} ORDER BY project", {"c": c})]

    def period(self, month: str | date | Period | None = None, *, start: datetime | str | None = None,
               end: datetime | str | None = None, cluster: str | None = None) -> Period:
        """Resolve a period: a month (default: the last complete month with jobs), or ``start``/``end``.

        >>> p = wh.period("2026-10")
        >>> (p.cluster, p.start.isoformat(), p.end.isoformat())
        ('ai1', '2026-10-01T00:00:00+00:00', '2026-11-01T00:00:00+00:00')
        """

        if isinstance(month, Period):
            return month
        with self.session() as w:
            return self._period(w, month, start, end, cluster)

    def _period(self, w, month, start, end, cluster) -> Period:
        c = resolve_cluster(w, cluster)
        if start is not None or end is not None:
            if month is not None or start is None or end is None:
                raise OpsError("give a month, or both start and end")
            s, e = utc_time(start, "start"), utc_time(end, "end")
            if e <= s:
                raise OpsError(f"end {e:%Y-%m-%d %H:%M} is not after start {s:%Y-%m-%d %H:%M}")
            return Period(c, s, e)
        if month is None:
            m = last_complete_month(*history_span(w, c))
        elif isinstance(month, date):
            m = month.replace(day=1)
        else:
            m = parse_month(str(month))
        start_m, end_m = month_window(m)
        return Period(c, start_m, end_m, f"{m:%Y-%m}")

    def __getattr__(self, name: str):
        """A declared mart without a method of its own (a new statistic: its SQL file and declaration are all
        it takes) is ``wh.<mart>(month, project=..., cluster=..., start=..., end=..., **filters)``, as
        :meth:`mart` runs it; the methods below (``name = _mart_method(doc)``) take the keywords their
        declarations give and add their own documentation."""
        m = None if name.startswith("_") else declarations.marts().get(name)
        if m is None or m.kind != "window":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

        def call(month=None, *, project: str | None = None, cluster: str | None = None, start=None, end=None,
                 params: dict | None = None, **filters):
            if project is not None and m.scope != "project":
                raise OpsError(f"mart {name} is the cluster's (scope cluster): it takes no project")
            if m.project_only and not project:
                raise OpsError(f"mart {name} is per project: give project=")
            return self.mart(name, month, project=project, cluster=cluster, start=start, end=end, params=params,
                             **filters)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"{m.grain[0].upper()}{m.grain[1:]}: sql/marts/{name}.sql, as declared there."
        return call

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n, m in declarations.marts().items() if m.kind == "window"})

    def mart(self, name: str, month=None, *, project: str | None = None, cluster: str | None = None,
             start=None, end=None, params: dict | None = None, **filters) -> pl.DataFrame:
        """Any mart of sql/marts/ by name, for a period and optionally a project; ``params`` sets the mart's
        other query parameters (ops_warehouse.analytics.marts.PARAMETERS: ``behind_ratio``, ``top_jobs``);
        ``filters`` keep the rows whose column equals the value (or is in a list of values), e.g.
        ``gpu_model="h100"``.

        >>> wh.mart("end_states", "2026-10", state="COMPLETED")["state"].to_list()
        ['COMPLETED']
        """
        import polars as pl  # 0.3 s: imported by the first call, not by `import ops_warehouse`

        with self.session() as w:
            p = self.period(month, start=start, end=end, cluster=cluster)
            df = _analysis().run_mart(w, name, cluster=p.cluster, window=(p.start, p.end), project=project or "",
                                      **{k: v for k, v in (params or {}).items() if v is not None})
        for col, want in filters.items():
            if want is None:
                continue
            if col not in df.columns:
                raise OpsError(f"mart {name} has no column {col!r} to filter on; it has: {', '.join(df.columns)}")
            values = list(want) if isinstance(want, (list, tuple, set)) else [want]
            df = df.filter(pl.col(col).is_in(values))
        return df

    # ------------------------------------------------------------------ capacity and utilization
    utilization = _mart_method(
        """Capacity and its use, in GPU-hours: capacity, down, drained, available, allocated, reserved,
        reserved-but-idle, free, allocated-but-idle, busy, and utilization (allocated / available), one row per
        ``level`` ("cluster", "gpu_model", "partition": the partition a node is counted under, "partition_member":
        every partition a node is in, rows that overlap) and ``key``.

        >>> u = wh.utilization("2026-10", level="cluster")
        >>> u["available_gpu_h"].item() == u["capacity_gpu_h"].item() - u["down_gpu_h"].item() - u["drained_gpu_h"].item()
        True
        """)

    utilization_daily = _mart_method(
        """The same split day by day (and the project's allocation, with ``project``).""")

    idle_capacity = _mart_method(
        """Where capacity that could have been used went unused, GPU-hours: free (no job, no reservation),
        reserved but unused, allocated but idle (a job held the GPU, telemetry saw it under the idle threshold),
        and down or drained, with each as a share of capacity (``idle_capacity``).

        >>> i = wh.idle_capacity("2026-10", level="cluster")
        >>> round(i["free_share"].item() + i["reserved_idle_share"].item() + i["allocated_idle_share"].item()
        ...       + i["down_share"].item() + i["drained_share"].item(), 6) <= 1
        True
        """)

    # ------------------------------------------------------------------ jobs
    job_sizes = _mart_method(
        """Jobs and GPU-hours by job size class (GPUs: 1, 2-8, 9-64, 65-256, 257-1024, >1024), with shares:
        the "many small jobs, few large ones hold the GPU-hours" observation.""")

    run_times = _mart_method(
        """Run time and wait percentiles (p50/p90/p99, seconds) by size class, and ``cdf_s``: the
        run-time quantiles at 1%, 2%, ... 100% of the jobs that ended (exact).""")

    end_states = _mart_method(
        """Runs and GPU-hours by final state (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...).""")

    efficiency = _mart_method(
        """How well allocated GPUs were used: GPU utilization, SM/tensor/DRAM activity, energy, bytes moved,
        delivered PFLOP and PFLOP-days; per project (``project_key``) and in total (``project_key`` "").""")

    job_efficiency = _mart_method(
        """The same per job run: GPU-hours, efficiency, energy, bytes, delivered PFLOP, and its least active
        node against the median of its nodes.""")

    def job(self, job_id, *, cluster: str | None = None):
        """Every run of one job (requeues included), as `ops-report job` shows it: ``.runs`` (job_detail: user,
        account, state, wait, CPU and memory efficiency, pooled GPU figures, the grain read), ``.gpus``
        (run_gpus: per node and GPU), ``.notes`` (job_notes: each note with its figure) and ``.series``
        (run_gpu_series: each GPU's samples or hours); ``.as_dict()`` for JSON (docs/efficiency.md).

        >>> jid = wh.sql("SELECT min(job_id) AS j FROM fct_job_run WHERE gpus > 0 AND NOT never_ran")["j"].item()
        >>> j = wh.job(jid)
        >>> j.runs["job_id"].unique().to_list() == [jid]
        True
        >>> j.notes.columns
        ['job_id', 'submit_ts', 'note', 'figure', 'unit', 'threshold', 'detail']
        """
        with self.session() as w:
            return _analysis().job_report(w, str(job_id), cluster)

    def largest_jobs(self, month=None, *, project=None, cluster=None, start=None, end=None,
                     top_jobs: int | None = None) -> pl.DataFrame:
        """The runs holding the most GPU-hours (``top_jobs``, default 15: the monthly report's), as
        :meth:`job_efficiency` gives them.

        >>> wh.largest_jobs("2026-10", top_jobs=3).height
        3
        """
        runs_limit = top_jobs or _analysis().PARAMETERS["top_jobs"]
        return self.mart("largest_jobs", month, project=project, cluster=cluster, start=start, end=end,
                         params={"top_jobs": top_jobs, "runs_limit": runs_limit})

    users = _mart_method(
        """A project's users: jobs started, GPU-hours, completed and failed, and :meth:`user_efficiency`'s
        columns for each (a project is required: users are per project; the monthly report's users).""")

    user_efficiency = _mart_method(
        """Per user of the project, or of the cluster without one: runs, GPU-hours, pooled GPU utilization and
        SM/tensor/DRAM activity (GPU-hour weighted, never a mean of the runs' means), idle and unbusy
        GPU-hours, a grade A-F, the three most wasteful runs and the rank, most wasteful first
        (sql/marts/user_efficiency.sql; docs/efficiency.md).""")

    user_resources = _mart_method(
        """Per user, as :meth:`user_efficiency`: GPU-memory efficiency (peak used ÷ the GPUs' memory), CPU and
        memory efficiency from sacct (TotalCPU ÷ CPUs × time, MaxRSS ÷ requested), pooled over the runs
        (sql/marts/user_resources.sql: it reads every sample and step, so apart).""")

    wasteful_users = _mart_method(
        """:meth:`user_efficiency`'s users over a waste threshold, with ``reasons`` ('idle', 'low_util',
        'low_gpu_memory'): who `ops-report digest` writes to; the thresholds are its keywords
        (sql/marts/wasteful_users.sql).""")

    # ------------------------------------------------------------------ reliability
    failures_by_size = _mart_method(
        """Failures by job size: runs, node-days, NODE_FAIL runs and hardware failures, failures per 1,000
        node-days, the observed mean time to failure and the model's (domain.md: MTTF falls as 1/nodes),
        GPU-hours lost to NODE_FAIL and after a hardware Xid.""")

    xid_events = _mart_method("""Xid events per node, GPU and code, with whether the code means hardware.""")

    xid_codes = _mart_method(
        """Xid events per code: events, nodes and GPUs that logged it, whether the code means hardware.""")

    node_failures = _mart_method(
        """DOWN and DRAIN events and hours per node, their reasons, and ``repeated``: lemon-node candidates.""")

    throttling = _mart_method(
        """GPUs that spent hours throttled (thermal or power), with their peak temperature.""")

    stragglers = _mart_method(
        """Nodes that ran behind their peers in at least one multi-node job: GPU utilization under
        ``behind_ratio`` (default 0.8, the report's) of the job's median node.""")

    # ------------------------------------------------------------------ waste: hangs and idle GPUs
    hung_jobs = _mart_method(
        """Runs that ended TIMEOUT, CANCELLED, FAILED or NODE_FAIL after their GPUs had all fallen idle (under
        the config's idle threshold) with their NICs quiet (under ``[reports] hang_nic_bytes_per_s``) for at
        least ``hang_minutes`` (default 20): the NCCL-hang signature, read from what the loads formed from the
        per-sample telemetry (run_telemetry). Each with the hang's start, its length in
        minutes (a lower bound within one sampling step), the GPU-hours lost and the nodes (sql/marts/hung_jobs.sql).
        A month whose per-sample telemetry is gone (``[telemetry] fine_ttl_days``) has no rows: see
        :meth:`fine_telemetry` for whether the answer is "none" or "unknown".

        >>> h = wh.hung_jobs("2026-10")
        >>> bool((h["hang_minutes"] >= 20).all() and (h["hung_gpu_h"] > 0).all())
        True
        """)

    hang_suspect_nodes = _mart_method(
        """Per node, the hung runs it was in (:meth:`hung_jobs`' rule): a node in two or more is a suspect
        (``suspect``), with its hours, lost GPU-hours and the runs that ended on it (sql/marts/hang_suspect_nodes.sql).""")

    idle_gpu_jobs = _mart_method(
        """Runs that held GPUs at a mean utilization under the config's idle threshold for at least
        ``idle_min_minutes`` (default 60) of telemetry, worst first, with their GPU-hours and write-off cost;
        ``attribution`` says how the run's GPU samples were told apart: its own GPUs (dcgm-exporter's hpc_job
        label, or whole nodes) or its share of a shared node's samples (sacct gives no GPU indices)
        (sql/marts/idle_gpu_jobs.sql).

        >>> j = wh.idle_gpu_jobs("2026-10")
        >>> bool((j["gpu_util_pct"] < 5).all()), set(j["attribution"]) <= {"own GPUs", "whole nodes", "shared node: node share"}
        (True, True)
        """)

    idle_gpu_users = _mart_method(
        """:meth:`idle_gpu_jobs` summed for the scope ('all'), per project and per user: runs, GPU-hours (on
        whole nodes and shared), cost, the user's share of the project's and rank in it, the worst run
        (sql/marts/idle_gpu_users.sql).""")

    node_health = _mart_method(
        """The node scorecard: every in-service node (or ``reservation``'s) with its hardware Xids, DOWN and
        DRAIN events, throttled hours, runs behind its peers, failed runs and hangs against its share, one
        score with its reasons, rank, and ``swap`` (score ≥ ``swap_min_score``, default 6): the nodes to
        swap for reserve nodes before the next reservation (sql/marts/node_health.sql).

        >>> card = wh.node_health("2026-10")
        >>> card["rank"].to_list() == list(range(1, card.height + 1)), bool((card["swap"] == (card["score"] >= 6)).all())
        (True, True)
        """)

    campaigns = _mart_method(
        """Training campaigns: a run, its requeues and the resubmissions of the same user, account, job name
        and GPU count each submitted within ``campaign_gap_hours`` (default 6) after an interrupted run's end;
        a COMPLETED run closes its campaign. Wall time from the first start, the initial wait apart, running,
        restart waits and start-ups, work lost since the last checkpoint (Lustre write bursts at ``[reports]
        ckpt_write_bytes_per_s``, default 1e8, seen by the loads; unknown without telemetry) by cause, and
        ETTR = (running − lost − start-up) ÷ wall time (sql/marts/campaigns.sql).

        >>> c = wh.campaigns("2026-10")
        >>> bool(c.filter(c["ettr"].is_not_null())["ettr"].is_between(0, 1).all())
        True
        """)

    goodput = _mart_method(
        """:meth:`campaigns` summed for the scope (``project_key`` '') and per project: ETTR weighted by GPU
        count over the campaigns of ``campaign_min_gpus`` (default 64) or more (``ettr``) and over all
        (``ettr_all``), GPU-hours lost by cause, initial and restart waits in hours, start-up GPU-hours
        (sql/marts/goodput.sql).""")

    def whatif(self, month=None, *, cluster=None, start=None, end=None, add=(), remove=(), reservation=(),
               scale_load: float = 1.0, project=None, name: str = "") -> dict:
        """What the next purchase would buy: the period's jobs replayed with the backfill scheduler on the cluster
        as it was and as changed (``add=["h200:16"]``, ``remove=["h100:8"]``, ``reservation=["A:0"]``: a
        project's reservations resized to that many nodes, ``scale_load=1.2``), beside what was observed. Returns
        {'summary', 'waits', 'projects', 'daily'} frames (marts whatif_*: allocated ÷ capacity GPU-hours, idle
        GPU-hours, waits per size class, GPU-hours per project, capex per allocated GPU-hour, wait-hours saved per
        added node, and
        the unchanged replay's error against the observed month), 'scenarios' and 'replay_stats'
        (docs/whatif.md).

        >>> w = wh.whatif("2026-10", add=["h200:16"])
        >>> w["scenarios"], bool(abs(w["summary"]["allocated_of_capacity_error_pts"][1]) < 2)
        (['observed', 'replay', '+16 h200'], True)
        """
        change = parse_change(add, remove, reservation, scale_load, name)
        with self.session() as w:
            p = self.period(month, start=start, end=end, cluster=cluster)
            return _analysis().whatif(w, cluster=p.cluster, window=(p.start, p.end), changes=[change],
                                      project=project or "")

    energy = _mart_method(
        """Energy and carbon of the runs, for the scope (``project_key`` '') and per project: GPU energy
        (counters, else power samples), the rest of the nodes (IPMI power − GPUs), facility kWh (× PUE),
        kgCO2e (× ``carbon_g_per_kwh``, default the config's [energy] carbon_g_per_kwh; none when unset), per
        GPU-hour and per delivered PFLOP-day, and how much of it was measured (sql/marts/energy.sql).

        >>> e = wh.energy("2026-10")
        >>> bool((e["it_kwh"] >= e["gpu_kwh"]).all()), e["project_key"].to_list()[0]
        (True, '')
        """)

    job_energy = _mart_method(
        """Per run: the same figures, most energy first, with the energy's source (sql/marts/job_energy.sql).""")

    fine_telemetry = _mart_method(
        """Whether the period still has per-sample GPU telemetry (what :meth:`hung_jobs` reads): its first and
        last sample times and ``covered`` (sql/marts/fine_telemetry.sql).""")

    gpu_heatmap = _mart_method("""Mean GPU utilization per GPU (rack, node, index).""")

    mig_jobs = _mart_method("""Per run and MIG GPU instance it held (dcgm-exporter's hpc_job label): samples,
        observed hours, mean engine, tensor and memory activity of the slice, peak framebuffer
        (sql/marts/mig_jobs.sql).""")

    # ------------------------------------------------------------------ investment
    cost = _mart_method(
        """Cost by GPU model (and "all"): capex share and energy (x PUE: each node's IPMI-measured energy where
        it reported power, else its GPUs', ``energy_basis``), cost per available, allocated and busy GPU-hour,
        the cost of idle capacity, PFLOP-days and cost per PFLOP-day (config [cost.<model>]).""")

    chargeback = _mart_method(
        """Each project's allocated GPU-hours by GPU model, its share of that model's allocation, and the cost
        charged to it (the model's cost split by share: the shares add up to the model's total cost).""")

    chargeback_totals = _mart_method(
        """Each project's chargeback over all GPU models: allocated GPU-hours, their share of the cluster's
        available GPU-hours, and the cost charged.

        >>> t = wh.chargeback_totals("2026-10", project="A").row(0, named=True)
        >>> round(t["cost"], 6) == round(wh.chargeback("2026-10", project="A")["cost"].sum(), 6)
        True
        """)

    reservations = _mart_method(
        """Reservations in the period: reserved, used and idle GPU-hours, use ratio; with ``project``, those
        held for one of the project's accounts.""")

    # ------------------------------------------------------------------ what `ops-report summary` and `telemetry` give
    def summary(self, date_from, date_to, *, by: list[str] | None = None, period: str = "none",
                tz: str | None = None) -> pl.DataFrame:
        """Open XDMoD's Jobs-realm statistics (jobs ended, started, cancelled before start, CPU-, GPU-, node-,
        wall- and wait-hours) per ``by`` group (cluster, account, project, partition, qos, user, gpu_type,
        gpu_count_bin, job_size_bin, wall_time_bin) over the whole days ``date_from`` .. ``date_to``, by
        ``period`` ("none", "day", "month") in ``tz`` (default the config's): what `ops-report summary` prints
        (sql/marts/summary.sql).

        >>> s = wh.summary("2026-10-01", "2026-10-03", by=["project"])
        >>> s["project"].to_list()[:2], bool((s["gpu_h"] > 0).all())
        (['A', 'B'], True)
        """
        with self.session() as w:
            return _analysis().summary(w, utc_day(date_from, "date_from"), utc_day(date_to, "date_to"), by, period, tz)

    def telemetry(self, date_from, date_to, *, by: str = "cluster") -> pl.DataFrame:
        """What the loaded telemetry says over the whole days ``date_from`` .. ``date_to`` per ``by`` (cluster,
        node, gpu, gpu_model): mean utilization and activities, power, energy, peak temperature, throttled
        hours, bytes moved, Xid events: what `ops-report telemetry` prints (sql/marts/telemetry.sql).

        >>> t = wh.telemetry("2026-10-01", "2026-10-03")
        >>> t["cluster"].to_list(), bool(t["energy_kwh"].item() > 0 and t["xid_events"].item() > 0)
        (['ai1'], True)
        """
        with self.session() as w:
            return _analysis().telemetry(w, utc_day(date_from, "date_from"), utc_day(date_to, "date_to"), by)

    # ------------------------------------------------------------------ the laws
    def check(self, month=None, *, project: str | None = None, cluster=None, start=None, end=None,
              laws: list[str] | None = None) -> list:
        """Run the laws of sql/checks/ (docs/checks.md) on a period: for ``project`` (its report's figures
        against the cluster's), or the whole cluster and each project with runs in the period. One outcome
        per law (ops_warehouse.analytics.checks.Outcome): ``status`` 'holds', 'broken' (``rows``: one per
        violation), 'not checked' (``reasons``) or 'error'.

        >>> [o.status for o in wh.check("2026-10", laws=["capacity_order"])]
        ['holds']
        """
        with self.session() as w:
            p = self.period(month, start=start, end=end, cluster=cluster)
            if project is not None and project not in self.projects(cluster=p.cluster):
                raise OpsError(f"no jobs of project {project!r} on {p.cluster}; projects: "
                               f"{', '.join(self.projects(cluster=p.cluster))}")
            return _analysis().run_checks(w, cluster=p.cluster, window=(p.start, p.end), project=project,
                                          names=laws)

    # ------------------------------------------------------------------ the report and exports
    def monthly(self, month=None, *, project: str | None = None, cluster: str | None = None,
                anonymize_users: bool = False) -> dict:
        """The monthly report as the JSON document of docs/monthly.md (what `ops-report monthly` renders)."""

        m = None if month is None else (month.replace(day=1) if isinstance(month, date) else parse_month(str(month)))
        return _analysis().monthly_report(self, month=m, project=project, cluster=cluster,
                                          anonymize_users=anonymize_users)

    def export(self, out: str | Path, month=None, *, project: str | None = None, cluster: str | None = None,
               anonymize_users: bool = False) -> dict:
        """Write the report's marts for a month as Parquet files, one per mart, and manifest.json, into
        ``out/<cluster>-<project or cluster>-<YYYY-MM>/`` (ops_warehouse.analytics.export); returns the manifest."""

        return _analysis().export_month(self, Path(out), month, project=project, cluster=cluster,
                                        anonymize_users=anonymize_users)


# the examples of the methods built from the declarations, for doctest (which finds functions, not those)
__test__ = {f"Connection.{n}": v.doc for n, v in vars(Connection).items() if isinstance(v, _mart_method)}


def connect(dsn: str | None = None, *, config: str | Path | None = None) -> Connection:
    """Open the warehouse as the CLI does: ``dsn`` (``chdb:///path`` or ``http(s)://user@host:8123/db``),
    else OPS_WAREHOUSE, else the config's (``config``, OPS_CONFIG, ./ops-warehouse.toml, ...), else the
    embedded ``./warehouse``. Passwords come from OPS_WAREHOUSE_PASSWORD or the config, never the DSN text."""

    cfg = load_config(config)
    if dsn:
        cfg.dsn = dsn
    conn = Connection(cfg)
    with conn.session():  # fail here, not at the first call, when the warehouse cannot be opened
        pass
    return conn
