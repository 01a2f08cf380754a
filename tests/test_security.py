"""Hostile and careless use (issue 27): names from the data never leave the output folder, the counts a user
passes are bounded, the nightly lock follows no link, and a DSN never carries (or prints) a password.

The hostile names come from tests/data/hostile/writers-traversal.psv: cluster ``../../../var/x``, accounts
``../../../../var/ESCAPED``, ``a/b`` and ``a_b``. The file-name components below are worked out by hand from
core/files.py's rule: letters, digits, ``-``, ``_`` and ``.`` kept, every other byte ``%XX``, a leading ``.``
encoded too.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
from pathlib import Path
from urllib.parse import unquote

import pytest

from ops_warehouse.config import Config
from ops_warehouse.dsn import dsn_secret, redact
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.nightly import NightlyLock, lock_path
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.files import MAX_COMPONENT, safe_name
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.cli_runner import cli, ops
from tests.conftest import DATA, warehouse_config

HOSTILE = DATA / "hostile"
CLUSTER = "../../../var/x"
ESCAPED = "../../../../var/ESCAPED"
MONTH = "2026-10"
C = "%2E.%2F..%2F..%2Fvar%2Fx"              # CLUSTER as a component
P = "%2E.%2F..%2F..%2F..%2Fvar%2FESCAPED"   # ESCAPED as a component


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, request) -> str:
    """A warehouse holding the hostile fixture (3 jobs, 2 nodes), built once for the module; its DSN, closed
    for the CLI to open."""
    cfg = warehouse_config("embedded", tmp_path_factory.mktemp("hostile"), request)
    wh = open_warehouse(cfg)
    try:
        assert load_capacity(wh, inventory=HOSTILE / "writers-inventory.csv", cluster=CLUSTER) == {"node_inventory": 2}
        r = load_sacct(wh, HOSTILE / "writers-traversal.psv")
        assert (r.jobs_loaded, r.quarantined) == (3, 0)
        assert {c for (c,) in wh.query_rows("SELECT DISTINCT cluster FROM slurm_job_run FINAL")} == {CLUSTER}
    finally:
        wh.close()
        close_embedded()
    return cfg.dsn


def _tree(root: Path) -> set[str]:
    """Every file and folder under ``root``, relative."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# ---------------------------------------------------------------- 1. names from data never leave --out


@pytest.fixture
def two_marts(monkeypatch):
    """The export's marts cut to two real ones: what is tested is where the files go, and the 28 marts cost
    4-6 CPU s an export."""
    from ops_warehouse.analytics import export

    monkeypatch.setattr(export, "_marts", lambda api, per, project: {
        "job_sizes": api.job_sizes(per, project=project), "chargeback": api.chargeback(per, project=project)})


def test_export_writes_nothing_outside_out_for_hostile_cluster_and_project_names(hostile, tmp_path, two_marts):
    top = tmp_path / "top"
    out = top / "a" / "b" / "c" / "d" / "out"
    out.mkdir(parents=True)
    p = cli("--warehouse", hostile, "export", "--month", MONTH, "--out", str(out))
    # the three jobs are one size class (8 GPUs) of three projects on one GPU model: 1 + 3 rows, then 1 + 1
    assert p.stdout == f"{out / (C + '-cluster-2026-10')}: 2 marts, 4 rows, manifest.json\n"
    p = cli("--warehouse", hostile, "export", "--month", MONTH, "--project", ESCAPED, "--out", str(out))
    assert p.stdout == f"{out / (C + '-' + P + '-2026-10')}: 2 marts, 2 rows, manifest.json\n"
    # exactly these: no folder where the names pointed (top/a/b/var, top/a/var), no temporary file left
    files = {"manifest.json", "job_sizes.parquet", "chargeback.parquet"}
    assert _tree(top) == {"a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/out"} | {
        f"a/b/c/d/out/{folder}{f}" for folder in (f"{C}-cluster-2026-10", f"{C}-{P}-2026-10") for f in
        ["", *(f"/{n}" for n in files)]}
    manifest = json.loads((out / f"{C}-{P}-2026-10" / "manifest.json").read_text())
    assert (manifest["cluster"], manifest["project"]) == (CLUSTER, ESCAPED)
    assert unquote(C) == CLUSTER and unquote(P) == ESCAPED


