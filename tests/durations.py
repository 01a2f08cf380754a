"""Each test's measured time in CI's last full run (tests/durations.json), read by tests/conftest.py for two
things: the default `pytest` loop leaves out the tests that took longer than SLOW_S (marked slow), and the
two xdist workers take the longest groups first, so that none of them starts last and ends the run alone.

Refresh it from a whole-suite run's JUnit report (`.ci/run` prints where it wrote it):

    python -m tests.durations /tmp/tmp.XXXX/junit.xml

A test missing from the file (a new one) counts as fast until the file is refreshed; a group missing from it
starts first (its time is unknown, and a short group started early costs nothing)."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")
# a test measured above this (on CI's 2 cores, setup and teardown included) is left out of the default loop:
# the rest, about 330 tests, take about a minute of the two workers (docs/testing.md)
SLOW_S = 1.5


def load() -> dict[str, float]:
    """Seconds each test took, by node id; empty where there is no file."""
    try:
        return json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return {}


def from_junit(path: Path) -> dict[str, float]:
    """The node ids and times of a JUnit report written by pytest (classname is the module's dotted path)."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    times: dict[str, float] = {}
    for case in suite.iter("testcase"):
        nodeid = case.get("classname").replace(".", "/") + ".py::" + case.get("name")
        times[nodeid] = round(float(case.get("time", 0)), 1)
    return times


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.durations JUNIT_XML", file=sys.stderr)
        return 2
    times = from_junit(Path(argv[0]))
    DURATIONS.write_text(json.dumps(dict(sorted(times.items())), indent=0) + "\n")
    slow = sum(t > SLOW_S for t in times.values())
    print(f"{DURATIONS}: {len(times)} tests, {sum(times.values()):.0f} s; {slow} above {SLOW_S} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
