"""Which report marts give different results when evaluated twice on the same warehouse (the engine adds floats
in whatever order its threads finish), and what the exact sums cost: each window mart of the monthly report
evaluated N times on the small generated week (tests/sites.py), its values compared exactly (each float's bits).

    OPS_TEST_SITES=/tmp/sites python bench/bench_deterministic_marts.py [--repeat 4] [--marts energy,job_energy]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--marts", default="")
    # the small week fits one block: smaller blocks on more threads make the engine add in parts, as a month does
    ap.add_argument("--block-rows", type=int, default=64)
    ap.add_argument("--threads", type=int, default=4)
    a = ap.parse_args()
    from ops_warehouse.analytics import declarations
    from ops_warehouse.analytics.marts import run_file
    from tests.sites import SMALL_WEEK, open_site, small_week

    site = small_week(None)
    names = a.marts.split(",") if a.marts else [n for n in declarations.reported()
                                                  if declarations.mart(n).kind == "window"]
    with tempfile.TemporaryDirectory() as tmp:
        wh = open_site(site, Path(tmp))
        cluster = site.facts["cluster"]
        wh.command(f"SET max_block_size = {a.block_rows}")
        wh.command(f"SET max_threads = {a.threads}")
        differ = []
        for name in names:
            outs, t = [], time.perf_counter()
            for _ in range(a.repeat):
                df = run_file(wh, f"marts/{name}.sql", cluster=cluster, window=SMALL_WEEK)
                outs.append(repr([[v.hex() if isinstance(v, float) else v for v in df[c].to_list()] for c in df.columns]))
            per_s = (time.perf_counter() - t) / a.repeat
            same = len(set(outs)) == 1
            if not same:
                differ.append(name)
            print(f"{name:28s} rows={df.height:6d} {'same' if same else 'DIFFERS'} {per_s:.3f} s/evaluation")
        print(f"RESULT marts_differing={len(differ)} {','.join(differ)}")


if __name__ == "__main__":
    main()