def test_monthly_names_its_files_inside_out_and_apart_for_names_a_cleaning_would_merge(tmp_path):
    from ops_warehouse.reports.monthly_render import write

    out = tmp_path / "out"
    for project in (ESCAPED, "a/b", "a_b"):
        r = {"cluster": CLUSTER, "project": project, "scope": "project", "month": MONTH}
        write(r, out, ["json"])
    write({"cluster": CLUSTER, "project": None, "scope": "cluster", "month": MONTH}, out, ["json"])
    # before: "a/b" and "a_b" were both monthly-…-a_b-2026-10.json (the second overwrote the first), and
    # the names' '.' were kept, so only the separators kept them in the folder
    assert _tree(tmp_path) == {"out", f"out/monthly-{C}-{P}-2026-10.json", f"out/monthly-{C}-a%2Fb-2026-10.json",
                               f"out/monthly-{C}-a_b-2026-10.json", f"out/monthly-{C}-cluster-2026-10.json"}
    assert json.loads((out / f"monthly-{C}-a%2Fb-2026-10.json").read_text())["project"] == "a/b"


def test_monthly_charts_folder_and_links_stay_inside_out(tmp_path, monkeypatch):
    from ops_warehouse.reports import monthly_render

    links = {}
    monkeypatch.setattr(monthly_render, "draw_all", lambda r: {"gantt": "<svg>gantt</svg>"})
    monkeypatch.setattr(monthly_render, "to_markdown", lambda r, files: links.update(files) or "# report\n")
    monkeypatch.setattr(monthly_render, "to_html", lambda r, charts: "<html></html>\n")
    r = {"cluster": CLUSTER, "project": ESCAPED, "scope": "project", "month": MONTH}
    written = monthly_render.write(r, tmp_path / "out", ["md", "html"])
    stem = f"monthly-{C}-{P}-2026-10"
    assert [p.name for p in written] == [f"{stem}.md", f"{stem}.html"]
    assert _tree(tmp_path) == {"out", f"out/{stem}.md", f"out/{stem}.html", f"out/{stem}-charts",
                               f"out/{stem}-charts/gantt.svg"}
    # the Markdown links the chart with the names' '%' written %25, so a viewer finds the file by its name
    assert links == {"gantt": f"{stem.replace('%', '%25')}-charts/gantt.svg"}


@pytest.mark.parametrize("name, component", [
    ("..", "%2E%2E"), (".", "%2E"), ("...", "%2E%2E%2E"), (".hidden", "%2Ehidden"), ("-rf", "%2Drf"),
    ("a/b", "a%2Fb"), ("a\\b", "a%5Cb"), ("a_b", "a_b"), ("a b", "a%20b"), ("100%", "100%25"),
    ("a%2Fb", "a%252Fb"), ("ai1", "ai1"), ("proj.A-1_x", "proj.A-1_x"), ("x\x00y", "x%00y"),
    ("line\nbreak", "line%0Abreak"), ("\x1b[31mred", "%1B%5B31mred"), ("é", "%C3%A9"), ("e\u0301", "e%CC%81"),
    (CLUSTER, C), (ESCAPED, P),
])
def test_safe_name_by_hand(name, component):
    assert safe_name(name) == component and unquote(component) == name


def test_safe_names_are_one_component_and_distinct():
    names = ["..", ".", "...", ".a", "a/b", "a_b", "a%2Fb", "a b", "a\\b", "a\tb", "-", "--x", "x-", "é", "e\u0301",
             "x" * 300, "x" * 299 + "y", "/" * 300, "%" * 300, "a" * MAX_COMPONENT, "a" * (MAX_COMPONENT + 1),
             "\u202egnp.exe", "CON", "a:b", "a*b?"]
    got = [safe_name(n) for n in names]
    assert len(set(got)) == len(names)  # distinct names, distinct components
    for g in got:
        assert 0 < len(g) <= MAX_COMPONENT and g not in (".", "..") and not g.startswith((".", "-"))
        assert set(g) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.%")
    assert safe_name("x" * 300) == safe_name("x" * 300)  # stable
    with pytest.raises(OpsError, match="the project is empty"):
        safe_name("", "project")


# ---------------------------------------------------------------- 6. counts a user passes are bounded


