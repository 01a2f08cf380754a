"""The demo's stages after its nightly loads (issue 51, item 3), each as the demo runs it now beside the way
it ran before, in one command on a copy of a loaded demo warehouse (`ops-report demo --dir DIR` once):

  capacity   load_capacity of the demo's inventory, events and reservations: the hourly models that read
             them (now) vs every grain over the month (before: run_sample_hour, run_telemetry, job_run of every
             job and gpu_day of every day too)
  kernel     load_kernel_log of the demo's kernel logs (unchanged; its time for the budget)
  summaries  the demo's stage (cli/demo.py write_summaries: four summaries, the telemetry by cluster and by
             GPU model from one query) vs a telemetry call per grouping (before: the samples read twice); the
             files both write compared byte for byte
  reports    cli/demo.py's write_reports: the monthly reports (--cluster, --project A; md + html + json) and the
             Parquet exports in one block of evaluated marts, --rounds times, with the seconds spent writing the
             reports' files (round 3 compared the shared block with a block each, round 4 at a4b7858 the files
             written by a forked process beside the next marts and the exports: dropped, slower here)
  charts     the two reports' files written (md + html + json: every chart drawn as SVG), --rounds times,
             the fastest counted; the reports' figures made once beforehand (until round 10 it compared the
             charts drawn by forked workers with one after the other: SVG takes milliseconds, no workers)

    .venv/bin/python bench/bench_demo_stages.py --dir /tmp/k51/demo [--profile] [--stages summaries]
        [--telemetry-before REV]

--telemetry-before REV: the summaries' "before" runs its per-grouping calls with sql/marts/telemetry.sql as it
was at git revision REV (issue 51 round 3: the mart that read the samples three times).

Prints a RESULT line per stage (seconds now, before, ratio before ÷ now) and, with --profile, the slowest SQL
statements of each "now" (time.perf_counter around the client's calls). The machine is shared: both sides run
back to back in this one process, before first."""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import date
from pathlib import Path

STATS: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])


def _profile_client() -> None:
    """Time every statement the warehouse's client sends (wrapped at the class: chDB's and the server's)."""
    from clickhouse_connect.driver import _backendclient, client as cc

    for cls, meth in ((c, m) for c in (cc.Client, _backendclient.SyncBackendClient)
                      for m in ("command", "query", "query_arrow", "raw_query", "insert", "insert_arrow")):
        f = cls.__dict__.get(meth)
        if f is None:
            continue

        def timed(self, *a, _f=f, _m=meth, **k):
            t = time.perf_counter()
            try:
                return _f(self, *a, **k)
            finally:
                sql = a[0] if a and isinstance(a[0], str) else _m
                s = STATS[" ".join(sql.split())[:110]]
                s[0] += 1
                s[1] += time.perf_counter() - t
        setattr(cls, meth, timed)


