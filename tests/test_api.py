"""The analysts' Python API (ops_warehouse.analytics.api) on the demo's warehouse: its docstring examples run as
doctests; its functions give the monthly report's numbers (the report calls them); `ops-report export`
writes Parquet that DuckDB reads back to the same numbers."""

from __future__ import annotations

import doctest
import json

import duckdb
import polars as pl
import pytest

import ops_warehouse
from ops_warehouse.errors import OpsError
from ops_warehouse.warehouse import close_embedded
from tests.cli_runner import cli

MONTH = "2026-10"


@pytest.fixture(scope="module")
def demo(demo_runs):
    base, _ = demo_runs
    dsn = f"chdb://{base / 'a' / 'warehouse'}"
    report = json.loads((base / "a" / "out" / f"monthly-ai1-A-{MONTH}.json").read_text())
    cluster = json.loads((base / "a" / "out" / f"monthly-ai1-cluster-{MONTH}.json").read_text())
    return dsn, report, cluster


@pytest.fixture
def api(demo):
    conn = ops_warehouse.connect(demo[0])
    yield conn
    close_embedded()  # the warehouse is embedded: let the next process (a notebook kernel, the CLI) open it


def test_docstring_examples_run(api, demo):
    import ops_warehouse.analytics.api as module

    result = doctest.testmod(module, extraglobs={"wh": api, "DSN": demo[0]}, optionflags=doctest.ELLIPSIS,
                             verbose=False)
    assert result.attempted >= 15 and result.failed == 0


def test_the_functions_give_the_reports_numbers(api, demo):
    _, report, cluster = demo
    p = api.period(MONTH)
    u = api.utilization(p, level="cluster").row(0, named=True)
    c = next(r for r in cluster["utilization"] if r["level"] == "cluster")
    assert u["allocated_gpu_h"] == pytest.approx(c["allocated_gpu_h"], rel=1e-9)
    sizes = api.job_sizes(MONTH, project="A")
    assert sizes["gpu_h"].to_list() == pytest.approx([r["gpu_h"] for r in report["job_sizes"]], rel=1e-9)
    # pandas for those who want it
    assert api.cost(MONTH).to_pandas().shape[0] == len(cluster["cost"])
    # a window that is not a month: the first day alone holds less allocation than the month
    day = api.utilization(start="2026-10-01", end="2026-10-02", level="cluster")["allocated_gpu_h"].item()
    assert 0 < day < u["allocated_gpu_h"]
    # filters keep the rows whose column has the value
    h100 = api.cost(MONTH, gpu_model="h100")
    assert h100["model"].to_list() == ["h100"]
    # a query with user input is parameterized: the value is data, never SQL
    evil = "A' OR 1=1 --"
    assert api.sql("SELECT count() AS n FROM fct_job_run WHERE project = {p:String}", p=evil)["n"].item() == 0
    assert api.job_sizes(MONTH, project=evil)["jobs"].sum() == 0


def test_clear_errors(api):
    with pytest.raises(OpsError, match="YYYY-MM"):
        api.utilization("October")
    with pytest.raises(OpsError, match="no column 'gpu'"):
        api.mart("cost", MONTH, gpu="h100")
    with pytest.raises(OpsError, match="not after start"):
        api.utilization(start="2026-10-02", end="2026-10-01")
    with pytest.raises(OpsError, match="no mart named"):
        api.mart("../etc/passwd", MONTH)


