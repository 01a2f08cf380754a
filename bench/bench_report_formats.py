"""What each format of `ops-report monthly` costs over the report's figures (issue 51 item 6): a JSON report and
Markdown printed on the terminal show no chart, so they should cost what the marts cost; Markdown in a folder
links the charts as PNG files and HTML holds them inline, so those draw them.

Each row is a fresh child process, as the command is (wall time from spawn to exit, its own peak RSS), doing
what `ops-report monthly --cluster` does on one warehouse: import the renderers, make the report (the marts:
the engine's work, ``report_s``, measured inside the child), render the formats asked for into a fresh folder
(no chart drawn by an earlier run). The baseline is the report alone in a child (``report only``): the engine
doing the marts, with nothing rendered. The "charts imported first" rows import reports/charts.py (matplotlib)
before the report, as the renderers did until issue 51's round 3: the before, in the same command. Rows are
taken in turn within each repeat (a change of the shared machine's load falls on all of them); best of
``--repeat`` by wall time.

    python bench/bench_report_formats.py --warehouse PATH [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """import json, sys, time
sys.path.insert(0, {bench!r})
from pathlib import Path
t0, c0 = time.perf_counter(), time.process_time()
if {charts_first}:
    import ops_warehouse.reports.charts  # the renderers' import until round 3: matplotlib before the figures
from ops_warehouse.reports import monthly_render
from ops_warehouse.analytics.api import Connection
from ops_warehouse.analytics.monthly import monthly_report
from ops_warehouse.config import Config
from ops_warehouse.warehouse import open_warehouse
from peak_rss import peak_rss_mb
imported, imported_cpu = time.perf_counter(), time.process_time()
# not migrated: a warehouse whose grains an edited SQL file marks stale is read as it is, by every row alike
r = monthly_report(Connection(open_warehouse(Config(dsn="chdb://" + {warehouse!r}), migrate=False)))
made = time.perf_counter()
formats = {formats!r}
if formats == ["terminal"]:
    monthly_render.to_markdown(r)
elif formats:
    monthly_render.write(r, Path({out!r}), formats)
done = time.perf_counter()
print(json.dumps({{"import_s": imported - t0, "import_cpu_s": imported_cpu - c0, "report_s": made - imported, "render_s": done - made,
                  "rss_mb": peak_rss_mb(), "matplotlib": "matplotlib" in sys.modules}}))
"""

ROWS = [("report only", [], False), ("json", ["json"], False), ("json, charts imported first", ["json"], True),
        ("md on the terminal", ["terminal"], False), ("md on the terminal, charts imported first", ["terminal"], True),
        ("md in a folder", ["md"], False), ("html", ["html"], False), ("all", ["md", "html", "json"], False)]


def run(warehouse: str, formats: list[str], charts_first: bool) -> dict:
    with tempfile.TemporaryDirectory() as out:
        code = CHILD.format(bench=str(REPO / "bench"), charts_first=charts_first, warehouse=warehouse,
                            formats=formats, out=out)
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
    return {"wall_s": wall, **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warehouse", required=True, help="an embedded warehouse's folder (e.g. the demo's)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    best: dict[str, dict] = {}
    for _ in range(a.repeat):
        for name, formats, first in ROWS:
            m = run(a.warehouse, formats, first)
            if name not in best or m["wall_s"] < best[name]["wall_s"]:
                best[name] = m
    base = best["report only"]["wall_s"]
    print(f"{'row':44} {'wall s':>7} {'import s':>8} {'(CPU s)':>8} {'report s':>8} {'render s':>8} {'RSS MB':>7} "
          "matplotlib")
    for name, m in best.items():
        print(f"{name:44} {m['wall_s']:7.2f} {m['import_s']:8.2f} {m['import_cpu_s']:8.2f} {m['report_s']:8.2f} "
              f"{m['render_s']:8.2f} {m['rss_mb']:7.0f} {m['matplotlib']}")
    for name, m in best.items():
        if name != "report only":
            print(f"RESULT report_format[{name}] wall_s={m['wall_s']:.2f} baseline_report_only_s={base:.2f} "
                  f"ratio={m['wall_s'] / base:.2f} import_cpu_s={m['import_cpu_s']:.2f} rss_mb={m['rss_mb']:.0f} "
                  f"baseline_rss_mb={best['report only']['rss_mb']:.0f}")


if __name__ == "__main__":
    main()
