"""`ops-report users` and the monthly report's users (issue 52 item 2) on the hand-built day of
tests/user_scenario.py: every pooled figure per user against DuckDB over the very sacct and dcgm-exporter files
that were loaded (never the product's SQL), the grade's bounds on runs placed at them, the most wasteful runs
and the ranking, the users section's old columns unchanged beside the new, and the command."""

from __future__ import annotations

import json

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_mart
from tests import user_scenario as us
from tests.cli_runner import cli
from tests.sites import user_day

FIGURES = {  # the marts' columns (user_efficiency, user_resources): DuckDB's (tests/user_scenario.py, duckdb_runs)
    "runs": "runs", "gpu_h": "gpu_h", "gpu_util_pct": "util_pct", "sm_active": "sm", "tensor_active": "tensor",
    "dram_active": "dram", "gpu_mem_eff": "gpu_mem_eff", "cpu_eff": "cpu_eff", "mem_eff": "mem_eff", "idle_gpu_h": "idle_gpu_h", "unbusy_gpu_h": "unbusy_gpu_h",
}


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    """The day loaded once (embedded), with its folder of raw files."""
    folder = tmp_path_factory.mktemp("users-day")
    cfg = user_day(tmp_path_factory, folder)  # us.load_day's folder, the day loaded once per run (tests/sites.py)
    return folder, cfg


@pytest.fixture
def wh(day):
    from ops_warehouse.warehouse import open_warehouse

    w = open_warehouse(day[1])
    yield w
    w.close()


def _mart(wh, name, project="", **params):
    return run_mart(wh, name, cluster="t1", window=us.OCT, project=project, idle_util_pct=5.0, **params)


def test_pooled_figures_per_user_are_duckdbs_over_the_raw_files(day, wh):
    truth = us.duckdb_runs(day[0]).sql("SELECT * FROM users").pl()
    for project in ("", "A", "B"):
        got = _mart(wh, "user_efficiency", project).join(_mart(wh, "user_resources", project), on="user")
        want = truth if not project else truth.filter(pl.col("project") == project)
        assert sorted(got["user"]) == sorted(want["user_name"]), project
        for u in want.iter_rows(named=True):
            row = got.filter(pl.col("user") == u["user_name"]).row(0, named=True)
            for col, theirs in FIGURES.items():
                assert row[col] == pytest.approx(u[theirs], rel=1e-6, abs=1e-6), (project, u["user_name"], col)
    alice = _mart(wh, "user_efficiency", "A").join(_mart(wh, "user_resources", "A"), on="user").filter(
        pl.col("user") == "alice").row(0, named=True)
    # pooled by GPU-hours, not the mean of her runs' means (90 and 50: 70)
    assert alice["gpu_util_pct"] == pytest.approx(82.0) and alice["gpu_mem_eff"] == pytest.approx(0.70)
    # from her .batch steps: (0.5 × 112 × 4 h + 0.25 × 112 × 1 h) / (112 × 5 h) = 0.45 of the CPUs, and
    # (40,960 + 20,480 MiB) / (2 × 102,400) = 0.30 of the memory
    assert alice["cpu_eff"] == pytest.approx(0.45) and alice["mem_eff"] == pytest.approx(0.30)
    bob = _mart(wh, "user_efficiency", "A").filter(pl.col("user") == "bob").row(0, named=True)
    assert (bob["idle_runs"], bob["idle_gpu_h"], bob["idle_share"]) == (1, 32.0, pytest.approx(32 / 56))


def test_the_grade_at_its_bounds(wh):
    grades = dict(_mart(wh, "user_efficiency").select("user", "grade").iter_rows())
    # frank 80 % exactly: A (at least 80); gina 79.5 %: B; heidi 80 % with an idle share of exactly 0.20: D
    # (C wants under 0.20); alice 82 % A, erin 85 % A, carol 45 % C, dave 25 % D, bob 31 % with 0.57 idle F
    assert grades == {"frank": "A", "gina": "B", "heidi": "D", "alice": "A", "erin": "A", "carol": "C",
                      "dave": "D", "bob": "F"}


def test_the_most_wasteful_runs_and_the_rank(day, wh):
    runs = us.duckdb_runs(day[0]).sql(
        "SELECT user_name, project, job_id, observed_gpu_h * (1 - util_pct / 100) AS waste FROM runs").pl()
    got = _mart(wh, "user_efficiency", "A")
    for r in got.iter_rows(named=True):
        mine = runs.filter(pl.col("user_name") == r["user"]).sort(["waste", "job_id"], descending=[True, False])
        assert r["worst_job_ids"] == mine["job_id"].head(3).to_list()
        assert r["worst_waste_gpu_h"] == pytest.approx(mine["waste"].head(3).to_list())
    # bob, the project's user with the idle run, first; then by GPU-hours held and not busy
    assert got.sort("rank")["user"].to_list() == ["bob", "alice", "carol"]


