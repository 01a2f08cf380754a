"""What a command costs before it does anything: the fixed cost of `ops-report` over opening the engine.

Each measurement is a fresh child process (wall time from spawn to exit, its CPU time, user + system, and its
own peak RSS, both from wait4), best of ``--repeat``, the rows taken in turn within each repeat so that a
change of the shared machine's load falls on all of them:

- python: the interpreter alone (``python -c pass``);
- engine: chDB opened on the warehouse and one ``SELECT 1`` (what any embedded command must pay);
- client: the same through clickhouse-connect (its handshake queries included);
- engine + the summary's SQL: chDB opened and the summary's own SQL run on it (its Arrow table), the same
  parameters: the engine alone doing the command's work;
- command: ``ops-report summary`` of one day on the same warehouse, a query that returns at once.

The fixed cost is command − engine (goal ≤ 0.2 s, issue 51; ≤ 0.4 GB, issue 16), in wall and in CPU seconds:
on a shared machine the CPU figure is the steadier one. Two baselines: ``SELECT 1`` (what it always was, so the
query's own work counts in the fixed cost) and the summary's SQL on the engine alone (``RESULT startup_same_sql``:
what the product adds over the engine doing the same work, the house rule's baseline).

Bytecode: the children run with Python's bytecode cache on, kept in a temporary ``PYTHONPYCACHEPREFIX`` that a
first, untimed pass of every row fills, as an installed package runs (pip compiles every module at install, an
editable install writes its cache at the first run). A process started with ``PYTHONDONTWRITEBYTECODE=1``
beside a venv without ``__pycache__`` (uv installs without compiling) recompiles every module it imports at
every start, about 0.3 CPU-s of a summary, the engine's baseline included; ``--cold`` measures that way.

``--against DIR``: the same command also run with ``PYTHONPATH=DIR`` (an earlier version installed there with ``pip install --no-deps --target DIR``, its own
dependencies beside it), in the same repeats: a before/after in one command. A warehouse is made first (tiny:
one sacct file from tests/data) unless ``--warehouse`` names one (e.g. the demo's).

``--phases``: where the command's CPU goes, step by step in one fresh process (``time.process_time`` around
each: the engine's import, the CLI's, typer's build of the command, the open (clickhouse-connect's import in it
where the open makes the client: before round 7 of issue 51; it says whether the client was imported), the
query, the printing), best of ``--repeat``.

    python bench/bench_startup.py [--warehouse PATH] [--repeat 5] [--importtime] [--against DIR] [--phases] [--cold]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(argv: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """(seconds, CPU seconds, peak RSS MB) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:4])}... failed: {p.stderr.read().decode()[-500:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", help="an embedded warehouse folder (default: make a tiny one)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", metavar="DIR", help="also run the summary with PYTHONPATH=DIR (an earlier version)")
    ap.add_argument("--importtime", action="store_true",
                    help="also print what the imports cost, by package, for the CLI import and the summary command")
    ap.add_argument("--phases", action="store_true", help="also time each step of the summary in one process")
    ap.add_argument("--cold", action="store_true",
                    help="no bytecode cache: every child compiles what it imports (as this process's environment says)")
    a = ap.parse_args()
    py = sys.executable
    tmp = tempfile.mkdtemp(prefix="bench-startup-")
    wh = Path(a.warehouse).resolve() if a.warehouse else Path(tmp) / "wh"
    env = {"OPS_CONFIG": "", "OPS_WAREHOUSE": f"chdb://{wh}"}
    if a.cold:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
    print(f"bytecode: {'none, every import compiles (--cold)' if a.cold else 'cached (PYTHONPYCACHEPREFIX, filled by a first untimed pass)'}")
    ops = [py, "-c", "from ops_warehouse.cli.main import main; main()"]
    if not a.warehouse:
        sacct = REPO / "tests" / "data" / "sacct" / "xdmod" / "phillips.log"
        subprocess.run([*ops, "etl", "sacct", "--fields", "xdmod", str(sacct)], check=True, env={**os.environ, **env},
                       stdout=subprocess.DEVNULL)
    rows = [
        ("python (interpreter alone)", [py, "-c", "pass"]),
        ("engine: chdb.connect + SELECT 1", [py, "-c", f"import chdb; c = chdb.connect({str(wh)!r}); "
                                                      "c.query('SELECT 1'); c.close()"]),
        # ArrowStream bytes read by pyarrow.ipc: chDB's own 'ArrowTable' format imports pandas (0.3 CPU-s)
        ("engine: chdb.connect + the summary's SQL", [py, "-c", f"import chdb, pyarrow.ipc; c = chdb.connect({str(wh)!r}); "
                                                              f"r = c.query({summary_sql()!r}, 'ArrowStream', "
                                                              f"params={SUMMARY_PARAMS!r}); "
                                                              "t = pyarrow.ipc.open_stream(r.bytes()).read_all(); "
                                                              "assert t.num_rows == 1, t; c.close()"]),
        ("client: clickhouse-connect chdb:// + SELECT 1", [py, "-c", "import clickhouse_connect; c = clickhouse_connect"
                                                                    f".get_client(dsn='chdb://{wh}'); c.query('SELECT 1')"]),
        ("import the CLI (no command)", [py, "-c", "import ops_warehouse.cli.main"]),
        ("ops-report summary, one day", [*ops, "summary", "--from", "2016-12-22", "--to", "2016-12-22"]),
    ]
    rows = [(label, argv, {}) for label, argv in rows]
    if a.against:
        rows.append(("ops-report summary, one day, --against", rows[-1][1], {"PYTHONPATH": a.against}))
    runs: dict[str, list] = {label: [] for label, _, _ in rows}
    if not a.cold:
        for label, argv, extra in rows:  # fills the bytecode cache; not timed
            child(argv, {**env, **extra})
    for _ in range(a.repeat):  # in turn, so that the machine's load changes fall on every row
        for label, argv, extra in rows:
            runs[label].append(child(argv, {**env, **extra}))
    out = {label: tuple(min(r[i] for r in rs) for i in range(3)) for label, rs in runs.items()}
    print(f"{'what':<48} {'seconds':>8} {'CPU s':>7} {'peak RSS MB':>12}")
    for label, (s, cpu, m) in out.items():
        print(f"{label:<48} {s:8.3f} {cpu:7.3f} {m:12.0f}")
    for label, tag, base in (("ops-report summary, one day", "startup", "engine: chdb.connect + SELECT 1"),
                             ("ops-report summary, one day, --against", "startup_against",
                              "engine: chdb.connect + SELECT 1"),
                             ("ops-report summary, one day", "startup_same_sql", "engine: chdb.connect + the summary's SQL"),
                             ("ops-report summary, one day, --against", "startup_same_sql_against",
                              "engine: chdb.connect + the summary's SQL")):
        if label not in out:
            continue
        eng = out[base]
        cmd = out[label]
        fixed_s, fixed_cpu, fixed_mb = cmd[0] - eng[0], cmd[1] - eng[1], cmd[2] - eng[2]
        print(f"\n{label}: fixed cost over [{base}] {fixed_s:.3f} s, {fixed_cpu:.3f} CPU-s (goal <= 0.2), "
              f"{fixed_mb:.0f} MB (goal <= 400)")
        print(f"RESULT {tag} fixed_s={fixed_s:.3f} fixed_cpu_s={fixed_cpu:.3f} baseline={eng[0]:.3f} "
              f"baseline_cpu={eng[1]:.3f} goal=<=0.2s fixed_mb={fixed_mb:.0f} bytecode={'cold' if a.cold else 'cached'}")
    if a.phases:
        print_phases(py, {**os.environ, **env}, a.repeat)
    if a.importtime:
        print("\nwhat the imports cost: ms of python -X importtime's self time, summed by package (a package's "
              "own modules; what it imports of another package counts there), total first")
        for label, argv in (("import the CLI", [py, "-X", "importtime", "-c", "import ops_warehouse.cli.main"]),
                            ("ops-report summary", [py, "-X", "importtime", *ops[1:], "summary", "--from",
                                                    "2016-12-22", "--to", "2016-12-22"])):
            costs = import_costs(argv, {**os.environ, **env})
            total = sum(costs.values())
            top = sorted(costs.items(), key=lambda kv: -kv[1])[:12]
            print(f"  {label}: total {total / 1000:.0f}; " + ", ".join(f"{n} {us / 1000:.0f}" for n, us in top))


SUMMARY_PARAMS = {"from_date": "2016-12-22", "to_date": "2016-12-22", "tz": "UTC", "period": "none"}


def summary_sql() -> str:
    """The SQL `ops-report summary` sends with no --by (analytics/summary.py), read from the tree."""
    return (REPO / "sql" / "marts" / "summary.sql").read_text(encoding="utf-8").replace("{{by}}", "")


PHASES = """
import sys, time
from datetime import date
t, out = time.process_time, []
def step(name, t0):
    out.append(f"{name}={t() - t0:.4f}")
    return t()
t0 = t()
import chdb, pyarrow
t0 = step("engine_import", t0)
import ops_warehouse.cli.main
t0 = step("cli_import", t0)
import typer.main
from ops_warehouse.cli.invoked import narrowed
typer.main.get_command(narrowed(ops_warehouse.cli.main.app, ["summary", "--from", "2016-12-22"]))
t0 = step("cli_build", t0)  # the click command typer builds from the signatures (cli/invoked.py)
from ops_warehouse.config import load_config
from ops_warehouse.warehouse import open_warehouse
wh = open_warehouse(load_config(None))
t0 = step("open", t0)
from ops_warehouse.analytics.summary import summary_table
table = summary_table(wh, date(2016, 12, 22), date(2016, 12, 22))
t0 = step("query", t0)
from ops_warehouse.reports.tabular import render
text = render(table, "table")
t0 = step("print", t0)
wh.close()
step("close", t0)
print(" ".join(out), "polars_imported=" + str("polars" in sys.modules),
      "client_imported=" + str("clickhouse_connect" in sys.modules))
"""


def print_phases(py: str, env: dict, repeat: int) -> None:
    """CPU seconds of each step of a one-day summary in one process, best of ``repeat`` per step."""
    best: dict[str, float] = {}
    extra = ""
    for _ in range(repeat):
        p = subprocess.run([py, "-c", PHASES], capture_output=True, text=True, env=env, check=True)
        tokens = p.stdout.split()
        steps = [kv for kv in tokens if "_imported=" not in kv]
        extra = " ".join(kv for kv in tokens if "_imported=" in kv)
        for kv in steps:
            k, v = kv.split("=")
            best[k] = min(best.get(k, 1e9), float(v))
    print("\nthe summary's steps in one process, CPU s (best of each): "
          + ", ".join(f"{k} {v:.3f}" for k, v in best.items()) + f"; {extra}")


def import_costs(argv: list[str], env: dict) -> dict[str, int]:
    """µs of import self time per top-level package (``polars.api`` counts as polars, ``ops_warehouse.cli.main``
    as ops_warehouse) of one process."""
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    out: dict[str, int] = {}
    for ln in p.stderr.splitlines():
        parts = ln.split("|")
        if not ln.startswith("import time:") or len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        self_us = int(parts[0][len("import time:"):])
        pkg = parts[2].strip().split(".")[0]
        out[pkg] = out.get(pkg, 0) + self_us
    return out

if __name__ == "__main__":
    main()
