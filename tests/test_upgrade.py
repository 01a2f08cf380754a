"""Upgrades: a warehouse built by an earlier version of this repository, opened with today's `ops-report init`,
gives the reports a fresh load of the same files gives (every figure of the monthly report), and a report never
reads grains an earlier version's SQL built.

The warehouses are real: tests/data/upgrade/<commit>.tar.gz holds a small generated site's raw files (sacct,
inventory, node events, reservation, three days of half-hourly dcgm, NIC, Lustre and IPMI telemetry) and the
warehouse the version at <commit> loaded them into (scripts/build_upgrade_fixtures.sh, tests/data/README.md):
57bdd704, the last commit of 2026-11-30 (before the run telemetry's samples, node-hour energy and gpu_day: its
chargeback, heatmap, throttling and stragglers were empty after an upgrade), and 95a5e297, the last of
2026-12-02 (before the node-hour energy columns: GPU and node energy 0, energy basis `none`, chargeback 5-11%
low, 141 of the report's 2,658 figures different until the next load, `check`'s same_name_same_value broken).
"""

from __future__ import annotations

import json
import math
import shutil
import tarfile
from pathlib import Path

import pytest

import ops_warehouse as ow
from ops_warehouse.errors import OpsError
from ops_warehouse.grain_versions import GRAINS, fingerprints, stale_grains
from tests.cli_runner import cli

DATA = Path(__file__).parent / "data" / "upgrade"
OLD = {"57bdd704": "2026-11-30", "95a5e297": "2026-12-02"}
MONTH = "2026-10"


def unpack(sha: str, folder: Path) -> Path:
    with tarfile.open(DATA / f"{sha}.tar.gz") as t:
        # (the "data" filter: Pythons from 3.10.12 on; the files are this repository's own)
        t.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return folder


def env(folder: Path, warehouse: str) -> dict:
    # the site's config maps its accounts to projects A-F, as the old version's load had it
    return {"OPS_CONFIG": str(folder / "site" / "config.toml"), "OPS_WAREHOUSE": f"chdb://{folder / warehouse}"}


def monthly(folder: Path, warehouse: str, out: str) -> dict:
    cli("monthly", "--cluster", "--month", MONTH, "--format", "json", "--out", str(folder / out),
        env=env(folder, warehouse))
    (path,) = (folder / out).glob("*.json")
    return json.loads(path.read_text())


def leaves(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, x


def differences(got: dict, want: dict) -> list[tuple]:
    """Every figure of ``got`` not equal to ``want``'s (floats to 1e-9), the report's own time left out."""
    a, b = dict(leaves(got)), dict(leaves(want))
    out = []
    for k in sorted(set(a) | set(b)):
        if k == ".generated_at":
            continue
        x, y = a.get(k, "<missing>"), b.get(k, "<missing>")
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
        if not (x == y or numbers and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)):
            out.append((k, x, y))
    return out


@pytest.fixture(scope="module", params=sorted(OLD))
def site(request, tmp_path_factory):
    """(the folder holding the old version's warehouse and the raw files, the monthly report of a fresh load of
    those files by today's code)."""
    folder = unpack(request.param, tmp_path_factory.mktemp(f"upgrade-{request.param}"))
    e = env(folder, "fresh")
    s = folder / "site"
    cli("etl", "sacct", str(s / "sacct" / "sacct.psv"), env=e)
    cli("etl", "capacity", "--inventory", str(s / "inventory.csv"), "--events", str(s / "slurm" / "events.psv"),
        "--reservations", str(s / "slurm" / "reservations.txt"), "--cluster", "ai1", env=e)
    cli("etl", "metrics", "--source", "file", "--file", str(s / "telemetry"), "--from", "2026-10-01",
        "--to", "2026-10-03", "--cluster", "ai1", env=e)
    return folder, monthly(folder, "fresh", "fresh-out")


@pytest.mark.slow
def test_init_on_an_old_warehouse_gives_every_figure_of_a_fresh_load(site, tmp_path):
    folder, fresh = site
    shutil.copytree(folder / "warehouse", tmp_path / "warehouse", symlinks=True)  # chDB links its folders
    shutil.copytree(folder / "site", tmp_path / "site")
    e = env(tmp_path, "warehouse")
    p = cli("init", env=e)
    upgraded = monthly(tmp_path, "warehouse", "out")
    # the report is not empty where the old versions left it empty or zero: a comparison of nothing passes
    assert len(dict(leaves(fresh))) > 2500
    assert {c["energy_basis"] for c in fresh["cost"]} == {"node (IPMI)"}
    assert fresh["chargeback"] and fresh["gpu_heatmap"] and fresh["throttling"] and fresh["campaigns"]
    diffs = differences(upgraded, fresh)
    assert diffs == [], f"{len(diffs)} figures differ, e.g. {diffs[:3]}"
    assert "rebuilt the grains an earlier version built: job_run, telemetry_hourly, gpu_day, hourly" in p.stdout
    # every law holds on the upgraded warehouse (same_name_same_value was broken after 95a5e297's upgrade)
    assert cli("check", "--month", MONTH, env=e, check=False).returncode == 0
    # recorded: the next init, and every load, rebuild nothing
    assert "rebuilt" not in cli("init", env=e).stdout


