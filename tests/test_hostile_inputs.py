"""Every hostile fixture through every loader, then every writer over what landed (issue 27).

The fixtures are the hand-made files of tests/data/hostile/ (issue 27's cases: clock skew, two layouts, a cut
last line, traversal names) and tests/fuzz_corpus/ (the parsers' fuzz findings: invalid UTF-8, NUL bytes,
hostlist bombs, truncated JSON, absurd dates). Each file goes to each of the seven file loaders, whatever it
was made for — an operator who passes the wrong file to the wrong command is the common case. A loader may
load, quarantine or refuse a file, never raise anything but a one-line error (OpsError: what `ops-report`
prints as one line; anything else reaches the user as a traceback). Then the monthly report (every format)
and the export run for every cluster and project of an odd name that landed, and no file may appear outside
their --out.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.carbon_intensity import load_carbon_intensity
from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.vm_export_source import load_vm_export
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.cli_runner import cli
from tests.conftest import DATA, REPO

pytestmark = pytest.mark.slow  # ~60 files x 7 loaders, then the writers: docs/testing.md

FIXTURES = sorted(p for folder in (DATA / "hostile", REPO / "tests" / "fuzz_corpus") for p in folder.iterdir()
                  if p.is_file() and p.suffix not in (".md",) and p.name != "expected.json")
DAY = date(2026, 10, 1)
LOADERS = {
    "sacct": lambda wh, p: load_sacct(wh, p),
    "inventory": lambda wh, p: load_capacity(wh, inventory=p, cluster="h1"),
    "events": lambda wh, p: load_capacity(wh, events=p, cluster="h1"),
    "reservations": lambda wh, p: load_capacity(wh, reservations=p, cluster="h1"),
    "openmetrics": lambda wh, p: load_text_files(wh, [p], DAY, DAY, at=datetime(2026, 10, 1, 12, tzinfo=timezone.utc),
                                                 cluster="h1"),
    "vm-export": lambda wh, p: load_vm_export(wh, p, DAY, DAY, cluster="h1"),
    "carbon": lambda wh, p: load_carbon_intensity(wh, p, cluster="h1"),
}


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_every_hostile_file_through_every_loader_and_writer(tmp_path):
    assert len(FIXTURES) >= 50
    # --out lies four folders down, so that a name with ../../../.. that escaped it would land in tmp_path
    out = tmp_path / "a" / "b" / "c" / "d" / "out"
    dsn = f"chdb://{tmp_path / 'wh'}"
    wh = open_warehouse(Config(dsn=dsn))
    tracebacks, outcomes = [], {"loaded": 0, "refused": 0}
    try:
        for p in FIXTURES:
            for name, load in LOADERS.items():
                try:
                    load(wh, p)
                    outcomes["loaded"] += 1
                except OpsError as e:
                    assert str(e).strip() and "\n" not in str(e).strip(), (p.name, name, str(e))
                    outcomes["refused"] += 1
                except Exception as e:  # what would reach the user as a traceback
                    tracebacks.append(f"{name} {p.name}: {type(e).__name__}: {str(e)[:200]}")
        clusters = [r[0] for r in wh.query_rows("SELECT DISTINCT cluster FROM slurm_job_run ORDER BY cluster")]
        projects = {c: [r[0] for r in wh.query_rows(
            "SELECT DISTINCT project FROM fct_job_run WHERE cluster = {c:String} ORDER BY project", {"c": c})]
            for c in clusters}
    finally:
        wh.close()
        close_embedded()
    assert not tracebacks, "\n".join(tracebacks)
    assert outcomes["loaded"] > 0 and outcomes["refused"] > 0, outcomes
    assert "../../../var/x" in clusters, clusters

    before = _files(tmp_path)
    failed = []
    # the writers for the names that are not plain file names (the ones a writer could misplace: a plain name
    # goes the same way through the same code, tests/test_security.py)
    plain = lambda name: name.replace("-", "").replace("_", "").isalnum()  # noqa: E731
    for c in clusters:
        odd = [p for p in projects[c] if not plain(p)]
        if plain(c) and not odd:
            continue
        runs = [("monthly", "--cluster", "--slurm-cluster", c, "--format", "all", "--out", str(out)),
                ("export", "--slurm-cluster", c, "--out", str(out))]
        runs += [("export", "--slurm-cluster", c, "--project", p, "--out", str(out)) for p in odd[:3]]
        for args in runs:
            r = cli("--warehouse", dsn, *args, check=False)
            text = r.stdout + r.stderr
            if "Traceback" in text or (r.returncode != 0 and r.stderr.strip().count("\n") > 0):
                failed.append(f"{' '.join(args)} -> {r.returncode}: {text[-500:]}")
    assert not failed, "\n".join(failed)
    written = _files(tmp_path) - before
    outside = sorted(str(p.relative_to(tmp_path)) for p in written
                     if out not in p.parents and (tmp_path / "wh") not in p.parents)
    assert not outside, outside
    assert any(p.suffix == ".parquet" for p in written) and any(p.suffix == ".html" for p in written)
