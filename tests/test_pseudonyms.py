"""--anonymize-users (issue 13): a pseudonym must not reveal its user to whoever lacks the site's key. With no
`[reports] pseudonym_key` configured the key was empty, so anyone with the site's list of user names turned
every pseudonym back into its name by hashing the names. Now a warehouse without a configured key gets a
random one on first use, kept where only its owner can read it (mode 600): `pseudonym.key` in an embedded
warehouse's folder, or ~/.config/ops-warehouse/pseudonym-keys/ for a server, named by its DSN less secrets.

Checked on the real sacct output of tests/data (three users) loaded into two warehouses, through the export
and the monthly report."""

from __future__ import annotations

import hashlib
import hmac
import shutil
import stat
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, open_warehouse
from tests.conftest import LIVE

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

MONTH = "2026-11"


def site_users() -> set[str]:
    df = pl.read_csv(LIVE / "sacct.psv", separator="|", infer_schema=False)
    return set(df.filter(~pl.col("JobID").str.contains(".", literal=True)).get_column("User").to_list())


def unkeyed(user: str) -> str:
    """What the old code printed with no key configured: anyone can compute it from a list of names."""
    return "user-" + hmac.new(b"", user.encode(), hashlib.sha256).hexdigest()[:8]


def anonymized(path: Path, out: Path | None, report: bool = False) -> tuple[dict[int, str], set[str]]:
    """(job id -> user pseudonym of the export's job_efficiency, written under ``out`` (None: no export), user
    pseudonyms of the cluster's monthly report if ``report``) of the embedded warehouse at ``path`` (loaded
    with the real sacct output if new)."""
    from ops_warehouse.analytics.api import Connection
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.analytics.export import export_month
    from ops_warehouse.analytics.monthly import monthly_report

    cfg = Config(dsn=f"chdb://{path}")
    wh = open_warehouse(cfg)
    try:
        if not wh.query_rows("SELECT count() FROM slurm_job_run")[0][0]:
            load_sacct(wh, LIVE / "sacct.psv", cluster="c1")
        jobs, users = {}, set()
        if out is not None:
            m = export_month(Connection(wh), out, MONTH, anonymize_users=True)
            df = pl.read_parquet(Path(m["folder"]) / "job_efficiency.parquet")
            jobs = dict(zip(df.get_column("job_id").to_list(), df.get_column("user").to_list()))
        if report:
            r = monthly_report(Connection(wh), month=date(2026, 11, 1), cluster="c1", anonymize_users=True)
            users = {j["user"] for j in r["largest_jobs"]}
        return jobs, users
    finally:
        close_embedded()


def test_pseudonyms_are_keyed_per_warehouse_and_stable(tmp_path, embedded_template):
    users = site_users()
    assert len(users) == 3
    # two fresh warehouses, each a copy of the run's migrated empty one (tests/conftest.py: ~0.3 s against ~1-2 s
    # of migrating an empty folder): one folder copied twice, so the two keys below are each warehouse's own
    for wh in ("a", "b"):
        shutil.copytree(embedded_template, tmp_path / wh, symlinks=True)
    assert not any((tmp_path / wh / "pseudonym.key").exists() for wh in ("a", "b"))
    a1, _ = anonymized(tmp_path / "a", tmp_path / "out-a1")
    # the warehouse opened again, for its report alone (a second export of it, which gave a1 again, evaluated 28
    # more marts)
    _, report = anonymized(tmp_path / "a", None, report=True)
    b, _ = anonymized(tmp_path / "b", tmp_path / "out-b")
    # the same warehouse, the same pseudonym for each user, in the export and, opened again, in the monthly
    # report: every user of the report's largest jobs is one of the export's three (a key made anew at the
    # second opening gives the report three others)
    assert len(set(a1.values())) == 3 and report and report <= set(a1.values())
    assert not users & set(a1.values())
    # not the plain hash of the name, which anyone with the list of user names can compute
    assert not {unkeyed(u) for u in users} & (set(a1.values()) | set(b.values()))
    # another warehouse has another key: the same users under other pseudonyms
    assert a1.keys() == b.keys() and not set(a1.values()) & set(b.values())
    for wh in ("a", "b"):
        key = tmp_path / wh / "pseudonym.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert len(key.read_text().strip()) == 64  # 256 random bits, hex


def test_a_configured_key_is_used_and_no_file_is_made(tmp_path):
    from ops_warehouse.analytics.pseudonyms import pseudonym, pseudonym_key

    wh = open_warehouse(Config(dsn=f"chdb://{tmp_path / 'w'}", pseudonym_key="site-key-from-the-config"))
    try:
        assert pseudonym_key(wh) == "site-key-from-the-config"
        assert pseudonym("alice", pseudonym_key(wh)) == "user-" + hmac.new(
            b"site-key-from-the-config", b"alice", hashlib.sha256).hexdigest()[:8]
    finally:
        close_embedded()
    assert not (tmp_path / "w" / "pseudonym.key").exists()


def server(dsn: str, **cfg):
    from ops_warehouse.warehouse import Warehouse

    return Warehouse(None, dsn, Config(dsn=dsn, **cfg), None)  # the key needs no connection


def test_a_server_warehouse_keeps_its_key_in_the_users_config_folder(tmp_path, monkeypatch):
    from ops_warehouse.analytics.pseudonyms import key_path, pseudonym_key

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    one = server("http://ops:pw-one-secret@ch.example:8123/ops")
    path = key_path(one)
    assert path.parent == tmp_path / "home" / ".config" / "ops-warehouse" / "pseudonym-keys"
    assert "pw-one-secret" not in str(path)
    k = pseudonym_key(one)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # the same server and database, whatever the password: the same key; another database: another key
    assert pseudonym_key(server("http://ops:changed-pw@ch.example:8123/ops")) == k
    assert key_path(server("http://ops@ch.example:8123/other")) != path
    assert pseudonym_key(server("http://ops@ch.example:8123/other")) != k


def test_a_key_others_can_read_or_that_cannot_be_made_is_refused(tmp_path, monkeypatch):
    from ops_warehouse.analytics.pseudonyms import pseudonym_key

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    wh = server("http://ops@ch.example:8123/ops")
    pseudonym_key(wh)
    key = next((tmp_path / "home").rglob("*.key"))
    key.chmod(0o644)
    with pytest.raises(OpsError, match=r"readable by others: chmod 600"):
        pseudonym_key(wh)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "file"))  # a home that is a file: no folder can be made there
    with pytest.raises(OpsError, match=r"pseudonym_key") as e:
        pseudonym_key(wh)
    assert "\n" not in str(e.value)
