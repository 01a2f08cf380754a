"""`ops-report`: a thin command line over the ops_warehouse library (each command parses, calls, prints)."""

from __future__ import annotations

import signal
import sys
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Optional

import typer
from ops_warehouse.analytics.periods import parse_month
from ops_warehouse.cli.invoked import narrowed
from ops_warehouse.config import load_config
from ops_warehouse.dsn import dsn_secret
from ops_warehouse.errors import OpsError, Terminated, sigterm_received, stop_on_sigterm
from ops_warehouse.etl.grains import rebuild_stale, refresh_history
from ops_warehouse.etl.retry import Retry
from ops_warehouse.etl.watermarks import days_since, extract_end
from ops_warehouse.files import write_file
from ops_warehouse.migrations import Deployment, rendered_schema, restore_missing_objects
from ops_warehouse.planning.changes import parse_change
from ops_warehouse.progress import count_progress, file_progress, step_progress
from ops_warehouse.reports import job_render
from ops_warehouse.reports import users_render
from ops_warehouse.warehouse import bring_up_to_date, open_warehouse, redact

# A command imports what only it needs when it runs (_etl, _analytics, _render below, the generator, the
# report's charts): polars, pyarrow and the sources' clients cost 0.7 s and 80 MB that `ops-report init`,
# `schema` or `--help` should not pay, nor a report the loads. The modules imported above are light (no
# polars, no pyarrow, no clickhouse-connect: tests/test_startup.py).
app = typer.Typer(
    help="ops-warehouse: offline analytics for GPU supercomputers (Slurm accounting in ClickHouse).",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
etl_app = typer.Typer(help="Load data into the warehouse.", no_args_is_help=True)
app.add_typer(etl_app, name="etl")

_state: dict = {}

WarehouseOpt = Annotated[Optional[str], typer.Option(
    "--warehouse", "-w", envvar="OPS_WAREHOUSE",
    help="Warehouse DSN: chdb:///path (embedded, default chdb://./warehouse) or http(s)://user@host:8123/db. "
         "Put passwords in OPS_WAREHOUSE_PASSWORD, not here.", show_envvar=True)]


# the commands that only read the warehouse: they never create one
READS = {"summary", "telemetry", "monthly", "export", "nodes", "whatif", "check"}


@app.callback()
def _main(
    ctx: typer.Context,
    warehouse: WarehouseOpt = None,
    config: Annotated[Optional[Path], typer.Option(
        "--config", "-c", envvar="OPS_CONFIG", help="Config file (TOML). Default ./ops-warehouse.toml, "
        "then ~/.config/ops-warehouse/config.toml.")] = None,
    wait: Annotated[Optional[bool], typer.Option(
        "--wait/--no-wait", help="When another process has the embedded warehouse (the nightly load, a report, a "
        "notebook call), wait for it (up to the config's warehouse.wait_s, default 1800 s) or fail at once.")] = None,
):
    cfg = load_config(config)
    if wait is False:
        cfg.wait_s = 0
    cfg.purpose = f"ops-report {ctx.invoked_subcommand or ''}".strip()
    # the reports read: on a path that holds no warehouse they say so instead of making an empty one
    _state["creates"] = ctx.invoked_subcommand not in READS
    ctx.call_on_close(_close_wh)
    if warehouse:
        # a password in the user part or a password= parameter (core/dsn.py); from OPS_WAREHOUSE it was
        # refused by load_config
        if dsn_secret(warehouse) and any(warehouse in a for a in sys.argv[1:]):
            raise OpsError("--warehouse must not hold a password (the process list shows it to every user): put "
                           "it in OPS_WAREHOUSE_PASSWORD or the config's [warehouse] password (a chmod 600 file)")
        cfg.dsn = warehouse
    _state["cfg"] = cfg


def _wh():
    """The command's warehouse: opened at its first use, closed when the command ends (on the embedded
    engine that ends this process's turn)."""
    if "wh" not in _state:
        _state["wh"] = open_warehouse(_state["cfg"], create=_state.get("creates", True))
    return _state["wh"]


def _api():
    """The analysts' API over the command's warehouse, its module imported by the commands that use it (as a
    report's module, :func:`_analytics`): the API with its declarations, and the digest, imported at the top
    cost a `summary`, which reads through none of them, 3-4 ms of CPU a start (issue 51, round 5)."""
    return _analytics("api").Connection(_wh())


def _close_wh():
    wh = _state.pop("wh", None)
    if wh is not None:
        wh.close()


def _retry(label: str):
    """Patience with a source that can heal (slurmdbd or MariaDB away, sacct failing): the config's [nightly]
    retries and backoff_s, as the nightly run has, each retry a line on stderr (etl/retry.py)."""

    cfg = _state["cfg"]
    return Retry(cfg.nightly_retries, cfg.nightly_backoff_s, label)


def _etl() -> SimpleNamespace:
    """The loads and their sources (polars, pyarrow, the sources' clients), for the `etl` commands."""
    from ops_warehouse.etl import (
        backfill,
        capacity_sources,
        carbon_intensity,
        kernel_log_xid,
        nightly,
        openmetrics_source,
        prometheus_source,
        sacct_load,
        sacct_run,
        sacct_text,
        slurmdbd_source,
        slurmrestd_source,
        telemetry_load,
        victorialogs_source,
        vm_export_source,
    )  # polars, pyarrow, the sources' HTTP and SQL clients: 0.6 s that only the loads pay

    return SimpleNamespace(
        load_capacity=capacity_sources.load_capacity, load_carbon_intensity=carbon_intensity.load_carbon_intensity,
        run_nightly=nightly.run_nightly,
        load_text_files=openmetrics_source.load_text_files, PromClient=prometheus_source.PromClient,
        load_prometheus=prometheus_source.load_prometheus, load_sacct=sacct_load.load_sacct,
        run_sacct=sacct_run.run_sacct, XDMOD_FIELDS=sacct_text.XDMOD_FIELDS, parse_fields=sacct_text.parse_fields,
        load_slurmdbd=slurmdbd_source.load_slurmdbd, load_parquet_dir=telemetry_load.load_parquet_dir,
        DaysAhead=telemetry_load.DaysAhead,
        fetch_jobs=slurmrestd_source.fetch_jobs, slurm_jwt=slurmrestd_source.token,
        load_vm_export=vm_export_source.load_vm_export, load_kernel_log=kernel_log_xid.load_kernel_log,
        load_victorialogs=victorialogs_source.load_victorialogs, load_resumably=backfill.load_resumably,
        FILE_CHUNK_DAYS=backfill.FILE_CHUNK_DAYS, SERVER_CHUNK_DAYS=backfill.SERVER_CHUNK_DAYS,
    )


_REPORTS = ("api", "checks", "digest", "export", "monthly", "summary", "telemetry", "whatif")


def _analytics(report: str):
    """The module of one report's queries, or the analysts' API (ops_warehouse.analytics.<report>), imported by
    the command that runs it alone: importing all six made a one-day `summary` pay for the what-if's numpy and the checks'
    and monthly report's modules, 0.4 s of CPU (issue 51, bench_startup)."""
    import importlib

    if report not in _REPORTS:
        raise ValueError(f"no report module {report!r}")
    return importlib.import_module(f"ops_warehouse.analytics.{report}")


def _render(df, fmt: str, max_str: int = 60) -> str:
    from ops_warehouse.reports.tabular import render  # an Arrow table of plain columns prints without polars

    return render(df, fmt, max_str)


def _day_window(date_from: str, date_to: str) -> tuple[datetime, datetime]:
    """--from and --to (whole days, --to inclusive) as [start, end) in UTC."""
    d0, d1 = _date(date_from, "--from"), _date(date_to, "--to")
    if d1 < d0:
        raise OpsError(f"--to {d1} is before --from {d0}")
    return (datetime.combine(d0, time(), timezone.utc), datetime.combine(d1 + timedelta(days=1), time(), timezone.utc))


# Bounds of the counts a user passes (issue 27): generous for any real site, so only a typo or a hostile
# value is refused, in one line, before it costs memory or time (`--jobs-per-day 10^12` asked numpy for
# 7 TB, `demo --days 10^9` overflowed the calendar with a traceback).
MAX_DAYS = 3660              # ten years of history: more than any accounting history one simulates
MAX_JOBS_PER_DAY = 1_000_000  # the busiest HPC/HTC schedulers run some 10^5 jobs a day
MAX_NODES = 100_000          # several times the largest GPU machines built (some 10,000 to 25,000 nodes)
MAX_METRICS_STEP_S = 86_400  # one sample a day: the coarsest step a telemetry file is any use at
MAX_SEED = 2**63 - 1


def _count(value: int, option: str, lo: int, hi: int, unit: str = "") -> int:
    """``value`` of ``option`` if within [lo, hi], else a one-line refusal naming both."""
    if not lo <= value <= hi:
        shown = str(value) if len(str(value)) <= 30 else str(value)[:27] + "..."
        raise OpsError(f"{option} {shown}: out of range, expected {lo:,} to {hi:,}{' ' + unit if unit else ''}")
    return value


def _choice(value: str, flag: str, choices: tuple[str, ...]) -> str:
    """An option with a fixed set of values (each command's choices stand beside its option): anything else is
    refused in one line that names them."""
    if value not in choices:
        raise OpsError(f"{flag} must be {', '.join(choices[:-1])} or {choices[-1]}, not {value!r}")
    return value


def _month_or_days(month: str | None, date_from: str | None, date_to: str | None):
    """A report's period: --month, or the --from/--to pair (whole days, --to inclusive) as [start, end) in
    UTC, or neither ((None, None): the last complete month)."""
    if (date_from is None) != (date_to is None):
        raise OpsError("give both --from and --to (or --month)")
    if month and date_from:
        raise OpsError("choose one: --month or --from/--to")
    return _day_window(date_from, date_to) if date_from else (None, None)


def _date(value: str, flag: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise OpsError(f"{flag} must be a date YYYY-MM-DD, not {value!r}") from None


@app.command()
def init():
    """Create or upgrade the warehouse schema (idempotent; ETL commands do this too)."""

    # what every connection does: the mapping and cost model are replaced only by a config that names them
    with open_warehouse(_state["cfg"], migrate=False) as wh:
        applied = bring_up_to_date(wh)
        restored = restore_missing_objects(wh)  # the log says what was applied, not what was dropped since
        # the grains an earlier version's SQL built, over the whole history (progress on stderr)
        rebuilt = rebuild_stale(wh)

    print(f"warehouse {redact(wh.dsn)}: " + (f"applied {', '.join(applied)}" if applied else "schema up to date"))
    if rebuilt:
        print(f"rebuilt the grains an earlier version built: {', '.join(rebuilt)}")
    if restored:
        print(f"created again {len(restored)} missing tables and views: {', '.join(restored)} (their rows are "
              "not restored: load their sources again, then ops-report etl refresh)")


@app.command()
def schema(
    deployment: Annotated[str, typer.Option(help="single or cluster")] = "cluster",
    cluster_name: Annotated[str, typer.Option(help="ClickHouse cluster name for ON CLUSTER")] = "ops",
):
    """Print the schema DDL as rendered for a deployment (review it before running it on a cluster)."""

    _choice(deployment, "--deployment", ("single", "cluster"))
    for s in rendered_schema(Deployment(deployment, cluster_name)):
        print(s.rstrip().rstrip(";") + ";\n")


@etl_app.command("sacct")
def etl_sacct(
    files: Annotated[Optional[list[Path]], typer.Argument(
        help="sacct output files: text with a header (--parsable2 or --parsable), headerless with --fields, "
             "or sacct --json. Omit and give --from/--to to run sacct.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="auto, text or json")] = "auto",
    delimiter: Annotated[str, typer.Option(help="Field delimiter of text input (sacct --delimiter)")] = "|",
    fields: Annotated[Optional[str], typer.Option(
        help="Field names of headerless text, comma-separated, or 'xdmod' for Open XDMoD's sacct format")] = None,
    timezone: Annotated[Optional[str], typer.Option(
        "--timezone", help="Zone sacct printed times in (default: config, else UTC)")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster name for input without a Cluster field")] = None,
    date_from: Annotated[Optional[str], typer.Option("--from", help="Run sacct from this day (YYYY-MM-DD)")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Run sacct to this day, inclusive")] = None,
    slurmrestd: Annotated[Optional[str], typer.Option(
        "--slurmrestd", envvar="OPS_SLURMRESTD_URL", show_envvar=True,
        help="With --from/--to: ask slurmrestd (http://slurmctld:6820) for /slurmdb/v0.0.4x/jobs of the days "
             "instead of running sacct (newest data_parser first); the token from SLURM_JWT, never the command "
             "line")] = None,
):
    """Load Slurm job records (jobs, steps, requeued runs) from sacct output, by running sacct, or from
    slurmrestd."""

    cfg = _state["cfg"]
    _choice(fmt, "--format", ("auto", "text", "json"))
    if timezone is not None and not timezone.strip():
        raise OpsError("--timezone is empty: give the zone sacct printed times in (an IANA name such as UTC or "
                       "Europe/Berlin), or leave it out for the config's")
    etl = _etl()
    field_list = None
    if fields:
        field_list = etl.parse_fields(etl.XDMOD_FIELDS if fields.strip().lower() == "xdmod" else fields)
    inputs: list[tuple[Path, str | None, bool]] = [(f, None, False) for f in files or []]
    through = None
    if date_from or date_to:
        if files:
            raise OpsError("give files or --from/--to, not both")
        if not (date_from and date_to):
            raise OpsError("--from and --to go together")

        d0, d1 = _date(date_from, "--from"), _date(date_to, "--to")
        through = extract_end(d1)
        if slurmrestd:
            import tempfile
            from datetime import datetime, time, timedelta
            from datetime import timezone as tz

            start = datetime.combine(d0, time(), tz.utc)
            out = etl.fetch_jobs(slurmrestd, start, datetime.combine(d1, time(), tz.utc) + timedelta(days=1),
                                 Path(tempfile.mkdtemp(prefix="ops-slurmrestd-")), etl.slurm_jwt())[0]
            inputs = [(out, f"slurmrestd {d0}..{d1}", True)]  # epoch times: no zone to read them in
        else:
            out = etl.run_sacct(cfg.sacct_command, d0, d1, retry=_retry(f"sacct {cluster or cfg.default_cluster}"))
            inputs = [(out, f"sacct {d0}..{d1}", True)]  # the label; rows name the source sacct:<cluster>
        timezone = "UTC"
    elif slurmrestd:
        raise OpsError("--slurmrestd needs --from and --to: the days whose job records to ask it for")
    if not inputs:
        raise OpsError("nothing to load: give sacct output files, or --from and --to to run sacct")
    wh = _wh()  # after sacct ran: its minutes do not hold the embedded warehouse from others
    for path, source, temporary in inputs:
        wh.between_steps()  # whole files only: a report waiting for the warehouse goes between two
        try:
            with file_progress(f"loading {source or path}") as progress:
                r = etl.load_sacct(wh, path, fmt=fmt, delimiter=delimiter, fields=field_list, tz=timezone,
                                   cluster=cluster,
                                   source=f"sacct:{cluster or cfg.default_cluster}" if source else None,
                                   label=source, progress=progress, extracted_through=through if source else None)
        finally:
            if temporary:
                path.unlink(missing_ok=True)
                if path.parent.name.startswith("ops-slurmrestd-"):
                    path.parent.rmdir()
        print(f"{source or path}: read {r.records_read}, loaded {r.loaded} "
              f"({r.jobs_loaded} job runs, {r.steps_loaded} steps), quarantined {r.quarantined} "
              f"in {r.seconds:.1f} s" + (f"; defaults: {', '.join(r.defaults)}" if r.defaults else ""))
        for reason, n in sorted(r.reasons.items(), key=lambda kv: -kv[1]):
            print(f"  quarantined {n}: {reason}")
        if r.replaced_zone:
            print(f"  replaced the rows of its earlier load in {r.replaced_zone} (times are read in "
                  f"{timezone or cfg.timezone} now)")


@etl_app.command("metrics")
def etl_metrics(
    date_from: Annotated[Optional[str], typer.Option(
        "--from", help="First day (YYYY-MM-DD, UTC). Prometheus source: default the day before its watermark")] = None,
    date_to: Annotated[Optional[str], typer.Option(
        "--to", help="Last day, inclusive. Prometheus source: default yesterday (UTC)")] = None,
    source: Annotated[str, typer.Option(
        help="prometheus or victoriametrics (query_range, downsampled by the server), vm-export (VictoriaMetrics "
             "/api/v1/export raw samples for bulk backfill: --url or --file), or file")] = "file",
    url: Annotated[Optional[str], typer.Option(help="Prometheus/VictoriaMetrics base URL, e.g. http://vm:8428")] = None,
    step: Annotated[int, typer.Option(help="Downsampling step in seconds (prometheus source)")] = 60,
    file: Annotated[Optional[list[Path]], typer.Option(
        help="A folder of exporter Parquet files (<dir>/<family>/<YYYY-MM-DD>.parquet: dcgm, nic, lustre, ipmi, "
             "as ops-report generate writes them), or Prometheus text / OpenMetrics files (a dcgm-exporter "
             "scrape, promtool input); repeat for several")] = None,
    at: Annotated[Optional[str], typer.Option(
        help="Time of samples without a timestamp (a single scrape), ISO 8601 UTC; default the file's mtime")] = None,
    instance: Annotated[Optional[str], typer.Option(
        help="Scrape target (host:port) for samples without an instance label (a file saved from an exporter's "
             "/metrics, e.g. node_exporter or ipmi_exporter: Prometheus adds the label when it scrapes)")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster name for the rows (default: config)")] = None,
    restart: Annotated[bool, typer.Option(
        help="Load the whole window again even where an earlier run of it was stopped part-way (by default "
             "that run is resumed at the first day it had not loaded: docs/sources.md)")] = False,
):
    """Load downsampled GPU, network, storage and power telemetry for whole days."""
    etl = _etl()
    if source in ("prometheus", "victoriametrics") and url and not (date_from and date_to):
        # from the source's watermark (re-reading its last day, for late samples) to yesterday
        d0, d1 = days_since(_wh(), f"prometheus:{etl.PromClient(url).url}", overlap_days=1, first_days=0)
        date_to = date_to or d1.isoformat()
        date_from = date_from or d0.isoformat()
    if not (date_from and date_to):
        raise OpsError("--from and --to are needed (only the prometheus source has a watermark to start from)")
    d0, d1 = _date(date_from, "--from"), _date(date_to, "--to")
    if d1 < d0:
        raise OpsError(f"--to {d1} is before --from {d0}")
    if source == "file":
        if not file:
            raise OpsError("--source file needs --file DIR or --file FILE")
        if len(file) == 1 and file[0].is_dir():
            # one DaysAhead for the whole backfill: a week's first day staged beside the week before's last writes
            with count_progress("telemetry days") as progress, etl.DaysAhead(_wh(), True) as ahead:
                c = etl.load_resumably(
                    _wh(), f"file:{file[0].resolve()}", d0, d1,
                    lambda a, b, p: etl.load_parquet_dir(_wh(), file[0], a, b, cluster=cluster, progress=p,
                                                         ahead=ahead, through=d1),
                    chunk_days=etl.FILE_CHUNK_DAYS, progress=progress, restart=restart)
        else:
            from datetime import datetime, timezone


            when = None
            if at:
                try:
                    when = datetime.fromisoformat(at.replace("Z", "+00:00"))
                except ValueError:
                    raise OpsError(f"--at must be an ISO 8601 time, not {at!r}") from None
                when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
            c = etl.load_text_files(_wh(), list(file), d0, d1, at=when, cluster=cluster, instance=instance)
            c["days"] = (d1 - d0).days + 1
        what = ", ".join(str(f) for f in file[:3])
    elif source in ("prometheus", "victoriametrics"):

        if not url:
            raise OpsError(f"--source {source} needs --url")
        if step < 1:
            raise OpsError("--step must be positive")
        with count_progress("telemetry days") as progress:
            c = etl.load_resumably(
                _wh(), f"prometheus:{etl.PromClient(url).url}", d0, d1,
                lambda a, b, p: etl.load_prometheus(_wh(), url, a, b, step_s=step, cluster=cluster, progress=p),
                chunk_days=etl.SERVER_CHUNK_DAYS, progress=progress, restart=restart)

        what = redact(url)
    elif source == "vm-export":

        if not (url or file):
            raise OpsError("--source vm-export needs --url or --file EXPORT.jsonl")
        if url:  # a day at a time: an export is held in memory until it is inserted
            with count_progress("telemetry days") as progress:
                c = etl.load_resumably(_wh(), f"vm-export:{url}", d0, d1,
                                       lambda a, b, p: etl.load_vm_export(_wh(), url, a, b, cluster=cluster),
                                       chunk_days=etl.SERVER_CHUNK_DAYS, progress=progress, restart=restart)
        else:
            c = etl.load_vm_export(_wh(), file[0], d0, d1, cluster=cluster)
            c["days"] = (d1 - d0).days + 1

        what = redact(url) if url else str(file[0])
    else:
        raise OpsError("--source must be file, prometheus, victoriametrics or vm-export")
    if c.get("resumed_from"):
        print(f"resumed at {c['resumed_from']}: the {c['skipped_days']} days before it were loaded by an earlier "
              "run of this window that was stopped (--restart loads them again)")
    print(f"{what}: {c['days']} days, {c['gpu_rows']} GPU samples, {c['node_rows']} node samples, "
          f"{c['xid_events']} Xid events, "
          + (f"{c['job_io_rows']} Lustre job I/O rows, " if c.get("job_io_rows") else "")
          + f"quarantined {c.get('quarantined', 0)}")


@etl_app.command("kernel-log")
def etl_kernel_log(
    files: Annotated[Optional[list[Path]], typer.Argument(
        help="Kernel logs with the driver's NVRM: Xid lines: journalctl -k -o json or -o short-iso output, "
             "syslog files (/var/log/messages, kern.log). Omit with --victorialogs.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="auto (JSON when a file starts with an object), json, "
                                                      "short-iso or syslog")] = "auto",
    year: Annotated[Optional[int], typer.Option(
        help="Year of traditional syslog lines (Jun 10 03:09:55 host kernel: ...), which carry none")] = None,
    tz: Annotated[str, typer.Option(
        "--tz", help="Zone the hosts' clocks were in for traditional syslog lines (ISO lines and journald's "
                     "JSON carry their own)")] = "UTC",
    victorialogs: Annotated[Optional[str], typer.Option(
        "--victorialogs", envvar="OPS_VICTORIALOGS_URL", show_envvar=True,
        help="VictoriaLogs base URL (http://vlselect:9428): query /select/logsql/query for --from..--to. A URL "
             "with a password goes in OPS_VICTORIALOGS_URL, never on the command line")] = None,
    date_from: Annotated[Optional[str], typer.Option(
        "--from", help="First day (YYYY-MM-DD, UTC), --victorialogs")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Last day, inclusive, --victorialogs")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster name for the rows (default: config)")] = None,
):
    """Load Xids from the kernel log (journald, syslog, VictoriaLogs), the GPU named by its PCI bus id (idempotent)."""
    if bool(files) == bool(victorialogs):
        raise OpsError("give kernel log files, or --victorialogs URL with --from and --to")
    if year is not None:
        _count(year, "--year", 1970, 2105)
    try:
        from zoneinfo import ZoneInfo  # the standard library's: checks --tz before any file is read

        ZoneInfo(tz)
    except Exception:
        raise OpsError(f"--tz {tz!r}: not a time zone (an IANA name such as UTC or Asia/Tokyo)") from None
    etl = _etl()
    if victorialogs:
        if dsn_secret(victorialogs) and any(victorialogs in a for a in sys.argv[1:]):
            raise OpsError("--victorialogs must not hold a password (the process list shows it to every user): "
                           "put the URL in OPS_VICTORIALOGS_URL")
        if not (date_from and date_to):
            raise OpsError("--victorialogs needs --from and --to")
        d0, d1 = _date(date_from, "--from"), _date(date_to, "--to")
        if d1 < d0:
            raise OpsError(f"--to {d1} is before --from {d0}")
        c = etl.load_victorialogs(_wh(), victorialogs, d0, d1, cluster=cluster)
        what = redact(victorialogs)
    else:
        c = etl.load_kernel_log(_wh(), list(files), fmt=fmt, year=year, tz=tz, cluster=cluster)
        what = ", ".join(str(f) for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    print(f"{what}: {c['lines']} Xid lines, {c['xid_events']} Xid events, {c['gauge_rows_replaced']} gauge rows "
          f"of the same Xids replaced, quarantined {c['quarantined']}")


@etl_app.command("slurmdbd")
def etl_slurmdbd(
    db: Annotated[str, typer.Option(
        help="The slurmdbd database: mysql://USER@HOST:PORT/DBNAME (a read-only user; the password comes from "
             "OPS_SLURMDBD_PASSWORD or the config's slurmdbd.password, never from here)")],
    date_from: Annotated[Optional[str], typer.Option(
        "--from", help="First day (YYYY-MM-DD, UTC). Without --from/--to: incremental, every job changed since "
                       "the last load (slurmdbd's mod_time, with a 10-minute overlap)")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Last day, inclusive")] = None,
    cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster name: its tables are <cluster>_job_table etc. (default: config)")] = None,
):
    """Load jobs, steps, node events and reservations straight from slurmdbd's database (same facts as sacct)."""

    if (date_from is None) != (date_to is None):
        raise OpsError("give both --from and --to, or neither (an incremental load since the last one)")
    w0, w1 = _day_window(date_from, date_to) if date_from else (None, None)
    wh = _wh()
    r = _etl().load_slurmdbd(wh, db, w0, w1, cluster=cluster or wh.cfg.default_cluster,
                             retry=_retry(f"slurmdbd {cluster or wh.cfg.default_cluster}"))
    print(f"{r.source}: read {r.records_read}, loaded {r.loaded} ({r.jobs_loaded} job runs, {r.steps_loaded} "
          f"steps), quarantined {r.quarantined}; {r.events_loaded} node events, {r.reservations_loaded} "
          "reservations")


@etl_app.command("nightly")
def etl_nightly(
    date_from: Annotated[Optional[str], typer.Option(
        "--from", help="Backfill from this day (YYYY-MM-DD, UTC) instead of each source's watermark")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Backfill to this day, inclusive")] = None,
    dry_run: Annotated[bool, typer.Option(help="Show the sources and windows a run would load; load nothing")] = False,
):
    """For cron: every configured source since its watermark (docs/nightly.md); exit 0 only if all succeeded."""

    if (date_from is None) != (date_to is None):
        raise OpsError("give both --from and --to, or neither (each source from its watermark)")
    d0 = _date(date_from, "--from") if date_from else None
    d1 = _date(date_to, "--to") if date_to else None
    if d0 and d1 and d1 < d0:
        raise OpsError(f"--to {d1} is before --from {d0}")
    outcomes = _etl().run_nightly(_state["cfg"], date_from=d0, date_to=d1, dry_run=dry_run,
                                  log=lambda line: print(line, flush=True))
    failed = [o for o in outcomes if o.status == "failed"]
    for o in failed:
        print(f"ops-report: nightly source failed: {o.source.kind} {o.source.cluster} {o.window}: {o.detail}",
              file=sys.stderr)
    if failed:
        raise typer.Exit(1)


@etl_app.command("capacity")
def etl_capacity(
    inventory: Annotated[Optional[Path], typer.Option(
        help="Node inventory: a CSV (node,gpu_model,gpus,partition,rack,in_service_date[,cpus,retired_date]), "
             "saved `scontrol show node` output (with or without -o) or slurmrestd's /slurm/v0.0.4x/nodes "
             "response")] = None,
    events: Annotated[Optional[Path], typer.Option(
        help="Node DOWN/DRAIN events: saved `sacctmgr list event --parsable2` output")] = None,
    reservations: Annotated[Optional[Path], typer.Option(
        help="Reservations: saved `scontrol show reservation` output (with or without -o) or slurmrestd's "
             "/slurm/v0.0.4x/reservations response")] = None,
    cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster the files describe (default: config; events name their own)")] = None,
    timezone: Annotated[Optional[str], typer.Option(
        "--timezone", help="Zone scontrol and sacctmgr printed times in (default: config, else UTC; "
                           "slurmrestd's times are absolute)")] = None,
    slurmrestd: Annotated[Optional[str], typer.Option(
        "--slurmrestd", envvar="OPS_SLURMRESTD_URL", show_envvar=True,
        help="slurmrestd base URL (http://slurmctld:6820): the nodes and reservations it serves (newest "
             "data_parser first, v0.0.44 to v0.0.40), with the token in SLURM_JWT (never on the command line); "
             "--inventory or --reservations given take their place")] = None,
):
    """Load what capacity is made of: the node inventory, node state events and reservations (idempotent)."""

    if not (inventory or events or reservations or slurmrestd):
        raise OpsError("give at least one of --inventory, --events, --reservations, --slurmrestd")
    c = _etl().load_capacity(_wh(), inventory=inventory, events=events, reservations=reservations, cluster=cluster,
                             tz=timezone, slurmrestd=slurmrestd)
    print(", ".join(f"{t}: {n} rows" for t, n in c.items()))


@etl_app.command("carbon")
def etl_carbon(
    file: Annotated[Path, typer.Argument(
        help="An hourly grid carbon intensity CSV: an Electricity Maps export (Datetime (UTC), Zone Id, Carbon "
             "Intensity gCO₂eq/kWh (direct)/(LCA)), NESO's historic generation mix (DATETIME, CARBON_INTENSITY, "
             "half-hourly) or hour,g_co2e_per_kwh[,zone]; times in UTC unless they carry an offset")],
    cluster: Annotated[Optional[str], typer.Option(
        help="The Slurm cluster whose runs draw on this grid (default: config)")] = None,
    zone: Annotated[Optional[str], typer.Option(
        help="The grid zone to load from a file of several (Electricity Maps' Zone Id), or to record for a file "
             "that names none")] = None,
    basis: Annotated[str, typer.Option(
        help="Electricity Maps' figure: direct (operational emissions, as location-based Scope 2 reports them) "
             "or lifecycle (LCA, with the plants' and fuels' life-cycle emissions)")] = "direct",
):
    """Load the grid's carbon intensity hour by hour (gCO2e/kWh) for the energy reports' kgCO2e (idempotent).

    An hour the file holds is priced at its intensity; other hours at the config's energy.carbon_g_per_kwh.
    """

    r = _etl().load_carbon_intensity(_wh(), file, cluster=cluster, zone=zone, basis=basis)
    span = f"{r['first']:%Y-%m-%d %H:%M} .. {r['last']:%Y-%m-%d %H:%M} UTC" if r["hours"] else "no hours"
    print(f"{r['source']}: read {r['rows']} rows, loaded {r['hours']} hours of zone {r['zone'] or '-'} "
          f"({span}), quarantined {r['quarantined']}")


@etl_app.command("refresh")
def etl_refresh(
    date_from: Annotated[Optional[str], typer.Option("--from", help="First day (UTC) to recompute (default: the "
                                                      "start of the loaded history)")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Last day (UTC), inclusive (default: the "
                                                    "history's as-of time)")] = None,
):
    """Recompute the hourly grains the reports read (capacity_node_hour) from what is loaded.

    The loads do this for the hours they change; run it after changing the config's reports.idle_util_pct
    or a rule in sql/functions/.
    """

    w0 = datetime.combine(_date(date_from, "--from"), time.min, timezone.utc) if date_from else None
    w1 = datetime.combine(_date(date_to, "--to") + timedelta(days=1), time.min, timezone.utc) if date_to else None
    if w0 and w1 and w1 <= w0:
        raise OpsError(f"--to {date_to} is before --from {date_from}")
    span = refresh_history(_wh(), w0, w1)
    print("nothing loaded yet: no hours to refresh" if span is None else
          f"capacity_node_hour refreshed for {span[0]:%Y-%m-%d %H:%M} .. {span[1]:%Y-%m-%d %H:%M} UTC")


@app.command()
def monthly(
    project: Annotated[Optional[str], typer.Option(
        help="The project to report on (the config's projects table maps Slurm accounts to projects; an "
             "unmapped account is its own project)")] = None,
    whole_cluster: Annotated[bool, typer.Option(
        "--cluster", help="Report on the whole machine instead of one project")] = False,
    month: Annotated[Optional[str], typer.Option(
        help="YYYY-MM (UTC). Default: the last complete month with data (else the current, partial one)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="md, html, json or all")] = "md",
    out: Annotated[Optional[Path], typer.Option(
        help="Folder to write the report to (default: print Markdown / JSON to the terminal; HTML and all need "
             "a folder, default ./reports-out)")] = None,
    anonymize_users: Annotated[bool, typer.Option(
        help="Replace user names with stable pseudonyms, keyed by config reports.pseudonym_key or else a "
             "random key kept for the warehouse (mode 600)")] = False,
    slurm_cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster (default: the only one loaded, else config)")] = None,
):
    """One month's report: utilization and idle capacity, job sizes, run times, efficiency, reliability,
    reservations, cost, month over month (docs/monthly.md)."""

    from ops_warehouse.reports.monthly_render import to_json, to_markdown, write  # the charts once one is drawn

    if whole_cluster == (project is not None):
        raise OpsError("choose one: --project NAME or --cluster")
    formats = {"md": ["md"], "html": ["html"], "json": ["json"], "all": ["md", "html", "json"]}.get(fmt)
    if formats is None:
        raise OpsError("--format must be md, html, json or all")
    m = parse_month(month) if month else None
    _wh()  # the warehouse opens (or is refused, in one line) before any folder is made
    if out is not None or formats not in (["md"], ["json"]):
        out = _out_folder(out or Path("reports-out"))
    with _steps("monthly report") as progress:
        r = _analytics("monthly").monthly_report(_api(), month=m, project=project, cluster=slurm_cluster,
                                        anonymize_users=anonymize_users, progress=progress)
    if out is None and formats in (["md"], ["json"]):
        sys.stdout.write(to_markdown(r) if formats == ["md"] else to_json(r))
        return
    for p in write(r, out or Path("reports-out"), formats):
        print(p)


@app.command()
def export(
    month: Annotated[Optional[str], typer.Option(
        help="YYYY-MM (UTC). Default: the last complete month with data")] = None,
    project: Annotated[Optional[str], typer.Option(
        help="Export one project's view (its jobs and users, and the cluster-level aggregates); default: the "
             "whole cluster")] = None,
    out: Annotated[Path, typer.Option(help="Folder to write into (a subfolder per export)")] = Path("exports"),
    anonymize_users: Annotated[bool, typer.Option(
        help="Replace user names with stable pseudonyms, keyed by config reports.pseudonym_key or else a "
             "random key kept for the warehouse (mode 600)")] = False,
    slurm_cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster (default: the only one loaded, else config)")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="marts: every exported mart as Parquet; focus: the chargeback as a FOCUS 1.3 cost and "
                         "usage dataset (Parquet and CSV, docs/focus.md)")] = "marts",
):
    """Write a month's marts as Parquet (one file per mart, the monthly report's numbers, and manifest.json)
    for DuckDB, polars or pandas elsewhere, e.g.
    duckdb -c "SELECT * FROM 'exports/ai1-A-2026-10/job_sizes.parquet'"; or, with --format focus, the
    month's chargeback as FOCUS (FinOps Foundation) rows, one per project, GPU model and day."""

    m = parse_month(month) if month else None
    if fmt not in ("marts", "focus"):
        raise OpsError(f"--format must be marts or focus, not {fmt!r}")
    _wh()  # the warehouse opens (or is refused, in one line) before any folder is made
    _out_folder(out)
    if fmt == "focus":
        manifest = _analytics("export").export_focus(_api(), out, m, project=project,
                                                     cluster=slurm_cluster)
        print(f"{manifest['folder']}: FOCUS {manifest['focus_version']}, {manifest['rows']} rows, "
              f"focus_cost.parquet, focus_cost.csv, manifest.json")
        return
    with count_progress("export marts") as progress:
        manifest = _analytics("export").export_month(_api(), out, m, project=project, cluster=slurm_cluster,
                                             anonymize_users=anonymize_users, progress=progress)
    rows = sum(f["rows"] for f in manifest["files"].values())
    print(f"{manifest['folder']}: {len(manifest['files'])} marts, {rows} rows, manifest.json")


def _out_folder(path: Path, flag: str = "--out") -> Path:
    """A folder to write into, made if missing; a file in its place, or a folder that cannot be made or
    written, refused in one line before any work is done."""
    import os

    if path.exists() and not path.is_dir():
        raise OpsError(f"{flag} {path} is a file: give a folder to write into")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OpsError(f"cannot make the {flag} folder {path}: {e.strerror or e}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OpsError(f"cannot write into the {flag} folder {path}: permission denied")
    return path


def _out_file(path: Path, flag: str = "--out") -> Path:
    """A file to write, in a folder that exists: a folder in its place refused in one line."""
    if path.is_dir():
        raise OpsError(f"{flag} {path} is a folder: give the file to write")
    _out_folder(path.parent if str(path.parent) else Path("."), f"{flag}'s folder")
    return path


def _steps(label: str):

    return step_progress(label)


@app.command()
def nodes(
    swap_list: Annotated[bool, typer.Option(
        "--swap-list", help="Only the nodes to swap for reserve nodes (score at --min-score or more)")] = False,
    reservation: Annotated[Optional[str], typer.Option(
        help="Score only this reservation's nodes (against the cluster's rates), e.g. before it starts again")] = None,
    month: Annotated[Optional[str], typer.Option(
        help="YYYY-MM (UTC). Default: the last complete month with data; or give --from and --to")] = None,
    date_from: Annotated[Optional[str], typer.Option("--from", help="First day (YYYY-MM-DD, UTC)")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Last day, inclusive")] = None,
    min_score: Annotated[Optional[float], typer.Option(
        help="Points that put a node on the swap list (default 6: two hardware faults, a week throttled in 30 "
             "days, five runs behind its peers, or failures or hangs significantly above its share)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json (csv and json: every column)")] = "table",
    slurm_cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster (default: the only one loaded, else config)")] = None,
):
    """Node health scorecard and swap list: per node, hardware faults (an Xid and its DOWN or DRAIN are one;
    planned drains are not faults), throttling, runs behind its peers, failed multi-node runs and hangs against
    its share (counted only when significant), one score with its reasons, ranked (docs/monthly.md,
    Definitions, "node health")."""

    _choice(fmt, "--format", ("table", "json", "csv"))
    start, end = _month_or_days(month, date_from, date_to)
    api = _api()
    with api.session() as w:
        if reservation is not None:
            known = sorted({r[0] for r in w.query_rows("SELECT DISTINCT name FROM reservation FINAL")})
            if reservation not in known:
                raise OpsError(f"no reservation named {reservation!r}; reservations: {', '.join(known) or 'none loaded'}")
        card = api.node_health(month, cluster=slurm_cluster, start=start, end=end, reservation=reservation,
                               swap_min_score=min_score)
    if swap_list:
        card = card.filter(card["swap"] == 1)
    if fmt == "table":
        card = card.select("rank", "node", "gpu_model", "score", "swap", "reasons")
    sys.stdout.write(_render(card, fmt))


# --- issue 52: the users' efficiency and the waste digest (engineer U's block) ---------------------------------
READS.update({"users", "digest"})


@app.command()
def users(
    month: Annotated[Optional[str], typer.Option(
        help="YYYY-MM (UTC). Default: the last complete month with data; or give --from and --to")] = None,
    date_from: Annotated[Optional[str], typer.Option("--from", help="First day (YYYY-MM-DD, UTC)")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Last day, inclusive")] = None,
    project: Annotated[Optional[str], typer.Option(help="One project's users (default: the whole cluster's)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, md, csv or json (csv and json: every column)")] = "table",
    slurm_cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster (default: the only one loaded, else config)")] = None,
):
    """Per user: runs, GPU-hours, pooled GPU utilization and SM/tensor/DRAM activity (GPU-hour weighted),
    GPU-memory efficiency, idle and unbusy GPU-hours, a grade A-F, and the `ops-report job` lines of their three
    most wasteful runs; most wasteful user first (docs/efficiency.md)."""
    _choice(fmt, "--format", ("table", "md", "csv", "json"))
    start, end = _month_or_days(month, date_from, date_to)
    api = _api()
    with api.session():
        if project is not None and project not in api.projects(cluster=slurm_cluster):
            raise OpsError(f"no jobs of project {project!r}; projects: {', '.join(api.projects(cluster=slurm_cluster))}")
        df = api.user_efficiency(month, project=project, cluster=slurm_cluster, start=start, end=end)
        # the GPU memory, CPU and memory beside them (a mart apart: it reads every sample and step)
        df = df.join(api.user_resources(month, project=project, cluster=slurm_cluster, start=start, end=end),
                     on="user", how="left")
        cluster = api.period(month, start=start, end=end, cluster=slurm_cluster).cluster
    shown = "table" if fmt == "md" else fmt  # the table is Markdown's
    sys.stdout.write(_render(users_render.users_frame(df, shown), shown)
                     + (users_render.job_lines_text(df, cluster) if shown == "table" else ""))


@app.command()
def digest(
    days: Annotated[int, typer.Option(help="Days of history, ending with --to")] = 7,
    date_to: Annotated[Optional[str], typer.Option(
        "--to", help="Last day, inclusive (YYYY-MM-DD, UTC); default: the day the loaded history reaches")] = None,
    out: Annotated[Optional[Path], typer.Option(
        help="Folder to write one <user>.md per user into (for a cron job to mail); default: print them")] = None,
    project: Annotated[Optional[str], typer.Option(help="One project's users (default: the whole cluster's)")] = None,
    idle_gpu_h: Annotated[Optional[float], typer.Option(
        help="Threshold: idle GPU-hours at or above (default 8, wasteful_users.sql)")] = None,
    util_pct: Annotated[Optional[float], typer.Option(
        help="Threshold: pooled GPU utilization under this % (default 30)")] = None,
    gpu_mem_eff: Annotated[Optional[float], typer.Option(
        help="Threshold: GPU-memory efficiency under this fraction (default 0.1)")] = None,
    slurm_cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster (default: the only one loaded, else config)")] = None,
):
    """Per user whose GPU waste in the last days is over a threshold (idle GPU-hours, low utilization, low
    GPU memory: sql/marts/wasteful_users.sql), a short Markdown message with the figures, the runs and what to
    change; exactly those users, written to --out (one file each) or printed. No mail is sent."""
    _count(days, "--days", 1, MAX_DAYS, "days")
    if out is not None:
        _out_folder(out)
    found = _analytics("digest").digest(_api(), days=days, last_day=_date(date_to, "--to") if date_to else None,
                                        project=project, cluster=slurm_cluster, waste_idle_gpu_h=idle_gpu_h,
                                        waste_util_pct=util_pct, waste_gpu_mem_eff=gpu_mem_eff)
    last = found["end"] - timedelta(days=1)
    files = users_render.digest_files(found["users"].to_dicts(), cluster=found["cluster"], start=f"{found['start']:%Y-%m-%d}",
                         end=f"{last:%Y-%m-%d}", thresholds=found["thresholds"])
    if out is None:
        sys.stdout.write("\n".join(files.values()))
    else:
        for name, text in files.items():
            write_file(out / name, text)
    print(f"{len(files)} users over a threshold, {found['start']:%Y-%m-%d} to {last:%Y-%m-%d}"
          + (f": {out}" if out is not None else ""), file=sys.stderr)


# --- issue 52: one job's report (engineer J's block) -------------------------------------------------------------
READS.add("job")


@app.command()
def job(
    job_id: Annotated[str, typer.Argument(help="The job id as sacct prints it (123, 123_4, 123+1)")],
    cluster: Annotated[Optional[str], typer.Option(
        "--cluster", help="Slurm cluster (default: the only one loaded, else config)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="text, json or html")] = "text",
):
    """Every run of one job (requeues included): user, account, partition, state and exit, times and wait,
    nodes and GPUs; per GPU its utilization, SM/tensor/DRAM activity, memory, power, energy and throttled time;
    CPU and memory efficiency; the expert's notes with their figures; which telemetry grain was read (the
    hourly rollup once the samples expired). HTML: a chart per GPU (docs/efficiency.md)."""
    _choice(fmt, "--format", ("text", "json", "html"))
    sys.stdout.write(job_render.render_job(_api().job(job_id, cluster=cluster).as_dict(), fmt))


@app.command()
def whatif(
    month: Annotated[Optional[str], typer.Option(
        help="YYYY-MM (UTC). Default: the last complete month with data; or give --from and --to")] = None,
    date_from: Annotated[Optional[str], typer.Option("--from", help="First day (YYYY-MM-DD, UTC)")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Last day, inclusive")] = None,
    add: Annotated[Optional[list[str]], typer.Option(
        help="MODEL:NODES nodes of a GPU model to add, in its partition (e.g. h200:16); repeatable")] = None,
    remove: Annotated[Optional[list[str]], typer.Option(
        help="MODEL:NODES nodes of a GPU model to take out (e.g. h100:8); repeatable")] = None,
    reservation: Annotated[Optional[list[str]], typer.Option(
        help="PROJECT:NODES resize a project's reservations to NODES nodes (A:0: none); repeatable")] = None,
    scale_load: Annotated[float, typer.Option(
        help="Submit this many times the jobs (1.2: a fifth more, copies a few minutes after their originals)")] = 1.0,
    fmt: Annotated[str, typer.Option("--format", help="table, json, md or html")] = "table",
    out: Annotated[Optional[Path], typer.Option(help="File to write md or html to (default: print md; html needs it)")] = None,
    slurm_cluster: Annotated[Optional[str], typer.Option(
        help="Slurm cluster (default: the only one loaded, else config)")] = None,
):
    """What the next purchase buys: replay the month's jobs with the backfill scheduler on the cluster as it
    was and as changed, and print the observed month, the unchanged replay (with its error: how far to trust
    it) and the changed one side by side: utilization, idle GPU-hours, queue waits by size class, GPU-hours per
    project, jobs not started, cost per allocated GPU-hour, wait-hours saved per added node (docs/whatif.md)."""

    _choice(fmt, "--format", ("table", "json", "md", "html"))
    if fmt == "html" and out is None:
        raise OpsError("--format html needs --out FILE")
    start, end = _month_or_days(month, date_from, date_to)
    # the changes are checked before anything opens: a count out of range is the user's to fix, warehouse or not
    change = parse_change(add or [], remove or [], reservation or [], scale_load)
    _wh()  # the warehouse opens (or is refused, in one line) before any folder is made
    if out is not None:
        _out_file(out)
    an = _analytics("whatif")
    api = _api()
    with api.session() as w, _steps("what-if replay"):
        p = api.period(parse_month(month) if month else None, start=start, end=end, cluster=slurm_cluster)
        r = an.whatif_report(w, cluster=p.cluster, window=(p.start, p.end), changes=[change])
    from ops_warehouse.reports import whatif_render  # the chart only once drawn (--format html)

    if fmt == "table":
        import polars as pl

        for title, lead, head, rows, _ in whatif_render.sections(r):
            df = pl.DataFrame(rows, schema=[h or " " for h in head], orient="row")
            sys.stdout.write(f"{title}\n{lead + chr(10) if lead else ''}{_render(df, 'table')}\n")
        return
    if fmt == "json":
        text = whatif_render.to_json(r)
    elif fmt == "md":
        text = whatif_render.to_markdown(r)
    else:
        text = whatif_render.to_html(r, whatif_render.chart(r))
    if out is None:
        sys.stdout.write(text)
    else:
        print(write_file(out, text))  # whole, or the previous file kept (core/files.py)


@app.command()
def check(
    month: Annotated[Optional[str], typer.Option(
        help="YYYY-MM (UTC). Default: the last complete month with data; or give --from and --to")] = None,
    date_from: Annotated[Optional[str], typer.Option("--from", help="First day (YYYY-MM-DD, UTC)")] = None,
    date_to: Annotated[Optional[str], typer.Option("--to", help="Last day, inclusive")] = None,
    project: Annotated[Optional[str], typer.Option(
        help="Check a project's report: its figures, and against the cluster's (default: the whole cluster, "
             "and the laws of each project for every project with runs in the period)")] = None,
    law: Annotated[Optional[list[str]], typer.Option(
        help="Run only this law (a file name of sql/checks/ without .sql); repeatable")] = None,
    fmt: Annotated[str, typer.Option("--format", help="text or json")] = "text",
    max_rows: Annotated[int, typer.Option(help="Offending rows printed per broken law (json: listed; the count "
                                                "is always given)")] = 20,
    slurm_cluster: Annotated[Optional[str], typer.Option(
        "--slurm-cluster", "--cluster", help="Slurm cluster (default: the only one loaded, else config)")] = None,
):
    """Check the laws every figure obeys (sql/checks/, docs/checks.md): busy ≤ allocated ≤ available ≤ capacity,
    the idle split sums to capacity, breakdowns sum to totals, lost GPU-hours ≤ allocated ones, 0 ≤ ETTR ≤ 1,
    cost per busy ≥ per allocated ≥ per available GPU-hour, a project ≤ its cluster, the what-if's jobs not
    started = the jobs pending at the end, one value per name. Prints which hold, which are broken with the
    offending rows, and which could not be checked (an input the warehouse lacks). Exit 0 when none is
    broken, 1 when one is (or could not be run). Reads only; runs the what-if's unchanged replay for the laws
    that need it."""

    _choice(fmt, "--format", ("text", "json"))
    start, end = _month_or_days(month, date_from, date_to)
    _count(max_rows, "--max-rows", 0, 1_000_000, "rows")
    api = _api()
    with api.session(), _steps("laws"):
        p = api.period(parse_month(month) if month else None, start=start, end=end, cluster=slurm_cluster)
        outcomes = api.check(p, project=project, laws=law)
    c = _analytics("checks")
    HOLDS, BROKEN, NOT_CHECKED, ERROR = c.HOLDS, c.BROKEN, c.NOT_CHECKED, c.ERROR
    failed = [o for o in outcomes if o.status in (BROKEN, ERROR)]
    where = {"cluster": p.cluster, "month": p.month, "from": p.start.isoformat(), "to": p.end.isoformat(),
             "project": project}
    if fmt == "json":
        import json

        doc = {**where, "holds": not failed, "laws": [o.as_dict(max_rows) for o in outcomes]}
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    else:
        period = p.month or f"{p.start:%Y-%m-%d %H:%M} .. {p.end:%Y-%m-%d %H:%M} UTC"
        scope = f"project {project}" if project is not None else "the whole cluster"
        print(f"laws of {p.cluster}, {period}, {scope}:")
        for o in outcomes:
            label = {HOLDS: "holds", BROKEN: "BROKEN", NOT_CHECKED: "not checked", ERROR: "ERROR"}[o.status]
            print(f"{label:<12} {o.law.name}: {o.law.law}")
            if o.status == NOT_CHECKED:
                print("".join(f"             not checked: {r}\n" for r in o.reasons), end="")
            elif o.status == ERROR:
                print(f"             could not be run: {o.error}")
            elif o.status == BROKEN:
                n = o.rows.height
                print(f"             {n} offending row{'s' if n != 1 else ''}"
                      + (f", the first {max_rows}:" if n > max_rows else ":"))
                if max_rows:
                    table = _render(o.rows.head(max_rows), "table", max_str=200)  # a law's figure whole
                    print("".join(f"             {line}\n" for line in table.splitlines()), end="")
                if n > max_rows:
                    print(f"             ... and {n - max_rows} more")
        counts = {s: sum(o.status == s for o in outcomes) for s in (HOLDS, BROKEN, NOT_CHECKED, ERROR)}
        print(f"{len(outcomes)} laws: {counts[HOLDS]} hold, {counts[BROKEN]} broken, {counts[NOT_CHECKED]} not checked"
              + (f", {counts[ERROR]} could not be run" if counts[ERROR] else ""))
    if failed:
        print("ops-report: laws broken: " + ", ".join(o.law.name for o in failed), file=sys.stderr)
        raise typer.Exit(1)


@app.command()
def telemetry(
    date_from: Annotated[str, typer.Option("--from", help="First day (YYYY-MM-DD, UTC)")],
    date_to: Annotated[str, typer.Option("--to", help="Last day, inclusive")],
    by: Annotated[str, typer.Option(help="cluster, node, gpu (node:index) or gpu_model")] = "cluster",
    fmt: Annotated[str, typer.Option("--format", help="table, json or csv")] = "table",
):
    """A quick look at the loaded telemetry: utilization, activity, power, energy, temperature, throttling, bytes, Xids."""

    _choice(fmt, "--format", ("table", "json", "csv"))
    df = _analytics("telemetry").telemetry(_wh(), _date(date_from, "--from"), _date(date_to, "--to"), by)
    sys.stdout.write(_render(df, fmt))


@app.command()
def summary(
    date_from: Annotated[str, typer.Option("--from", help="First day (YYYY-MM-DD)")],
    date_to: Annotated[str, typer.Option("--to", help="Last day, inclusive (YYYY-MM-DD)")],
    by: Annotated[Optional[list[str]], typer.Option(
        help="Group by: cluster, account, project, partition, qos, user, gpu_type, gpu_count_bin, "
             "job_size_bin, wall_time_bin (comma-separated or repeated)")] = None,
    period: Annotated[str, typer.Option(help="none, day or month")] = "none",
    timezone: Annotated[Optional[str], typer.Option(
        "--timezone", help="Zone of day/month boundaries (default: config, else UTC)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json or csv")] = "table",
):
    """Job-accounting statistics with Open XDMoD's Jobs-realm definitions (see docs/statistics.md)."""

    reports = _analytics("summary")
    keys = reports.parse_by(by)
    d0, d1 = _date(date_from, "--from"), _date(date_to, "--to")
    _choice(fmt, "--format", ("table", "json", "csv"))
    table = reports.summary_table(_wh(), d0, d1, keys, period, timezone)  # printed from Arrow: no polars
    sys.stdout.write(_render(table, fmt))


@app.command()
def grafana(
    out: Annotated[Path, typer.Option("--out", help="Folder for the provisioning files (provisioning/datasources, "
                                                    "provisioning/dashboards, dashboards/*.json)")],
    url: Annotated[Optional[str], typer.Option(
        help="The ClickHouse server Grafana reads, http(s)://HOST:PORT/DATABASE (default: the warehouse's DSN "
             "when it is a server)")] = None,
    user: Annotated[str, typer.Option(help="The read-only analysts' user Grafana connects as "
                                           "(docs/deployment.md)")] = "ops_analyst",
    password_env: Annotated[str, typer.Option(
        "--password-env", help="The environment variable of Grafana's process that holds that user's password "
                               "(the files name it; they never hold the password)")] = "OPS_GRAFANA_PASSWORD",
):
    """Provision Grafana on the warehouse: a ClickHouse data source and the dashboards, each panel reading a
    mart through its view (the views are created in the warehouse: run it as the ETL user)."""
    if sys.version_info < (3, 11):  # grafana-foundation-sdk is published for 3.11 on (pyproject.toml)
        raise OpsError("ops-report grafana needs Python 3.11 or newer (grafana-foundation-sdk, which writes the "
                       f"dashboards, is not published for {sys.version_info.major}.{sys.version_info.minor}); "
                       "run it from a 3.11+ install against the same warehouse")
    from ops_warehouse.cli.grafana import provision  # grafana-foundation-sdk: only this command pays for it

    files, views, server = provision(_wh(), _state["cfg"], _out_folder(out, "--out"), url=url, user=user,
                                     password_env=password_env)
    print(f"wrote {len(files)} files under {out} for {server} (user {user}, password from ${password_env}); "
          f"created {len(views)} views: {', '.join(views)}")


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Where the demo writes its data, warehouse and reports")] = Path("demo"),
    days: Annotated[int, typer.Option(help="Days of history, from 2026-10-01")] = 31,
    jobs_per_day: Annotated[int, typer.Option(help="Jobs submitted per day")] = 900,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same outputs)")] = 7,
):
    """Generate a month of a GPU cluster, load it as a site does (backfilled, its last night by cron), write the reports."""
    _count(days, "--days", 1, MAX_DAYS, "days")
    _count(jobs_per_day, "--jobs-per-day", 0, MAX_JOBS_PER_DAY, "jobs a day")
    _count(seed, "--seed", 0, MAX_SEED)
    from ops_warehouse.cli.demo import run_demo  # slow optional subsystem: the generator, imported on use

    run_demo(_state["cfg"], _out_folder(directory, "--dir"), days=days, jobs_per_day=jobs_per_day, seed=seed)


@app.command()
def generate(
    out: Annotated[Path, typer.Option(help="Output folder")],
    start: Annotated[str, typer.Option(help="First day (YYYY-MM-DD, UTC)")] = "2026-10-01",
    days: Annotated[int, typer.Option(help="Days to simulate")] = 31,
    jobs_per_day: Annotated[int, typer.Option(help="Jobs submitted per day")] = 900,
    nodes: Annotated[Optional[int], typer.Option(
        help="Nodes in all (default 114: 90 H100, 16 H200, 8 B200, scaled in proportion)")] = None,
    metrics_step: Annotated[int, typer.Option(help="Telemetry step in seconds")] = 300,
    telemetry: Annotated[str, typer.Option(help="parquet, openmetrics, both or none")] = "parquet",
    nightly: Annotated[bool, typer.Option(help="Also write each night's sacct extract")] = False,
    spill: Annotated[bool, typer.Option(
        help="Keep memory flat for very large histories (runs go to disk as they are made; no --nightly)")] = False,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same files)")] = 0,
):
    """Write the files a GPU site has (sacct, node events, reservations, inventory, telemetry) for a simulated period."""
    from datetime import datetime, timezone

    import polars as pl
    from ops_warehouse.generate import generate as run  # slow optional subsystem: the generator

    formats = {"parquet": ("parquet",), "openmetrics": ("openmetrics",), "both": ("parquet", "openmetrics"),
               "none": ()}.get(telemetry)
    if formats is None:
        raise OpsError("--telemetry must be parquet, openmetrics, both or none")
    if spill and nightly:
        raise OpsError("--nightly needs the runs in memory: use it without --spill")
    _count(days, "--days", 1, MAX_DAYS, "days")
    _count(jobs_per_day, "--jobs-per-day", 0, MAX_JOBS_PER_DAY, "jobs a day")
    _count(metrics_step, "--metrics-step", 1, MAX_METRICS_STEP_S, "seconds")
    if nodes is not None:
        _count(nodes, "--nodes", 3, MAX_NODES, "nodes")
    _count(seed, "--seed", 0, MAX_SEED)
    first = _date(start, "--start")
    if not date(1970, 1, 1) <= first or first > date(2105, 12, 31) - timedelta(days=days):
        # the warehouse's DateTime columns hold 1970-01-01 .. 2106-02-07
        raise OpsError(f"--start {first} with --days {days}: the period must lie within 1970-01-01 .. 2105-12-31")
    t0 = datetime.combine(first, datetime.min.time(), timezone.utc)
    with count_progress("telemetry days") as progress:
        h = run(_out_folder(out), start=t0, days=days, jobs_per_day=jobs_per_day, nodes=nodes, seed=seed,
                metrics_step_s=metrics_step, telemetry=formats, nightly=nightly, spill=spill, progress=progress)
    n_runs = h.runs.lazy().select(pl.len()).collect().item()
    print(f"{out}: {n_runs} job runs on {h.inventory.height} nodes, {h.node_events.height} node events, "
          f"{h.xids.height} Xid events; lemon nodes {', '.join(h.lemons)}; straggler {h.straggler}")


def _stopped() -> None:
    """Exit as the signal that stopped the command: 130 for SIGINT, 143 for SIGTERM (a shell's 128 + N)."""
    if sigterm_received():
        print("ops-report: stopped by SIGTERM", file=sys.stderr)
        sys.exit(Terminated.exit_code)
    sys.exit(130)


def clickhouse_errors():
    from clickhouse_connect.driver.exceptions import Error

    return Error


def main() -> None:
    # cron's `timeout` and `systemctl stop` send SIGTERM: stopped as SIGINT stops a command (a load undone and
    # logged failed, a report's files never half-written), not killed mid-insert
    before = stop_on_sigterm()
    try:
        _run_app()
    finally:  # main() in a test's process (tests/cli_runner.py) leaves that process's SIGTERM as it was
        if before is not None:
            signal.signal(signal.SIGTERM, before)


def _run_app() -> None:
    try:
        rc = narrowed(app, sys.argv[1:])(standalone_mode=False)  # only the command run is built (cli/invoked.py)
        if rc == 130:  # typer returns 130 for any KeyboardInterrupt, SIGTERM's (Terminated) too
            _stopped()
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except OpsError as e:
        print(f"ops-report: error: {e}", file=sys.stderr)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        _stopped()
    except clickhouse_errors() as e:
        print(f"ops-report: warehouse error: {str(e).strip().splitlines()[0][:500]}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # usage errors from typer's click layer: shown as click would
        if hasattr(e, "show") and hasattr(e, "exit_code"):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
