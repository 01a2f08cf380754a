"""Benchmark: the demo's nightly loads (issue 50, item 4) against the engine's bare INSERT ... SELECT of the same files.

    .venv/bin/python bench/bench_nightly.py [--days 31] [--site DIR] [--separate]
        [--against REV | --before-migration NAME | --before-python PY] [--side-by-side] [--workdir DIR]

The demo's site (114 nodes, ~900 jobs a day, 5-minute telemetry, nightly sacct extracts; generated unless
--site names one already generated) is loaded night by night as `ops-report demo` loads it
(cli/demo.py: load_nights: each night's sacct extract, then its telemetry day, the hourly grains refreshed
once a night), in a child process, timed with its peak RSS (bench/peak_rss.py). The baseline, in the same
command and on the same files: a fresh chDB session that INSERT ... SELECTs each night's sacct file and
telemetry day files as they are into MergeTree tables (what the engine takes to read and store the bytes,
with none of the product's parsing, quarantine, history or grains). With --separate, also the loads as
before issue 50 (each load refreshing its own hours), and whether the two leave every table the same
(tests/conftest.py's content checksums, the refresh times excluded). With --against REV, also the loads with
the grains' SQL (sql/intermediate/) as it was at git revision REV, in the same command, and whether every table
is the same: a change to the grains' SQL measured before and after on a loaded machine. With
--before-migration NAME (e.g. 0023_sample_day_partitions.sql), also the loads on a warehouse whose schema stops
before that migration (it and the ones after it left out: the tables as they were), every table compared: a
change of the schema measured before and after. With --before-python PY (another checkout's venv python,
e.g. a worktree of main), also the loads by that checkout's code (this file's child run by PY: its
ops_warehouse), right after this one's, every table compared: a change of the Python measured before and after
in one command. --side-by-side runs the two at the same time (each then has about half the machine: only their
ratio means anything). --workdir keeps the warehouses (product/, against/). Each child reports its process's
CPU seconds (the engine runs in it: its threads count), steadier than the wall on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

START = datetime(2026, 10, 1, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[1]


def _cluster(site: Path) -> str:
    """The site's cluster, as its first sacct extract names it (the generator's spec name)."""
    first = sorted((site / "sacct" / "nightly").glob("*.psv"))[0]
    head, row = first.read_text().splitlines()[:2]
    return row.split("|")[head.split("|").index("Cluster")]


def _grains_sql_from(folder: str) -> None:
    """This process reads sql/intermediate/ from ``folder`` (the files it holds; the rest as installed)."""
    from ops_warehouse import sqlfiles

    shipped = sqlfiles.sql_text

    def sql_text(relpath: str) -> str:
        p = Path(folder) / relpath
        return p.read_text(encoding="utf-8") if relpath.startswith("intermediate/") and p.exists() else shipped(relpath)

    sqlfiles.sql_text = sql_text


def _schema_before(name: str) -> None:
    """This process's schema leaves out migration ``name`` and the ones after it."""
    from ops_warehouse import migrations

    shipped = migrations.sql_files

    def sql_files(folder: str, root=None) -> list[tuple[str, str]]:
        found = shipped(folder, root)
        return [f for f in found if f[0] < name] if folder == "migrations" else found

    migrations.sql_files = sql_files


def child_product(site: str, wh: str, separate: bool, sql_dir: str | None = None,
                  before_migration: str | None = None) -> dict:
    if sql_dir:
        _grains_sql_from(sql_dir)
    if before_migration:
        _schema_before(before_migration)
    from ops_warehouse.cli.demo import load_nights
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    sys.path.insert(0, str(REPO))
    from bench.peak_rss import peak_rss_mb
    from tests.conftest import table_checksums

    w = open_warehouse(Config(dsn=f"chdb://{wh}"))
    cluster = _cluster(Path(site))
    t, c = time.perf_counter(), _cpu_s()
    n = load_nights(w, Path(site), cluster, one_refresh_a_night=not separate)
    seconds = time.perf_counter() - t
    cpu_s = _cpu_s() - c
    return {"seconds": seconds, "cpu_s": cpu_s, "rss_mb": peak_rss_mb(), **n,
            "checksums": {k: list(v) for k, v in table_checksums(w).items()}}