@pytest.mark.slow
@pytest.mark.parametrize("site", ["57bdd704"], indirect=True)  # the same rebuild as init's: one version will do
def test_a_load_without_init_rebuilds_too(site, tmp_path):
    """The nightly load after an upgrade, with nobody running init: the sacct file loaded again (no new run)
    brings the warehouse to what a fresh load gives. (57bdd704's: the marks of etl/grains.py made such a load
    rebuild the hourly grains already, but not gpu_day, which only a telemetry load built: the heatmap and
    throttling stayed empty.)"""
    folder, fresh = site
    shutil.copytree(folder / "warehouse", tmp_path / "warehouse", symlinks=True)
    shutil.copytree(folder / "site", tmp_path / "site")
    cli("etl", "sacct", str(tmp_path / "site" / "sacct" / "sacct.psv"), env=env(tmp_path, "warehouse"))
    diffs = differences(monthly(tmp_path, "warehouse", "out"), fresh)
    assert diffs == [], f"{len(diffs)} figures differ, e.g. {diffs[:3]}"


@pytest.mark.slow
def test_a_report_on_an_old_warehouse_asks_for_init_and_reads_nothing(tmp_path):
    folder = unpack("95a5e297", tmp_path)
    p = cli("monthly", "--cluster", "--month", MONTH, "--format", "json", "--out", str(tmp_path / "out"),
            env=env(folder, "warehouse"), check=False)
    assert p.returncode == 2 and not list((tmp_path / "out").glob("*"))  # ops-report's exit for an OpsError
    (line,) = p.stderr.strip().splitlines()
    assert "built by an earlier version of ops-warehouse: run ops-report init" in line
    assert "job_run, telemetry_hourly, gpu_day, hourly" in line  # (the declared order, issue 50)
    # the API's reads the same
    with pytest.raises(OpsError, match="run ops-report init"):
        ow.connect(f"chdb://{folder / 'warehouse'}").clusters()


def copy_sql(tmp_path: Path) -> Path:
    root = tmp_path / "sql"
    shutil.copytree(Path(__file__).parents[1] / "sql", root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_a_grain_is_stale_when_its_sql_or_what_it_reads_changes(tmp_path):
    root = copy_sql(tmp_path)
    base = fingerprints(root)
    assert list(base) == list(GRAINS) and base == fingerprints()
    recorded = {f"grains/{g}": fp for g, fp in base.items()}
    assert stale_grains(recorded, base) == ()
    assert stale_grains({}, base) == tuple(GRAINS)  # a warehouse built before the record: everything

    def stale_after(path: str, old: str, new: str) -> tuple[str, ...]:
        text = (root / path).read_text()
        edit(root / path, old, new)
        try:
            return stale_grains(recorded, fingerprints(root))
        finally:
            (root / path).write_text(text)

    # a comment is not what the engine runs
    assert stale_after("intermediate/run_node_hour.sql", "\n", "\n-- a reworded comment\n") == ()
    # a function the fan-out (an included file) calls: the hourly grains only
    assert stale_after("functions/overlap_s.sql", "greatest(toInt64(0)", "greatest(toInt64(1)") == ("hourly",)
    # the view job_run reads: job_run and the hourly grains that read job_run
    assert stale_after("intermediate/fct_job_run.sql", "FROM slurm_job_run FINAL",
                       "FROM slurm_job_run  FINAL") == ("job_run", "hourly")
    # the throttling rule the hourly rollups use: they, and the grains that read them
    assert stale_after("functions/gpu_is_throttled.sql", "0xEC) != 0",
                       "0xED) != 0") == ("telemetry_hourly", "gpu_day", "hourly")
    # a new migration (a new table or column): every grain
    (root / "migrations" / "9999_new.sql").write_text("SELECT 1;\n")
    assert stale_grains(recorded, fingerprints(root)) == tuple(GRAINS)


def test_a_new_warehouse_records_todays_grains(wh):
    assert wh.stale_grains == ()
    assert stale_grains(dict(wh.query_rows("SELECT name, checksum FROM schema_migrations FINAL"))) == ()
