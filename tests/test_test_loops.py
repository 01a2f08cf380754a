"""The two test loops (docs/testing.md): `pytest` alone collects only the fast tests, a run that names a module
collects all of it, and scripts/test's `-m ""` collects every test, so CI's count check sees the whole suite
(.ci/run's MIN_TESTS fails a run that collected fewer)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # a collection of the whole suite (~25 s on 2 cores) and three of two modules

# measured in CI's whole run of 2026-12-06 (its JUnit report): 18.8 s, with no slow mark of its own
LONG = "tests/test_checks.py::test_each_law_holds_on_the_hand_built_month[capacity_order]"
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
