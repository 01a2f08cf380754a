"""The package claims the Python versions pyproject.toml's requires-python names (issue 13: it said >= 3.10 and
imported tomllib, new in 3.11). vermin reads every module's syntax tree and reports anything newer than the
oldest version claimed (standard modules and their members, syntax such as `except*`, evaluated annotations);
a version-guarded import (`if sys.version_info >= (3, 11)`) counts as guarded."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

# the folders of Python that run in CI but do not ship (notebooks/ are JSON and run what the package imports)
UNSHIPPED = ("tests", "bench", "scripts")


def folders() -> list[str]:
    """Every folder pyproject.toml maps a package onto (read from it, so a new one cannot be left out: issue 49
    found analytics/, planning/ and generate/ missing from a written list), then the unshipped ones."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return sorted({d.split("/")[0] for d in package_dir.values()}) + list(UNSHIPPED)
# vermin takes bytes.decode for str.decode (Python 2 only) where it cannot tell the type: never meant here
VERMIN_OPTIONS = ("--no-tips", "--violations", "--eval-annotations", "--exclude", "str.decode")


def oldest_python() -> str:
    text = (REPO / "pyproject.toml").read_text()
    m = re.search(r'^requires-python\s*=\s*">=\s*(3\.\d+)"', text, re.M)
    assert m, "pyproject.toml names no requires-python lower bound"
    return m.group(1)


def vermin(target: str, *paths) -> subprocess.CompletedProcess:
    pytest.importorskip("vermin", reason="vermin is in the test extra: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", f"-t={target}-", *VERMIN_OPTIONS, *map(str, paths)],
                          capture_output=True, text=True, timeout=300)


def test_the_check_catches_a_newer_module(tmp_path):
    """The check can fail: an unguarded `import tomllib` and `datetime.UTC` (both 3.11) are reported for 3.10.
    (Syntax new in 3.11, such as `except*`, does not parse under 3.10 at all: CI's interpreter is newer.)"""
    (tmp_path / "new.py").write_text("import tomllib\n")
    (tmp_path / "groups.py").write_text("import datetime\nprint(datetime.UTC)\n")
    (tmp_path / "guarded.py").write_text(
        "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\nelse:\n    import tomli as tomllib\n")
    for name, fails in (("new.py", True), ("groups.py", True), ("guarded.py", False)):
        p = vermin("3.10", tmp_path / name)
        assert (p.returncode != 0) == fails, (name, p.stdout, p.stderr)


def test_every_package_folder_is_checked():
    got = folders()
    for f in ("core", "etl", "analytics", "generate", "reports", "planning", "cli", "sql", "tests"):
        assert f in got, f
    assert all((REPO / f).is_dir() for f in got), got


def test_the_code_runs_on_the_oldest_python_claimed():
    target = oldest_python()
    p = vermin(target, *[REPO / f for f in folders()])
    assert p.returncode == 0, f"needs more than Python {target}:\n{p.stdout}{p.stderr}"
    assert "Target versions not met" not in p.stdout


def test_tomli_stands_in_for_tomllib_where_it_is_missing():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'''"tomli>=2; python_version < '3\.11'"''', text)
    src = (REPO / "core" / "config.py").read_text()
    assert "import tomli as tomllib" in src


def test_times_with_a_trailing_z_read_on_every_version():
    """datetime.fromisoformat reads a trailing Z from 3.11 on only: the readers of user-given times add it."""
    from datetime import datetime, timezone

    from ops_warehouse.analytics.periods import utc_time
    from ops_warehouse.etl.capacity_sources import _ts

    t = datetime(2026, 10, 1, 12, 30, tzinfo=timezone.utc)
    assert _ts("2026-10-01T12:30:00Z", "test") == t and utc_time("2026-10-01T12:30Z", "test") == t
