"""The demo's monthly stage (cli/demo.py write_reports): each report's files, its charts drawn, are written by
a forked process while the demo goes on with the next report's marts and the Parquet exports (issue 51: the
marts leave a core idle most of the time); every file is there when the stage ends, and a writer that fails
stops the demo with a line naming the folder. The files' content is the demo's own tests' (tests/test_demo.py:
the reports' JSON against the simulation's truth, two runs byte for byte)."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from datetime import date

import pytest

from ops_warehouse.cli import demo
from ops_warehouse.errors import OpsError


@pytest.fixture()
def stage(monkeypatch, tmp_path):
    """write_reports with the marts and exports replaced by stand-ins: a report is its project, an export a
    file in exports/ (what the writers wait for), each step's order recorded."""
    monkeypatch.setattr(demo, "each_mart_once", lambda wh: nullcontext())
    monkeypatch.setattr(demo, "Connection", lambda wh: wh)
    monkeypatch.setattr(demo, "monthly_report", lambda c, month, project, cluster: {"project": project})

    def export(c, folder, month, project, cluster):
        folder.mkdir(exist_ok=True)
        (folder / f"export-{project}").write_text("done")

    monkeypatch.setattr(demo, "export_month", export)
    return tmp_path


def _waits_for_the_exports(r, out, formats):
    """A report's files, written only once both exports are there: a writer that ran before the exports (in
    turn, in the demo's own process) would wait for them forever (here 20 s, then fail)."""
    exports = out.parent / "exports"
    t = time.monotonic() + 20
    while not ((exports / "export-None").exists() and (exports / "export-A").exists()):
        if time.monotonic() > t:
            raise SystemExit(f"report {r['project']}: the exports never came while it was written")
        time.sleep(0.05)
    out.mkdir(exist_ok=True)
    (out / f"report-{r['project']}.json").write_text(json.dumps({**r, "formats": formats}))


def test_the_reports_files_are_written_beside_the_exports(stage, monkeypatch):
    monkeypatch.setattr(demo, "write", _waits_for_the_exports)
    reports = demo.write_reports(None, stage / "out", stage / "exports", date(2026, 10, 1), "ai1")
    assert reports == [{"project": None}, {"project": "A"}]
    # both files there when the stage returns, each written once with the three formats
    assert sorted(p.name for p in (stage / "out").iterdir()) == ["report-A.json", "report-None.json"]
    assert json.loads((stage / "out" / "report-A.json").read_text()) == {"project": "A",
                                                                         "formats": ["md", "html", "json"]}


def test_a_writer_that_fails_stops_the_demo_naming_the_folder(stage, monkeypatch):
    def fails(r, out, formats):
        raise SystemExit(3 if r["project"] else 0)  # the cluster's writer ends well, project A's does not

    monkeypatch.setattr(demo, "write", fails)
    with pytest.raises(OpsError, match=r"writing the monthly reports' files into .*out failed \(exit codes \[3\]"):
        demo.write_reports(None, stage / "out", stage / "exports", date(2026, 10, 1), "ai1")