@pytest.mark.parametrize("args, shown, allowed", [
    (["whatif", "--month", MONTH, "--add", "h100:99999999999"], "--add 'h100:99999999999'", "0 to 100,000 nodes"),
    (["whatif", "--month", MONTH, "--add", "h100:100000000"], "--add 'h100:100000000'", "0 to 100,000 nodes"),
    (["whatif", "--month", MONTH, "--remove", "h100:100001"], "--remove 'h100:100001'", "0 to 100,000 nodes"),
    (["whatif", "--month", MONTH, "--reservation", "A:" + "9" * 5000], "--reservation 'A:99999", "0 to 100,000 nodes"),
    (["whatif", "--month", MONTH, "--scale-load", "11"], "--scale-load 11", "above 0 and at most 10"),
    (["whatif", "--month", MONTH, "--scale-load", "nan"], "--scale-load nan", "above 0 and at most 10"),
    (["demo", "--days", "1000000000"], "--days 1000000000", "1 to 3,660 days"),
    (["demo", "--days", "0"], "--days 0", "1 to 3,660 days"),
    (["demo", "--jobs-per-day", "10000000"], "--jobs-per-day 10000000", "0 to 1,000,000 jobs a day"),
    (["demo", "--seed", "-1"], "--seed -1", "0 to 9,223,372,036,854,775,807"),
    (["generate", "--out", "gen", "--days", "100000000"], "--days 100000000", "1 to 3,660 days"),
    (["generate", "--out", "gen", "--jobs-per-day", "1000000000000"], "--jobs-per-day 1000000000000",
     "0 to 1,000,000 jobs a day"),
    (["generate", "--out", "gen", "--jobs-per-day", "-1"], "--jobs-per-day -1", "0 to 1,000,000 jobs a day"),
    (["generate", "--out", "gen", "--nodes", "100000000"], "--nodes 100000000", "3 to 100,000 nodes"),
    (["generate", "--out", "gen", "--metrics-step", "100000000"], "--metrics-step 100000000", "1 to 86,400 seconds"),
    (["generate", "--out", "gen", "--seed", "-1"], "--seed -1", "0 to 9,223,372,036,854,775,807"),
    (["generate", "--out", "gen", "--start", "2105-12-01", "--days", "60"], "--start 2105-12-01 with --days 60",
     "1970-01-01 .. 2105-12-31"),
])
def test_counts_out_of_range_are_refused_in_one_line(tmp_path, args, shown, allowed):
    """Refused before anything is generated, read or opened: no warehouse, no folder."""
    p = cli("--warehouse", f"chdb://{tmp_path / 'wh'}", *args, cwd=tmp_path, check=False,
            env={"OPS_WAREHOUSE": "", "OPS_CONFIG": ""})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and len(p.stderr) < 200, p.stderr
    assert p.stderr.startswith(f"ops-report: error: {shown}") and allowed in p.stderr, p.stderr
    assert list(tmp_path.iterdir()) == []


def test_whatif_scenarios_of_the_config_are_bounded_too():
    from ops_warehouse.planning.changes import MAX_NODES, parse_change

    assert parse_change(add=[f"h200:{MAX_NODES}"]).add == (("h200", MAX_NODES),)
    assert parse_change(add=["h200:0000016"]).add == (("h200", 16),)
    with pytest.raises(OpsError, match=r"^--add 'h100:100001': too many nodes; expected NAME:NODES with 0 to 100,000"):
        parse_change(add=["h100:100001"])


# ---------------------------------------------------------------- 8. the nightly lock follows no link


def _nightly_config(tmp_path: Path) -> Path:
    f = tmp_path / "ops.toml"
    f.write_text(f'[nightly.capacity]\ninventory = "{HOSTILE / "writers-inventory.csv"}"\ncluster = "c1"\n')
    return f


def test_the_nightly_lock_never_writes_through_a_symlink(tmp_path):
    wh = tmp_path / "wh"
    lock = lock_path(Config(dsn=f"chdb://{wh}"))
    assert lock == tmp_path / ".wh.nightly.lock"
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"a file the lock must never touch\n")
    lock.symlink_to(victim)
    p = ops("--config", str(_nightly_config(tmp_path)), "--warehouse", f"chdb://{wh}", "etl", "nightly",
            check=False, env={"OPS_WAREHOUSE": ""})
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"ops-report: error: the nightly lock {lock} is a symbolic link: remove it")
    assert victim.read_bytes() == b"a file the lock must never touch\n"  # before: the pid, written over it
    assert lock.is_symlink() and not wh.exists()  # and the run did nothing


def test_the_nightly_lock_is_a_private_regular_file_of_ours(tmp_path):
    lock = tmp_path / "fresh.lock"
    with NightlyLock(lock):
        st = os.lstat(lock)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert lock.read_text() == str(os.getpid())
    old = tmp_path / "old.lock"  # made by an earlier version, mode 644
    old.write_text("123")
    old.chmod(0o644)
    with NightlyLock(old):
        assert stat.S_IMODE(os.stat(old).st_mode) == 0o600
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    with pytest.raises(OpsError, match=r"^the nightly lock .*fifo.lock is not a regular file: remove it"):
        NightlyLock(fifo).__enter__()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a file of another user's")
def test_the_nightly_lock_of_another_user_is_refused(tmp_path):
    lock = tmp_path / "theirs.lock"
    lock.write_text("their content")
    os.chown(lock, 65534, 65534)
    with pytest.raises(OpsError, match=r"^the nightly lock .* belongs to another user \(uid 65534\)"):
        NightlyLock(lock).__enter__()
    assert lock.read_text() == "their content"


# ---------------------------------------------------------------- 9. no password in a DSN, none printed


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


