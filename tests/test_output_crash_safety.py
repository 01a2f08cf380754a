"""A report or export write that fails leaves the previous file (issue 27): every written file goes to a
temporary file in its folder, is flushed and renamed over the old one (core/files.py).

The failures are real: the kernel's file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes a write past it
fail with EFBIG half-way, as a full disk fails it with ENOSPC, whatever the writer (Python's, polars' own);
and a process SIGKILLed in the middle of a write. Before the fix the monthly report's files were written in
place: a write cut short left a truncated JSON (or a 0-byte HTML after a kill) where the good report was.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.files import replacing, write_file
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import DATA, REPO, warehouse_config

HOSTILE = DATA / "hostile"
CLUSTER = "../../../var/x"


@contextmanager
def file_size_limit(n: int):
    """Writes past ``n`` bytes of a file fail (EFBIG) in this process, as on a full disk."""
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too: a temporary file left behind shows) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- the monthly report's files


@pytest.fixture
def renderers(monkeypatch):
    """The report's renderers made to give texts of a known size (the files' handling is what is tested,
    and a real report costs 6 CPU s): 20 kB of Markdown, 50 kB of HTML, a chart; the JSON is the real
    to_json of the report dict given."""
    from ops_warehouse.reports import monthly_render

    state = SimpleNamespace(version="v1")
    monkeypatch.setattr(monthly_render, "draw_all", lambda r: {"gantt": "<svg>" + "g" * 3000 + "</svg>"})
    monkeypatch.setattr(monthly_render, "to_markdown", lambda r, files: f"# {state.version}\n" + "m" * 20_000)
    monkeypatch.setattr(monthly_render, "to_html", lambda r, charts: f"<!-- {state.version} -->" + "h" * 50_000)
    return state


def _report(version: str) -> dict:
    return {"cluster": "c1", "project": None, "scope": "cluster", "month": "2026-10", "version": version,
            "rows": [{"project": f"p{i}", "gpu_h": i * 1.5} for i in range(400)]}


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
def test_a_report_write_cut_short_leaves_the_previous_report(tmp_path, renderers, fmt):
    from ops_warehouse.reports.monthly_render import write

    out = tmp_path / "out"
    write(_report("v1"), out, ["md", "html", "json"])
    before = _snapshot(out)
    stem = "monthly-c1-cluster-2026-10"
    assert set(before) == {f"{stem}.json", f"{stem}.md", f"{stem}.html", f"{stem}-charts/gantt.svg"}
    assert all(len(b) > 8192 for name, b in before.items() if not name.endswith(".svg"))
    renderers.version = "v2"  # the new report differs from the one on disk
    with file_size_limit(8192), pytest.raises(OpsError) as e:
        write(_report("v2"), out, [fmt])
    assert str(e.value).startswith(f"cannot write {out / f'{stem}.{fmt}'}: File too large") and "\n" not in str(e.value)
    # before: the file cut at 8,192 bytes (a JSON that does not parse) and the good report gone
    assert _snapshot(out) == before  # every byte of the previous report, and no temporary file
    json.loads(before[f"{stem}.json"])
    write(_report("v2"), out, [fmt])  # with room again, the new report replaces it whole
    assert _snapshot(out)[f"{stem}.{fmt}"] != before[f"{stem}.{fmt}"]
    assert set(_snapshot(out)) == set(before)


def test_a_write_killed_half_way_leaves_the_previous_file(tmp_path):
    """SIGKILL in the middle of the write: the old file stays; the dead process's temporary file is removed
    by the next write of that file."""
    target = tmp_path / "monthly.html"
    write_file(target, "<html>good</html>\n")
    child = (
        "import os, signal, sys\n"
        "from ops_warehouse.files import replacing\n"
        "with replacing(sys.argv[1]) as tmp:\n"
        "    with open(tmp, 'wb') as f:\n"
        "        f.write(b'<html>half of the new rep'); f.flush()\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.run([sys.executable, "-c", child, str(target)], capture_output=True, timeout=120)
    assert p.returncode == -signal.SIGKILL
    left = [f.name for f in tmp_path.iterdir() if f.name != "monthly.html"]
    assert target.read_text() == "<html>good</html>\n" and len(left) == 1 and left[0].startswith(".monthly.html.")
    write_file(target, "<html>new</html>\n")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["monthly.html"]
    assert target.read_text() == "<html>new</html>\n"


# ---------------------------------------------------------------- the export's files


@pytest.fixture(scope="module")
def hostile_dsn(tmp_path_factory, request) -> str:
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.sacct_load import load_sacct

    cfg = warehouse_config("embedded", tmp_path_factory.mktemp("crash-safety"), request)
    wh = open_warehouse(cfg)
    try:
        load_capacity(wh, inventory=HOSTILE / "writers-inventory.csv", cluster=CLUSTER)
        assert load_sacct(wh, HOSTILE / "writers-traversal.psv").jobs_loaded == 3
    finally:
        wh.close()
        close_embedded()
    return cfg.dsn


def test_an_export_cut_short_leaves_the_previous_export(hostile_dsn, tmp_path, monkeypatch):
    """A Parquet file written by polars past the limit, then a manifest past it: each time the previous
    export is there byte for byte and no temporary file is left (before: polars' `.<mart>.parquet.tmp`
    stayed behind, and manifest.json was written in place)."""
    from ops_warehouse.analytics import export
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.config import Config

    big = pl.DataFrame({"x": range(50_000)}).with_columns((pl.col("x") * 7919 % 100_003).alias("y"))
    monkeypatch.setattr(export, "_marts", lambda api, per, project: {
        "job_sizes": api.job_sizes(per, project=project), "big": big})
    out = tmp_path / "exports"
    api = Connection(open_warehouse(Config(dsn=hostile_dsn)))
    try:
        manifest = export.export_month(api, out, "2026-10", cluster=CLUSTER)
        folder = Path(manifest["folder"])  # its name: tests/test_security.py
        before = _snapshot(out)
        assert set(before) == {f"{folder.name}/{f}" for f in ("job_sizes.parquet", "big.parquet", "manifest.json")}
        assert len(before[f"{folder.name}/big.parquet"]) > 65_536
        with file_size_limit(65_536), pytest.raises(OpsError, match=r"^cannot write .*big\.parquet: .*File too large"):
            export.export_month(api, out, "2026-10", cluster=CLUSTER)
        assert _snapshot(out) == before
        # the manifest, written last, made larger than a limit every Parquet file passes (valid JSON: spaces at
        # its end)
        limit = max(len(b) for b in before.values()) + 10_000
        dumps = json.dumps
        monkeypatch.setattr(export, "json", SimpleNamespace(dumps=lambda *a, **k: dumps(*a, **k) + " " * limit))
        with file_size_limit(limit), pytest.raises(OpsError, match=r"^cannot write .*manifest\.json: File too large"):
            export.export_month(api, out, "2026-10", cluster=CLUSTER)
        after = _snapshot(out)
        assert set(after) == set(before) and after[f"{folder.name}/manifest.json"] == before[f"{folder.name}/manifest.json"]
    finally:
        api._given.close()
        close_embedded()


# ---------------------------------------------------------------- the helper itself


def test_a_failed_rename_or_writer_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    write_file(target, '{"good": true}\n')
    target.chmod(0o640)

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", refuse)
        with pytest.raises(OpsError, match=r"^cannot write .*report.json: No space left on device \(the previous"):
            write_file(target, '{"new": true}\n')
    assert target.read_bytes() == b'{"good": true}\n' and os.listdir(tmp_path) == ["report.json"]
    with pytest.raises(ValueError, match="serializer broke"), replacing(target) as tmp:  # a writer failing half-way
        tmp.write_bytes(b'{"half')
        raise ValueError("serializer broke")
    assert target.read_bytes() == b'{"good": true}\n' and os.listdir(tmp_path) == ["report.json"]
    write_file(target, '{"new": true}\n')
    assert target.read_bytes() == b'{"new": true}\n' and os.stat(target).st_mode & 0o777 == 0o640  # mode kept


def test_stale_temporary_files_of_dead_processes_only_are_removed(tmp_path):
    target = tmp_path / "a.md"
    dead = tmp_path / ".a.md.4194999.0badcafe.tmp"   # pids stop at 4,194,304 on Linux
    alive = tmp_path / ".a.md.1.0badcafe.tmp"        # pid 1 is always there
    other = tmp_path / ".b.md.4194999.0badcafe.tmp"  # another file's
    for f in (dead, alive, other):
        f.write_text("partial")
    write_file(target, "# report\n")
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted([target.name, alive.name, other.name])


def test_every_writer_of_user_facing_files_goes_through_the_helper():
    """reports/, analytics/ and cli/ write files only through core/files.py: no write_text, write_bytes or
    open(..., "w"), and every polars or matplotlib write to a path inside a `with replacing(...)` block."""
    bad = []
    for folder in ("reports", "analytics", "cli"):
        for f in sorted((REPO / folder).glob("*.py")):
            lines = f.read_text().splitlines()
            for i, line in enumerate(lines):
                code = line.split("#")[0]
                if re.search(r"\.write_(text|bytes)\(|\bopen\([^)]*['\"][wax]b?\+?['\"]", code):
                    bad.append(f"{folder}/{f.name}:{i + 1}: {line.strip()}")
                elif re.search(r"\.(write_parquet|write_csv|write_json|write_ipc|sink_parquet|savefig)\((?!\))", code):  # to a path
                    if "savefig(buf" in code or any("replacing(" in prev for prev in lines[max(0, i - 3):i]):
                        continue
                    bad.append(f"{folder}/{f.name}:{i + 1}: {line.strip()}")
    assert bad == []