@contextmanager
def _profiled(label: str, on: bool):
    STATS.clear()
    yield
    if on:
        for k, (n, s) in sorted(STATS.items(), key=lambda kv: -kv[1][1])[:8]:
            print(f"  {label}: {s:7.2f} s {n:4d}x  {k}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/k51/demo"), help="a loaded demo folder")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--stages", default="capacity,kernel,summaries,reports", help="comma-separated, in the demo's order")
    ap.add_argument("--telemetry-before", metavar="REV", help="the summaries' before: the telemetry mart at git REV")
    ap.add_argument("--rounds", type=int, default=3, help="charts: rounds (the fastest counts)")
    a = ap.parse_args()
    stages = set(a.stages.split(","))
    if a.profile:
        _profile_client()
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.marts import each_mart_once
    from ops_warehouse.analytics.monthly import monthly_report
    from ops_warehouse.analytics.summary import summary
    from ops_warehouse.analytics.telemetry import telemetry
    from ops_warehouse.cli import demo as demo_module
    from ops_warehouse.cli.demo import DEMO_START, VIEWS, write_summaries
    from ops_warehouse.config import Config
    from ops_warehouse.etl import grains
    from ops_warehouse.etl import capacity_sources
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.kernel_log_xid import load_kernel_log
    from ops_warehouse.reports.monthly_render import write
    from ops_warehouse.warehouse import open_warehouse

    data = a.dir / "data"
    tmp = Path(tempfile.mkdtemp(prefix="bench-demo-"))
    shutil.copytree(a.dir / "warehouse", tmp / "warehouse", symlinks=True)  # chDB links its metadata relatively
    cfg = Config(dsn=f"chdb://{tmp / 'warehouse'}")
    cfg.projects = {f"proj{c}": c.upper() for c in "abcdef"}
    cfg.whatif = [{"name": "16 more H200 nodes", "add": ["h200:16"]}]
    wh = open_warehouse(cfg)
    cluster = "ai1"
    last = date(2026, 10, 31)
    month = DEMO_START.replace(day=1)

    def capacity():
        return load_capacity(wh, inventory=data / "inventory.csv", events=data / "slurm" / "events.psv",
                             reservations=data / "slurm" / "reservations.txt", cluster=cluster)

    def everything(wh_, **_):  # before: a capacity load refreshed the whole history of every grain
        return grains.refresh_history(wh_)

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    if "capacity" in stages:
        real = capacity_sources.refresh_history
        capacity_sources.refresh_history = everything
        try:
            before = timed(capacity)
        finally:
            capacity_sources.refresh_history = real
        with _profiled("capacity", a.profile):
            now = timed(capacity)
        print(f"RESULT demo_capacity now_s={now:.2f} before_s={before:.2f} ratio={before / now:.2f}", flush=True)

    if "kernel" in stages:
        with _profiled("kernel", a.profile):
            now = timed(lambda: load_kernel_log(wh, sorted((data / "logs" / "kernel").glob("*.log")), cluster=cluster))
        print(f"RESULT demo_kernel_logs now_s={now:.2f}", flush=True)

    def views(out_dir: Path):
        out_dir.mkdir(parents=True, exist_ok=True)
        write_summaries(wh, out_dir, DEMO_START, last)

    def per_grouping(wh_, first, last_, bys):  # before: a telemetry call per grouping, each reading the samples
        return {by: telemetry(wh_, first, last_, by) for by in bys}

    def views_before(out_dir: Path):
        from ops_warehouse.analytics import telemetry as tel_module

        real_groupings, real_text = demo_module.telemetry_groupings, tel_module.sql_text
        demo_module.telemetry_groupings = per_grouping
        if a.telemetry_before:
            old = subprocess.run(["git", "show", f"{a.telemetry_before}:sql/marts/telemetry.sql"], check=True,
                                 capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent).stdout
            tel_module.sql_text = lambda rel: old if rel == "marts/telemetry.sql" else real_text(rel)
        try:
            views(out_dir)
        finally:
            demo_module.telemetry_groupings, tel_module.sql_text = real_groupings, real_text

    if "summaries" in stages:
        before = timed(lambda: views_before(tmp / "summaries_before"))
        with _profiled("summaries", a.profile):
            now = timed(lambda: views(tmp / "summaries_now"))
        files = sorted(p.name for p in (tmp / "summaries_now").iterdir())
        differ = [f for f in files if (tmp / "summaries_now" / f).read_bytes()
                  != (tmp / "summaries_before" / f).read_bytes()]
        print(f"summaries: {len(files)} files, {len(files) - len(differ)} byte for byte the same before and now"
              + (f"; differ: {', '.join(differ)}" if differ else ""), flush=True)
        print(f"RESULT demo_summaries now_s={now:.2f} before_s={before:.2f} ratio={before / now:.2f}", flush=True)

    out = tmp / "out"

    def reports(k: int) -> float:
        """The stage (cli/demo.py write_reports) into a fresh folder, every chart drawn; the seconds spent in
        writing the files (drawing the charts, rendering md/html/json)."""
        real_write, inside = demo_module.write, [0.0]

        def timed_write(*args, **kw):
            t = time.perf_counter()
            real_write(*args, **kw)
            inside[0] += time.perf_counter() - t

        demo_module.write = timed_write
        try:
            demo_module.write_reports(wh, out / f"round-{k}", tmp / "exports", month, cluster)
        finally:
            demo_module.write = real_write
        return inside[0]

    if "reports" in stages:
        for k in range(a.rounds):
            with _profiled("reports", a.profile):
                t = time.perf_counter()
                writing = reports(k)
            wall = time.perf_counter() - t
            print(f"RESULT demo_reports_exports round={k} s={wall:.2f} writing_files_s={writing:.2f} "
                  f"(the marts and exports {wall - writing:.2f})", flush=True)
    if "replays" in stages:
        import resource

        from ops_warehouse.analytics import whatif as whatif_module
        def cpu() -> float:
            own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
            return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

        kept = whatif_module.kept_in_block
        best = {"before": [float("inf")] * 2, "now": [float("inf")] * 2}
        for k in range(a.rounds):
            for way in ("before", "now"):
                whatif_module.kept_in_block = kept if way == "now" else (lambda wh_: None)
                t, c = time.perf_counter(), cpu()
                try:
                    demo_module.write_reports(wh, tmp / f"replays-{way}-{k}", tmp / f"exports-{way}-{k}", month,
                                              cluster)
                finally:
                    whatif_module.kept_in_block = kept
                wall, used = time.perf_counter() - t, cpu() - c
                best[way] = [min(best[way][0], wall), min(best[way][1], used)]
                print(f"replays round={k} {way}: wall {wall:.2f} s, CPU {used:.2f} s", flush=True)

        def stamped(b: bytes) -> bytes:  # the text before the "Generated" stamp (json: without generated_at)
            return b"\n".join(ln for ln in b.split(b"\n") if b'"generated_at"' not in ln and b"Generated " not in ln)

        def rounded(v):  # the engine sums floats in the order its threads finish: the last digits vary run to run
            if isinstance(v, float):
                return float(f"{v:.9g}")
            if isinstance(v, dict):
                return {k: rounded(x) for k, x in v.items() if k != "generated_at"}
            return [rounded(x) for x in v] if isinstance(v, list) else v

        def compared(x: str, y: str) -> None:
            """Every file of run x against run y's: md, html and PNG byte for byte (after the stamp); json
            byte for byte after the stamp, and else its values with floats to 9 significant digits."""
            import json

            files = sorted(p.relative_to(tmp / x) for p in (tmp / x).rglob("*") if p.is_file())
            same, close, differ = 0, [], []
            for f in files:
                old, new = ((tmp / d / f).read_bytes() for d in (y, x))
                if stamped(old) == stamped(new):
                    same += 1
                elif f.suffix == ".json" and rounded(json.loads(old)) == rounded(json.loads(new)):
                    close.append(str(f))
                else:
                    differ.append(str(f))
            print(f"{x} against {y}: {len(files)} files, {same} the same bytes"
                  + (f"; the same to 9 digits: {', '.join(close)}" if close else "")
                  + (f"; DIFFER: {', '.join(differ)}" if differ else ""), flush=True)

        compared("replays-now-0", "replays-before-0")
        if a.rounds > 1:  # what differs between two runs of the same code: the engine's float sums
            compared("replays-before-1", "replays-before-0")
        (b_wall, b_cpu), (n_wall, n_cpu) = best["before"], best["now"]
        print(f"RESULT demo_reports_replays now_s={n_wall:.2f} before_s={b_wall:.2f} ratio={b_wall / n_wall:.2f} "
              f"now_cpu_s={n_cpu:.2f} before_cpu_s={b_cpu:.2f}", flush=True)
    if "charts" in stages:
        with each_mart_once(wh):
            reps = [monthly_report(Connection(wh), month=month, project=p, cluster=cluster) for p in (None, "A")]
        best = float("inf")
        for k in range(a.rounds):
            t = time.perf_counter()
            for r in reps:
                write(r, tmp / f"charts-{k}", ["md", "html", "json"])
            best = min(best, time.perf_counter() - t)
        print(f"RESULT demo_report_files s={best:.2f}", flush=True)
    wh.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