# every password holds "Pa55", and none of its text may be printed; "s3cret" is its first part: what the old
# error ("Port could not be cast to integer value as 's3cret'") leaked of a password holding a '/' or '#'
DSN_FORMS = {
    "password= parameter": "http://ops@127.0.0.1:{port}/ops?password=s3cret-Pa55",
    "pwd= parameter": "http://ops@127.0.0.1:{port}/ops?connect_timeout=1&pwd=s3cret-Pa55",
    "user part": "http://ops:s3cret-Pa55@127.0.0.1:{port}/ops",
    "user part with /": "http://ops:s3cret/Pa55@127.0.0.1:{port}/ops",
    "user part with #": "http://ops:s3cret#Pa55@127.0.0.1:{port}/ops",
    "user part with ?": "http://ops:s3cret?Pa55@127.0.0.1:{port}/ops",
    "digits, then /": "http://ops:4321/Pa55@127.0.0.1:{port}/ops",  # reads as host ops, port 4321
}


def _leaks(text: str) -> bool:
    # 4321 as a number of its own: the closed port the DSN names is random and may contain it (43213 failed CI)
    return "Pa55" in text or "s3cret" in text or re.search(r"(?<!\d)4321(?!\d)", text) is not None


@pytest.mark.parametrize("form", DSN_FORMS)
@pytest.mark.parametrize("where", ["OPS_WAREHOUSE", "--warehouse", "config 644", "config 600"])
def test_a_password_in_the_dsn_is_refused_and_never_printed(tmp_path, form, where):
    dsn = DSN_FORMS[form].format(port=_closed_port())
    env = {"OPS_WAREHOUSE": "", "OPS_CONFIG": "", "HOME": str(tmp_path), "OPS_WAREHOUSE_PASSWORD": ""}
    args = ["init"]
    if where == "OPS_WAREHOUSE":
        env["OPS_WAREHOUSE"] = dsn
    elif where == "--warehouse":
        args = ["--warehouse", dsn, "init"]
    else:
        f = tmp_path / "ops.toml"
        f.write_text(f'[warehouse]\ndsn = "{dsn}"\n')
        f.chmod(0o644 if where == "config 644" else 0o600)
        args = ["--config", str(f), "init"]
    p = cli(*args, env=env, cwd=tmp_path, check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert not _leaks(p.stdout + p.stderr), p.stderr
    if where == "--warehouse":
        assert "--warehouse must not hold a password (the process list shows it" in p.stderr
    assert "OPS_WAREHOUSE_PASSWORD" in p.stderr
    assert not (tmp_path / "warehouse").exists()


@pytest.mark.parametrize("form", DSN_FORMS)
def test_the_library_refuses_it_too_and_redact_masks_it(form):
    dsn = DSN_FORMS[form].format(port=8123)
    assert dsn_secret(dsn) is not None
    with pytest.raises(OpsError) as e:
        open_warehouse(Config(dsn=dsn))
    assert "OPS_WAREHOUSE_PASSWORD" in str(e.value) and not _leaks(str(e.value))
    shown = redact(dsn)
    assert not _leaks(shown) and shown.startswith("http://") and "***" in shown and "8123/ops" in shown


@pytest.mark.parametrize("dsn", [
    "http://ops@127.0.0.1:8123/ops", "https://ops_etl@ch1.example:8443/ops?form_encode_query_params=true",
    "http://ops@ch:8123/ops?quota_key=alice@example.com", "chdb:///home/alice@corp/warehouse", "chdb://./warehouse",
])
def test_dsns_without_a_secret_are_kept_as_they_are(dsn):
    assert dsn_secret(dsn) is None and redact(dsn) == dsn


def test_redact_masks_query_passwords_and_unparsable_user_parts():
    assert redact("http://ops:s3cret@ch:8123/db") == "http://ops:***@ch:8123/db"
    assert redact("http://ops@ch:8123/db?password=s3cret&x=1") == "http://ops@ch:8123/db?password=***&x=1"
    assert redact("http://ops@ch/db?x=1;db_PASSWORD=s3cret") == "http://ops@ch/db?x=1;db_PASSWORD=***"
    assert redact("http://ops:s3/cr#et@ch:8123/db") == "http://***@ch:8123/db"
    assert redact("http://ops:12/s3cret@ch:8123/db") == "http://***@ch:8123/db"


def test_a_slurmdbd_dsn_with_a_password_parameter_is_refused(tmp_path):
    p = cli("etl", "slurmdbd", "--db", "mysql://ops_ro@127.0.0.1:3306/slurm_acct_db?password=s3cret-Pa55",
            "--cluster", "c1", check=False, env={"OPS_WAREHOUSE": f"chdb://{tmp_path / 'unused'}", "OPS_CONFIG": ""})
    assert p.returncode == 2 and "--db must not hold a password" in p.stderr and p.stderr.count("\n") == 1
    assert not _leaks(p.stdout + p.stderr)
