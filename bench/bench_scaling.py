"""Benchmark (prints figures; not a timed test): how loads, the manager's reports and storage grow with the
site, from the demo's data (1×) to 8× it, and storage per GPU per year at 60 s sampling.

    python bench/bench_scaling.py [--scales 1 2 4 8] [--extrapolate K ...] [--workdir DIR] [--repeat 2]
                                  [--calibrate-days 7] [--keep] [--reuse] [--days 31]

What "k× the demo's data" is here: the demo's month (`ops-report demo`: October 2026, 31 days, seed 7, 5-minute
telemetry) on a site k times as large — k × 114 nodes in the demo's proportions (90 H100 : 16 H200 : 8 B200,
`--nodes`), k × 900 jobs submitted a day (`--jobs-per-day`), same month, same telemetry step. So every table the
reports read for the month (job runs and steps, GPU and node samples, hourly rollups, the capacity grain) is
k times the demo's; a report of a month reads k times as many rows. (k times as many days instead would leave
a month's report reading the same rows.)

For each k, in a fresh directory, each step a fresh `ops-report` process (this snapshot of the package, run
as `python -m ops_warehouse.cli.main`), its wall time, CPU time and peak RSS (os.wait4 on it; a child starts
out with this process's peak, so this process stays small: it imports neither chDB nor polars):

1. `ops-report generate --out site --nodes 114k --jobs-per-day 900k --seed 7 --metrics-step 300`
   (generator time is shown, not a product figure);
2. loads into a fresh embedded warehouse (`chdb://…`), in the demo's order: `ops-report etl sacct
   site/sacct/sacct.psv` (the month as of its end, one file), `ops-report etl metrics --source file --file site
   --from 2026-10-01 --to 2026-10-31`, `ops-report etl capacity --inventory … --events … --reservations …`;
3. `ops-report init` on the loaded warehouse (what every command pays: start, imports, open, schema check),
   then the reports a manager runs, each `--repeat` times (the best is shown): `ops-report monthly --cluster
   --month 2026-10 --format all --out …`, `ops-report monthly --project A …`, `ops-report summary --from
   2026-10-01 --to 2026-10-31 --by project --period month`;
4. storage: rows, compressed and uncompressed bytes of every table's active parts (system.parts), as the
   loads left them, then again after `OPTIMIZE TABLE … FINAL` of every table (one part per partition, what
   background merges converge to; compression depends on it: a part holding one day has short runs per
   series). Per-GPU-year figures use the merged bytes.

Wall time on a shared machine depends on what else runs: each step also records the child's CPU time
(user + system, which contention inflates far less) and the 1-minute load average when it ended. `--keep`
keeps the warehouses; `--reuse` then times `init`, the reports and storage again on them (and the 60 s
calibration), keeping the generation and load figures of the earlier run's results.json.

`--extrapolate 8` adds a column for a scale not measured: each time and peak RSS fitted as a + b·k (least
squares over the measured scales) and each table's rows and bytes as the largest measured scale's × k / k_max;
the column says "extrapolated". (The generator's scheduler simulation grows faster than k: on 2 shared cores
8× takes longer than everything else together, so a run of 1 2 4 with `--extrapolate 8` is the practical one.)

`--days N` (default 31) generates and loads only the month's first N days: a quick check that the script
runs, not the figures above (a month's reports then read N days).

Then (unless `--calibrate-days 0`) one more site at 1× with 60 s telemetry for `--calibrate-days` days
(telemetry only), whose bytes per row are the ones the per-GPU-per-year figures at 60 s use; the 300 s figures
are shown beside them. Per GPU per year at 60 s: gpu_sample 525,600 rows (one per minute), node_sample
525,600 per node ÷ 8 GPUs, gpu_hour 8,760, node_hour and capacity_node_hour 8,760 per node ÷ 8; job
tables and Xid events scale with the workload, not the step: the demo month's rows per GPU × 365/31.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

DEMO_NODES, DEMO_JOBS_PER_DAY, SEED, DAYS, MONTH = 114, 900, 7, 31, "2026-10"
D0, D1 = "2026-10-01", "2026-10-31"
GPUS_PER_NODE = 8
YEAR_S = 365 * 86400
PROJECTS = {f"proj{c}": c.upper() for c in "abcdef"}
CLI = [sys.executable, "-m", "ops_warehouse.cli.main"]


def run(label: str, args: list[str], log: Path, env: dict | None = None) -> dict:
    """Run one fresh process; its wall time, CPU time (user + system) and its own peak RSS (wait4 on that
    pid), and the 1-minute load average when it ended (the machine may be shared)."""
    t = time.perf_counter()
    with open(log, "ab") as f:
        f.write(f"\n$ {' '.join(map(str, args))}\n".encode())
        f.flush()
        p = subprocess.Popen([str(a) for a in args], stdout=f, stderr=subprocess.STDOUT, env=env)
        _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    load = os.getloadavg()[0]
    if p.returncode:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{label} failed (exit {p.returncode}); end of {log}:\n{tail}")
    return {"s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "load1": round(load, 2)}


def _parts(wh) -> dict:
    rows = wh.query_rows(
        "SELECT table, count() AS parts, sum(rows), sum(data_compressed_bytes), sum(data_uncompressed_bytes), "
        "sum(bytes_on_disk) FROM system.parts WHERE active AND database = currentDatabase() GROUP BY table")
    return {t: {"parts": int(p), "rows": int(r), "comp": int(c), "uncomp": int(u), "disk": int(d)}
            for t, p, r, c, u, d in rows}


def child_storage(dsn: str) -> None:
    """In a fresh process: rows and bytes of every table's active parts as the loads left them, then again
    after OPTIMIZE TABLE … FINAL (one part per partition: what background merges converge to), and a few
    counts."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    wh = open_warehouse(Config(dsn=dsn), migrate=False)
    out = _parts(wh)
    # the biggest columns of gpu_sample (system.columns), to say where the bytes are
    cols = wh.query_rows(
        "SELECT name, data_compressed_bytes, data_uncompressed_bytes FROM system.columns "
        "WHERE database = currentDatabase() AND table = 'gpu_sample' ORDER BY data_compressed_bytes DESC LIMIT 6")
    facts = {}
    if "gpu_sample" in out:
        facts["gpus"], facts["step_s"] = wh.query_rows(
            "SELECT uniqExact(node, gpu), any(step_s) FROM gpu_sample")[0]
    if "node_sample" in out:
        facts["nodes"] = wh.query_rows("SELECT uniqExact(node) FROM node_sample")[0][0]
    if "slurm_job_run" in out:
        facts["job_runs_final"] = wh.query_rows("SELECT count() FROM slurm_job_run FINAL")[0][0]
    t = time.perf_counter()
    for table, v in out.items():
        if v["rows"]:
            wh.command(f"OPTIMIZE TABLE {table} FINAL")
    facts["optimize_s"] = time.perf_counter() - t
    print(json.dumps({"tables": out, "merged": _parts(wh), "facts": {k: round(v) for k, v in facts.items()},
                      "gpu_sample_columns": [[n, int(c), int(u)] for n, c, u in cols]}))


