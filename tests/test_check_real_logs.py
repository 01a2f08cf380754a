"""The laws (`ops-report check`, docs/checks.md) on real sacct logs, and the figures they tie together worked
out again from the raw lines by another engine (DuckDB) and by hand.

Open XDMoD's phillips.log (tests/data/README.md) is a site with no node inventory: 4,285 jobs, two of them
GPU jobs (163485 and 196835, 2 GPUs each on cpn-f11-31, project chaff, user noror). Before the marts were
made to agree, three laws broke on it: users_sum_to_project (the users mart counted CPU-only jobs as jobs
started: taifl 3,547 against job_sizes' 0) and cluster_breakdowns_sum_to_totals and
project_report_matches_cluster_report (chargeback had 465.49 GPU-hours under no GPU model where utilization,
without an inventory, had no row at all).
"""

from __future__ import annotations

import duckdb
import pytest

import ops_warehouse as ow
from ops_warehouse.etl.sacct_text import XDMOD_FIELDS
from tests.conftest import XDMOD
from tests.sites import phillips as phillips_site

DECEMBER = {"start": "2016-12-01", "end": "2017-01-01"}
OUTSIDE = "(not in the inventory)"  # the GPU model and partition of a node the inventory does not list
WHOLE_LOG = {"start": "2016-12-22", "end": "2017-01-02"}  # every job of the log starts and ends inside it


@pytest.fixture(scope="module")
def phillips(tmp_path_factory):
    # loaded once per run (tests/sites.py, `ops-report etl sacct --fields xdmod`); this module reads its own copy
    site = phillips_site(tmp_path_factory)
    assert "loaded 4285" in site.facts["stdout"]
    wh = ow.connect(f"chdb://{site.open_copy(tmp_path_factory.mktemp('phillips'))}")
    yield wh
    wh.close()


def raw_gpu_jobs(window: dict) -> dict[tuple[str, str], tuple[int, float]]:
    """(account, user) -> (GPU jobs started in the window, GPUs × the part of their run inside it, hours),
    read by DuckDB from the raw lines: the GPUs are AllocTRES' gres/gpu, the run Start to End."""
    cols = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in XDMOD_FIELDS.split(",")) + "}"
    con = duckdb.connect()
    got = con.execute(f"""
        WITH j AS (
            SELECT account, "user",
                   coalesce(TRY_CAST(regexp_extract(alloctres, 'gres/gpu=([0-9]+)', 1) AS INTEGER), 0) AS gpus,
                   CAST(start AS TIMESTAMP) AS s, CAST("end" AS TIMESTAMP) AS e
            FROM read_csv(?, delim = '|', header = false, quote = '', escape = '', columns = {cols}))
        SELECT account, "user",
               count(*) FILTER (WHERE s >= CAST(? AS TIMESTAMP) AND s < CAST(? AS TIMESTAMP)),
               sum(gpus * greatest(0, epoch(least(e, CAST(? AS TIMESTAMP))) - epoch(greatest(s, CAST(? AS TIMESTAMP)))))
                   / 3600
        FROM j WHERE gpus > 0 GROUP BY ALL""",
        [str(XDMOD / "phillips.log"), window["start"], window["end"], window["end"], window["start"]]).fetchall()
    return {(a, u): (n, h) for a, u, n, h in got}


def test_the_raw_lines_by_hand():
    # 163485: 2 GPUs from 2016-12-22 07:15:13 to 2017-01-01 20:42:19 (10-13:27:06 = 912,426 s); December holds
    # 837,887 s of it (to 2017-01-01 00:00). 196835: 2 GPUs for 17 s on 2017-01-01.
    assert raw_gpu_jobs(DECEMBER) == {("chaff", "noror"): (1, pytest.approx(2 * 837_887 / 3600))}
    assert raw_gpu_jobs(WHOLE_LOG) == {("chaff", "noror"): (2, pytest.approx(2 * (912_426 + 17) / 3600))}
    assert 2 * 837_887 / 3600 == pytest.approx(465.4928, abs=1e-4)


@pytest.mark.parametrize("window", [DECEMBER, WHOLE_LOG], ids=["2016-12", "whole log"])
def test_allocated_gpu_h_without_an_inventory(phillips, window):
    """The GPUs the jobs held are allocated GPU-hours in utilization as in chargeback: one figure, under one
    name ('(not in the inventory)', as the report's chargeback table says); what only the inventory knows is unknown."""
    gpu_h = sum(h for _, h in raw_gpu_jobs(window).values())
    u = {(r["level"], r["key"]): r for r in phillips.utilization(**window).to_dicts()}
    assert set(u) == {("cluster", ""), ("gpu_model", OUTSIDE), ("partition", OUTSIDE), ("partition_member", OUTSIDE)}
    for r in u.values():
        assert r["allocated_gpu_h"] == pytest.approx(gpu_h)
        assert r["capacity_gpu_h"] is None and r["available_gpu_h"] is None and r["utilization"] is None
    charged = phillips.chargeback(**window).to_dicts()
    assert [(r["project"], r["gpu_model"]) for r in charged] == [("chaff", OUTSIDE)]
    assert charged[0]["allocated_gpu_h"] == pytest.approx(gpu_h)
    assert phillips.chargeback(**window, project="chaff").to_dicts()[0]["gpu_model"] == OUTSIDE
    assert phillips.chargeback_totals(**window)["allocated_gpu_h"].sum() == pytest.approx(gpu_h)
    # nothing is priced without a model: no cost row says that nothing was allocated
    assert phillips.cost(**window).height == 0


@pytest.mark.parametrize("window", [DECEMBER, WHOLE_LOG], ids=["2016-12", "whole log"])
def test_users_count_gpu_jobs_as_job_sizes_does(phillips, window):
    raw = raw_gpu_jobs(window)
    for project in ("aytinis", "chaff", "taifl"):
        users = {r["user"]: (r["jobs_started"], r["gpu_h"])
                 for r in phillips.users(**window, project=project).to_dicts()}
        want = {u: (n, h) for (a, u), (n, h) in raw.items() if a == project}
        assert users.keys() == want.keys(), project
        for user, (n, h) in want.items():
            assert users[user][0] == n and users[user][1] == pytest.approx(h), (project, user)
        assert phillips.job_sizes(**window, project=project)["jobs"].sum() == sum(n for n, _ in want.values())


@pytest.mark.slow  # two runs of every law, about 20 s on 2 vCPUs
def test_every_law_holds_on_phillips(phillips):
    for window in (DECEMBER, WHOLE_LOG):
        outcomes = {o.law.name: o for o in phillips.check(**window)}
        bad = {n: (o.status, o.rows.head(3).to_dicts(), o.error) for n, o in outcomes.items()
               if o.status in ("broken", "error")}
        assert not bad, (window, bad)
        for law in ("users_sum_to_project", "cluster_breakdowns_sum_to_totals",
                    "project_report_matches_cluster_report", "same_name_same_value", "capacity_order",
                    "capacity_split"):
            assert outcomes[law].status == "holds", (window, law)
