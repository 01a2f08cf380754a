"""`ops-report digest` (issue 52 item 3) on the hand-built day of tests/user_scenario.py: the messages go to
exactly the users whose waste, worked out by DuckDB over the loaded sacct and dcgm-exporter files (never the
product's SQL), is over the thresholds, at the declared thresholds and at others given on the command line,
each message with the user's figures and runs."""

from __future__ import annotations

import pytest

from tests import user_scenario as us
from tests.cli_runner import cli
from tests.sites import user_day

# wasteful_users.sql's declared thresholds, as docs/efficiency.md states them
DEFAULTS = {"idle_gpu_h": 8.0, "util_pct": 30.0, "gpu_mem_eff": 0.1, "min_gpu_h": 8.0}


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digest-day")
    user_day(tmp_path_factory, folder)  # us.load_day's folder, the day loaded once per run (tests/sites.py)
    return folder


def _over(folder, idle_gpu_h, util_pct, gpu_mem_eff, min_gpu_h) -> set[str]:
    """DuckDB: the users with idle GPU-hours at or above the threshold, or (with enough observed GPU-hours)
    pooled utilization or GPU-memory efficiency under theirs."""
    con = us.duckdb_runs(folder)
    rows = con.execute("""
        SELECT u.user_name FROM users u
        JOIN (SELECT user_name, sum(observed_gpu_h) AS seen FROM runs GROUP BY user_name) s USING (user_name)
        WHERE u.idle_gpu_h >= ? OR (s.seen >= ? AND (u.util_pct < ? OR u.gpu_mem_eff < ?))""",
                       [idle_gpu_h, min_gpu_h, util_pct, gpu_mem_eff]).fetchall()
    return {r[0] for r in rows}


def test_the_digest_holds_exactly_the_users_over_the_thresholds(day, tmp_path):
    conf = ("-c", str(day / "ops.toml"))
    want = _over(day, **DEFAULTS)
    assert want == {"bob", "heidi", "dave"}  # bob's idle run, heidi's idle hour (8 GPU-h: at the bound), dave 25 %
    out = tmp_path / "digest"
    p = cli(*conf, "digest", "--days", "7", "--to", "2026-10-05", "--out", str(out))
    assert {f.name for f in out.iterdir()} == {f"{u}.md" for u in want}
    assert "3 users over a threshold, 2026-09-29 to 2026-10-05" in p.stderr
    bob = (out / "bob.md").read_text()
    # bob's figures (by hand: 56 GPU-h, (32 × 2 + 24 × 70) / 56 = 31.1 %, 32 idle GPU-h of one idle run) and
    # his most wasteful run first
    assert "| GPU-hours held | 56.0 |" in bob and "| 31.1% |" in bob and "| GPU-hours of idle runs (1 runs) | 32.0 |" in bob
    assert bob.index("ops-report job 3003 --cluster t1") < bob.index("ops-report job 3004 --cluster t1")
    assert "**idle GPU-hours**" in bob
    dave = (out / "dave.md").read_text()
    assert "**low GPU utilization, low GPU memory use**" in dave and "| 25.0% |" in dave and "| 5.0% |" in dave

    # other thresholds, given on the command line, printed instead of written
    for given, flags in (({"util_pct": 50.0}, ["--util-pct", "50"]), ({"idle_gpu_h": 8.5}, ["--idle-gpu-h", "8.5"]),
                         ({"gpu_mem_eff": 0.6, "util_pct": 0.0, "idle_gpu_h": 1e9},
                          ["--gpu-mem-eff", "0.6", "--util-pct", "0", "--idle-gpu-h", "1e9"])):
        want = _over(day, **{**DEFAULTS, **given})
        printed = cli(*conf, "digest", "--to", "2026-10-05", *flags).stdout
        got = {line.split(" ")[4] for line in printed.splitlines() if line.startswith("# GPU use of ")}
        assert got == want, flags
    assert _over(day, **{**DEFAULTS, "util_pct": 50.0}) == {"bob", "heidi", "dave", "carol"}


def test_the_digest_reads_only_its_days(day):
    conf = ("-c", str(day / "ops.toml"))
    # the week before the loaded day: nothing ran, nobody is written to
    p = cli(*conf, "digest", "--days", "7", "--to", "2026-10-04")
    assert p.stdout == "" and "0 users over a threshold, 2026-09-28 to 2026-10-04" in p.stderr
    # the default last day is the loaded history's
    p = cli(*conf, "digest", "--days", "1")
    assert "2026-10-05 to 2026-10-05" in p.stderr
