"""The report's charts are drawn in forked worker processes (reports/charts.py) that the pool ends with SIGTERM
once they are drawn; the command's SIGTERM handler (core/errors.py) must not follow them there."""

from __future__ import annotations

from tests.cli_runner import ops
from tests.sites import phillips


def test_a_report_with_charts_prints_no_worker_traceback(tmp_path, tmp_path_factory):
    # Open XDMoD's phillips.log: December 2016 has runs to draw (the run-time and size charts at least); loaded
    # once per run (tests/sites.py), a copy of it here
    dsn = f"chdb://{phillips(tmp_path_factory).open_copy(tmp_path)}"
    p = ops("--warehouse", dsn, "monthly", "--cluster", "--month", "2016-12", "--format", "html",
            "--out", str(tmp_path / "out"))
    html = next((tmp_path / "out").glob("*.html")).read_text()
    assert html.count("data:image/png;base64,") >= 2  # drawn by more than one worker where there are two cores
    assert "Traceback" not in p.stderr and "Terminated" not in p.stderr, p.stderr
