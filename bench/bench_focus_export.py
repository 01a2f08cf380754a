"""Benchmark: `ops-report export --format focus` (the mart focus_cost, then Parquet and CSV) against the
chargeback it restates (the mart chargeback alone, through the same engine), back to back in one process on a
copy of one warehouse, so that the shared machine's load falls on both alike.

    .venv/bin/python bench/bench_focus_export.py --warehouse ~/.cache/ops-warehouse/bench-monthly-n32-d31-<checkout>/warehouse
                                                [--month 2026-10] [--repeat 3]

Prints one RESULT line per repetition and the best of each: focus_s (export_focus: mart, Parquet, CSV,
manifest), baseline_s (run_mart chargeback for the same window, its cost mart included), the ratio
baseline ÷ FOCUS (bench/run_all.py's convention: above 1 the product is faster), the rows, and this
process's peak RSS (bench/peak_rss.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peak_rss import peak_rss_mb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", required=True, type=Path, help="a loaded embedded warehouse folder (copied)")
    ap.add_argument("--month", default="2026-10")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-focus-"))
    try:
        shutil.copytree(a.warehouse, tmp / "warehouse", symlinks=True)  # reads only, but never the original
        # a warehouse built by earlier code is refused for reading until its grains are rebuilt: not timed
        subprocess.run([sys.executable, "-c", "from ops_warehouse.cli.main import main; main()", "init"],
                       env={**os.environ, "OPS_WAREHOUSE": f"chdb://{tmp / 'warehouse'}"}, check=True,
                       stdout=subprocess.DEVNULL)
        bench(tmp, a.month, a.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench(tmp: Path, month: str, repeat: int) -> None:
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.export import export_focus
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.config import Config

    api = Connection(Config(dsn=f"chdb://{tmp / 'warehouse'}"))
    best_focus = best_base = float("inf")
    with api.session() as w:
        per = api.period(month)
        for i in range(repeat):
            t = time.perf_counter()
            base = run_mart(w, "chargeback", cluster=per.cluster, window=(per.start, per.end))
            base_s = time.perf_counter() - t
            t = time.perf_counter()
            m = export_focus(api, tmp / f"out{i}", per)
            focus_s = time.perf_counter() - t
            best_focus, best_base = min(best_focus, focus_s), min(best_base, base_s)
            print(f"RESULT focus_export_run{i} focus_s={focus_s:.3f} baseline_s={base_s:.3f} "
                  f"ratio={base_s / focus_s:.2f} rows={m['rows']} chargeback_rows={base.height}", flush=True)
    print(f"RESULT focus_export cluster={per.cluster} month={per.month} best_focus_s={best_focus:.3f} "
          f"best_baseline_s={best_base:.3f} ratio={best_base / best_focus:.2f} peak_rss_mb={peak_rss_mb():.0f}")


if __name__ == "__main__":
    main()
