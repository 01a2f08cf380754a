"""What-if capacity planning (issue 18) on a hand-built week whose every figure is worked out by hand below:
the replay (planning/backfill.py), the temporary tables it hands the engine (both forms: on a server they
live in the client's session) and the whatif_* marts.

Cluster t1: nodes n1, n2 with 8 H100 each (partition gpu), in service since 2026-09-01. Jobs (sacct lines
below, 2026-10-05):
  J1 7001 alice proja  16 GPUs (n1, n2)  submit 00:00  run 00:00 .. 04:00   waited 0
  J2 7002 bob   projb   8 GPUs (n1)      submit 01:00  run 04:00 .. 06:00   waited 3 h   (J1 held both nodes)
  J3 7003 carol projc   1 GPU  (n2)      submit 01:30  run 04:00 .. 05:00   waited 2.5 h
October: capacity 2 nodes × 8 GPUs × 744 h = 11,904 GPU-h; allocated 16 × 4 + 8 × 2 + 1 × 1 = 81 GPU-h.

Unchanged replay: J1 starts at once on both nodes; J2 and J3 wait for its end at 04:00, then J2 takes the
first node with 8 free (n1) and J3 packs onto the fullest node that fits (n2): what happened. Waits summed
5.5 h; by size class '9-64' 0, '2-8' 3 h, '1' 2.5 h.
+1 H100 node (in its partition, from the window's start): J1 takes the first two nodes, J2 starts at 01:00 on
the third and runs 2 h, J3 (1 GPU) finds no GPU free until J2 ends at 03:00: waits 0, 0, 1.5 h. Capacity
3 × 8 × 744 = 17,856 GPU-h, allocated 81; wait-hours saved 5.5 − 1.5 = 4 per added node; added capex =
8 GPUs × 744 h × capex_per_gpu_hour(H100 node price, 8, years) of the warehouse's cost model.
−1 H100 node (n2, the last by name): J1's 16 GPUs no longer fit and it never starts; J2 starts at 01:00 on
n1 (to 03:00), J3 waits for it until 03:00: 1 job not started, waits 0 and 1.5 h, the not-started J1's wait
counted to the window's end.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from ops_warehouse.analytics.whatif import whatif
from ops_warehouse.planning.changes import Change, parse_change
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import one_refresh
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.migrations import warehouse_cost_model
from tests.warehouse_copies import Loaded

pytestmark = [pytest.mark.both_forms, pytest.mark.slow]

UTC = timezone.utc
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName")
JOBS = [  # id, account, user, gpus, nodes, nodelist, submit, start, end
    (7001, "proja", "alice", 16, 2, "n[1-2]", "00:00", "00:00", "04:00"),
    (7002, "projb", "bob", 8, 1, "n1", "01:00", "04:00", "06:00"),
    (7003, "projc", "carol", 1, 1, "n2", "01:30", "04:00", "05:00"),
]


PROJECTS = {"proja": "A", "projb": "B", "projc": "C"}


def _build(wh, folder, _) -> None:
    lines = [HEAD]
    for jid, acct, user, gpus, nn, nodelist, submit, start, end in JOBS:
        s, e = (datetime.fromisoformat(f"2026-10-05T{x}") for x in (start, end))
        tres = f"billing={14 * gpus},cpu={14 * gpus},gres/gpu={gpus},mem=100G,node={nn}"
        lines.append(f"{jid}|{jid}|t1|gpu|normal|{acct}|{acct}|1|{user}|1|2026-10-05T{submit}:00|2026-10-05T{submit}:00|"
                     f"2026-10-05T{start}:00|2026-10-05T{end}:00|{int((e - s).total_seconds())}|600|0:0|COMPLETED|"
                     f"{nn}|{14 * gpus}|{14 * gpus}|100G|{tres}|{tres}|{nodelist}||j{jid}")
    (folder / "sacct.psv").write_text("\n".join(lines) + "\n")
    (folder / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                          "n1,h100,8,gpu,r1,2026-09-01\nn2,h100,8,gpu,r1,2026-09-01\n")
    # the history complete through October's end (a sacct window run to then): the month is whole, not in
    # progress at the last job's end (a what-if of a month in progress replays to where the data stops).
    # The two loads in one refresh of the grains (etl/grains.py one_refresh, as `etl nightly` runs a night's):
    # every table's checksum as with each load refreshing its own hours (docs/benchmarks.md, issue 51 round 10)
    with one_refresh(wh):
        assert load_sacct(wh, folder / "sacct.psv", extracted_through=OCT[1]).quarantined == 0
        load_capacity(wh, inventory=folder / "inventory.csv", cluster="t1")


@pytest.fixture(scope="module")
def loaded(form, request, tmp_path_factory):
    """The week loaded once per form (its loads were most of a test's time); each test a copy of its own
    (tests/warehouse_copies.py): the report test sets the config, the command test closes the warehouse."""
    return Loaded(form, request, tmp_path_factory, _build, PROJECTS)


@pytest.fixture
def site(loaded, tmp_path, request):
    with loaded.opened_copy(tmp_path, request) as wh:
        yield wh


def _by(df, *keys):
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in df.to_dicts()}


def test_replays_worked_by_hand(site):
    w = whatif(site, cluster="t1", window=OCT, changes=[parse_change(add=["h100:1"]), parse_change(remove=["h100:1"])])
    assert w["scenarios"] == ["observed", "replay", "+1 h100", "-1 h100"]
    s = _by(w["summary"], "scenario")
    for sc in ("observed", "replay"):
        assert (s[sc]["nodes"], s[sc]["capacity_gpu_h"], s[sc]["allocated_gpu_h"]) == (2, 11_904, 81), sc
        assert (s[sc]["jobs"], s[sc]["jobs_not_started"], s[sc]["wait_hours"]) == (3, 0, pytest.approx(5.5)), sc
    assert s["replay"]["allocated_of_capacity_error_pts"] == pytest.approx(0)
    add = s["+1 h100"]
    assert (add["nodes"], add["capacity_gpu_h"], add["allocated_gpu_h"]) == (3, 17_856, 81)
    assert add["allocated_of_capacity"] == pytest.approx(81 / 17_856)
    assert (add["added_nodes"], add["wait_hours"], add["wait_hours_saved"]) == (1, pytest.approx(1.5), pytest.approx(4))
    assert add["wait_hours_saved_per_added_node"] == pytest.approx(4)
    m = warehouse_cost_model(site)["h100"]
    capex_node = 8 * 744 * m["node_price"] / 8 / (m["amortization_years"] * 8766)
    assert add["added_capex"] == pytest.approx(capex_node)
    assert add["cost_per_wait_hour_saved"] == pytest.approx(capex_node / 4)
    assert add["capex"] == pytest.approx(3 * capex_node)
    assert add["capex_per_allocated_gpu_h"] == pytest.approx(3 * capex_node / 81)
    rm = s["-1 h100"]
    assert (rm["nodes"], rm["capacity_gpu_h"], rm["allocated_gpu_h"]) == (1, 5_952, 17)  # n2 out from Oct 1
    assert (rm["jobs_started"], rm["jobs_not_started"]) == (2, 1)
    never = (datetime(2026, 11, 1, tzinfo=UTC) - datetime(2026, 10, 5, tzinfo=UTC)).total_seconds() / 3600
    assert rm["wait_hours"] == pytest.approx(never + 0 + 1.5)
    waits = _by(w["waits"], "scenario", "size_class")
    for sc in ("observed", "replay"):
        assert [waits[(sc, c)]["wait_p50_hours"] for c in ("1", "2-8", "9-64")] == [2.5, 3, 0], sc
    assert [waits[("+1 h100", c)]["wait_p50_hours"] for c in ("1", "2-8", "9-64")] == [1.5, 0, 0]
    assert waits[("replay", "1")]["wait_p50_ratio"] == pytest.approx(1)
    assert (waits[("-1 h100", "9-64")]["jobs_started"], waits[("-1 h100", "9-64")]["jobs_waiting"]) == (0, 1)
    projects = _by(w["projects"], "scenario", "project")
    assert [projects[("+1 h100", p)]["gpu_h"] for p in "ABC"] == [64, 16, 1]
    assert ("-1 h100", "A") in projects and projects[("-1 h100", "A")]["gpu_h"] == 0
    daily = _by(w["daily"], "scenario", "day")
    oct5 = datetime(2026, 10, 5).date()
    assert daily[("observed", oct5)]["allocated_gpu_h"] == pytest.approx(81)
    assert daily[("+1 h100", oct5)]["allocated_of_capacity"] == pytest.approx(81 / (3 * 8 * 24))
    # the replay wrote nothing: its tables were its session's, and are gone
    assert site.query_rows("SELECT count() FROM system.tables WHERE name LIKE 'whatif%'")[0][0] == 0


def test_load_scaling_and_refusals(site):
    w = whatif(site, cluster="t1", window=OCT, changes=[Change(scale_load=2.0)])
    s = _by(w["summary"], "scenario")
    assert (s["load x2"]["jobs"], s["load x2"]["allocated_gpu_h"]) == (6, 162)  # each job once more
    with pytest.raises(OpsError, match="no b200 nodes"):
        whatif(site, cluster="t1", window=OCT, changes=[parse_change(add=["b200:4"])])
    with pytest.raises(OpsError, match="has 2 h100 nodes"):
        whatif(site, cluster="t1", window=OCT, changes=[parse_change(remove=["h100:3"])])
    with pytest.raises(OpsError, match="expected NAME:NODES"):
        parse_change(add=["h200"])


def test_the_monthly_report_replays_the_configured_scenarios(site):
    """[[whatif]] in the config: the report's "What the next purchase buys" section, the same figures."""
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.analytics.monthly import monthly_report
    from ops_warehouse.reports.monthly_render import to_markdown

    site.cfg.whatif = [{"name": "one more H100 node", "add": ["h100:1"]}]
    r = monthly_report(Connection(site), month=OCT[0].date())
    assert r["schema_version"] == "5.1" and r["whatif"]["scenarios"] == ["observed", "replay", "one more H100 node"]
    s = _by_rows(r["whatif"]["summary"], "scenario")
    assert (s["one more H100 node"]["wait_hours_saved"], s["one more H100 node"]["added_nodes"]) == (
        pytest.approx(4), 1)
    md = to_markdown(r)
    assert "## What the next purchase buys" in md and "| wait-hours saved per added node |" in md
    assert "one more H100 node" in md
    # a project's report: its own projects row only
    ra = monthly_report(Connection(site), month=OCT[0].date(), project="A")
    assert {p["project"] for p in ra["whatif"]["projects"]} == {"A"}


def test_one_replay_for_the_reports_of_a_block(site, monkeypatch):
    """The demo's two reports in one each_mart_once block: the month is replayed once (the replays never depend
    on the project), and each report has its own scope's hand-worked figures from it."""
    from ops_warehouse.analytics import whatif as whatif_module
    from ops_warehouse.analytics.marts import each_mart_once

    replays = []
    real = whatif_module.replay_scenarios
    monkeypatch.setattr(whatif_module, "replay_scenarios", lambda *a, **k: replays.append(1) or real(*a, **k))
    one = [parse_change(add=["h100:1"])]
    with each_mart_once(site):
        w = whatif(site, cluster="t1", window=OCT, changes=one)
        wa = whatif(site, cluster="t1", window=OCT, changes=one, project="A")
        wb = whatif(site, cluster="t1", window=OCT, changes=one, project="B")
    assert len(replays) == 1
    assert wa["scenarios"] == wb["scenarios"] == w["scenarios"] == ["observed", "replay", "+1 h100"]
    assert wa["replay_s"] == wb["replay_s"] == 0  # none made: the block's
    s = _by(w["summary"], "scenario")
    assert (s["+1 h100"]["wait_hours"], s["+1 h100"]["wait_hours_saved"]) == (pytest.approx(1.5), pytest.approx(4))
    projects = _by(w["projects"], "scenario", "project")
    assert [projects[("+1 h100", p)]["gpu_h"] for p in "ABC"] == [64, 16, 1]
    # project A's J1 (16 GPUs × 4 h) and B's J2 (8 × 2 h), each report only its own project's row
    assert {(r["scenario"], r["project"], r["gpu_h"]) for r in wa["projects"].to_dicts()} == {
        (sc, "A", 64) for sc in ("observed", "replay", "+1 h100")}
    assert {(r["scenario"], r["project"], r["gpu_h"]) for r in wb["projects"].to_dicts()} == {
        (sc, "B", 16) for sc in ("observed", "replay", "+1 h100")}
    # outside a block, each call replays: a second block replays again
    with each_mart_once(site):
        whatif(site, cluster="t1", window=OCT, changes=one, project="A")
    assert len(replays) == 2


def _by_rows(rows, key):
    return {r[key]: r for r in rows}


def test_the_command(site, tmp_path):
    """`ops-report whatif` prints the three columns with the replay's error first; json carries the marts' rows;
    html is one file with the chart inline; a bad change is one line."""
    import json

    from tests.cli_runner import cli

    dsn = site.dsn
    site.close()  # the command opens the warehouse itself (the embedded engine is one process's)
    from ops_warehouse.warehouse import close_embedded

    close_embedded()
    out = cli("--warehouse", dsn, "whatif", "--month", "2026-10", "--add", "h100:1").stdout
    header = next(line for line in out.splitlines() if line.startswith("|") and "observed" in line)
    assert [c.strip() for c in header.strip("|").split("|")][1:] == ["observed", "replay", "+1 h100"]
    assert re.search(r"\| wait-hours saved\s+\| 0\s+\| 0\s+\| 4 ", out), out
    assert "0.00 points from what happened" in out and "| wait-hours saved per added node" in out
    j = json.loads(cli("--warehouse", dsn, "whatif", "--month", "2026-10", "--add", "h100:1", "--format", "json").stdout)
    assert {r["scenario"]: r["wait_hours_saved"] for r in j["summary"]}["+1 h100"] == pytest.approx(4)
    page = tmp_path / "w.html"
    cli("--warehouse", dsn, "whatif", "--month", "2026-10", "--add", "h100:1", "--format", "html", "--out", str(page))
    assert page.read_text().count("data:image/svg+xml;base64,") == 1
    bad = cli("--warehouse", dsn, "whatif", "--month", "2026-10", "--add", "b200:2", check=False)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "no b200 nodes" in bad.stderr