def storage(dsn: str, log: Path, env: dict) -> dict:
    args = [sys.executable, __file__, "--child-storage", dsn]
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"storage query failed:\n{p.stderr[-3000:]}")
    with log.open("a") as f:
        f.write(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def one_scale(k: int, work: Path, repeat: int, env: dict, *, step_s: int = 300, days: int = DAYS,
              reports: bool = True) -> dict:
    d = work / (f"x{k}" if step_s == 300 else f"x{k}-step{step_s}")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    log = d / "log.txt"
    site, whdir = d / "site", d / "warehouse"
    (d / "ops-warehouse.toml").write_text("[projects]\n" + "".join(f'{a} = "{p}"\n' for a, p in PROJECTS.items()))
    env = scale_env(d, env)
    r: dict = {"k": k, "step_s": step_s, "days": days, "nodes": DEMO_NODES * k, "jobs_per_day": DEMO_JOBS_PER_DAY * k}
    print(f"[{k}x{'' if step_s == 300 else f' {step_s} s'}] generate {days} days, {r['nodes']} nodes, "
          f"{r['jobs_per_day']} jobs/day, {step_s} s telemetry ...", flush=True)
    r["generate"] = run("generate", CLI + ["generate", "--out", site, "--days", days, "--nodes", r["nodes"],
                                           "--jobs-per-day", r["jobs_per_day"], "--seed", SEED,
                                           "--metrics-step", step_s], log, env)
    r["sacct_lines"] = sum(1 for _ in open(site / "sacct" / "sacct.psv", "rb")) - 1
    r["sacct_mb"] = (site / "sacct" / "sacct.psv").stat().st_size / 1e6
    r["telemetry_mb"] = sum(p.stat().st_size for p in (site / "telemetry").rglob("*.parquet")) / 1e6
    last = f"2026-10-{days:02d}"
    if reports:
        print(f"[{k}x] load sacct ({r['sacct_lines']:,} lines) ...", flush=True)
        r["load_sacct"] = run("etl sacct", CLI + ["etl", "sacct", site / "sacct" / "sacct.psv"], log, env)
    print(f"[{k}x] load telemetry ({r['telemetry_mb']:,.0f} MB Parquet) ...", flush=True)
    r["load_telemetry"] = run("etl metrics", CLI + ["etl", "metrics", "--source", "file", "--file", site,
                                                    "--from", D0, "--to", last, "--cluster", "ai1"], log, env)
    if reports:
        print(f"[{k}x] load capacity, then the reports ...", flush=True)
        r["load_capacity"] = run("etl capacity", CLI + [
            "etl", "capacity", "--inventory", site / "inventory.csv", "--events", site / "slurm" / "events.psv",
            "--reservations", site / "slurm" / "reservations.txt", "--cluster", "ai1"], log, env)
        time_reports(r, d, repeat, env)
    r["storage"] = storage(f"chdb://{whdir}", log, env)
    r["warehouse_du_mb"] = sum(p.stat().st_size for p in whdir.rglob("*") if p.is_file()) / 1e6
    shutil.rmtree(site, ignore_errors=True)  # the generated files are big; the warehouse stays until the end
    print(f"[{k}x] done: " + json.dumps({x: r[x] for x in r if x != "storage"}), flush=True)
    return r


def scale_env(d: Path, env: dict) -> dict:
    return {**env, "OPS_CONFIG": str(d / "ops-warehouse.toml"), "OPS_WAREHOUSE": f"chdb://{d / 'warehouse'}"}


def time_reports(r: dict, d: Path, repeat: int, env: dict) -> None:
    """`init` (the fixed cost of any command) and the manager's reports, each `repeat` times in a fresh
    process; the best run is kept."""
    env, log = scale_env(d, env), d / "log.txt"
    cmds = {
        "init": ["init"],  # the fixed cost of a command: start, imports, open the warehouse, check the schema
        "monthly_cluster": ["monthly", "--cluster", "--month", MONTH, "--format", "all", "--out", d / "out"],
        "monthly_project": ["monthly", "--project", "A", "--month", MONTH, "--format", "all", "--out", d / "out"],
        "summary": ["summary", "--from", D0, "--to", D1, "--by", "project", "--period", "month"],
    }
    for name, args in cmds.items():
        runs = [run(name, CLI + args, log, env) for _ in range(repeat)]
        r[name] = min(runs, key=lambda x: x["s"])
        r[name]["all_s"] = [round(x["s"], 2) for x in runs]


REPORTS = ("init", "monthly_cluster", "monthly_project", "summary")
TIMED = ("generate", "init", "load_sacct", "load_telemetry", "load_capacity", "monthly_cluster", "monthly_project",
         "summary")


def extrapolate(results: list[dict], k: int) -> dict:
    """A column for scale k from the measured ones: times and RSS fitted a + b*k, sizes scaled from the
    largest measured scale (they are linear in k by construction)."""
    ks = [r["k"] for r in results]
    top = max(results, key=lambda r: r["k"])
    f = k / top["k"]

    def fit(values: list[float]) -> float:
        if len(ks) == 1:
            return values[0] * k / ks[0]
        mk, mv = sum(ks) / len(ks), sum(values) / len(values)
        b = sum((x - mk) * (y - mv) for x, y in zip(ks, values)) / sum((x - mk) ** 2 for x in ks)
        return mv + b * (k - mk)

    r = {"k": k, "extrapolated": True, "nodes": DEMO_NODES * k, "jobs_per_day": DEMO_JOBS_PER_DAY * k,
         "sacct_lines": round(top["sacct_lines"] * f), "sacct_mb": top["sacct_mb"] * f,
         "telemetry_mb": top["telemetry_mb"] * f, "warehouse_du_mb": top["warehouse_du_mb"] * f}
    for key in TIMED:
        r[key] = {"s": fit([x[key]["s"] for x in results]), "rss_mb": fit([x[key]["rss_mb"] for x in results])}
        if all("cpu_s" in x[key] for x in results):
            r[key]["cpu_s"] = fit([x[key]["cpu_s"] for x in results])
    st = top["storage"]
    scale = lambda tabs: {t: {c: (round(v[c] * f) if c != "parts" else v[c]) for c in v} for t, v in tabs.items()}
    r["storage"] = {"tables": scale(st["tables"]), "merged": scale(st.get("merged", st["tables"])),
                    "facts": {c: round(v * f) for c, v in st["facts"].items()},
                    "gpu_sample_columns": []}
    r["storage"]["facts"]["step_s"] = st["facts"].get("step_s", 300)
    return r


def fmt_b(n: float) -> str:
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= f:
            return f"{n / f:,.1f} {unit}"
    return f"{n:,.0f} B"


def machine() -> str:
    """The versions come from the packages' metadata, not by importing them: importing chDB and polars here
    would raise this process's peak RSS to about 265 MB, and every child's os.wait4 peak with it."""
    from importlib.metadata import version

    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    mem = next((int(ln.split()[1]) for ln in open("/proc/meminfo") if ln.startswith("MemTotal")), 0) / 2**20
    return (f"{os.cpu_count()} CPUs ({cpu}), {mem:.1f} GiB RAM; Python {platform.python_version()}, "
            f"chDB {version('chdb')}, clickhouse-connect {version('clickhouse-connect')}, polars {version('polars')}")


def table(results: list[dict], calib: dict | None) -> float:
    """Prints the tables; returns the compressed bytes per GPU per year at 60 s (all tables)."""
    print("\n## Loads and reports (wall s / CPU s / peak RSS MB of the child)\n")
    head = ["", *[f"{r['k']}×" + (" (extrapolated)" if r.get("extrapolated") else "") for r in results]]
    rows = [
        ("nodes / GPUs", lambda r: f"{r['nodes']} / {r['nodes'] * GPUS_PER_NODE}"),
        ("jobs submitted a day", lambda r: f"{r['jobs_per_day']:,}"),
        ("job runs (slurm_job_run FINAL)", lambda r: f"{r['storage']['facts'].get('job_runs_final', 0):,}"),
        ("sacct lines / MB", lambda r: f"{r['sacct_lines']:,} / {r['sacct_mb']:,.0f}"),
        ("GPU samples (gpu_sample rows)", lambda r: f"{r['storage']['tables']['gpu_sample']['rows']:,}"),
        ("telemetry Parquet MB", lambda r: f"{r['telemetry_mb']:,.0f}"),
        ("generate (not product)", lambda r: f"{r['generate']['s']:.1f} / "
         + (f"{r['generate']['cpu_s']:.1f}" if "cpu_s" in r["generate"] else "—") + f" / {r['generate']['rss_mb']:,.0f}"),
        ("1-min load average while loading telemetry",
         lambda r: f"{r['load_telemetry']['load1']:.1f}" if "load1" in r["load_telemetry"] else "—"),
    ]
    for key, label in (("init", "init (fixed cost of any command)"), ("load_sacct", "etl sacct"),
                       ("load_telemetry", f"etl metrics ({results[0].get('days', DAYS)} days)"),
                       ("load_capacity", "etl capacity"), ("monthly_cluster", "monthly --cluster --format all"),
                       ("monthly_project", "monthly --project A --format all"),
                       ("summary", "summary --by project --period month")):
        rows.append((label, lambda r, key=key: f"{r[key]['s']:.1f} / "
                     + (f"{r[key]['cpu_s']:.1f}" if "cpu_s" in r[key] else "—") + f" / {r[key]['rss_mb']:,.0f}"))
    rows.append(("1-min load average, reports", lambda r: f"{max(r[x]['load1'] for x in REPORTS):.1f}"
                 if "load1" in r["summary"] else "—"))
    rows.append(("warehouse on disk", lambda r: fmt_b(r["warehouse_du_mb"] * 1e6)))
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(results))
    for label, f in rows:
        print(f"| {label} | " + " | ".join(f(r) for r in results) + " |")
    base = results[0]
    if len(results) > 1:
        print("\nTime relative to the smallest scale measured (k× data ÷ 1×), wall / CPU:\n")
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * len(results))
        for key in ("load_sacct", "load_telemetry", "monthly_cluster", "monthly_project", "summary"):
            cpu = lambda r: (f" / {r[key]['cpu_s'] / base[key]['cpu_s']:.2f}"
                             if "cpu_s" in r[key] and "cpu_s" in base[key] else "")
            print(f"| {key} | " + " | ".join(f"{r[key]['s'] / base[key]['s']:.2f}{cpu(r)}" for r in results) + " |")

    print(f"\n## Storage at {base['k']}× (300 s telemetry): active parts as the loads left them, and merged "
          "(after OPTIMIZE TABLE … FINAL)\n")
    print("| table | rows | parts | compressed | uncompressed | ratio | bytes/row | merged: rows | compressed | bytes/row |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    tabs = base["storage"]["tables"]
    merged = base["storage"].get("merged", tabs)
    for t, v in sorted(tabs.items(), key=lambda kv: -kv[1]["comp"]):
        m = merged.get(t, v)
        print(f"| {t} | {v['rows']:,} | {v['parts']} | {fmt_b(v['comp'])} | {fmt_b(v['uncomp'])} | "
              f"{v['uncomp'] / max(v['comp'], 1):.1f} | {v['comp'] / max(v['rows'], 1):.1f} | {m['rows']:,} | "
              f"{fmt_b(m['comp'])} | {m['comp'] / max(m['rows'], 1):.1f} |")
    if len(results) > 1:
        print("\nCompressed bytes of the big tables at each scale, as loaded / merged:\n")
        print("| " + " | ".join(["table", *head[1:]]) + " |")
        print("|---|" + "---:|" * len(results))
        for t in ("gpu_sample", "node_sample", "gpu_hour", "node_hour", "capacity_node_hour", "slurm_job_run",
                  "slurm_job_step", "xid_event"):
            print(f"| {t} | " + " | ".join(
                fmt_b(r["storage"]["tables"].get(t, {}).get("comp", 0)) + " / "
                + fmt_b(r["storage"].get("merged", r["storage"]["tables"]).get(t, {}).get("comp", 0)) for r in results)
                + " |")
    cols = base["storage"]["gpu_sample_columns"]
    print("\ngpu_sample's largest columns (compressed / uncompressed): "
          + ", ".join(f"{n} {fmt_b(c)} / {fmt_b(u)}" for n, c, u in cols))

    # per GPU per year at 60 s
    gpus = base["storage"]["facts"]["gpus"]
    nodes = base["storage"]["facts"]["nodes"]
    bpr = lambda st: {t: v["comp"] / max(v["rows"], 1) for t, v in st.get("merged", st["tables"]).items()}
    bpr300 = bpr(base["storage"])
    bpr60 = bpr(calib["storage"]) if calib else {}
    per_step = YEAR_S // 60
    month_to_year = 365 / base.get("days", DAYS)  # the job tables hold the generated days' workload
    plan = [
        ("gpu_sample", per_step, "one row per GPU per minute"),
        ("node_sample", per_step / GPUS_PER_NODE, "one row per node per minute ÷ 8 GPUs"),
        ("gpu_hour", 8760, "one row per GPU per hour"),
        ("node_hour", 8760 / GPUS_PER_NODE, "per node per hour ÷ 8"),
        ("capacity_node_hour", 8760 / GPUS_PER_NODE, "per node per hour ÷ 8"),
        ("xid_event", tabs.get("xid_event", {}).get("rows", 0) / gpus * month_to_year, "demo month's rate"),
        ("slurm_job_run", tabs["slurm_job_run"]["rows"] / gpus * month_to_year, "demo month's workload"),
        ("slurm_job_step", tabs["slurm_job_step"]["rows"] / gpus * month_to_year, "demo month's workload"),
    ]
    src = f"60 s calibration ({calib['days']} days at 1×)" if calib else "300 s (no 60 s calibration run)"
    print(f"\n## Per GPU per year at 60 s sampling (merged bytes/row from the {src}; 300 s beside)\n")
    print("| table | rows / GPU / year | bytes/row at 60 s | bytes/row at 300 s | compressed / GPU / year | "
          "10,000 GPUs, 1 year: rows | compressed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    tot = 0.0
    for t, n, why in plan:
        b60 = bpr60.get(t) if t in ("gpu_sample", "node_sample", "gpu_hour", "node_hour") else None
        b = b60 if b60 is not None else bpr300.get(t, 0)
        tot += n * b
        print(f"| {t} ({why}) | {n:,.0f} | {'' if b60 is None else f'{b60:.2f}'} | {bpr300.get(t, 0):.2f} | "
              f"{fmt_b(n * b)} | {n * 1e4:,.3g} | {fmt_b(n * b * 1e4)} |")
    print(f"| **all of the above** | | | | **{fmt_b(tot)}** | | **{fmt_b(tot * 1e4)}** |")
    print(f"\n(measured on {gpus} GPUs / {nodes} nodes; 1 GB = 10^9 bytes)")
    return tot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--extrapolate", type=int, nargs="*", default=[],
                    help="scales to extrapolate from the measured ones (clearly labelled)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/bench-scaling"))
    ap.add_argument("--repeat", type=int, default=2, help="runs of each report (the best is shown)")
    ap.add_argument("--calibrate-days", type=int, default=7,
                    help="days of 60 s telemetry at 1× for the per-GPU-year bytes (0: none)")
    ap.add_argument("--keep", action="store_true", help="keep the warehouses")
    ap.add_argument("--reuse", action="store_true",
                    help="time init, the reports and storage again on the warehouses a --keep run left in --workdir "
                         "(generation and load figures are kept from its results.json; the 60 s calibration is "
                         "run again)")
    ap.add_argument("--days", type=int, default=DAYS,
                    help="days of the month generated and loaded (default 31; fewer only for a quick check)")
    ap.add_argument("--child-storage")
    a = ap.parse_args()
    if a.child_storage:
        child_storage(a.child_storage)
        return
    print(f"machine: {machine()}", flush=True)
    a.workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    t0 = time.perf_counter()
    results, calib = [], None
    save = lambda: (a.workdir / "results.json").write_text(json.dumps({"results": results, "calib": calib}, indent=1))
    if a.reuse:
        old = json.loads((a.workdir / "results.json").read_text())
        results = [r for r in old["results"] if r["k"] in a.scales]
        for r in results:
            d = a.workdir / f"x{r['k']}"
            print(f"[{r['k']}x] init and reports again on {d / 'warehouse'} ...", flush=True)
            time_reports(r, d, a.repeat, env)
            r["storage"] = storage(f"chdb://{d / 'warehouse'}", d / "log.txt", env)
            r["reports_rerun"] = True
            save()
        a.keep = True
    else:
        for k in a.scales:
            results.append(one_scale(k, a.workdir, a.repeat, env, days=a.days))
            save()  # what was measured survives a run stopped later
    if a.calibrate_days:
        calib = one_scale(1, a.workdir, a.repeat, env, step_s=60, days=a.calibrate_days, reports=False)
        save()
    per_gpu_year = table(results + [extrapolate(results, k) for k in a.extrapolate], calib)
    if calib:
        c = calib["storage"]["tables"]["gpu_sample"]
        print(f"\n60 s calibration: {c['rows']:,} gpu_sample rows loaded in {calib['load_telemetry']['s']:.1f} s "
              f"(peak RSS {calib['load_telemetry']['rss_mb']:,.0f} MB)")
    # for bench/run_all.py: the largest measured scale, how `monthly --cluster` grew (CPU s at the largest
    # scale ÷ at the smallest), and the storage per GPU per year at 60 s; figures only, no goal
    lo, hi = min(results, key=lambda r: r["k"]), max(results, key=lambda r: r["k"])
    mc = hi["monthly_cluster"]
    growth = (f" cpu_growth={mc['cpu_s'] / lo['monthly_cluster']['cpu_s']:.2f}"
              if hi is not lo and "cpu_s" in mc and "cpu_s" in lo["monthly_cluster"] else "")
    print(f"RESULT scaling k={hi['k']} days={hi.get('days', DAYS)} monthly_cluster_s={mc['s']:.1f} "
          + (f"monthly_cluster_cpu_s={mc['cpu_s']:.1f} " if "cpu_s" in mc else "")
          + f"monthly_cluster_peak_mb={mc['rss_mb']:.0f} init_s={hi['init']['s']:.1f} "
          f"telemetry_rows_per_s={hi['storage']['tables']['gpu_sample']['rows'] / hi['load_telemetry']['s']:.0f} "
          f"telemetry_peak_mb={hi['load_telemetry']['rss_mb']:.0f}{growth} mb_per_gpu_year={per_gpu_year / 1e6:.1f}")
    print(f"\nwhole run {time.perf_counter() - t0:.0f} s; raw figures in {a.workdir / 'results.json'}")
    if not a.keep:
        for p in a.workdir.glob("x*"):
            shutil.rmtree(p / "warehouse", ignore_errors=True)


if __name__ == "__main__":
    main()
