"""Data safety of the loads (issue 7): running them again, backfilling what is loaded, and killing them
(SIGKILL, at random points) then running them again must leave every table as a single clean run leaves
it: nothing lost, nothing doubled. Compared as content checksums of every table (tests/conftest.py).

The input is the generator's: three days before today on 16 nodes (sacct output, dcgm/NIC/Lustre/IPMI
day files, the inventory, node events and a reservation), loaded through `ops-report`: in a subprocess
where the process is the point (the load killed, the clean run it is timed against, the output under cron
and on a terminal), in this process (tests/cli_runner.py `cli`: the same `main()`) for the runs that only
load (the reruns, a kill's rerun to the end), a second or more of start-up less each. The same checks
against a real Slurm (the sacct and slurmdbd sources) are in tests/test_slurm_live.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import TODAY, warehouse_checksums
from tests.cli_runner import OPS, cli, ops

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

FIRST_DAY = TODAY - timedelta(days=3)
LAST_DAY = TODAY - timedelta(days=1)
NODES = 16


@pytest.fixture(scope="module")
def gen(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    cli("generate", "--out", str(out), "--start", FIRST_DAY.isoformat(), "--days", "3", "--jobs-per-day", "1000",
        "--nodes", str(NODES), "--metrics-step", "300", "--seed", "11")
    return out


def nightly_config(path: Path, wh: Path, gen: Path, sources: tuple[str, ...]) -> dict:
    """A config naming ``sources`` (telemetry, capacity) of the generated site; returns the env to run with."""
    text = f'[warehouse]\ndsn = "chdb://{wh}"\n[sacct]\ncluster = "ai1"\n'
    if "telemetry" in sources:
        text += f'[nightly.telemetry]\nsource = "file"\npath = "{gen / "telemetry"}"\ncluster = "ai1"\n'
    if "capacity" in sources:
        text += (f'[nightly.capacity]\ncluster = "ai1"\ninventory = "{gen / "inventory.csv"}"\n'
                 f'events = "{gen / "slurm" / "events.psv"}"\nreservations = "{gen / "slurm" / "reservations.txt"}"\n')
    path.write_text(text)
    return {"OPS_CONFIG": str(path), "OPS_WAREHOUSE": ""}


def test_repeated_runs_and_backfills_leave_every_table_identical(gen, tmp_path):
    """Nightly three times, a backfill of the loaded window and of one day in it, the sacct file loaded
    twice: after the first load no table changes."""
    wh = tmp_path / "wh"
    env = nightly_config(tmp_path / "ops.toml", wh, gen, ("telemetry", "capacity"))
    cli("etl", "sacct", str(gen / "sacct" / "sacct.psv"), env=env)
    first = cli("etl", "nightly", env=env).stdout
    assert first.count(": ok ") == 2 and f"{FIRST_DAY}..{LAST_DAY}" in first, first
    once = warehouse_checksums(wh)
    # the load is complete: as many GPU samples as the day files hold, every job run of the sacct output
    dcgm = pl.read_parquet(gen / "telemetry" / "dcgm" / "*.parquet")
    assert once["gpu_sample"][0] == dcgm.select(pl.struct("Hostname", "gpu", "timestamp").n_unique()).item()
    assert once["node_inventory"][0] == NODES and once["reservation"][0] >= 1
    sacct = pl.read_csv(gen / "sacct" / "sacct.psv", separator="|", infer_schema=False)
    assert once["slurm_job_run"][0] == sacct.filter(~pl.col("JobID").str.contains(".", literal=True)).height > 1000
    assert once["gpu_hour"][0] > 0 and once["capacity_node_hour"][0] > 0

    changed = []
    for what, args in [
        ("nightly again", ("etl", "nightly")),
        ("nightly a third time", ("etl", "nightly")),
        ("backfill of the loaded window", ("etl", "nightly", "--from", str(FIRST_DAY), "--to", str(LAST_DAY))),
        ("backfill of one day in it", ("etl", "nightly", "--from", str(LAST_DAY), "--to", str(LAST_DAY))),
        ("the sacct file again", ("etl", "sacct", str(gen / "sacct" / "sacct.psv"))),
    ]:
        cli(*args, env=env)
        now = warehouse_checksums(wh)
        changed += [f"{what}: {t}" for t in once if now.get(t) != once[t]]
    assert not changed


def _started(p: subprocess.Popen, marker: str) -> bool:
    """Read ``p``'s output up to a line holding ``marker`` (then the rest, in a thread, so that it never
    blocks on a full pipe); False if it ended first."""
    import threading

    for line in p.stdout:
        if marker in line:
            threading.Thread(target=p.stdout.read, daemon=True).start()
            return True
    return False


def _kill_during(argv: list[str], env: dict, after_s: float, marker: str | None = None) -> bool:
    """Start ``argv``; SIGKILL it ``after_s`` seconds after its start, or after it printed a line holding
    ``marker`` (the load's own start, past the interpreter's and the engine's: on a busy machine start-up
    varies by more than a small load takes, and a kill timed from the process's start came after the capacity
    files' load had ended in 4 of 5 tries), if it is still running. True if it was killed."""
    p = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.PIPE if marker else subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        if marker and not _started(p, marker):
            p.wait()
            return False
        p.wait(timeout=after_s)
        return False
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
        return True


def load_seconds(argv: list[str], env: dict, marker: str) -> tuple[float, str]:
    """Run ``argv`` to its end (exit 0): the seconds from its line holding ``marker`` to its exit, and its
    output."""
    p = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    out: list[str] = []
    for line in p.stdout:
        out.append(line)
        if marker in line:
            break
    t0 = time.monotonic()
    rest, err = p.communicate()
    seconds = time.monotonic() - t0
    assert p.returncode == 0 and any(marker in x for x in out), f"{argv} -> {p.returncode}\n{''.join(out)}{rest}{err}"
    return seconds, "".join(out) + rest


# a nightly run's line as a source's load begins (etl/nightly.py): the kills are timed from it
NIGHTLY_START = ": start"


LOADS = {
    # what is loaded -> (ops-report arguments, sources in the config)
    "sacct file": (lambda gen: ("etl", "sacct", str(gen / "sacct" / "sacct.psv")), ()),
    "telemetry day files": (lambda gen: ("etl", "nightly"), ("telemetry",)),
    "capacity files": (lambda gen: ("etl", "nightly"), ("capacity",)),
}
KILLS_PER_LOAD = 5


@pytest.mark.parametrize("load", list(LOADS))
def test_sigkill_at_random_points_then_a_rerun_equals_a_clean_run(gen, tmp_path, load, embedded_template):
    """The load is killed (SIGKILL: no cleanup runs) at a random moment of its work, then run again to the
    end: every table equals that of one clean run. The moment: for a nightly run, after its line saying the
    source's load begins, within the clean run's time from that line; for a file load (no such line), between
    the end of start-up and the end of the clean run's time. Each kill on a fresh warehouse, KILLS_PER_LOAD
    kills per load; seeds are fixed, so the kill points are the same on every run of the test (machines differ
    in speed: a kill that came after the load had ended is tried again nearer the load's start; the test
    requires most kills to land before the load finished, and counts the ones that left the warehouse torn)."""
    import shutil

    args_of, sources = LOADS[load]
    args = args_of(gen)
    clean = tmp_path / "clean"
    env_clean = nightly_config(tmp_path / "clean.toml", clean, gen, sources)
    # what a first `ops-report init` leaves (a process less, as for the crashed ones below); the init after it
    # is the timed start-up, and runs on the clean warehouse as before
    shutil.copytree(embedded_template, clean, symlinks=True)
    t0 = time.monotonic()
    ops("init", env=env_clean)  # start-up: the interpreter, the engine, the schema check
    startup_s = time.monotonic() - t0
    # a nightly's kills are timed from its line as the load begins (NIGHTLY_START), over the clean load's time
    # from that line; a file load's (no such line) from the process's start, past start-up
    marker = NIGHTLY_START if args[:2] == ("etl", "nightly") else None
    t0 = time.monotonic()
    if marker:
        load_s, _ = load_seconds([*OPS, *args], env_clean, marker)
        first = 0.0
    else:
        ops(*args, env=env_clean)
        load_s, first = time.monotonic() - t0, 0.8 * startup_s
    want = warehouse_checksums(clean)

    rng = random.Random(f"{load}-7")
    landed, torn = [], 0
    for k in range(KILLS_PER_LOAD):
        at_s = rng.uniform(first, load_s)
        # a kill that came after the load had ended (the clean run, timed on a busy machine, took longer than
        # this one) is tried again, halfway nearer the load's start, on a fresh warehouse
        for attempt in range(4):
            crashed = tmp_path / f"crashed{k}-{attempt}"
            env = nightly_config(tmp_path / f"crashed{k}-{attempt}.toml", crashed, gen, sources)
            # the schema is there before the kill (kills during the load, not the migrations): a copy of the
            # session's migrated empty warehouse, what `ops-report init` leaves (no projects or costs)
            shutil.copytree(embedded_template, crashed, symlinks=True)
            if _kill_during([*OPS, *args], env, at_s, marker):
                landed.append(at_s)
                torn += warehouse_checksums(crashed) != want
                break
            if attempt < 3:
                shutil.rmtree(crashed)
                at_s = first + (at_s - first) / 2
        cli(*args, env=env)  # the rerun to the end: a load like any other, in this process
        assert warehouse_checksums(crashed) == want, f"killed at {at_s:.2f} s"
        assert not [d for d in (crashed / "staging").glob("*")], "a killed run's staging folder was left"
        shutil.rmtree(crashed)
    print(f"{load}: start-up {startup_s:.1f} s, clean load {load_s:.1f} s (from {marker or 'the start'}); "
          f"{len(landed)} of {KILLS_PER_LOAD} kills landed (at {', '.join(f'{x:.1f}' for x in landed)} s), {torn} "
          "left a torn warehouse; "
          f"after the rerun all equal the clean run")
    assert len(landed) >= KILLS_PER_LOAD // 2, "most kills came after the load had finished: nothing was tested"


def test_progress_is_a_bar_on_a_terminal_and_plain_lines_under_cron(gen, tmp_path):
    """On a terminal (a pseudo-terminal here) the loads draw a progress bar; piped, as under cron, the output
    is plain timestamped lines without terminal escapes."""
    import pty

    env = nightly_config(tmp_path / "tty.toml", tmp_path / "tty", gen, ("telemetry", "capacity"))
    pid, fd = pty.fork()
    if pid == 0:  # the child: ops-report on the terminal
        os.execvpe(OPS[0], [*OPS, "etl", "nightly"], {**os.environ, **env, "TERM": "xterm-256color",
                                                        "COLUMNS": "120"})
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, screen
    assert "━" in screen and "telemetry-file ai1" in screen and "\x1b[" in screen  # rich's bar, redrawn

    env = nightly_config(tmp_path / "cron.toml", tmp_path / "cron", gen, ("telemetry", "capacity"))
    p = ops("etl", "nightly", env=env)
    assert "\x1b[" not in p.stdout + p.stderr and "━" not in p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 4 and all(line[:19].replace("T", " ").count(":") == 2 for line in lines), lines
