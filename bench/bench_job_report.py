"""Benchmark: `ops-report job` for 5 jobs and the users' per-GPU reads (user_resources) over a month, each beside
the engine's bare read of the same samples, measured in one command (issue 52, engineer H's round 4).

    .venv/bin/python bench/bench_job_report.py [--site DIR] [--month DIR] [--old-run-gpus OLD.sql] [--rounds 3]

--site: a generated site of tests/test_job_report.py's planted module (default: the newest cached
job-plants-* under ~/.cache/ops-warehouse/test-sites); --month: bench/bench_monthly.py's prepared month (default
~/.cache/ops-warehouse/bench-monthly-n32-d31-<checkout>; '' skips it). Each part runs in a fresh child on a copy (peak RSS
is the child's own, bench/peak_rss.py):

1. job: job_report (the four marts in one each_mart_once block) for 5 planted jobs; then run_gpus alone as
   shipped and, with --old-run-gpus, as the old text, one after the other in each round; and the engine alone:
   count and sum of the jobs' nodes' samples over the same window (what run_gpus must read at least).
2. month: user_resources over October of --project (job_detail over every run, through run_gpus over every GPU
   sample) as shipped and, with --old-run-gpus, with the old run_gpus inlined instead; rows the engine read
   (system.events SelectedRows); the engine alone: the month's samples of the project's nodes grouped per node
   and GPU (max memory used, the read user_resources needs at least).
Best of --rounds; the shared 2-core machine is noisy, so old and new alternate within each round.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from month_cache import month_workdir  # noqa: E402  bench/month_cache.py

OCT = (datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, tzinfo=timezone.utc))


def _open(src: Path, tmp: Path):
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse
    from tests.sites import PROJECTS

    dest = tmp / "warehouse"
    shutil.copytree(src, dest, symlinks=True)
    cfg = Config(dsn=f"chdb://{dest}")
    cfg.projects = PROJECTS
    return open_warehouse(cfg)


def _texts(name: str, old_file: str) -> dict[str, str]:
    """Mart ``name`` as shipped and, with ``old_file``, with run_gpus' old text inlined where the new one is."""
    from ops_warehouse.sqlfiles import _inline, split_statements, sql_query, unordered

    new = sql_query(f"marts/{name}.sql")
    texts = {"new": new}
    if old_file:
        old_rg = _inline(split_statements(Path(old_file).read_text())[0].rstrip().rstrip(";"),
                         "marts/run_gpus.sql", ())
        new_rg = sql_query("marts/run_gpus.sql")
        if name == "run_gpus":
            texts["old"] = old_rg
        else:
            assert unordered(new_rg) in new, "run_gpus is not inlined as a whole"
            texts["old"] = new.replace(unordered(new_rg), unordered(old_rg))
    return texts


def _rows_read(wh) -> int:
    return wh.query_rows("SELECT value FROM system.events WHERE event = 'SelectedRows'")[0][0]


def child_job(site: Path, old_file: str, rounds: int) -> dict:
    import polars as pl
    from ops_warehouse.analytics import marts
    from ops_warehouse.analytics.job import job_report, job_window
    from peak_rss import peak_rss_mb

    cluster = json.loads((site / "facts.json").read_text())["cluster"]
    truth = pl.read_parquet(site / "truth" / "efficiency.parquet")
    jobs = truth.filter(pl.col("kind") != "idle_user")["job_id"].unique().sort().head(5).to_list()
    with tempfile.TemporaryDirectory() as tmp:
        wh = _open(site / "warehouse", Path(tmp))
        texts = _texts("run_gpus", old_file)
        best = {"report": float("inf"), "bare": float("inf"), **{k: float("inf") for k in texts}}
        same = True
        for _ in range(rounds):
            t = time.perf_counter()
            for j in jobs:
                job_report(wh, j, cluster)
            best["report"] = min(best["report"], time.perf_counter() - t)
            got = {}
            for k, sql in texts.items():
                t, got[k] = time.perf_counter(), []
                for j in jobs:
                    w = job_window(wh, j, cluster)
                    p = marts._params(wh, cluster, w, "", {"job_id": j})
                    got[k].append(sorted(map(repr, wh.query_rows(sql, marts._bound(sql, p)))))
                best[k] = min(best[k], time.perf_counter() - t)
            same = same and (len(got) == 1 or _close(got["new"], got["old"]))
            t = time.perf_counter()
            for j in jobs:
                w = job_window(wh, j, cluster)
                wh.query_rows(
                    "SELECT count(), sum(gpu_util_pct), max(fb_used_mib) FROM gpu_sample FINAL"
                    " WHERE cluster = {c:String} AND ts >= {f:DateTime('UTC')} AND ts < {t:DateTime('UTC')}"
                    " AND node IN (SELECT arrayJoin(nodes) FROM fct_job_run WHERE cluster = {c:String}"
                    " AND job_id = {j:String})", {"c": cluster, "f": w[0], "t": w[1], "j": j})
            best["bare"] = min(best["bare"], time.perf_counter() - t)
        return {"jobs": jobs, "best": best, "same_rows": same, "peak_rss_mb": peak_rss_mb()}


