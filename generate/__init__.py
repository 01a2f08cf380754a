"""A realistic synthetic GPU cluster: the files a real site has, for a configurable cluster and period.

``generate(out_dir, ...)`` simulates the period (generate/schedule.py) and writes:

- ``sacct/sacct.psv``: ``sacct --parsable2 --duplicates`` for the whole period as of its end; with
  ``nightly=True`` also ``sacct/nightly/YYYY-MM-DD.psv``, what the nightly cron's sacct call for each day
  returned at midnight (running jobs RUNNING, replaced by later nights); with ``backfill_days=N`` also
  ``sacct/backfill/<first day>..<day N>.psv``, what a site's first install's one sacct call for its first N days
  (``sacct -S first -E day N``) returned at the end of day N;
- ``slurm/events.psv``: node down/drain events as ``sacctmgr list event --parsable2`` prints them;
- ``slurm/reservations.txt``: ``scontrol show reservation`` text;
- ``inventory.csv``: node, GPU model, GPUs, partition, rack, in-service date;
- ``telemetry/``: dcgm-exporter, RDMA NIC, Lustre and IPMI metrics (generate/telemetry.py), Parquet and/or
  OpenMetrics for ``promtool tsdb create-blocks-from openmetrics``;
- ``logs/kernel/<node>.log``: the driver's ``NVRM: Xid`` line of every planted Xid, as ``journalctl -k -o
  short-iso`` prints them (generate/kernel_log.py), the GPU named by the PCI bus the telemetry labels it with;
- ``truth/*.parquet``: the simulation's own frames (runs, GPU allocations, events, Xids, throttling), the
  ground truth tests compare reports with. runs.parquet's ``campaign`` (the job id of the campaign's first
  run), ``lost_s`` (work lost at the run's end), ``startup_s`` (a restart's start-up, when not lost) and
  ``planted_campaign`` give each campaign's ETTR; ``truth/faults.json`` names the lemons, the straggler,
  the hot nodes and ``idle_users`` (account -> the user whose runs are mostly idle, one per account).

The efficiency cases (issue 52 item 5, generate/workload.py): ``truth/efficiency.parquet``, one row per planted
run (every run of a planted job: a requeue is planted too), kinds exclusive (a run is one kind or none):

- ``job_id`` (String, as runs.parquet: ``123_4`` for an array task), ``job_id_raw`` (Int64), ``run`` (Int32),
  ``submit``, ``start``, ``end`` (Int64 epoch s, as runs.parquet: submit is the key of a run with its job id),
  ``user``, ``account``, ``partition`` (String), ``gpus`` (Int32);
- ``kind`` (String): ``idle_gpu_of_n`` (one GPU of a run of 8-32 GPUs idle all along while the others work: a
  data-loader bug, a rank that never started), ``low_gpu_memory`` (busy GPUs using 2-8 % of their memory),
  ``cpu_bound`` (GPUs 10-28 % busy with low SM activity all along, CPUs 85-98 % busy), ``idle_user`` (a run of
  an account's ``idle_users`` user held idle at 0-3 % all along, as every idle-GPU run is);
- ``node`` (String), ``gpu`` (Int32): the idle GPU of an ``idle_gpu_of_n`` run (null for the other kinds);
- ``gpu_util`` (Float64): the planted DCGM_FI_DEV_GPU_UTIL (percent) while the run holds its GPUs: the idle
  GPU's for ``idle_gpu_of_n``, each GPU's for the other kinds; ``others_util`` (Float64): the other GPUs' of
  an ``idle_gpu_of_n`` run (null otherwise);
- ``sm_active`` (Float64, 0..1): as gpu_util (the idle GPU's, or each GPU's);
- ``fb_used_frac`` (Float64): of each GPU's memory, the run's busy GPUs' (the idle GPU's own is under 0.02);
- ``cpu_eff`` (Float64): TotalCPU / (NCPUS x elapsed) as sacct/sacct.psv writes it; ``mem_eff`` (Float64):
  the largest MaxRSS of the run's steps / ReqMem. Every run has them in runs.parquet too (``cpu_eff``,
  ``mem_eff``, and ``plant``: the kind, empty for an unplanted run); sacct lines carry TotalCPU and MaxRSS
  of ended runs (blank while running, as sacct prints them before the steps end).
"""

from __future__ import annotations

import json

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.generate.kernel_log import write_kernel_log
from ops_warehouse.generate.model import ClusterSpec, Partition
from ops_warehouse.generate.sacct_writer import compress_hostlist, sacct_text, write_sacct
from ops_warehouse.generate.schedule import History, simulate
from ops_warehouse.generate.telemetry import write_telemetry

__all__ = ["ClusterSpec", "History", "generate", "scaled_spec", "simulate"]


