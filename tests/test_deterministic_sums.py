"""The report's figures do not move between two evaluations of the same window on the same warehouse.

The engine adds the parts of a sum in whatever order its threads finish them; a Float64 sum then differs in its
last digits from one evaluation to the next (energy's it_kwh 26482.3362598351 and 26482.33625983511; the unchanged
replay's added_capex 8e-11 in one run, 0 in another). The marts sum exact units (whole GPU-seconds, Decimal
millijoules and kWh) and convert after (docs/sql.md). Each mart here is evaluated several times on a warehouse cut
into blocks of 8 rows handed to 4 threads (the small generated week is one block otherwise: a month is many), its
values compared exactly (each float's bits), and its totals against the parts added in Python with math.fsum (exactly
rounded: the order-free value a float sum can reach).
"""

from __future__ import annotations

import math
from datetime import timedelta

import polars as pl
import pytest

from ops_warehouse.analytics.marts import run_file
from ops_warehouse.migrations import warehouse_cost_model
from tests.sites import SMALL_WEEK, open_site, small_week

pytestmark = pytest.mark.slow  # a generated site: docs/testing.md
EVALUATIONS = 6


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    site = small_week(tmp_path_factory)
    wh = open_site(site, tmp_path_factory.mktemp("deterministic"))
    # many small blocks on several threads: the partial sums a month's rows give, on a week's
    wh.command("SET max_block_size = 8")
    wh.command("SET max_threads = 4")
    try:
        yield wh, site.facts["cluster"]
    finally:
        wh.close()


def _evaluations(wh, cluster, name, window=SMALL_WEEK) -> list[pl.DataFrame]:
    return [run_file(wh, f"marts/{name}.sql", cluster=cluster, window=window) for _ in range(EVALUATIONS)]


def _exact(df: pl.DataFrame) -> list:
    """The frame's values, each float as its exact bits (float.hex tells 0.0 from -0.0 and any last digit); not
    its Arrow bytes, whose slots under a NULL hold whatever the engine left there."""
    return [[v.hex() if isinstance(v, float) else v for v in df[c].to_list()] for c in df.columns]


def _same_bytes(frames: list[pl.DataFrame]) -> None:
    first = _exact(frames[0])
    for i, f in enumerate(frames[1:], 2):
        differ = {c: (a, b) for c, a, b in zip(f.columns, first, _exact(f)) if a != b}
        assert not differ, f"evaluation {i} differs from the first: {differ}"


def _stable_with_parts(wh, cluster, name, parts, least) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """The mart's evaluations, checked to be the same, and the per-run mart whose rows its totals add up (more
    than `least` of them: a sum of a few rows cannot show the order's last digits)."""
    frames = _evaluations(wh, cluster, name)
    _same_bytes(frames)
    rows = run_file(wh, f"marts/{parts}.sql", cluster=cluster, window=SMALL_WEEK)
    assert rows.height > least
    return frames, rows


def test_energy_is_the_same_every_evaluation_and_its_runs_summed(week):
    wh, cluster = week
    frames, runs = _stable_with_parts(wh, cluster, "energy", "job_energy", 1000)  # many blocks of 8
    e = {r["project_key"]: r for r in frames[0].to_dicts()}
    for key, part in [("", runs), *((p, runs.filter(pl.col("project") == p)) for p in e if p)]:
        for col in ("gpu_h", "gpu_kwh", "rest_kwh", "it_kwh", "facility_kwh"):
            assert e[key][col] == pytest.approx(math.fsum(part[col].to_list()), rel=1e-12, abs=1e-9), (key, col)
        assert e[key]["runs"] == part.height
    assert e[""]["it_kwh"] > 100  # a week of 16 nodes' energy: a figure with digits to lose


def test_job_energy_is_the_same_every_evaluation(week):
    wh, cluster = week
    _same_bytes(_evaluations(wh, cluster, "job_energy"))


def test_goodput_is_the_same_every_evaluation_and_its_campaigns_summed(week):
    wh, cluster = week
    frames, campaigns = _stable_with_parts(wh, cluster, "goodput", "campaigns", 500)
    g = {r["project_key"]: r for r in frames[0].to_dicts()}
    for key, part in [("", campaigns), *((p, campaigns.filter(pl.col("project") == p)) for p in g if p)]:
        for col, of in (("gpu_h", "gpu_h"), ("lost_gpu_h", "lost_gpu_h"),
                        ("restart_overhead_gpu_h", "restart_startup_gpu_h")):
            want = math.fsum(v for v in part[of].to_list() if v is not None)
            assert g[key][col] == pytest.approx(want, rel=1e-12, abs=1e-9), (key, col)
    # whole GPU-seconds: the sum a GPU-hour figure stands for
    assert g[""]["gpu_h"] * 3600 == pytest.approx(round(g[""]["gpu_h"] * 3600), abs=1e-6)


