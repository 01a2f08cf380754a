"""One embedded warehouse for cron, managers and analysts: they take turns (core/turns.py), with real processes.

- a Jupyter kernel that connected and ran a query, then sits idle, blocks nobody;
- `ops-report monthly` started while `etl nightly` loads waits for it, says what it waits for, and gives the
  figures of the loaded data; with two sources it gets its turn between them, before the nightly ends;
- `--no-wait` and `[warehouse] wait_s` bound the wait with one line; two nightly runs still exclude each other.

The nightly's sacct is a script that waits for the test's go-ahead, so each step happens when the test says
and nothing depends on timing. Figures are worked out from the job lines below.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_runner import OPS, ops

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName")


def job(jid: int, cluster: str, gpus: int, start: str, end: str, hours: int) -> str:
    tres = f"billing={gpus},cpu={gpus},gres/gpu={gpus},mem=100G,node=1"
    return (f"{jid}|{jid}|{cluster}|gpu|normal|proja|proja|1|alice|1|{start}|{start}|{start}|{end}|{hours * 3600}|"
            f"2880|0:0|COMPLETED|1|{gpus}|{gpus}|100G|{tres}|{tres}|n1||job{jid}")


# c1: two jobs in October 2026, 8 GPUs x 10 h + 4 GPUs x 5 h = 100 GPU-hours; c2: one job, 2 x 3 = 6 GPU-hours
C1 = [job(1, "c1", 8, "2026-10-02T00:00:00", "2026-10-02T10:00:00", 10),
      job(2, "c1", 4, "2026-10-03T00:00:00", "2026-10-03T05:00:00", 5)]
C2 = [job(3, "c2", 2, "2026-10-04T00:00:00", "2026-10-04T03:00:00", 3)]
C1_GPU_H, C2_GPU_H = 8 * 10 + 4 * 5, 2 * 3

FAKE_SACCT = """#!/bin/sh
# the nightly's sacct: the n-th call waits for go<n>, then prints out<n>.psv
d={dir}
n=$(ls $d/called* 2>/dev/null | wc -l); n=$((n + 1)); touch $d/called$n
while [ ! -e $d/go$n ]; do sleep 0.05; done
cat $d/out$n.psv
"""


@pytest.fixture
def site(tmp_path):
    d = tmp_path / "sacct"
    d.mkdir()
    (d / "out1.psv").write_text("\n".join([HEAD, *C1]) + "\n")
    (d / "out2.psv").write_text("\n".join([HEAD, *C2]) + "\n")
    script = d / "sacct"
    script.write_text(FAKE_SACCT.format(dir=d))
    script.chmod(0o755)
    wh = tmp_path / "wh"
    cfg = tmp_path / "ops.toml"
    cfg.write_text(f'[warehouse]\ndsn = "chdb://{wh}"\nwait_s = 120\n[sacct]\ncommand = "{script}"\ncluster = "c1"\n'
                   '[[nightly.slurm]]\ncluster = "c1"\n[[nightly.slurm]]\ncluster = "c2"\n')
    env = {"OPS_CONFIG": str(cfg), "OPS_WAREHOUSE": ""}
    ops("init", env=env)
    return {"dir": d, "wh": wh, "env": {**os.environ, **env}}


def start(*args, env) -> subprocess.Popen:
    return subprocess.Popen([*OPS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for(cond, what: str, timeout_s: float = 120):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout_s, f"gave up waiting for {what}"
        time.sleep(0.05)


def waiting(wh: Path) -> list[str]:
    d = wh.parent / f".{wh.name}.waiting"
    return [p.read_text() for p in d.iterdir()] if d.is_dir() else []


def gpu_h(report: dict) -> float:
    return sum(r["gpu_h"] for r in report["job_sizes"])


def test_a_report_started_during_the_nightly_waits_and_gets_its_turn_between_sources(site, tmp_path):
    d, env = site["dir"], site["env"]
    nightly = start("etl", "nightly", "--from", "2026-10-01", "--to", "2026-10-31", env=env)
    wait_for(lambda: (d / "called1").exists(), "the nightly's first sacct")
    # the nightly has the warehouse (it opened it before its sources); a manager asks for c1's month
    monthly = start("monthly", "--cluster", "--slurm-cluster", "c1", "--month", "2026-10", "--format", "json", "--out",
                    str(tmp_path / "r1"), env=env)
    wait_for(lambda: "ops-report monthly" in waiting(site["wh"]), "the report to wait")
    (d / "go1").touch()  # c1's jobs load; between the two sources the report has its turn
    out, err = monthly.communicate(timeout=300)
    assert monthly.returncode == 0, err
    assert "waiting for the warehouse: nightly load by pid " + str(nightly.pid) in err
    # the nightly goes on to c2 once the report has let go; its sacct waits for go2, so it is still running
    wait_for(lambda: (d / "called2").exists(), "the nightly's second sacct")
    assert nightly.poll() is None and not (d / "go2").exists()
    report = json.loads(next((tmp_path / "r1").glob("*.json")).read_text())
    assert report["job_sizes"] and gpu_h(report) == pytest.approx(C1_GPU_H)  # the post-load figures

    (d / "go2").touch()
    out, err = nightly.communicate(timeout=300)
    assert nightly.returncode == 0, err
    assert out.count(": ok ") == 2, out
    p = ops("summary", "--from", "2026-10-01", "--to", "2026-10-31", "--by", "cluster", "--format", "json", env=env)
    by_cluster = {r["cluster"]: r["gpu_h"] for r in json.loads(p.stdout)}
    assert by_cluster == pytest.approx({"c1": C1_GPU_H, "c2": C2_GPU_H})


def test_no_wait_and_wait_s_bound_the_wait_in_one_line(site, tmp_path):
    d, env = site["dir"], site["env"]
    nightly = start("etl", "nightly", "--from", "2026-10-01", "--to", "2026-10-31", env=env)
    try:
        wait_for(lambda: (d / "called1").exists(), "the nightly's first sacct")
        p = ops("--no-wait", "summary", "--from", "2026-10-01", "--to", "2026-10-31", env=env, check=False)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "busy (nightly load by pid " + str(nightly.pid) in p.stderr and "--no-wait" in p.stderr
        t0 = time.monotonic()
        cfg = Path(env["OPS_CONFIG"])
        cfg.write_text(cfg.read_text().replace("wait_s = 120", "wait_s = 1"))
        p = ops("summary", "--from", "2026-10-01", "--to", "2026-10-31", env=env, check=False)
        assert p.returncode == 2 and time.monotonic() - t0 < 30
        lines = p.stderr.strip().splitlines()
        assert lines[0].startswith("waiting for the warehouse: nightly load by pid") and len(lines) == 2, p.stderr
        assert "stayed busy for 1 s" in lines[1]
        # a second nightly does not wait its turn: nightly runs exclude each other and it says so at once
        p = ops("etl", "nightly", env=env, check=False)
        assert p.returncode != 0 and "another ops-report etl nightly is running" in p.stderr
    finally:
        (d / "go1").touch()
        (d / "go2").touch()
        nightly.communicate(timeout=300)
    assert nightly.returncode == 0


KERNEL_CELLS = [
    "import ops_warehouse as ow\nwh = ow.connect({dsn!r})\n"
    "print('RUNS', wh.sql('SELECT count() AS n FROM slurm_job_run FINAL')['n'].item())",
    "print('GPU_H', round(wh.sql('SELECT sum(gpus * wall_s) / 3600 AS h FROM fct_job_run')['h'].item(), 6))",
]


def _execute(kc, code: str) -> str:
    msg_id = kc.execute(code)
    out = []
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        t, c = msg["msg_type"], msg["content"]
        if t == "stream":
            out.append(c["text"])
        elif t == "error":
            raise AssertionError("\n".join(c["traceback"]))
        elif t == "status" and c["execution_state"] == "idle":
            return "".join(out)


def test_an_idle_notebook_kernel_blocks_nobody(site, tmp_path):
    """An analyst's kernel connected and ran a query, and sits idle: the CLI's reports run, a load runs,
    and the kernel's next query sees the new rows."""
    from jupyter_client.manager import start_new_kernel

    env = site["env"]
    (tmp_path / "c1.psv").write_text("\n".join([HEAD, *C1]) + "\n")
    ops("etl", "sacct", str(tmp_path / "c1.psv"), env=env)
    km, kc = start_new_kernel(kernel_name="python3", env={**env, "PYTHONPATH": str(Path(__file__).parents[1])})
    try:
        out = _execute(kc, KERNEL_CELLS[0].format(dsn=f"chdb://{site['wh']}"))
        assert "RUNS 2" in out
        # the kernel is idle now and holds its Connection object
        p = ops("--no-wait", "summary", "--from", "2026-10-01", "--to", "2026-10-31", "--by", "cluster",
                "--format", "json", env=env)
        assert {r["cluster"]: r["gpu_h"] for r in json.loads(p.stdout)} == pytest.approx({"c1": C1_GPU_H})
        ops("--no-wait", "monthly", "--cluster", "--slurm-cluster", "c1", "--month", "2026-10", "--format", "json", "--out",
            str(tmp_path / "r"), env=env)
        assert gpu_h(json.loads(next((tmp_path / "r").glob("*.json")).read_text())) == pytest.approx(C1_GPU_H)
        (tmp_path / "c2.psv").write_text("\n".join([HEAD, *C2]) + "\n")
        ops("--no-wait", "etl", "sacct", str(tmp_path / "c2.psv"), env=env)
        assert f"GPU_H {C1_GPU_H + C2_GPU_H}" in _execute(kc, KERNEL_CELLS[1])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
