"""The two test loops (docs/testing.md): `pytest` alone collects only the fast tests, a run that names a module
collects all of it, and scripts/test's `-m ""` collects every test, so CI's count check sees the whole suite
(.ci/run's MIN_TESTS fails a run that collected fewer)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import durations
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # a collection of the whole suite (~25 s on 2 cores) and three of two modules

# the longest test of test_checks.py in CI's last whole run (tests/durations.json) among those with no slow mark
# of their own (the small generated site's and the demo's laws carry one): which test that is moves with the
# module's fixtures (the hand-built month's laws, run once for the module, charged to the first test that asks;
# 2026-12-06: test_each_law_holds_on_the_hand_built_month[capacity_order], 18.8 s)
_OWN_MARK = ("test_each_law_on_a_small_generated_site", "test_laws_on_the_demo")
_CI_S = durations.load()
LONG = max((t for t in _CI_S if t.startswith("tests/test_checks.py::") and not any(m in t for m in _OWN_MARK)),
           key=_CI_S.__getitem__)
# 0.0 s there, and no fixture
QUICK = "tests/test_checks.py::test_a_header_without_its_law_is_refused"
DEMO = "tests/test_demo.py::"  # every test of the demo: slow by its fixture


def collected(*args: str) -> set[str]:
    # without the caller's PYTEST_ADDOPTS: a suite run with -v in it (to see each test's name as it ends) made
    # the inner --collect-only -q print its tree instead of the test ids
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                        *args], cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return {line.strip() for line in p.stdout.splitlines() if "::" in line}


def test_pytest_alone_is_the_fast_loop_naming_a_module_runs_all_of_it_and_m_empty_runs_everything():
    assert _CI_S[LONG] > durations.SLOW_S  # the file names a long test: else the next lines prove nothing
    fast = collected()
    assert QUICK in fast
    assert LONG not in fast
    assert not any(t.startswith(DEMO) for t in fast)
    # a run that names modules collects every test of them, slow ones included, unless it gives its own -m
    named = collected("tests/test_checks.py", "tests/test_demo.py")
    assert QUICK in named and LONG in named
    assert sum(t.startswith("tests/test_checks.py::") for t in named) >= 66  # the module's 66 on 2026-12-06
    assert sum(t.startswith(DEMO) for t in named) >= 8  # the eight demo tests CI ran on 2026-12-06
    assert LONG not in collected("tests/test_checks.py", "-m", "not slow")
    # scripts/test's -m "" (before the arguments) selects every test; .ci/run's count check counts them
    assert collected("-m", "", "tests/test_checks.py", "tests/test_demo.py") == named