def scaled_spec(nodes: int | None = None, name: str = "ai1") -> ClusterSpec:
    """The default cluster (90 H100 + 16 H200 + 8 B200 nodes), scaled to ``nodes`` in the same proportions."""
    spec = ClusterSpec(name=name)
    if not nodes or nodes == spec.n_nodes:
        return spec
    total = spec.n_nodes
    parts = []
    left = nodes
    for i, p in enumerate(spec.partitions):
        n = left if i == len(spec.partitions) - 1 else max(1, round(p.nodes * nodes / total))
        left -= n
        parts.append(Partition(p.name, p.gpu_model, max(n, 1), p.node_prefix, p.rack_size))
    return replace(spec, partitions=tuple(parts))


def _events_psv(h: History) -> str:
    fmt = "%Y-%m-%dT%H:%M:%S"
    lines = ["Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User"]
    for r in h.node_events.sort("start_ts", "node").iter_rows(named=True):
        lines.append(f"{h.spec.name}|{r['node']}|{r['start_ts']:{fmt}}|{r['end_ts']:{fmt}}|"
                     f"{r['state'].upper()}|{r['reason']}|root(0)")
    return "\n".join(lines) + "\n"


def _reservations_txt(h: History) -> str:
    fmt = "%Y-%m-%dT%H:%M:%S"
    out = []
    for r in h.reservations.iter_rows(named=True):
        d = r["end_ts"] - r["start_ts"]
        dur = f"{d.days}-{d.seconds // 3600:02d}:{d.seconds % 3600 // 60:02d}:00"
        n = len(r["nodes"])
        out.append(
            f"ReservationName={r['name']} StartTime={r['start_ts']:{fmt}} EndTime={r['end_ts']:{fmt}} "
            f"Duration={dur}\n   Nodes={compress_hostlist(tuple(r['nodes']))} NodeCnt={n} "
            f"CoreCnt={n * h.spec.cpus_per_node} Features=(null) PartitionName={r['partition']} Flags=\n"
            f"   TRES=cpu={n * h.spec.cpus_per_node}\n   Users=(null) Groups=(null) Accounts={r['accounts']} "
            f"Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a\n   MaxStartDelay=(null)\n")
    return "\n".join(out)


def _efficiency_truth(runs: pl.LazyFrame, gpu_alloc: pl.LazyFrame) -> pl.DataFrame:
    """truth/efficiency.parquet (the module docstring): each planted run that held GPUs, with its planted
    figures read back from its GPU allocations (the idle GPU: the one below every other's util)."""
    planted = runs.filter((pl.col("plant") != "") & pl.col("start").is_not_null()).with_columns(
        start_ts=pl.from_epoch("start", "s").dt.replace_time_zone("UTC").dt.cast_time_unit("ms"))
    alloc = gpu_alloc.join(planted.select("job_id", "start_ts", "plant"), on=["job_id", "start_ts"])
    idle_gpu = pl.col("plant").first() == "idle_gpu_of_n"
    low = pl.col("gpu_util").arg_min()
    per_run = alloc.group_by("job_id", "start_ts").agg(
        node=pl.when(idle_gpu).then(pl.col("node").get(low)),
        gpu=pl.when(idle_gpu).then(pl.col("gpu").get(low)),
        gpu_util=pl.col("gpu_util").min(),
        others_util=pl.when(idle_gpu).then(pl.col("gpu_util").max()),
        sm_active=pl.col("sm_active").get(low),
        fb_used_frac=pl.col("fb_used_frac").max(),
    )
    return (planted.join(per_run, on=["job_id", "start_ts"])
            .select("job_id", "job_id_raw", "run", "submit", "start", "end", "user", "account", "partition", "gpus",
                    pl.col("plant").alias("kind"), "node", pl.col("gpu").cast(pl.Int32), "gpu_util", "others_util",
                    "sm_active", "fb_used_frac", "cpu_eff", "mem_eff")
            .sort("submit", "job_id").collect())


