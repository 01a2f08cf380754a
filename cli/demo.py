"""`ops-report demo`: the product's front door. Generates a month of a GPU cluster (Slurm accounting, node
events, telemetry), loads it as a site does (its first install backfills all but the last day in one load, the
nightly cron job loads the last night), and writes the reports.
Same seed, same outputs, whichever shape the month is loaded in (``loads="nightly"``: every night by cron)."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import nullcontext
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from ops_warehouse.analytics.api import Connection
from ops_warehouse.analytics.export import export_month
from ops_warehouse.analytics.marts import each_mart_once
from ops_warehouse.analytics.monthly import monthly_report
from ops_warehouse.analytics.summary import summary
from ops_warehouse.analytics.telemetry import telemetry_groupings
from ops_warehouse.config import DEFAULT_DSN, Config
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.backfill import FILE_CHUNK_DAYS, load_resumably
from ops_warehouse.etl.grains import one_refresh
from ops_warehouse.etl.kernel_log_xid import load_kernel_log
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import DaysAhead, load_parquet_dir
from ops_warehouse.files import write_file
from ops_warehouse.progress import count_progress
from ops_warehouse.reports.monthly_render import write
from ops_warehouse.reports.tabular import render
from ops_warehouse.warehouse import open_warehouse, redact

DEMO_START = date(2026, 10, 1)
# (file stem, --by keys, period)
VIEWS = [
    ("summary_by_project", ["project"], "none"),
    ("summary_by_gpu_count", ["gpu_count_bin"], "none"),
    ("summary_by_wall_time", ["wall_time_bin"], "none"),
    ("summary_by_partition_day", ["partition"], "day"),
]
TELEMETRY_VIEWS = ("cluster", "gpu_model")  # ops-report telemetry --by each


def _stage(label: str):
    t0 = time.time()
    print(f"[demo] {label} ...", flush=True)

    def done(extra: str = "", seconds: float | None = None) -> None:
        print(f"[demo] {label}: done in {time.time() - t0 if seconds is None else seconds:.1f} s{extra}", flush=True)
    return done


class _Beside:
    """The generator run in a thread while the backfill loads what it has written: on 2 cores the engine loads
    telemetry day k while the generator computes and writes the days after it (docs/benchmarks.md, issue 51
    item 3, round 5: measured faster than one after the other). ``wait(n)`` returns once n telemetry days are
    written, ``wait(0)`` once the backfill's sacct extract is (the generator's first file: its progress with 0
    days; the other files come after the last day), raising the generator's error if it failed; ``join()``
    returns its History once every file is written. The warehouse is opened and the extract loaded beside the
    simulation and the first days (issue 51 item 3, round 11)."""

    def __init__(self, run):
        self._cond = threading.Condition()
        self._days = -1  # nothing written yet
        self._error: BaseException | None = None
        self.history = None
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._main, args=(run,), name="demo-generate", daemon=True)
        self._thread.start()

    def _main(self, run) -> None:
        t0 = time.time()
        try:
            self.history = run(self._written)
        except BaseException as e:  # handed to the loading thread: it is the one that stops the demo
            self._error = e
        finally:
            self.seconds = time.time() - t0
            with self._cond:
                self._days = sys.maxsize
                self._cond.notify_all()

    def _written(self, days: int, _total: int) -> None:
        with self._cond:
            self._days = days
            self._cond.notify_all()

    def wait(self, days: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._days >= days)
        if self._error is not None:
            raise self._error

    def join(self):
        self._thread.join()
        self.wait(0)
        return self.history


def write_summaries(wh, out: Path, first: date, last: date) -> dict:
    """The demo's summaries stage: the four job-accounting summaries and the telemetry by cluster and by GPU
    model, each as md, json and csv in ``out``. Returns the frames by file stem (the closing lines print two:
    read once). The two telemetry views come from one query, which reads the window's samples once for both
    (issue 51: a call per grouping read the demo's 8 M GPU samples twice)."""
    read = {}
    for stem, by, period in VIEWS:
        read[stem] = summary(wh, first, last, by, period)
    for by, df in telemetry_groupings(wh, first, last, TELEMETRY_VIEWS).items():
        read[f"telemetry_by_{by}"] = df
    for stem, df in read.items():
        for fmt, ext in (("table", "md"), ("json", "json"), ("csv", "csv")):
            write_file(out / f"{stem}.{ext}", render(df, fmt))
    return read


REPORT_FORMATS = ["md", "html", "json"]


def write_reports(wh, out: Path, exports: Path, month: date, cluster: str) -> list[dict]:
    """The demo's monthly stage and its exports: the monthly reports of the cluster and of project A (md, html,
    json, their charts) into ``out`` and their Parquet exports into ``exports``, in one block of evaluated
    marts (each mart once; the exports read the tables the reports' marts left). Returns the two reports.
    Each report's files are written here, in turn: written by a forked process beside the next marts and the
    exports they made the stage slower on the loaded 2 cores it was measured on (docs/benchmarks.md, issue 51
    round 4)."""
    done = _stage("monthly reports (ops-report monthly --cluster / --project A, md + html + json)")
    reports = []
    with each_mart_once(wh):
        for project in (None, "A"):
            r = monthly_report(Connection(wh), month=month, project=project, cluster=cluster)
            reports.append(r)
            write(r, out, REPORT_FORMATS)
        done(f" -> {out}")
        done = _stage("Parquet exports for analysts (ops-report export --month, --project A)")
        for project in (None, "A"):
            export_month(Connection(wh), exports, month, project=project, cluster=cluster)
        done(f" -> {exports}")
    return reports


def _add(n: dict, r) -> None:
    for key, v in (("read", r.records_read), ("jobs", r.jobs_loaded), ("steps", r.steps_loaded),
                   ("quarantined", r.quarantined)):
        n[key] += v


def _counts(nights: int) -> dict:
    return {"nights": nights, "read": 0, "jobs": 0, "steps": 0, "quarantined": 0, "gpu_rows": 0}


def load_nights(wh, data: Path, cluster: str, *, progress=None, one_refresh_a_night: bool = True,
                first: date | None = None) -> dict:
    """The nightly loads as the cron job makes them: each night's sacct extract (jobs still running re-read
    until they end), then its telemetry day. Returns the counts. ``one_refresh_a_night``: the night's two
    loads change the same hours, so their grains are refreshed once, at the end of it (False: each load
    refreshes its own, as before issue 50; bench/bench_nightly.py compares the two). ``first``: the nights from
    this day on (the days before backfilled)."""
    nightly = [f for f in sorted((data / "sacct" / "nightly").glob("*.psv"))
               if first is None or date.fromisoformat(f.stem) >= first]
    n = _counts(len(nightly))
    for k, f in enumerate(nightly, start=1):
        with one_refresh(wh) if one_refresh_a_night else nullcontext():
            _add(n, load_sacct(wh, f, source=f"nightly/{f.name}"))
            day = date.fromisoformat(f.stem)
            n["gpu_rows"] += load_parquet_dir(wh, data, day, day, cluster=cluster)["gpu_rows"]
        if progress:
            progress(k, len(nightly))
        wh.between_steps()  # a night is loaded: a report or notebook waiting for the warehouse goes now
    return n


def backfill(wh, data: Path, cluster: str, first: date, last: date, *, progress=None, written=None) -> dict:
    """A site's first install: the days ``first`` .. ``last`` in one load, their hourly grains refreshed once at
    its end, as `ops-report etl nightly --from FIRST --to LAST` loads them: sacct's one extract of the window
    (sacct/backfill/FIRST..LAST.psv: each job once, in its state at the window's end, where the nightly
    extracts re-read a running job every night), then the window's telemetry as `ops-report etl metrics
    --source file` backfills it (a week at a time, its progress recorded so that a stopped run resumes:
    etl/backfill.py). Returns the counts as load_nights does (``progress`` counts telemetry days).
    ``written(n)``: returns once the first n telemetry days' files are whole (a generator writing them beside);
    each day is read once its own files are."""
    extract = data / "sacct" / "backfill" / f"{first}..{last}.psv"
    if not extract.is_file():
        raise FileNotFoundError(f"no sacct extract of the backfill's window at {extract}")
    n = _counts((last - first).days + 1)
    root = data / "telemetry"
    with one_refresh(wh), DaysAhead(wh, True) as ahead:
        _add(n, load_sacct(wh, extract, source=f"backfill/{extract.name}"))
        if written:  # the telemetry's folders are listed as its load starts: there once the first day is
            written(1)
        def days(a: date, b: date, p) -> dict:
            # each day read as soon as its files are whole, not once its week's are (the first week waited
            # for the generator's seventh day); a chunk's first day staged beside the chunk before's last writes
            ready = (lambda d: written((d - first).days + 1)) if written else None
            return load_parquet_dir(wh, root, a, b, cluster=cluster, progress=p, ready=ready, ahead=ahead,
                                    through=last)

        c = load_resumably(wh, f"file:{root.resolve()}", first, last, days, chunk_days=FILE_CHUNK_DAYS,
                           progress=progress)
        n["gpu_rows"] += c["gpu_rows"]
    wh.between_steps()
    return n


LOADS = ("backfill", "nightly")


def run_demo(cfg: Config, directory: Path, *, days: int = 31, jobs_per_day: int = 900, seed: int = 7,
             metrics_step_s: int = 300, loads: str = "backfill", beside: bool = True) -> Path:
    """The demo in ``directory``. ``loads``: "backfill" (the first days - 1 in one load as a site's first
    install loads them, then the last night as the cron job does) or "nightly" (every night as the cron job
    does); the same reports either way (tests/test_demo_load_shapes.py). ``beside``: the backfill loads each
    telemetry day as soon as the generator has written it, the generator going on in a thread (False: the
    generator first, then the loads; bench/bench_demo.py compares the two)."""
    if loads not in LOADS:
        raise ValueError(f"loads must be one of {', '.join(LOADS)}, not {loads!r}")
    from ops_warehouse.generate import generate, scaled_spec  # slow optional subsystem: imported when the demo runs

    directory = directory.resolve()
    data, out = directory / "data", directory / "out"
    out.mkdir(parents=True, exist_ok=True)
    if cfg.dsn == DEFAULT_DSN:  # nothing chosen: a warehouse of the demo's own
        cfg.dsn = f"chdb://{directory / 'warehouse'}"
    if not cfg.projects:  # the generated accounts proja..projf are the projects A..F
        cfg.projects = {f"proj{c}": c.upper() for c in "abcdef"}
    if not cfg.whatif:  # the reports' "What the next purchase buys" (docs/whatif.md)
        cfg.whatif = [{"name": "16 more H200 nodes", "add": ["h200:16"]}]
    start = datetime.combine(DEMO_START, datetime.min.time(), timezone.utc)
    last = DEMO_START + timedelta(days=days - 1)

    generating = _stage(f"generate {days} days of a 114-node H100/H200/B200 cluster, ~{jobs_per_day} jobs/day, "
                        f"{metrics_step_s} s telemetry (seed {seed})")
    backfilled = last - timedelta(days=1) if loads == "backfill" and days > 1 else None

    def gen(progress):
        return generate(data, start=start, days=days, jobs_per_day=jobs_per_day, seed=seed,
                        metrics_step_s=metrics_step_s, telemetry=("parquet",), nightly=True,
                        backfill_days=(backfilled - DEMO_START).days + 1 if backfilled else 0, progress=progress)

    def generated(h, seconds=None):
        generating(f" ({h.runs.height} job runs, {h.node_events.height} node events -> {data})", seconds)

    g = h = None
    if backfilled and beside:
        g = _Beside(gen)  # the warehouse opened below, beside the simulation
    else:
        with count_progress("telemetry days") as progress:
            h = gen(progress)
        generated(h)

    cfg.purpose = "ops-report demo"
    wh = open_warehouse(cfg)
    first_night = DEMO_START
    if backfilled:
        first_night = last
        done = _stage(f"backfill of {DEMO_START} .. {backfilled} into {redact(cfg.dsn)}, as a site's first install "
                      "loads its history: sacct's one extract of the window, then its telemetry, the grains "
                      "refreshed once" + (" (each telemetry day as soon as it is generated)" if g else ""))
        if g:
            g.wait(0)  # the backfill's sacct extract is written
        with count_progress("telemetry days") as progress:
            n = backfill(wh, data, scaled_spec().name, DEMO_START, backfilled, progress=progress,
                         written=g.wait if g else None)
        done(f" ({n['nights']} days: sacct read {n['read']}, {n['jobs']} job-run records, {n['steps']} steps, "
             f"quarantined {n['quarantined']}; {n['gpu_rows']} GPU telemetry samples)")
    if g:
        h = g.join()
        generated(h, g.seconds)
    what = (f"night {days} ({last}) as the nightly cron job loads it" if first_night == last
            else f"nightly loads into {redact(cfg.dsn)}, each night as the cron job loads it")
    done = _stage(f"{what}: the night's sacct extract (running jobs replaced as they end), its telemetry day")
    with count_progress("nights") as progress:
        n = load_nights(wh, data, h.spec.name, progress=progress, first=first_night)
    done(f" ({n['nights']} nights: sacct read {n['read']}, {n['jobs']} job-run records, {n['steps']} steps, "
         f"quarantined {n['quarantined']}; {n['gpu_rows']} GPU telemetry samples)")

    done = _stage("capacity sources (inventory, sacctmgr node events, scontrol reservations)")

    c = load_capacity(wh, inventory=data / "inventory.csv", events=data / "slurm" / "events.psv",
                      reservations=data / "slurm" / "reservations.txt", cluster=h.spec.name)
    done(" (" + ", ".join(f"{t} {n}" for t, n in c.items()) + ")")

    # after the telemetry: its pci_bus_id labels say which GPU each kernel-log line names
    done = _stage("kernel logs (the driver's NVRM: Xid lines, journalctl -k -o short-iso of each node)")
    x = load_kernel_log(wh, sorted((data / "logs" / "kernel").glob("*.log")), cluster=h.spec.name)
    done(f" ({x['xid_events']} Xid events of {x['lines']} lines; {x['gauge_rows_replaced']} the Xid gauge also "
         f"saw; quarantined {x['quarantined']})")

    done = _stage("summaries")
    read = write_summaries(wh, out, DEMO_START, last)
    done(f" -> {out}")

    month = DEMO_START.replace(day=1)
    exports = directory / "exports"  # apart from out/: Parquet float bytes may differ in the last bit
    reports = write_reports(wh, out, exports, month, h.spec.name)
    print(f"\nTelemetry {DEMO_START} .. {last}, by GPU model (ops-report telemetry --by gpu_model):\n")
    print(render(read["telemetry_by_gpu_model"].select(
        "gpu_model", "gpu_util_mean", "tensor_active_mean", "power_w_mean", "energy_kwh", "throttled_hours",
        "xid_events"), "table"))
    df = read["summary_by_project"]
    print(f"\nJob accounting {DEMO_START} .. {last}, by project (ops-report summary --by project):\n")
    print(render(df, "table"))
    cl = next(u for u in reports[0]["utilization"] if u["level"] == "cluster")
    cost = next(c for c in reports[0]["cost"] if c["model"] == "all")
    a = next(t for t in reports[1]["chargeback_totals"] if t["project"] == "A")
    print(f"\nMonthly report {month:%Y-%m} (ops-report monthly --cluster): utilization {100 * cl['utilization']:.1f}% "
          f"of {cl['available_gpu_h']:,.0f} available GPU-hours; idle: {cl['free_gpu_h']:,.0f} free, "
          f"{cl['reserved_idle_gpu_h']:,.0f} reserved but unused, {cl['allocated_idle_gpu_h']:,.0f} allocated but "
          f"idle; cost {cost['total_cost']:,.0f} {cost['currency']} ({cost['cost_per_allocated_gpu_h']:.2f} per "
          f"allocated GPU-hour). Project A: {a['allocated_gpu_h']:,.0f} GPU-hours, "
          f"{a['cost']:,.0f} {cost['currency']}.")
    # the failure analytics (issue 17): what the operators act on next
    swap = [n for n in reports[0]["node_health"] if n["swap"]]
    idle = next(u for u in reports[0]["idle_gpu_users"] if u["level"] == "all")
    hung = reports[0]["hung_jobs"]
    print(f"Swap list ({len(swap)} nodes, ops-report nodes --swap-list): "
          + ("; ".join(f"{n['node']} ({n['reasons']})" for n in swap[:5]) or "none")
          + (f"; and {len(swap) - 5} more" if len(swap) > 5 else "") + ".")
    g = next((e for e in reports[1]["goodput"] if e["project_key"] == "A"), None)
    def pct(v) -> str:
        return "unknown" if v is None else f"{100 * v:.1f}%"

    print(f"Project A's effective training time ratio (ETTR, GPU-weighted): {pct(g and g['ettr'])} over its "
          f"{g['large_campaigns'] if g else 0} training campaigns of 64+ GPUs, {pct(g and g['ettr_all'])} over all "
          f"{g['campaigns'] if g else 0}; GPU-hours of work lost at interruptions: "
          f"{g['lost_gpu_h'] if g else 0:,.0f}.")
    worst = f" (the worst held {hung[0]['hung_gpu_h']:,.0f} GPU-hours after it hung)" if hung else ""
    print(f"Hung runs: {len(hung)}{worst}; "
          f"idle-GPU runs: {idle['runs']}, {idle['gpu_h']:,.0f} GPU-hours at under "
          f"{reports[0]['idle_util_pct']:g}% utilization.")
    wi = reports[0].get("whatif")
    if wi:  # what the next purchase buys (issue 18): the [[whatif]] scenario, read against the replay's error
        by = {r["scenario"]: r for r in wi["summary"]}
        name = wi["scenarios"][-1]
        print(f"What-if ({name}, ops-report whatif --add h200:16): allocated ÷ capacity GPU-hours "
              f"{100 * by['replay']['allocated_of_capacity']:.1f}% -> {100 * by[name]['allocated_of_capacity']:.1f}%, "
              f"{by[name]['wait_hours_saved']:,.0f} wait-hours saved "
              f"({by[name]['wait_hours_saved_per_added_node']:,.0f} per added node); the unchanged replay is "
              f"{by['replay']['allocated_of_capacity_error_pts']:+.2f} points of it from what happened.")
    wh.close()
    print(f"Reports: {out} (open monthly-*.html in a browser); Parquet marts for DuckDB/polars: {exports}\n"
          f"Notebooks: pip install '.[notebooks]', then OPS_WAREHOUSE=chdb://{(directory / 'warehouse').resolve()} "
          f"jupyter lab notebooks/ (notebooks/README.md; the notebook and ops-report take turns on the warehouse)\nGenerated site files (sacct, node events, reservations, inventory, telemetry, kernel logs): {data}")
    return out