def test_whatif_capex_of_the_unchanged_replay_adds_exactly_nothing(week):
    """400 nodes in the observed cluster and in its unchanged replay, of 4 and 8 GPUs, entering service on
    different days of the week: the two scenarios' capex are the same figure, so added_capex is 0, not 8e-11."""
    wh, cluster = week
    m = warehouse_cost_model(wh)["h100"]
    t0, t1 = SMALL_WEEK
    rows, want = [], []
    for i in range(400):
        gpus = 4 if i % 3 == 0 else 8
        in_service = t0 + timedelta(hours=(i * 7) % 150, minutes=i % 60)
        s_gpu = gpus * (t1 - in_service).total_seconds()
        want.append(s_gpu / 3600 * m["node_price"] / gpus / (m["amortization_years"] * 8766))
        for sc in ("observed", "replay"):
            rows.append({"scenario": sc, "node": f"n{i}", "gpu_model": "h100", "gpus": gpus,
                         "in_service_ts": in_service, "retired_ts": None})
    nodes = pl.DataFrame(rows, schema={"scenario": pl.String, "node": pl.String, "gpu_model": pl.String,
                                       "gpus": pl.UInt32, "in_service_ts": pl.Datetime("us", "UTC"),
                                       "retired_ts": pl.Datetime("us", "UTC")})
    client = wh.client
    client.command("CREATE TEMPORARY TABLE whatif_node (scenario String, node String, gpu_model String, gpus UInt32, "
                   "in_service_ts DateTime('UTC'), retired_ts Nullable(DateTime('UTC'))) ENGINE = Memory")
    client.command("CREATE TEMPORARY TABLE whatif_run (scenario String, job_id String, account String, "
                   "project String, gpus UInt32, submit_ts DateTime('UTC'), start_ts Nullable(DateTime('UTC')), "
                   "end_ts Nullable(DateTime('UTC'))) ENGINE = Memory")
    try:
        client.insert_arrow("whatif_node", nodes.with_columns(
            pl.col("in_service_ts", "retired_ts").dt.cast_time_unit("ms")).to_arrow())
        frames = _evaluations(wh, cluster, "whatif_summary")
    finally:
        for t in ("whatif_node", "whatif_run"):
            client.command(f"DROP TEMPORARY TABLE IF EXISTS {t}")
    _same_bytes(frames)
    for f in frames:
        s = {r["scenario"]: r for r in f.to_dicts()}
        assert s["replay"]["added_capex"] == 0.0
        assert s["observed"]["capex"] == pytest.approx(math.fsum(want), rel=1e-12)
        assert s["replay"]["nodes"] == 400


def test_idle_gpu_users_is_the_same_every_evaluation_and_its_runs_summed(week):
    wh, cluster = week
    frames, runs = _stable_with_parts(wh, cluster, "idle_gpu_users", "idle_gpu_jobs", 20)
    u = {(r["level"], r["project"], r["user"]): r for r in frames[0].to_dicts()}
    assert u[("all", "", "")]["gpu_h"] == pytest.approx(math.fsum(runs["gpu_h"].to_list()), rel=1e-12)
    assert u[("all", "", "")]["capex"] == pytest.approx(math.fsum(runs["capex"].drop_nulls().to_list()), rel=1e-12)
    for (level, project, user), r in u.items():
        if level == "user":
            part = runs.filter((pl.col("project") == project) & (pl.col("user") == user))
            assert r["gpu_h"] == pytest.approx(math.fsum(part["gpu_h"].to_list()), rel=1e-12), (project, user)


def test_utilization_is_the_same_every_evaluation(week):
    wh, cluster = week
    _same_bytes(_evaluations(wh, cluster, "utilization"))


def test_largest_jobs_is_the_same_every_evaluation_and_its_bytes_are_its_node_hours(week):
    """largest_jobs (job_efficiency, run_node_observed) summed each run's node-hour shares of the NIC and storage
    bytes and its telemetry time as Float64: at 64-row blocks on 4 threads the week's nic_rx_bytes came back
    9523172053122922.0 and 9523172053122924.0 for one run. Its figures must not move, and the largest run's bytes
    are its node-hours' (gpus_per_node x its seconds in the week x the node-hour's rate) added with math.fsum."""
    wh, cluster = week
    frames = _evaluations(wh, cluster, "largest_jobs")
    _same_bytes(frames)
    _same_bytes(_evaluations(wh, cluster, "idle_gpu_jobs"))  # run_observed: the same per-node sums
    top = frames[0].row(0, named=True)
    t0, t1 = SMALL_WEEK
    rows = wh.query_rows(
        "SELECT gpus_per_node * (least(e, {t1:DateTime('UTC')}) - greatest(s, {t0:DateTime('UTC')})), "
        "nic_rx_per_capacity, write_per_capacity, submit_ts FROM run_node_hour FINAL WHERE cluster = {c:String} "
        "AND job_id = {j:String} AND e > {t0:DateTime('UTC')} AND s < {t1:DateTime('UTC')}",
        {"c": cluster, "j": top["job_id"], "t0": t0, "t1": t1})
    assert len({r[3] for r in rows}) == 1  # (the mart shows no submit time: the job ran once)
    assert len(rows) > 20  # a run of many node-hours: a sum with digits to lose
    assert top["nic_rx_bytes"] == pytest.approx(math.fsum(g * r for g, r, _, _ in rows if r is not None), rel=1e-12)
    assert top["storage_write_bytes"] == pytest.approx(
        math.fsum(g * w for g, _, w, _ in rows if w is not None), rel=1e-12)



