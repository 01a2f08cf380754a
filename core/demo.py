"""`ops-report demo`: the product's front door. Generates a month of a GPU cluster's Slurm history, loads it
into the embedded warehouse and writes the job-accounting summaries. Same seed, same outputs."""

from __future__ import annotations

import time
from datetime import date, datetime, timezone
from pathlib import Path

from ops_warehouse.config import DEFAULT_DSN, Config
from ops_warehouse.reports.tabular import render

DEMO_MONTH = date(2026, 10, 1)
DEMO_DAYS = 31
# (file stem, --by keys, what it answers)
VIEWS = [
    ("summary_by_project", ["project"], "usage and waits per project"),
    ("summary_by_gpu_count", ["gpu_count_bin"], "job counts vs GPU-hours by job size (GPUs)"),
    ("summary_by_wall_time", ["wall_time_bin"], "job counts vs GPU-hours by run time"),
    ("summary_by_partition_day", ["partition"], "daily usage per partition"),
]


def _stage(label: str):
    t0 = time.time()
    print(f"[demo] {label} ...", flush=True)
    return lambda extra="": print(f"[demo] {label}: done in {time.time() - t0:.1f} s{extra}", flush=True)


def run_demo(cfg: Config, directory: Path, *, jobs: int = 20000, seed: int = 7) -> Path:
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.progress import file_progress
    from ops_warehouse.summary import summary
    from ops_warehouse.synth import write_sacct_dump
    from ops_warehouse.warehouse import connect, redact

    directory = directory.resolve()
    out = directory / "out"
    out.mkdir(parents=True, exist_ok=True)
    if cfg.dsn == DEFAULT_DSN:  # nothing chosen: a warehouse of the demo's own
        cfg.dsn = f"chdb://{directory / 'warehouse'}"
    if not cfg.projects:  # the generated accounts proja..projf are the projects A..F
        cfg.projects = {f"proj{c}": c.upper() for c in "abcdef"}
    done = _stage(f"generate {jobs} jobs of {DEMO_MONTH:%Y-%m} (seed {seed})")
    dump = directory / "sacct-2026-10.psv"
    stats = write_sacct_dump(dump, jobs=jobs, start=datetime.combine(DEMO_MONTH, datetime.min.time(), timezone.utc),
                             days=DEMO_DAYS, seed=seed, cluster="demo")
    done(f" ({stats.get('lines', '?')} sacct lines, {dump.stat().st_size / 1e6:.1f} MB)")

    done = _stage(f"load into {redact(cfg.dsn)}")
    wh = connect(cfg)
    with file_progress(f"loading {dump.name}") as progress:
        r = load_sacct(wh, dump, progress=progress)
    done(f" (read {r.records_read}, {r.jobs_loaded} job runs, {r.steps_loaded} steps, quarantined {r.quarantined})")

    done = _stage("summaries")
    last = date(2026, 10, 31)
    for stem, by, _ in VIEWS:
        period = "day" if stem.endswith("_day") else "none"
        df = summary(wh, DEMO_MONTH, last, by, period)
        for fmt, ext in (("table", "md"), ("json", "json"), ("csv", "csv")):
            (out / f"{stem}.{ext}").write_text(render(df, fmt), encoding="utf-8")
    done(f" -> {out}")
    df = summary(wh, DEMO_MONTH, last, ["project"], "none")
    print(f"\nJob accounting, {DEMO_MONTH:%B %Y}, by project (ops-report summary --by project):\n")
    print(render(df, "table"))
    print(f"All outputs: {out}")
    return out