def test_the_report_users_keep_their_columns_and_gain_the_efficiency(wh):
    users = _mart(wh, "users", "A")
    # jobs started, GPU-hours, completed, failed: from the sacct lines (every run COMPLETED in the day)
    assert {r["user"]: (r["jobs_started"], r["gpu_h"], r["completed"], r["failed"]) for r in users.to_dicts()} == {
        "alice": (2, 40.0, 2, 0), "bob": (2, 56.0, 2, 0), "carol": (1, 8.0, 1, 0)}
    eff = _mart(wh, "user_efficiency", "A")
    joined = users.join(eff, on="user", suffix="_eff")
    for col in ("runs", "gpu_util_pct", "idle_gpu_h", "grade", "worst_job_ids", "rank"):
        assert joined[col].to_list() == joined[f"{col}_eff"].to_list(), col


def test_ops_report_users(day):
    folder = day[0]
    conf = ("-c", str(folder / "ops.toml"))
    rows = json.loads(cli(*conf, "users", "--month", "2026-10", "--project", "B", "--format", "json").stdout)
    assert [r["user"] for r in rows] == ["heidi", "dave", "erin", "gina", "frank"]
    table = cli(*conf, "users", "--month", "2026-10").stdout
    assert "ops-report job 3003 --cluster t1" in table and "ops-report job 3006 --cluster t1" in table
    p = cli(*conf, "users", "--project", "Z", check=False)
    assert p.returncode == 2 and "no jobs of project 'Z'" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_a_users_cpu_memory_and_gpu_memory_pool_the_job_reports_figures(wh):
    """One meaning each (issue 52): a user's GPU-memory, CPU and memory efficiency pool the per-run figures
    `ops-report job` gives (job_detail.sql), numerators over denominators. Worked out by hand from the lines
    tests/user_scenario.py writes (its docstring): bob's 2-node run 3003 had n1's GPUs at 2 % of their memory
    and n2's at 6 %, was suspended 20 of its 120 minutes, and its MaxRSS is 0.05 of one node's part."""
    def one(name, job_id):
        return _mart(wh, name, "A", job_id=job_id)

    run = one("job_detail", "3003").row(0, named=True)
    # the GPU that used the most: 6 %; TotalCPU 26,880 s over 224 CPUs × sacct's Elapsed 6,000 s; 2,560 MiB of
    # the whole 102,400 MiB request
    assert run["fb_peak_share"] == pytest.approx(0.06) and run["cpu_eff"] == pytest.approx(0.02)
    assert run["mem_eff"] == pytest.approx(2_560 / 102_400)
    notes = one("job_notes", "3003").filter(pl.col("note") == "low_gpu_memory")
    assert notes["figure"].to_list() == [pytest.approx(6.0)]
    users = {r["user"]: r for r in _mart(wh, "user_resources", "A").iter_rows(named=True)}
    bob = users["bob"]
    # with 3004 (24 GPU-h at 60 %, 112 CPUs 75 % busy for 10,800 s, MaxRSS 61,440 MiB): GPU-hour weighted
    # (32 × 0.06 + 24 × 0.60) / 56, not its GPUs one by one (0.28); CPU-seconds by Elapsed, not End − Start
    # (934,080 / 2,822,400 = 0.3310); the requests summed
    assert bob["gpu_mem_eff"] == pytest.approx((32 * 0.06 + 24 * 0.60) / 56)
    assert bob["cpu_eff"] == pytest.approx((26_880 + 907_200) / (224 * 6_000 + 112 * 10_800))
    assert bob["mem_eff"] == pytest.approx((2_560 + 61_440) / (2 * 102_400))
    # a user of one run reads what the job report says of it
    carol = one("job_detail", "3005").row(0, named=True)
    assert (users["carol"]["gpu_mem_eff"], users["carol"]["cpu_eff"], users["carol"]["mem_eff"]) == pytest.approx(
        (carol["fb_peak_share"], carol["cpu_eff"], carol["mem_eff"]))
    assert (carol["fb_peak_share"], carol["cpu_eff"], carol["mem_eff"]) == pytest.approx((0.30, 0.90, 0.50))