def test_efficiency_is_the_same_however_its_grain_lies_in_parts(tmp_path_factory):
    """The report's efficiency (and energy's delivered PFLOP, which reads it) summed Float64 products of the
    run_node_hour grain's rates, whose last digits moved with the order the rows came in: two runs of
    bench_monthly's month gave observed_gpu_h 172181.007 and 172181.00700000004. Here the same rows are laid
    out in five parts instead of one (each row inserted again in one of four parts: FINAL keeps one of each,
    so the figures may not move) and the mart's values must stay the same to the bit; its GPU-hours against
    the grain's rows added in Python with math.fsum."""
    wh = open_site(small_week(tmp_path_factory), tmp_path_factory.mktemp("efficiency-parts"))
    try:
        cluster = wh.query_rows("SELECT any(cluster) FROM run_node_hour")[0][0]
        one_part = _evaluations(wh, cluster, "efficiency")
        _same_bytes(one_part)
        for k in range(4):
            wh.command(f"INSERT INTO run_node_hour SELECT * FROM run_node_hour FINAL "
                       f"WHERE cityHash64(node, hour) % 4 = {k}")
        assert wh.query_rows("SELECT uniqExact(_part) FROM run_node_hour")[0][0] == 5
        _same_bytes([one_part[0], *_evaluations(wh, cluster, "efficiency")])
        t0, t1 = SMALL_WEEK
        rows = wh.query_rows(
            "SELECT gpus_per_node * (least(e, {t1:DateTime('UTC')}) - greatest(s, {t0:DateTime('UTC')})), "
            "covered_per_capacity FROM run_node_hour FINAL WHERE cluster = {c:String} AND "
            "account IN (SELECT account FROM dim_account) AND e > {t0:DateTime('UTC')} AND s < {t1:DateTime('UTC')}",
            {"c": cluster, "t0": t0, "t1": t1})
        assert len(rows) > 1000  # a week of node-hours: a sum with digits to lose
        total = one_part[0].filter(pl.col("project_key") == "").row(0, named=True)
        assert total["gpu_h"] == pytest.approx(math.fsum(g for g, _ in rows) / 3600, rel=1e-12)
        assert total["observed_gpu_h"] == pytest.approx(math.fsum(g * c for g, c in rows) / 3600, rel=1e-9)
    finally:
        wh.close()


def test_capacity_node_hour_is_the_same_every_refresh(tmp_path_factory):
    """capacity_node_hour summed each node-hour's runs' seen and busy GPU-seconds as Float64, in the order the
    engine's threads gave: two refreshes of a month's same rows gave busy_gpu_s 22046.033333333333 and
    22046.033333333336 (docs/benchmarks.md, round 11, coordinator). Refreshed again and again, in blocks of 8 rows
    on 4 threads, its every value must stay the same to the bit, and the week's busy GPU-seconds are those of the
    runs' hours in run_sample_hour (their own and the other jobs' readings seen in their time) added by math.fsum,
    where every node has one GPU model (the share 1)."""
    from ops_warehouse.etl import grains

    wh = open_site(small_week(tmp_path_factory), tmp_path_factory.mktemp("capacity-refreshes"))
    try:
        wh.command("SET max_block_size = 8")
        wh.command("SET max_threads = 4")
        t0, t1 = SMALL_WEEK
        read = ("SELECT * EXCEPT refreshed_at FROM capacity_node_hour FINAL WHERE hour >= {t0:DateTime('UTC')} "
                "AND hour < {t1:DateTime('UTC')} ORDER BY cluster, node, hour, gpu_model")
        frames = []
        for _ in range(4):
            grains.refresh_capacity(wh, "", t0, t1)
            frames.append(pl.from_arrow(wh.query_arrow(read, {"t0": t0, "t1": t1})))
        _same_bytes(frames)
        assert wh.query_rows("SELECT countIf(gpus != node_gpus) FROM capacity_node_hour FINAL")[0][0] == 0
        parts = wh.query_rows(
            "SELECT busy_gpu_s + other_job_busy_gpu_s FROM run_sample_hour FINAL WHERE hour >= {t0:DateTime('UTC')} "
            "AND hour < {t1:DateTime('UTC')} AND (cluster, job_id, submit_ts) IN "
            "(SELECT cluster, job_id, submit_ts FROM job_run)", {"t0": t0, "t1": t1})
        assert len(parts) > 100
        assert frames[0]["busy_gpu_s"].sum() == pytest.approx(math.fsum(p for (p,) in parts), rel=1e-12)
    finally:
        wh.close()
