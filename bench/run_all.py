"""Run every benchmark and print one table of their figures against their baselines and goals.

Each bench/*.py script prints, besides its own report, lines of the form

    RESULT <name> <key>=<value> ... [ratio=<x> goal=<y>]

(ratio: the product against its baseline in the same run, above 1 the product is better). A goal is an
operator and a number, with a unit where it bounds a figure rather than the ratio: ``>=1.5`` and ``>=0.8``
bound the ratio, ``<=0.3s`` bounds the line's first figure in seconds, ``<=1536MB`` its first figure in MB
(a number without an operator means ``>=``). This script runs the benches one after another (never in
parallel: they share the machine's cores), each as its own process, keeps their full output under
--log-dir, and prints the machine, then the RESULT lines as one table with whether each goal is met.

    python bench/run_all.py                 # the sizes docs/benchmarks.md records (about an hour on 2 cores)
    python bench/run_all.py --quick         # small sizes, a few minutes: to check the benches run
    python bench/run_all.py --only startup,monthly

--quick works in a temporary folder (removed after) so that it neither reuses nor overwrites the full-size
work folders (bench_monthly's /tmp/bench-monthly, bench_scaling's /tmp/bench-scaling); its figures are a
smoke test, not measurements.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# name -> (script, full-size arguments, quick arguments); "{work}" is a per-run temporary folder
BENCHES = {
    "startup": ("bench_startup.py", ["--repeat", "5"], ["--repeat", "2"]),
    "sacct": ("bench_etl_sacct.py", ["--jobs", "1000000", "--small-jobs", "250000"],
              ["--jobs", "50000", "--small-jobs", "10000"]),
    # issue 50 item 1: a small sacct file's fixed cost, the demo's 31 nightly extracts one after the other
    "sacct_nightly": ("bench_etl_sacct.py", ["--nightly", "/tmp/bench-sacct-nightly/nightly"],
                      ["--nightly", "{work}/nightly", "--rounds", "1"]),
    "telemetry": ("bench_telemetry.py", ["--days", "31", "--nodes", "128"],
                  ["--days", "2", "--nodes", "8", "--skip-prometheus"]),
    "telemetry_refresh": ("bench_telemetry_refresh.py", [], ["--days", "8", "--nodes", "16", "--jobs-per-day", "300"]),
    "monthly": ("bench_monthly.py", [], ["--nodes", "16", "--days", "31", "--workdir", "{work}/monthly"]),
    "api": ("bench_api.py", [], ["--demo-days", "3"]),
    "generate": ("bench_generate.py", [],
                 ["--jobs", "20000", "--days", "20", "--telemetry-nodes", "8", "--telemetry-days", "2"]),
    "whatif": ("bench_whatif.py", [], ["--days", "5", "--workdir", "{work}/whatif", "--big-workdir", "{work}/none"]),
    # issue 51: the backfill scheduler's event loop in the generator's month (the replays need a demo: --dir)
    "scheduler": ("bench_scheduler.py", ["--only", "simulate"], ["--only", "simulate", "--rounds", "1"]),
    "scaling": ("bench_scaling.py", ["--scales", "1", "2", "4", "--extrapolate", "8"],
                ["--scales", "1", "--days", "3", "--repeat", "1", "--calibrate-days", "1",
                 "--workdir", "{work}/scaling"]),
    "grafana": ("bench_grafana.py", [], ["--days", "5", "--nodes", "8", "--jobs-per-day", "100",
                                         "--workdir", "{work}/grafana", "--repeat", "1"]),
    # issue 50: the demo's 31 nightly loads (sacct extract + telemetry day, the grains refreshed once a night)
    "nightly": ("bench_nightly.py", ["--separate"], ["--days", "2", "--jobs-per-day", "100"]),
    # issue 50: a backfill of the demo's site at 60 s (14 and 7 days, extrapolated to a year) and 5 M sacct jobs
    "backfill": ("bench_backfill.py", ["--days", "14", "--small-days", "7", "--vm-days", "2", "--sacct-jobs", "5000000"],
                 ["--days", "2", "--small-days", "1", "--nodes", "8", "--vm-days", "1", "--sacct-jobs", "20000"]),
    # issue 51 item 3: README command 1, the month backfilled and its last night by cron, against every night by cron
    "demo": ("bench_demo.py", [], ["--days", "2", "--jobs-per-day", "100"]),
}

GOAL = re.compile(r"^(>=|<=|>|<)?(\d+(?:\.\d+)?)(s|MB|mb)?$")


def parse_result(line: str) -> tuple[str, dict[str, str]]:
    parts = line.split()[1:]
    name, fields = parts[0], {}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        fields[k] = v
    return name, fields


def goal_met(fields: dict[str, str]) -> str:
    """"yes", "NO", or "" (no goal, or one this cannot read). A goal with a unit (s, MB) bounds the line's
    first figure; without one, the ratio."""
    g = fields.get("goal")
    if not g:
        return ""
    m = GOAL.match(g)
    if not m:
        return "?"
    op, bound, unit = m.group(1) or ">=", float(m.group(2)), m.group(3)
    if unit:
        value = next((v for k, v in fields.items() if k not in ("ratio", "goal")), None)
    else:
        value = fields.get("ratio")
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "?"
    ok = {">=": x >= bound, "<=": x <= bound, ">": x > bound, "<": x < bound}[op]
    return "yes" if ok else "NO"


def machine() -> str:
    """Cores, CPU model, RAM, Python and chDB version (read from the package metadata: importing chDB here
    would only grow this process)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "?"
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        chdb = version("chdb")
    except PackageNotFoundError:
        chdb = "not installed"
    return (f"{os.cpu_count()} cores ({cpu}), {mem_gb:.1f} GiB RAM, Python {platform.python_version()}, "
            f"chDB {chdb}, load average {os.getloadavg()[0]:.1f} at the start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: check that every bench runs")
    ap.add_argument("--only", help="comma-separated: " + ", ".join(BENCHES))
    ap.add_argument("--log-dir", type=Path, default=None, help="where each bench's full output goes")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else list(BENCHES)
    unknown = set(names) - set(BENCHES)
    if unknown:
        raise SystemExit(f"unknown bench {', '.join(sorted(unknown))}; choose from {', '.join(BENCHES)}")
    logs = a.log_dir or Path(tempfile.mkdtemp(prefix="bench-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-work-"))
    mach = machine()
    print(f"machine: {mach}", flush=True)
    print(f"{'quick (small sizes: a smoke run, not measurements)' if a.quick else 'full sizes'}; logs in {logs}",
          flush=True)
    results: list[tuple[str, str, dict[str, str]]] = []
    failed, seconds = [], {}
    t_all = time.perf_counter()
    try:
        for name in names:
            script, full, quick = BENCHES[name]
            args = [x.replace("{work}", str(work)) for x in (quick if a.quick else full)]
            argv = [sys.executable, str(BENCH / script), *args]
            t0 = time.perf_counter()
            print(f"running {name}: {' '.join(argv[1:])}", flush=True)
            with open(logs / f"{name}.log", "w") as log:
                p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, text=True, check=False)
                log.write(p.stdout)
            seconds[name] = time.perf_counter() - t0
            got = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            for line in got:
                r, fields = parse_result(line)
                results.append((name, r, fields))
            if p.returncode != 0:
                failed.append(name)
                print(f"  {name} failed (exit {p.returncode}) after {seconds[name]:.0f} s; see "
                      f"{logs / (name + '.log')}", flush=True)
            else:
                print(f"  {name}: {seconds[name]:.0f} s, {len(got)} RESULT line(s)", flush=True)
                if not got:
                    failed.append(f"{name} (no RESULT line)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"machine: {mach}")
    print(f"{'quick run at small sizes (smoke test: the figures are not measurements)' if a.quick else 'full sizes'}"
          f", {time.perf_counter() - t_all:.0f} s in all")
    print()
    print("| bench | result | figures | ratio | goal | met |")
    print("| --- | --- | --- | ---: | ---: | :---: |")
    for name, r, f in results:
        figures = ", ".join(f"{k}={v}" for k, v in f.items() if k not in ("ratio", "goal"))
        print(f"| {name} ({seconds[name]:.0f} s) | {r} | {figures} | {f.get('ratio', '')} | {f.get('goal', '')} | "
              f"{goal_met(f)} |")
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
