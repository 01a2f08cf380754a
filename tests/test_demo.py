"""`ops-report demo`, the README's first command: runs on the embedded default and is reproducible."""

from __future__ import annotations

import json

from tests.test_cli import ops


def test_demo_twice_gives_the_same_outputs(tmp_path):
    outs = []
    for run in ("a", "b"):
        p = ops("demo", "--dir", str(tmp_path / run), "--jobs", "3000", cwd=tmp_path,
                env={"OPS_WAREHOUSE": "", "OPS_CONFIG": ""})
        assert "quarantined 0" in p.stdout and "| A " in p.stdout
        outs.append({f.name: f.read_bytes() for f in sorted((tmp_path / run / "out").iterdir())})
    assert outs[0] == outs[1]
    assert {"summary_by_project.json", "summary_by_gpu_count.md", "summary_by_wall_time.csv"} <= set(outs[0])
    projects = json.loads(outs[0]["summary_by_project.json"])
    assert [p["project"] for p in projects] == ["A", "B", "C", "D", "E", "F"]
    # the demo loads its month: jobs of every project ran and used GPUs
    assert all(p["jobs_ended"] > 0 and p["gpu_hours"] > 0 for p in projects)
