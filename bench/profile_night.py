"""Profile one night of the demo's nightly loads statement by statement (issue 50, item 4).

    .venv/bin/python bench/profile_night.py --site DIR [--night 6] [--top 40] [--workdir DIR]

The site is one `generate --nightly` made (the demo's, or bench_nightly.py's). Nights 1..N-2 are loaded into a
fresh embedded warehouse as `ops-report demo` loads them (cli/demo.py: load_nights), not timed; in the same
process night N-1 is loaded unprofiled, so that imports and first-use costs are paid before, as the demo's 31
nights pay them once; then night N, with every call into the engine timed: wall (time.perf_counter) and the
process's CPU (getrusage: the engine runs in this process, so its threads and background merges count). The
CPU figure is the steadier one on a shared machine. Prints each phase (sacct, telemetry, the one refresh at the
night's end) and the statements by CPU, grouped by their first words (string literals masked).
"""

from __future__ import annotations

import argparse
import collections
import re
import resource
import sys
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _caller() -> str:
    """The innermost two functions of the package that led to this engine call (the warehouse's wrappers and
    the helpers that only pass a statement on left out), e.g. ``grains._refresh_hours<grains.refresh_pending``."""
    names, f = [], sys._getframe(2)
    while f is not None and len(names) < 2:
        mod = f.f_globals.get("__name__", "")
        if mod.startswith("ops_warehouse.") and not mod.endswith(".warehouse"):
            name = f"{mod.rsplit('.', 1)[-1]}.{f.f_code.co_name}"
            if f.f_code.co_name == "_run_file":
                name += f"({f.f_locals.get('name')})"
            names.append(name)
        f = f.f_back
    return "<".join(names) or "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, required=True)
    ap.add_argument("--night", type=int, default=6, help="the night profiled (1-based; at least 2)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--by-caller", action="store_true",
                    help="also the calls grouped by who made them (the innermost two functions of the package)")
    a = ap.parse_args()
    from ops_warehouse.cli.demo import load_nights
    from ops_warehouse.config import Config
    from ops_warehouse.etl.grains import one_refresh
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.warehouse import open_warehouse

    nights = sorted((a.site / "sacct" / "nightly").glob("*.psv"))
    if not 2 <= a.night <= len(nights):
        raise SystemExit(f"--night must be 2..{len(nights)}: the site has {len(nights)} nights")
    first = nights[0].read_text().splitlines()[:2]
    cluster = first[1].split("|")[first[0].split("|").index("Cluster")]
    work = a.workdir or Path(tempfile.mkdtemp(prefix="profile-night-"))
    site = work / "site"  # the first N-2 nights only, for load_nights
    (site / "sacct" / "nightly").mkdir(parents=True, exist_ok=True)
    for f in nights[:a.night - 2]:
        shutil.copy(f, site / "sacct" / "nightly" / f.name)
    if not (site / "telemetry").exists():
        (site / "telemetry").symlink_to((a.site / "telemetry").resolve())
    try:
        wh = open_warehouse(Config(dsn=f"chdb://{work / 'wh'}"))
        load_nights(wh, site, cluster)

        def night(f: Path) -> None:
            d = date.fromisoformat(f.stem)
            load_sacct(wh, f, source=f"nightly/{f.name}")
            phase[0] = "telemetry"
            load_parquet_dir(wh, a.site, d, d, cluster=cluster)
            phase[0] = "refresh"

        phase = ["sacct"]
        with one_refresh(wh):
            night(nights[a.night - 2])
        stats: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])
        callers: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])
        client = wh.client
        for meth in ("command", "query", "query_arrow", "raw_query", "raw_insert", "insert_arrow"):
            fn = getattr(client, meth, None)
            if fn is None:
                continue

            def timed(*args, _fn=fn, _meth=meth, **kw):
                t, c = time.perf_counter(), _cpu_s()
                try:
                    return _fn(*args, **kw)
                finally:
                    sql = args[0] if args and isinstance(args[0], str) else _meth
                    key = f"{phase[0]:9s} " + re.sub(r"'[^']*'", "'?'", " ".join(sql.split()))[:100]
                    dw, dc = time.perf_counter() - t, _cpu_s() - c
                    for s in (stats[key], callers[f"{phase[0]:9s} {_caller()}"]):
                        s[0] += 1
                        s[1] += dw
                        s[2] += dc

            setattr(client, meth, timed)
        phase[0] = "sacct"
        t0 = time.perf_counter()
        with one_refresh(wh):
            night(nights[a.night - 1])
        wall = time.perf_counter() - t0
        print(f"night {a.night} ({nights[a.night - 1].stem}) of {a.site}: {wall:.2f} s wall, "
              f"{sum(s[0] for s in stats.values())} engine calls")
        for ph in ("sacct", "telemetry", "refresh"):
            rows = [s for k, s in stats.items() if k.startswith(ph)]
            print(f"PROFILE phase={ph} calls={sum(s[0] for s in rows)} wall_s={sum(s[1] for s in rows):.2f} "
                  f"cpu_s={sum(s[2] for s in rows):.2f}")
        print(f"{'wall s':>7} {'CPU s':>7} {'calls':>5}  phase     statement")
        for k, (n, w, c) in sorted(stats.items(), key=lambda kv: -kv[1][2])[:a.top]:
            print(f"{w:7.3f} {c:7.3f} {n:5d}  {k}")
        if a.by_caller:
            print(f"{'wall s':>7} {'CPU s':>7} {'calls':>5}  phase     caller")
            for k, (n, w, c) in sorted(callers.items(), key=lambda kv: -kv[1][2]):
                print(f"{w:7.3f} {c:7.3f} {n:5d}  {k}")
        wh.close()
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
