"""Shared fixtures: the real sacct files in ../shared/data and a fresh embedded warehouse per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ops_warehouse.config import Config
from ops_warehouse.warehouse import close_embedded, connect

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("OPS_SHARED_DATA", REPO.parent / "shared" / "data"))
SACCT = DATA / "sacct"
XDMOD = SACCT / "xdmod"
SHREDDER = XDMOD / "shredder-unit"
HB = SACCT / "hb-jobinfo" / "sacct.txt"
LIVE = SACCT / "slurm-22.05-live"
SARC = SACCT / "sarc-json"
# Habrok's fixture was written per job with this --format, --parsable --noheader --delimiter=☃
HB_FIELDS = (
    "JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,Timelimit,Elapsed,"
    "TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,AllocTRES,TRESUsageInMax,"
    "TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,MaxRSSNode,MaxRSSTask,MaxVMSizeNode,"
    "MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,MaxDiskWriteNode,MaxDiskWriteTask,Comment"
)


def pytest_collection_modifyitems(config, items):
    if not DATA.is_dir():
        raise pytest.UsageError(f"shared test data not found at {DATA} (set OPS_SHARED_DATA)")


@pytest.fixture
def cfg(tmp_path) -> Config:
    return Config(dsn=f"chdb://{tmp_path / 'warehouse'}")


@pytest.fixture
def wh(cfg):
    w = connect(cfg)
    yield w
    close_embedded()


def rows(wh, sql: str, **params):
    return wh.query_rows(sql, params)


def table_checksums(wh) -> dict[str, tuple]:
    """Order-independent content checksums of the loaded tables (deduplicated view, as queries see it)."""
    out = {}
    for t in ("slurm_job_run", "slurm_job_step", "etl_quarantine"):
        cols = [c for (c,) in wh.query_rows(
            "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = {t:String} "
            "AND name != 'loaded_at'", {"t": t})]
        expr = "cityHash64(" + ", ".join(f"`{c}`" for c in cols) + ")"
        out[t] = tuple(wh.query_rows(f"SELECT count(), sum({expr}) FROM {t} FINAL")[0])
    return out
