"""Stage frames as Parquet and load them: the one way rows enter the warehouse tables."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import polars as pl
from ops_warehouse.processes import process_alive


def staging_dir(wh) -> Path:
    """A new folder for one load's staged files, named <pid>-<random>. Folders of processes that no longer
    exist (a load killed with SIGKILL, which runs no cleanup) are removed here, those of live ones kept."""
    base = (wh.embedded_path / "staging") if wh.embedded else Path(tempfile.gettempdir()) / "ops-warehouse-staging"
    if base.is_dir():
        for old in base.iterdir():
            pid = old.name.split("-", 1)[0]
            if not (pid.isdigit() and process_alive(int(pid))):
                shutil.rmtree(old, ignore_errors=True)
    d = base / f"{os.getpid()}-{uuid.uuid4().hex}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def stage_and_load(wh, stage: Path, tag: str, frames: dict[str, pl.DataFrame]) -> None:
    """Write each non-empty frame to ``stage`` as Parquet, insert it into the table of the same name."""
    for table, df in frames.items():
        if df is None or not df.height:
            continue
        p = stage / f"{table}-{tag}.parquet"
        df.write_parquet(p, compression="uncompressed", statistics=False)
        wh.load_parquet(table, p)
        p.unlink()


@contextmanager
def staged(wh):
    """A staging folder of its own for the block, removed afterwards whatever happens."""
    stage = staging_dir(wh)
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def load_frames(wh, frames: dict[str, pl.DataFrame]) -> None:
    """stage_and_load in a staging folder of its own, removed afterwards."""
    with staged(wh) as stage:
        stage_and_load(wh, stage, "0", frames)
