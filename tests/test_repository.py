"""The repository stands alone: nothing the tests, benchmarks or notebooks run reads outside the clone, and
every real export under tests/data is listed with its source in tests/data/README.md."""

from __future__ import annotations

import re

from tests.conftest import DATA, REPO

# a path out of the repository into the workplace's shared folder, in any spelling a script would use
OUTSIDE = re.compile(r"""\.\./shared|["']shared["']\s*[/)]|parent\s*/\s*["']shared|OPS_SHARED_DATA""")


def test_no_test_bench_or_notebook_reads_outside_the_clone():
    offenders = []
    for folder in ("tests", "bench", "notebooks", "scripts", ".ci"):
        for f in sorted((REPO / folder).rglob("*")):
            if not f.is_file() or DATA in f.parents or f.suffix in (".pyc",) or "fuzz_corpus" in f.parts:
                continue
            text = f.read_text(errors="replace")
            offenders += [f"{f.relative_to(REPO)}:{i}" for i, line in enumerate(text.splitlines(), 1)
                          if OUTSIDE.search(line) and f.name != "test_repository.py"]
    assert offenders == []


def test_every_data_file_has_its_source_in_the_readme():
    readme = (DATA / "README.md").read_text()
    files = [f for f in sorted(DATA.rglob("*")) if f.is_file() and f.name not in ("README.md", "LICENSE")
             and "LICENSES" not in f.parts]
    assert len(files) >= 20
    # an entry names the file, or (for a folder of one source) its folder: `xdmod/shredder-unit/*.log`
    missing = [str(f.relative_to(DATA)) for f in files
               if f.name not in readme and f"{f.parent.name}/" not in readme]
    assert missing == []
