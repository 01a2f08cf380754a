"""What a mart depends on is read from its text, not typed (analytics/declarations.py, issue 51 item 6): the
marts it includes (``{{mart name}}``) are its dependencies, and :func:`declarations.order` runs every mart
after those. No engine: the declarations and the shipped SQL files only."""

from __future__ import annotations

import dataclasses

import pytest
from ops_warehouse.analytics import declarations
from ops_warehouse.errors import OpsError
from ops_warehouse.sqlfiles import sql_text

# The `--- depends = [...]` lines the marts' headers held, typed by hand, before they were inferred (commit
# 28afcaf): the record the inferred dependencies are held to. Every other mart declared none.
HAND_TYPED = {
    "campaigns": ["hung_jobs"], "chargeback": ["cost", "run_allocation_daily"], "chargeback_totals": ["chargeback", "utilization"],
    "energy": ["efficiency", "job_energy"], "goodput": ["campaigns"], "gpu_heatmap": ["data_through"],
    "hang_suspect_nodes": ["hung_jobs"], "idle_capacity": ["utilization"], "idle_gpu_users": ["idle_gpu_jobs"],
    "largest_jobs": ["job_efficiency"], "node_failures": ["data_through"],
    "node_health": ["hang_suspect_nodes", "hung_jobs", "node_failures", "stragglers", "throttling"],
    "reservations": ["data_through"], "throttling": ["data_through"], "utilization_daily": ["data_through"],
    "xid_codes": ["xid_events"], "xid_events": ["data_through"],
    # issue 52's FOCUS export (engineer F): the chargeback's price, per day; its allocation and chargeback's are
    # one mart's rows (engineer G, round 4: run_allocation_daily)
    "focus_cost": ["cost", "run_allocation_daily"],
    # issue 52's job report (engineer J): the runs' figures and notes pooled from run_gpus, the notes by the rules
    # of hung_jobs and run_times
    "job_detail": ["run_gpus"], "job_notes": ["hung_jobs", "job_detail", "run_gpus", "run_times"],
    "run_gpu_series": ["run_gpus"],
    # issue 52's users (engineer U): pooled from the per-run marts, the report's users and the digest from it
    "user_efficiency": ["idle_gpu_jobs", "job_efficiency"], "user_resources": ["job_detail"],
    "users": ["user_efficiency"], "wasteful_users": ["user_efficiency", "user_resources"],
}
# round 5 (engineer A): one reading of a run's samples, run_observed, for which runs are idle and a user's
# utilization (the GPUs the hpc_job label names, as `ops-report job`): user_efficiency no longer reads
# job_efficiency's node share
HAND_TYPED.update({"idle_gpu_jobs": ["run_observed"], "user_efficiency": ["idle_gpu_jobs", "run_observed"]})

# a mart that names two others in its text and declares neither; its name sorts before both, so only its
# dependencies can put it after them
READER = """-- The Xid codes beside the window's end: a mart for this test.
--- [mart]
--- grain = "one row per Xid code"
--- scope = "cluster"
--- columns = ["xid", "through_ts"]
SELECT c.xid, d.through_ts
FROM ({{mart xid_codes}}) AS c CROSS JOIN ({{mart data_through}}) AS d
"""


def test_a_mart_naming_another_without_declaring_it_is_ordered_after_it():
    m = declarations.declaration("a_reader", READER)
    assert set(m.depends) == {"xid_codes", "data_through"}
    order = declarations.order({**declarations.marts(), "a_reader": m})
    # xid_codes includes xid_events, which includes data_through (the shipped files): all three come first
    at = {n: i for i, n in enumerate(order)}
    assert at["data_through"] < at["xid_events"] < at["xid_codes"] < at["a_reader"], order
    assert declarations.check(m, READER) == []


