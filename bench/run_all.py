"""Run every benchmark and print one table of their figures against their baselines and goals.

Each bench/*.py script prints, besides its own report, lines of the form

    RESULT <name> <key>=<value> ... [ratio=<x> goal=<y>]

(ratio: the product against its baseline in the same run, above 1 the product is better unless the goal
says "<="). This script runs them one after another (never in parallel: they share the machine's cores),
each as its own process, keeps their full output under --log-dir, and prints the RESULT lines as a table.

    python bench/run_all.py                 # the sizes docs/benchmarks.md records (about 25 minutes on 2 cores)
    python bench/run_all.py --quick         # small sizes, a few minutes: to check the benches run
    python bench/run_all.py --only startup,monthly
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# name -> (script, full-size arguments, quick arguments)
BENCHES = {
    "startup": ("bench_startup.py", ["--repeat", "5"], ["--repeat", "2"]),
    "sacct": ("bench_etl_sacct.py", ["--jobs", "1000000", "--small-jobs", "250000"],
              ["--jobs", "100000", "--small-jobs", "25000"]),
    "telemetry": ("bench_telemetry.py", ["--days", "31", "--nodes", "128"],
                  ["--days", "2", "--nodes", "16", "--skip-prometheus"]),
    "monthly": ("bench_monthly.py", [], ["--nodes", "16", "--days", "31"]),
    "api": ("bench_api.py", [], []),
    "scaling": ("bench_scaling.py", [], ["--scales", "1"]),
}


def parse_result(line: str) -> tuple[str, dict[str, str]]:
    parts = line.split()[1:]
    name, fields = parts[0], {}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        fields[k] = v
    return name, fields


def machine() -> str:
    cpu = "?"
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} CPUs ({cpu}), {mem_gb:.0f} GiB, Python {platform.python_version()}"


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
    print(f"machine: {machine()}; logs in {logs}", flush=True)
    results: list[tuple[str, str, dict[str, str], float]] = []
    failed = []
    for name in names:
        script, full, quick = BENCHES[name]
        argv = [sys.executable, str(BENCH / script), *(quick if a.quick else full)]
        t0 = time.perf_counter()
        print(f"running {name}: {' '.join(argv[1:])}", flush=True)
        with open(logs / f"{name}.log", "w") as log:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, text=True)
            log.write(p.stdout)
        seconds = time.perf_counter() - t0
        if p.returncode != 0:
            failed.append(name)
            print(f"  {name} failed (exit {p.returncode}); see {logs / (name + '.log')}", flush=True)
            continue
        for line in p.stdout.splitlines():
            if line.startswith("RESULT "):
                r, fields = parse_result(line)
                results.append((name, r, fields, seconds))
    print()
    print(f"| bench | figure | value | baseline | ratio | goal |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, r, f, _ in results:
        value = next((f"{k}={v}" for k, v in f.items() if k not in ("ratio", "goal", "baseline")), "")
        print(f"| {name} | {r} | {value} | {f.get('baseline', '')} | {f.get('ratio', '')} | {f.get('goal', '')} |")
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