def _cpu_s() -> float:
    """This process's CPU seconds so far, user and system, every thread (the embedded engine's included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child_engine(site: str, wh: str) -> dict:
    """The engine alone: each night's files INSERT ... SELECTed as they are, into MergeTree tables."""
    import chdb.session

    sys.path.insert(0, str(REPO))
    from bench.peak_rss import peak_rss_mb

    site_p = Path(site)
    s = chdb.session.Session(wh)
    s.query("CREATE DATABASE IF NOT EXISTS b")
    nights = sorted((site_p / "sacct" / "nightly").glob("*.psv"))
    families = sorted(p.name for p in (site_p / "telemetry").iterdir() if p.is_dir() and p.name != "openmetrics")
    made: set[str] = set()
    t, c = time.perf_counter(), _cpu_s()
    for f in nights:
        todo = [("sacct", f"file('{f}', 'CSVWithNames') SETTINGS format_csv_delimiter = '|', "
                 "input_format_csv_use_best_effort_in_schema_inference = 0")]
        todo += [(fam, f"file('{p}', 'Parquet')") for fam in families
                 for p in [site_p / "telemetry" / fam / f"{f.stem}.parquet"] if p.exists()]
        for table, src in todo:
            if table not in made:
                s.query(f"CREATE TABLE b.{table} ENGINE = MergeTree ORDER BY tuple() AS SELECT * FROM {src}")
                made.add(table)
            else:
                s.query(f"INSERT INTO b.{table} SELECT * FROM {src}")
    seconds = time.perf_counter() - t
    cpu_s = _cpu_s() - c
    rows = {tbl: int(s.query(f"SELECT count() FROM b.{tbl}", "CSV").bytes().strip()) for tbl in sorted(made)}
    s.close()
    return {"seconds": seconds, "cpu_s": cpu_s, "rss_mb": peak_rss_mb(), "rows": rows}


def run(kind: str, site: Path, wh: Path, separate: bool = False, sql_dir: Path | None = None,
        before_migration: str | None = None, python: str | None = None) -> dict:
    return _wait(_start(kind, site, wh, separate, sql_dir, before_migration, python))