def test_the_inferred_dependencies_are_the_hand_typed_ones_and_give_the_same_order():
    declared = declarations.marts()
    inferred = {n: sorted(m.depends) for n, m in declared.items() if m.depends}
    assert inferred == {n: sorted(d) for n, d in HAND_TYPED.items()}
    by_hand = {n: dataclasses.replace(m, depends=tuple(HAND_TYPED.get(n, ()))) for n, m in declared.items()}
    order = declarations.order()
    assert order == declarations.order(by_hand) and sorted(order) == sorted(declared)
    at = {n: i for i, n in enumerate(order)}
    assert all(at[d] < at[n] for n, deps in HAND_TYPED.items() for d in deps)
    # the longest chain, by hand: data_through -> node_failures -> node_health, hung_jobs -> campaigns -> goodput
    assert at["hung_jobs"] < at["campaigns"] < at["goodput"] and at["node_failures"] < at["node_health"]


def test_no_shipped_mart_types_a_dependency_its_text_names():
    for name in declarations.marts():
        text = sql_text(f"marts/{name}.sql")
        assert not any(line.startswith("--- depends") for line in text.splitlines()), name
        assert declarations.check(declarations.mart(name), text) == [], name


def test_a_restated_unknown_or_circular_dependency_is_refused_in_one_line():
    restated = READER.replace('--- columns', '--- depends = ["xid_codes"]\n--- columns')
    m = declarations.declaration("a_reader", restated)
    assert m.depends == ("xid_codes", "data_through")  # still each once
    assert [w for w in declarations.check(m, restated) if "inferred" in w] != []
    # a dependency the text does not name (kept, as declared) must be a mart
    ghost = declarations.declaration("a_reader", READER.replace('--- columns', '--- depends = ["nope"]\n--- columns'))
    with pytest.raises(OpsError, match="depends on nope: no such mart"):
        declarations.order({**declarations.marts(), "a_reader": ghost})
    loop = {**declarations.marts(),
            "data_through": dataclasses.replace(declarations.mart("data_through"), depends=("xid_codes",))}
    with pytest.raises(OpsError, match="cycle"):
        declarations.order(loop)


# the report's marts in the order the monthly report held them when it listed them by hand (commit 4677861's
# analytics/monthly.py, its doc), and the ones it also read for the month before
REPORT_BY_HAND = ["utilization", "utilization_daily", "job_sizes", "run_times", "end_states", "failures_by_size",
                  "efficiency", "largest_jobs", "chargeback", "chargeback_totals", "users", "cost", "reservations",
                  "xid_events", "xid_codes", "node_failures", "throttling", "stragglers", "gpu_heatmap",
                  "fine_telemetry", "hung_jobs", "idle_gpu_jobs", "idle_gpu_users", "node_health", "energy",
                  "goodput", "campaigns"]
PREVIOUS_BY_HAND = ["utilization", "failures_by_size", "efficiency", "chargeback", "chargeback_totals", "cost"]


def test_the_report_is_declared_in_its_marts_places():
    """`report = N` is a mart's place in the monthly report and `previous = true` has it read the month before:
    the shipped declarations give the report's hand-kept order and comparisons (issue 51 item 6)."""
    assert declarations.reported() == REPORT_BY_HAND
    assert declarations.with_previous() == PREVIOUS_BY_HAND


def test_a_report_place_that_is_no_place_or_taken_is_refused_in_one_line(monkeypatch):
    flag = READER.replace("--- columns", "--- report = true\n--- columns")
    with pytest.raises(OpsError, match=r"^sql/marts/a_reader.sql: report is the mart's place .*not True$"):
        declarations.declaration("a_reader", flag)
    with pytest.raises(OpsError, match="previous = true but no place in the report"):
        declarations.declaration("a_reader", READER.replace("--- columns", "--- previous = true\n--- columns"))
    taken = declarations.declaration("a_reader", READER.replace("--- columns", "--- report = 7\n--- columns"))
    assert taken.report == 7 and not taken.previous
    declared = {**declarations.marts(), "a_reader": taken}
    monkeypatch.setattr(declarations, "marts", lambda: declared)
    with pytest.raises(OpsError, match=r"^sql/marts/a_reader.sql and sql/marts/efficiency.sql both declare "
                                       r"report = 7: each mart"):
        declarations.reported()