def test_export_reads_back_in_duckdb_with_the_reports_numbers(demo, tmp_path):
    dsn, report, cluster = demo
    out = cli("--warehouse", dsn, "export", "--month", MONTH, "--project", "A", "--out", str(tmp_path)).stdout
    folder = tmp_path / f"ai1-A-{MONTH}"
    assert str(folder) in out
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["project"] == "A" and manifest["month"] == MONTH
    for name, f in manifest["files"].items():  # every file is there with the rows the manifest says
        assert duckdb.sql(f"SELECT count(*) FROM '{folder / f['file']}'").fetchall()[0][0] == f["rows"], name
    q = lambda sql: duckdb.sql(sql.replace("@", str(folder))).fetchall()  # noqa: E731
    (gpu_h, jobs), = q("SELECT sum(gpu_h), sum(jobs) FROM '@/job_sizes.parquet'")
    assert gpu_h == pytest.approx(sum(r["gpu_h"] for r in report["job_sizes"]), rel=1e-9)
    assert jobs == sum(r["jobs"] for r in report["job_sizes"])
    (p50,), = q("SELECT run_p50_s FROM '@/run_times.parquet' WHERE size_class = '1'")
    assert p50 == next(r["run_p50_s"] for r in report["run_times"] if r["size_class"] == "1")
    (util,), = q("SELECT utilization FROM '@/utilization.parquet' WHERE level = 'cluster'")
    assert util == pytest.approx(next(r["utilization"] for r in cluster["utilization"] if r["level"] == "cluster"),
                                 rel=1e-9)
    (charge,), = q("SELECT sum(cost) FROM '@/chargeback.parquet'")
    assert charge == pytest.approx(sum(r["cost"] for r in report["chargeback"]), rel=1e-9)
    # project isolation: only project A's jobs and users in the export
    assert q("SELECT DISTINCT project FROM '@/job_efficiency.parquet'") == [("A",)]
    assert {u for (u,) in q("SELECT user FROM '@/users.parquet'")} == {r["user"] for r in report["users"]}
    assert q("SELECT DISTINCT project FROM '@/chargeback.parquet'") == [("A",)]
    # the 2.1 files: energy, node health, idle GPUs, as in the report; a project's runs only
    (it_kwh,), = q("SELECT it_kwh FROM '@/energy.parquet' WHERE project_key = 'A'")
    assert it_kwh == pytest.approx(next(e["it_kwh"] for e in report["energy"] if e["project_key"] == "A"), rel=1e-9)
    assert q("SELECT DISTINCT project FROM '@/job_energy.parquet'") == [("A",)]
    assert [n for (n,) in q("SELECT node FROM '@/node_health.parquet' WHERE swap = 1 ORDER BY rank")] == [
        n["node"] for n in report["node_health"] if n["swap"]]
    assert q("SELECT runs FROM '@/idle_gpu_users.parquet' WHERE level = 'all'") == [
        (next(u["runs"] for u in report["idle_gpu_users"] if u["level"] == "all"),)]
    assert manifest["export_version"] == "2.1"
    # an unknown project is a one-line error
    bad = cli("--warehouse", dsn, "export", "--month", MONTH, "--project", "nope", "--out", str(tmp_path), check=False)
    assert bad.returncode == 2 and "no jobs of project 'nope'" in bad.stderr and bad.stderr.count("\n") == 1


def test_the_api_reads_the_same_polars_types_as_the_report(api):
    daily = api.utilization_daily(MONTH, project="A")
    assert daily.schema["day"] in (pl.Date, pl.Datetime("us", "UTC")) and daily.height >= 3


def test_the_demos_cluster_report_evaluates_each_mart_once(api, demo):
    """Issue 30: the cluster report of the demo's October asks for 27 marts; largest_jobs includes
    job_efficiency, node_health hang_suspect_nodes (and hung_jobs, node_failures, stragglers, throttling, which
    the report asks for too), energy job_energy (and efficiency), nine of them include data_through, and
    chargeback run_allocation_daily (the allocation it shares with the FOCUS export), and idle_gpu_jobs and
    user_efficiency run_observed (each run's readings by the one attribution rule, round 5): 32 marts, each
    evaluated once (50 evaluations when each include was pasted as text, 42 when only the includes were shared).
    The demo has no September, so the month-before marts do not run."""
    from ops_warehouse.analytics.marts import each_mart_once

    with api.session() as w, each_mart_once(w) as once:  # the report's own block is this one (nested)
        report = api.monthly("2026-10")
    assert report["cluster"] == demo[2]["cluster"] and not report["previous_month_has_data"]
    assert sum(once.evaluations.values()) == 32 and set(once.evaluations.values()) == {1}, once.evaluations
    assert {"job_efficiency", "hang_suspect_nodes", "job_energy", "data_through", "run_allocation_daily",
            "run_observed"} <= set(
        once.evaluations)