def generate(out_dir: str | Path, *, start: datetime, days: int, jobs_per_day: int = 900, nodes: int | None = None,
             seed: int = 0, metrics_step_s: int = 300, telemetry: tuple[str, ...] = ("parquet",),
             nightly: bool = False, spill: bool = False, faults: bool = True, campaign_share: float | None = None,
             backfill_days: int = 0, progress=None) -> History:
    """Simulate and write the site's files (see the module docstring). ``spill`` keeps memory flat in the
    number of jobs: runs and GPU allocations go to ``truth/`` as they are made and are read back lazily.
    ``progress(days_done, days_total)`` counts the telemetry days written, from 0 once the backfill's sacct
    extract is. The order serves a loader beside (the demo's backfill, cli/demo.py): that extract first, then
    the telemetry days, then the other files (the whole period's sacct, the nightly extracts, the truth, the
    kernel logs), which the backfill does not read."""
    if spill and nightly:
        raise ValueError("nightly extracts need the runs in memory: not with spill")
    if spill and backfill_days > 0:
        raise ValueError("a backfill extract needs the runs in memory: not with spill")
    out = Path(out_dir)
    (out / "sacct").mkdir(parents=True, exist_ok=True)
    (out / "slurm").mkdir(exist_ok=True)
    (out / "truth").mkdir(exist_ok=True)
    start = start if start.tzinfo else start.replace(tzinfo=timezone.utc)
    spec = scaled_spec(nodes)
    h = simulate(spec, start=start, days=days, jobs_per_day=jobs_per_day, seed=seed,
                 spill_dir=(out / "truth" / "parts") if spill else None, faults=faults,
                 **({} if campaign_share is None else {"campaign_share": campaign_share}))
    t0, t1 = int(start.timestamp()), int(h.end.timestamp())
    per_gpu_cpus = spec.cpus_per_node // spec.gpus_per_node
    per_gpu_mem = spec.mem_per_node_mib // spec.gpus_per_node
    kw = dict(cluster=spec.name, cpus_per_gpu=per_gpu_cpus, mem_per_gpu_mib=per_gpu_mem)
    if backfill_days > 0:
        (out / "sacct" / "backfill").mkdir(exist_ok=True)
        w1 = t0 + backfill_days * 86400
        last_day = (start + timedelta(days=backfill_days - 1)).strftime("%Y-%m-%d")
        write_sacct(out / "sacct" / "backfill" / f"{start:%Y-%m-%d}..{last_day}.psv", h.runs, as_of=w1,
                    window=(t0, w1), **kw)
    if telemetry:
        if progress is not None:  # the loads beside start: the demo opens its warehouse and loads the extract
            progress(0, (t1 - 1) // 86400 - t0 // 86400 + 1)
        # the runs' raw job ids: what dcgm-exporter's hpc_job label carries (SLURM_JOB_ID)
        raw_ids = h.runs.lazy().select("job_id", "job_id_raw").unique()
        write_telemetry(out, spec=spec, inventory=h.inventory,
                        gpu_alloc=h.gpu_alloc.lazy().join(raw_ids, on="job_id", how="left").collect(),
                        node_events=h.node_events,
                        xids=h.xids, throttle=h.throttle, start=start, end=h.end, step_s=metrics_step_s, seed=seed,
                        formats=tuple(telemetry), progress=progress)
    write_sacct(out / "sacct" / "sacct.psv", h.runs, as_of=t1, **kw)
    if nightly:
        (out / "sacct" / "nightly").mkdir(exist_ok=True)
        for d in range(days):
            w0 = t0 + d * 86400
            day = (start + timedelta(days=d)).strftime("%Y-%m-%d")
            (out / "sacct" / "nightly" / f"{day}.psv").write_text(
                sacct_text(h.runs, as_of=w0 + 86400, window=(w0, w0 + 86400), **kw), encoding="utf-8")
    (out / "slurm" / "events.psv").write_text(_events_psv(h), encoding="utf-8")
    (out / "slurm" / "reservations.txt").write_text(_reservations_txt(h), encoding="utf-8")
    h.inventory.select("node", "gpu_model", "gpus", "partition", "rack",
                       pl.col("in_service_ts").dt.date().alias("in_service_date")).write_csv(out / "inventory.csv")
    for name in ("runs", "gpu_alloc", "node_events", "xids", "throttle", "reservations", "inventory"):
        frame = getattr(h, name)
        if isinstance(frame, pl.LazyFrame):
            frame.sink_parquet(out / "truth" / f"{name}.parquet")
        else:
            frame.write_parquet(out / "truth" / f"{name}.parquet")
    efficiency = _efficiency_truth(h.runs.lazy(), h.gpu_alloc.lazy())
    efficiency.write_parquet(out / "truth" / "efficiency.parquet")
    idle_users = (h.runs.lazy().filter(pl.col("plant") == "idle_user").select("account", "user").unique()
                  .sort("account").collect())
    # the nodes the generator made faulty (the Xid repeaters are in xids.parquet: two hardware faults or more)
    (out / "truth" / "faults.json").write_text(json.dumps({
        "lemons": sorted(h.lemons), "straggler": h.straggler,
        "hot_nodes": sorted(set(h.throttle.get_column("node").to_list())),
        "idle_users": dict(idle_users.iter_rows())}, indent=1) + "\n", encoding="utf-8")
    write_kernel_log(out, h.xids)  # where a site sees its Xids: every planted one, the fatal ones too
    return h