def _close(a, b) -> bool:
    # the rows as text: the new statement adds a sample's hour pieces in another order (last-bit differences)
    import re

    num = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")

    def norm(rows):
        return [num.sub(lambda m: f"{float(m.group()):.9g}", r) for part in rows for r in part]

    return norm(a) == norm(b)


def child_month(month: Path, old_file: str, rounds: int, project: str, which: str) -> dict:
    from ops_warehouse.analytics import marts
    from peak_rss import peak_rss_mb

    cluster = (month / "cluster").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        wh = _open(month / "warehouse", Path(tmp))
        p = marts._params(wh, cluster, OCT, project, {})
        if which == "bare":
            sql = ("SELECT node, gpu, max(fb_used_mib), count() FROM gpu_sample FINAL WHERE cluster = {cluster:String}"
                   " AND ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node IN (SELECT"
                   " arrayJoin(nodes) FROM fct_job_run WHERE cluster = {cluster:String} AND project = {project:String}"
                   " AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')})"
                   " GROUP BY node, gpu")
        else:
            sql = _texts("user_resources", old_file)[which]
        best, rows, read = float("inf"), None, 0
        for _ in range(rounds):
            r0, t = _rows_read(wh), time.perf_counter()
            rows = wh.query_rows(sql, marts._bound(sql, p))
            best, read = min(best, time.perf_counter() - t), _rows_read(wh) - r0
        return {"seconds": best, "rows_read": read, "rows": [repr(r) for r in rows],
                "peak_rss_mb": peak_rss_mb()}


def _child(common: list[str], *args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *common, "--child", *args], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    cache = Path.home() / ".cache" / "ops-warehouse"
    sites = sorted((cache / "test-sites").glob("job-plants-*[0-9a-f]"), key=lambda p: p.stat().st_mtime)
    ap.add_argument("--site", default=str(sites[-1]) if sites else "")
    ap.add_argument("--month", default=str(month_workdir(32, 31)))
    ap.add_argument("--old-run-gpus", default="")
    ap.add_argument("--project", default="A")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--month-rounds", type=int, default=1)
    ap.add_argument("--child", nargs="+")
    a = ap.parse_args()
    if a.child:
        kind, *rest = a.child
        res = (child_job(Path(a.site), a.old_run_gpus, a.rounds) if kind == "job"
               else child_month(Path(a.month), a.old_run_gpus, a.month_rounds, a.project, rest[0]))
        print(json.dumps(res))
        return
    common = ["--site", a.site, "--month", a.month, "--old-run-gpus", a.old_run_gpus, "--project", a.project,
              "--rounds", str(a.rounds), "--month-rounds", str(a.month_rounds)]
    if a.site:
        j = _child(common, "job")
        b = j["best"]
        print(f"RESULT job_report jobs={len(j['jobs'])} product_s={b['report']:.3f} engine_bare_s={b['bare']:.3f} "
              f"ratio={b['report'] / b['bare']:.1f} peak_rss_mb={j['peak_rss_mb']:.0f}")
        if "old" in b:
            print(f"RESULT run_gpus jobs={len(j['jobs'])} new_s={b['new']:.3f} old_s={b['old']:.3f} "
                  f"speedup={b['old'] / b['new']:.2f} same_rows={j['same_rows']}")
    if a.month:
        res = {w: _child(common, "month", w) for w in ["bare", "new"] + (["old"] if a.old_run_gpus else [])}
        line = (f"RESULT user_resources project={a.project} month=2026-10 new_s={res['new']['seconds']:.2f} "
                f"engine_bare_s={res['bare']['seconds']:.2f} new_rows_read={res['new']['rows_read']} "
                f"bare_rows_read={res['bare']['rows_read']} new_peak_rss_mb={res['new']['peak_rss_mb']:.0f}")
        if "old" in res:
            same = _close([res["new"]["rows"]], [res["old"]["rows"]])
            line += (f" old_s={res['old']['seconds']:.2f} old_rows_read={res['old']['rows_read']} "
                     f"old_peak_rss_mb={res['old']['peak_rss_mb']:.0f} same_rows={same}")
        print(line)


if __name__ == "__main__":
    main()
