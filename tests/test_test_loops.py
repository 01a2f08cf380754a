"""The two test loops (docs/testing.md): `pytest` alone collects only the fast tests, a run that names a module
collects all of it, and scripts/test's `-m ""` collects every test, so CI's count check sees the whole suite."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # two collections of the suite and two of a module, in subprocesses: ~80 s on 2 cores

# measured in CI's whole run of 2026-12-06 (its JUnit report): 18.8 s, with no slow mark of its own
LONG = "tests/test_checks.py::test_each_law_holds_on_the_hand_built_month[capacity_order]"
# 0.0 s there, and no fixture
QUICK = "tests/test_checks.py::test_a_header_without_its_law_is_refused"
DEMO = "tests/test_demo.py::"  # every test of the demo: slow by its fixture


def collected(*args: str) -> set[str]:
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                        *args], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return {line.strip() for line in p.stdout.splitlines() if "::" in line}


def test_pytest_alone_is_the_fast_loop_naming_a_module_runs_all_of_it_and_m_empty_runs_everything():
    fast = collected()
    every = collected("-m", "")
    assert QUICK in fast and QUICK in every
    assert LONG not in fast and LONG in every
    assert not any(t.startswith(DEMO) for t in fast)
    assert sum(t.startswith(DEMO) for t in every) >= 8  # the eight demo tests CI ran on 2026-12-06
    assert fast < every
    assert len(every) > 985  # .ci/run's count before issue 51
    # a run that names a module collects every test of it, as the whole run does, unless it gives its own -m
    named = collected("tests/test_checks.py")
    assert named == {t for t in every if t.startswith("tests/test_checks.py::")}
    assert len(named) >= 66  # the module's 66 tests on 2026-12-06, slow ones included
    assert LONG not in collected("tests/test_checks.py", "-m", "not slow")
