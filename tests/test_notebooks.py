"""The analysts' notebooks (notebooks/*.ipynb) executed as Jupyter runs them (nbclient, a real IPython
kernel) against the demo's warehouse, with their parameters cell overridden as papermill would; each one's
closing `summary` must equal the monthly report's figures for the same month and project. Committed
notebooks must carry no outputs."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import REPO, require

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
MONTH, PROJECT = "2026-10", "A"


def test_there_are_the_six_notebooks_and_none_carries_outputs():
    assert [p.name for p in NOTEBOOKS] == ["01_utilization_and_idle_capacity.ipynb", "02_job_sizes_and_run_times.ipynb",
                                           "03_reliability.ipynb", "04_investment_effectiveness.ipynb",
                                           "05_goodput_and_node_health.ipynb", "06_capacity_planning.ipynb"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not dirty, f"{path.name}: cells {dirty} have outputs (strip them: nbstripout, or Clear All Outputs)"
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1 and "dsn =" in params[0].source and "month =" in params[0].source, path.name
        # analysts read through the API only: no SQL or engine imports in the notebooks
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "import ops_warehouse as ow" in code and "clickhouse" not in code and "chdb" not in code.replace(
            '"chdb://demo/warehouse"', ""), path.name


def _execute(path: Path, dsn: str, tmp_path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    injected = nbformat.v4.new_code_cell(f"# injected parameters\ndsn = {dsn!r}\nproject = {PROJECT!r}\n"
                                         f"month = {MONTH!r}\ncluster = None")
    injected.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(at + 1, injected)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


def _summary(nb) -> dict:
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert last.source.rstrip().endswith("summary"), "a notebook ends with its summary"
    text = next(o for o in last.outputs if o.output_type == "execute_result")["data"]["text/plain"]
    return ast.literal_eval(text)


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.fixture(scope="module")
def executed(demo_runs, tmp_path_factory):
    base, _ = demo_runs
    dsn = f"chdb://{base / 'a' / 'warehouse'}"
    tmp = tmp_path_factory.mktemp("nb")
    out = {p.name: _execute(p, dsn, tmp) for p in NOTEBOOKS}
    report = json.loads((base / "a" / "out" / f"monthly-ai1-{PROJECT}-{MONTH}.json").read_text())
    cluster = json.loads((base / "a" / "out" / f"monthly-ai1-cluster-{MONTH}.json").read_text())
    return out, report, cluster


def test_utilization_notebook_matches_the_report(executed):
    nbs, report, cluster = executed
    nb = nbs["01_utilization_and_idle_capacity.ipynb"]
    s = _summary(nb)
    c = next(r for r in cluster["utilization"] if r["level"] == "cluster")
    assert s["utilization"] == pytest.approx(c["utilization"], abs=1e-6)
    assert s["available_gpu_h"] == pytest.approx(c["available_gpu_h"], abs=1e-3)
    assert s["allocated_gpu_h"] == pytest.approx(c["allocated_gpu_h"], abs=1e-3)
    assert s["free_gpu_h"] == pytest.approx(c["free_gpu_h"], abs=1e-2)
    assert s["reserved_idle_gpu_h"] == pytest.approx(c["reserved_idle_gpu_h"], abs=1e-2)
    assert s["project_allocated_gpu_h"] == pytest.approx(sum(d["project_allocated_gpu_h"] for d in report["utilization_daily"]), abs=1e-2)
    assert _images(nb) == 2


def test_job_sizes_notebook_matches_the_report(executed):
    nbs, report, _ = executed
    nb = nbs["02_job_sizes_and_run_times.ipynb"]
    s = _summary(nb)
    assert s["jobs"] == sum(r["jobs"] for r in report["job_sizes"]) > 0
    assert s["gpu_h"] == pytest.approx(sum(r["gpu_h"] for r in report["job_sizes"]), abs=1e-2)
    small = [r for r in report["job_sizes"] if r["min_gpus"] <= 8]
    assert s["small_job_share"] == pytest.approx(sum(r["job_share"] for r in small), abs=1e-6)
    assert s["small_gpu_h_share"] == pytest.approx(sum(r["gpu_h_share"] for r in small), abs=1e-6)
    assert s["p50_run_s_by_size"] == {r["size_class"]: r["run_p50_s"] for r in report["run_times"]}
    assert _images(nb) == 2


def test_reliability_notebook_matches_the_report(executed):
    nbs, _, cluster = executed
    nb = nbs["03_reliability.ipynb"]
    s = _summary(nb)
    a = next(r for r in cluster["failures_by_size"] if r["size_class"] == "all")
    assert s["hw_failures"] == a["hw_failures"]
    for k, tol in (("failures_per_1000_node_days", 1e-6), ("node_fail_run_gpu_h", 1e-2)):
        assert s[k] == (None if a[k] is None else pytest.approx(a[k], abs=tol)), k
    assert s["xid_events"] == sum(r["events"] for r in cluster["xid_events"]) > 0
    assert s["lemon_nodes"] == sorted(r["node"] for r in cluster["node_failures"] if r["repeated"])
    assert _images(nb) == 2


def test_investment_notebook_matches_the_report(executed):
    nbs, report, cluster = executed
    nb = nbs["04_investment_effectiveness.ipynb"]
    s = _summary(nb)
    total = next(r for r in cluster["cost"] if r["model"] == "all")
    assert s["total_cost"] == pytest.approx(total["total_cost"], abs=0.01)
    assert s["idle_cost"] == pytest.approx(total["idle_cost"], abs=0.01)
    # each model's cost is split by its projects' shares: the charges add up to the cost of every model
    # that was allocated at all (a model no job used is nobody's to pay)
    used = [r for r in cluster["cost"] if r["model"] != "all" and r["allocated_gpu_h"] > 0]
    assert s["chargeback_total"] == pytest.approx(sum(r["total_cost"] for r in used), abs=0.05)
    assert s["project_cost"] == pytest.approx(sum(r["cost"] for r in report["chargeback"]), abs=0.01)
    assert _images(nb) == 2


def test_hangs_idle_and_node_health_notebook_matches_the_report(executed):
    nbs, report, _ = executed
    nb = nbs["05_goodput_and_node_health.ipynb"]
    s = _summary(nb)
    assert s["telemetry_covered"] == bool(report["fine_telemetry"]["covered"]) is True
    assert s["hung_runs"] == sorted(h["job_id"] for h in report["hung_jobs"])
    total = next(u for u in report["idle_gpu_users"] if u["level"] == "all")
    assert (s["idle_runs"], s["idle_gpu_h"]) == (total["runs"], pytest.approx(total["gpu_h"] or 0.0, abs=1e-3))
    assert s["idle_runs"] == len(report["idle_gpu_jobs"])
    assert s["swap_list"] == [n["node"] for n in report["node_health"] if n["swap"]]
    own = next(g for g in report["goodput"] if g["project_key"] == PROJECT)
    assert s["ettr"] == (None if own["ettr"] is None else pytest.approx(own["ettr"], abs=1e-6))
    assert _images(nb) == 3


def test_capacity_planning_notebook_matches_the_report(executed):
    """The demo's config replays "16 more H200 nodes" in the monthly report ([[whatif]]): the notebook's own
    replay through the API gives the same figures."""
    nbs, report, _ = executed
    s = _summary(nbs["06_capacity_planning.ipynb"])
    w = report["whatif"]
    assert s["scenarios"] == w["scenarios"] == ["observed", "replay", "16 more H200 nodes"]
    by = {r["scenario"]: r for r in w["summary"]}
    assert s["allocated_of_capacity"] == {k: pytest.approx(v["allocated_of_capacity"], abs=1e-6) for k, v in by.items()}
    assert s["replay_error_pts"] == pytest.approx(by["replay"]["allocated_of_capacity_error_pts"], abs=1e-6)
    assert s["wait_hours_saved_per_added_node"] == pytest.approx(
        by["16 more H200 nodes"]["wait_hours_saved_per_added_node"], abs=1e-6)
    assert s["project_gpu_h"] == {r["scenario"]: pytest.approx(r["gpu_h"], abs=1e-3) for r in w["projects"]}
    assert _images(nbs["06_capacity_planning.ipynb"]) == 2


JUPYTER = Path(sys.executable).parent / "jupyter"


@require(JUPYTER.exists(), "Jupyter (pip install '.[notebooks]')")
def test_the_notebooks_extra_gives_jupyter_lab():
    """`pip install '.[notebooks]'` (scripts/test installs it) gives the `jupyter lab` the README and the demo's
    closing lines tell a user to run, with this environment's kernel."""
    p = subprocess.run([str(JUPYTER), "lab", "--version"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and int(p.stdout.strip().split(".")[0]) >= 4, p.stdout + p.stderr
    p = subprocess.run([str(JUPYTER), "kernelspec", "list", "--json"], capture_output=True, text=True, timeout=120)
    assert "python3" in json.loads(p.stdout)["kernelspecs"]