def _start(kind: str, site: Path, wh: Path, separate: bool = False, sql_dir: Path | None = None,
           before_migration: str | None = None, python: str | None = None):
    shutil.rmtree(wh, ignore_errors=True)
    args = [python or sys.executable, __file__, "--child", kind, "--site", str(site), "--wh", str(wh)]
    args += ["--separate"] if separate else []
    args += ["--before-migration", before_migration] if before_migration else []
    return subprocess.Popen(args + (["--sql-dir", str(sql_dir)] if sql_dir else []), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait(p) -> dict:
    out, err = p.communicate()
    if p.returncode:
        raise SystemExit(err[-3000:])
    return json.loads(out.strip().splitlines()[-1])


def _checkout_grains_sql(rev: str, folder: Path) -> Path:
    """sql/intermediate/*.sql as at ``rev``, written under ``folder``/intermediate."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", f"{rev}:sql/intermediate"],
                           capture_output=True, text=True, check=True).stdout.split()
    (folder / "intermediate").mkdir(parents=True, exist_ok=True)
    for n in names:
        text = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:sql/intermediate/{n}"],
                              capture_output=True, text=True, check=True).stdout
        (folder / "intermediate" / n).write_text(text, encoding="utf-8")
    return folder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=31)
    ap.add_argument("--jobs-per-day", type=int, default=900)
    ap.add_argument("--site", type=Path, help="a site generated before (the demo's: generate --nightly)")
    ap.add_argument("--separate", action="store_true", help="also the loads refreshing apart (before issue 50)")
    ap.add_argument("--against", metavar="REV", help="also the loads with sql/intermediate/ as at git revision REV")
    ap.add_argument("--before-migration", metavar="NAME",
                    help="also the loads with the schema before this migration (e.g. 0023_sample_day_partitions.sql)")
    ap.add_argument("--before-python", metavar="PY",
                    help="also the loads by another checkout's code: its venv's python (e.g. a worktree of main)")
    ap.add_argument("--side-by-side", action="store_true",
                    help="with --against or --before-migration: the two loads at the same time")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--sql-dir", help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=("product", "engine"))
    ap.add_argument("--wh")
    a = ap.parse_args()
    if a.child:
        if a.child == "product":
            out = child_product(str(a.site), a.wh, a.separate, a.sql_dir, a.before_migration)
        else:
            out = child_engine(str(a.site), a.wh)
        print(json.dumps(out, default=str))
        return
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-nightly-"))
    try:
        site = a.site
        if site is None:
            from ops_warehouse.generate import generate

            site = work / "site"
            if not (site / "sacct" / "nightly").is_dir():
                generate(site, start=START, days=a.days, jobs_per_day=a.jobs_per_day, seed=7, metrics_step_s=300,
                         telemetry=("parquet",), nightly=True)
        nights = len(list((site / "sacct" / "nightly").glob("*.psv")))
        print(f"site {site}: {nights} nights (sacct extract + telemetry day each); product and engine back to "
              f"back in this command, each in its own process")
        engine = run("engine", site, work / "engine")
        if sum(map(bool, (a.against, a.before_migration, a.before_python))) > 1:
            raise SystemExit("--against, --before-migration and --before-python: one at a time")
        label = (a.against or (a.before_migration and f"schema before {a.before_migration}")
                 or (a.before_python and f"code of {a.before_python}"))
        if label and a.side_by_side:  # both at once: a machine whose load changes weighs on both alike
            old_sql = _checkout_grains_sql(a.against, work / "sql-before") if a.against else None
            pair = [_start("product", site, work / "product"),
                    _start("product", site, work / "against", sql_dir=old_sql, before_migration=a.before_migration,
                           python=a.before_python)]
            product, against = (_wait(p) for p in pair)
        else:
            product = run("product", site, work / "product")
        print(f"engine INSERT ... SELECT of the files: {engine['seconds']:7.1f} s, {engine['cpu_s']:7.1f} CPU-s, "
              f"peak RSS {engine['rss_mb']:.0f} MB "
              f"({', '.join(f'{t} {n:,}' for t, n in engine['rows'].items())} rows)")
        print(f"demo's nightly loads:                 {product['seconds']:7.1f} s, {product['cpu_s']:7.1f} CPU-s, "
              f"peak RSS {product['rss_mb']:.0f} MB "
              f"({product['jobs']:,} job-run records, {product['gpu_rows']:,} GPU samples)")
        ratio = engine["seconds"] / product["seconds"]
        extra = ""
        if a.separate:
            before = run("product", site, work / "separate", separate=True)
            keep = set(product["checksums"])
            same = all(product["checksums"][k] == before["checksums"].get(k) for k in keep)
            print(f"loads refreshing apart (before):      {before['seconds']:7.1f} s, peak RSS "
                  f"{before['rss_mb']:.0f} MB; every table the same: {same}")
            if not same:
                diff = [k for k in keep if product["checksums"][k] != before["checksums"].get(k)]
                raise SystemExit(f"the two loads differ in {', '.join(diff)}")
            extra = f" separate_s={before['seconds']:.1f} same_tables={same}"
        if label:
            if a.side_by_side:
                before = against
            else:
                old_sql = _checkout_grains_sql(a.against, work / "sql-before") if a.against else None
                before = run("product", site, work / "against", sql_dir=old_sql, before_migration=a.before_migration,
                             python=a.before_python)
            # (schema_migrations differs by construction: it records the fingerprints of the grains' SQL)
            same = all(before["checksums"].get(k) == v for k, v in product["checksums"].items()
                       if k != "schema_migrations")
            what = f"grains' SQL of {a.against}" if a.against else label
            print(f"the same loads, {what}{' (side by side)' * a.side_by_side}: "
                  f"{before['seconds']:7.1f} s, {before['cpu_s']:7.1f} CPU-s, peak RSS "
                  f"{before['rss_mb']:.0f} MB; every table the same: {same}")
            if not same:
                diff = [k for k in product["checksums"] if product["checksums"][k] != before["checksums"].get(k)
                        and k != "schema_migrations"]
                raise SystemExit(f"the two loads differ in {', '.join(diff)}")
            tag = a.against or (a.before_migration and "before:" + a.before_migration) or "python:" + a.before_python
            extra += (f" against={tag} against_s={before['seconds']:.1f} against_cpu_s={before['cpu_s']:.1f} "
                      f"against_rss_mb={before['rss_mb']:.0f} same_tables={same}")
        print(f"RESULT nightly product_s={product['seconds']:.1f} engine_s={engine['seconds']:.1f} "
              f"product_cpu_s={product['cpu_s']:.1f} engine_cpu_s={engine['cpu_s']:.1f} "
              f"rss_mb={product['rss_mb']:.0f} nights={nights}{extra} ratio={ratio:.3f} goal=<=40s")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
