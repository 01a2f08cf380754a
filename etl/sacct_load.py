"""Load Slurm job records into the warehouse: read -> normalize -> stage (Parquet) -> load, in chunks.

Memory stays flat in the input size: each chunk of the file is parsed, staged and loaded before the
next is read. Loads are idempotent: rows are keyed (see sql/migrations/0001) and replaced, never added.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl import sacct_contract, sacct_json, sacct_text
from ops_warehouse.etl.capacity_sources import capacity_form_of, describe, option_for
from ops_warehouse.etl.grains import history_as_of, refresh_after_jobs, refresh_capacity
from ops_warehouse.etl.normalize import QUARANTINE_SCHEMA, TimeWindow, normalize
from ops_warehouse.etl.quarantine import CopyCounter
from ops_warehouse.etl.run_log import logged_run
from ops_warehouse.etl.staging import stage_and_load, staging_dir
from ops_warehouse.etl.undo import Undo
from ops_warehouse.etl.watermarks import set_extracted_through
from ops_warehouse.input_files import check_readable


@dataclass
class LoadResult:
    source: str
    records_read: int = 0  # input records (lines, or jobs + steps for JSON)
    jobs_loaded: int = 0  # job-run rows written (a pending array range gives one per task)
    steps_loaded: int = 0
    quarantined: int = 0
    events_loaded: int = 0  # node events (slurmdbd source)
    reservations_loaded: int = 0
    seconds: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)
    # what was filled in for optional fields the input lacks ("account=unknown (no Account field)"), once
    # per load (etl/sacct_contract.py)
    defaults: list[str] = field(default_factory=list)
    first_ts: datetime | None = None  # the earliest start (or submit) of the runs written
    job_ids: tuple[str, str] | None = None  # the smallest and largest job id of the runs written (job_run's refresh)
    extracted_through: datetime | None = None  # how far the source was complete when read, where known
    newest_change: datetime | None = None  # the source's newest change read (slurmdbd: its watermark)
    # the zone the file was loaded in before, when it was another: the rows of that load were replaced
    replaced_zone: str | None = None

    def saw_runs(self, runs: pl.DataFrame) -> None:
        """Count a frame of runs written and keep the earliest time they hold (for the grains' refresh)."""
        self.jobs_loaded += runs.height
        if not runs.height:
            return
        lo, a, b = runs.select(pl.coalesce("start_ts", "submit_ts").min(), pl.col("job_id").min().alias("a"),
                               pl.col("job_id").max().alias("b")).row(0)
        if lo is not None and (self.first_ts is None or lo < self.first_ts):
            self.first_ts = lo
        self.job_ids = (a, b) if self.job_ids is None else (min(a, self.job_ids[0]), max(b, self.job_ids[1]))

    @property
    def loaded(self) -> int:
        return self.records_read - self.quarantined


def detect_format(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(4096)
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()  # a UTF-8 byte order mark, as Windows tools write
    # a JSON document opens with an object whose first key is quoted; a text line that merely starts
    # with "{" (a job name, garbage) is text, and its good lines must not be lost to a JSON error
    return "json" if re.match(rb'\{\s*("|\}|$)', head) else "text"


def _chunks(path: Path, fmt: str, delimiter: str, fields: list[str] | None
            ) -> Iterator[tuple[pl.DataFrame, pl.DataFrame, pl.Expr, str]]:
    """(records, quarantine, raw-line expression, tz override or '') per chunk."""
    if fmt == "json":
        # read as a stream, a chunk of jobs at a time, after a first pass found the document whole: a broken
        # one loads nothing, as when it was read in one piece (etl/sacct_json.py)
        try:
            sacct_json.check_file(path)
        except sacct_contract.Refused as e:  # a document lacking what every job needs: nothing loads
            raise sacct_contract.Refused(f"{path}: {e}") from None
        except (UnicodeDecodeError, ValueError) as e:
            with open(path, "rb") as f:
                head = f.read(4000)
            bad = pl.DataFrame(
                {"line_no": [1], "reason": [f"unreadable sacct --json: {str(e).splitlines()[0][:200]}"],
                 "raw": [head.decode("utf-8", "replace")]},
                schema=QUARANTINE_SCHEMA,
            )
            yield pl.DataFrame(schema={"line_no": pl.UInt64, "raw": pl.String}), bad, pl.col("raw"), "UTC"
            return
        for records, bad in sacct_json.read_json_file(path):
            yield records, bad, pl.col("raw"), "UTC"  # JSON carries epoch seconds
        return
    for records, bad, raw in sacct_text.read_text(path, delimiter, fields):
        yield records, bad, raw, ""


def _one_cluster(wh, source: str) -> str | None:
    """The cluster of the job rows ``source`` holds, when they are of one cluster."""
    rows = wh.query_rows("SELECT DISTINCT cluster FROM slurm_job_run WHERE source = {s:String} LIMIT 2", {"s": source})
    return rows[0][0] if len(rows) == 1 else None


def load_sacct(wh, path: str | Path, *, fmt: str = "auto", delimiter: str = "|",
               fields: list[str] | None = None, tz: str | None = None, cluster: str | None = None,
               source: str | None = None, label: str | None = None, progress: Callable[[int, int], None] | None = None,
               refresh: bool = True, extracted_through: datetime | None = None,
               now: datetime | None = None) -> LoadResult:
    """Load one sacct output file (text with or without header, or --json). Returns what happened.

    ``source`` names where the records come from (stored with every row; default the file's path): a
    source that re-reads overlapping windows (running sacct nightly) keeps one name, so a bad line read
    again is the same quarantined record. ``label`` is what the run log calls this load (default
    ``source``), e.g. with the window. The run log gets one row however the load ends (etl/run_log.py).
    ``refresh``: bring the hourly capacity grain up to date for the hours the runs cover (etl/grains.py);
    a caller that loads several sources and refreshes once passes False. ``extracted_through``: the time the
    records are complete through (a sacct window run by the product: its end, or when sacct ran), recorded
    for the history's as-of time (etl/watermarks.py). ``now``: the load's clock, which the times of a record
    may not be more than ``[sacct] max_future_hours`` past (default: the wall clock; normalize.TimeWindow).

    A load that fails leaves nothing of itself behind: what it wrote is taken back and what it replaced
    written back (etl/undo.py). A text file loaded before in another time zone has the rows of that load
    replaced by this one's (``last_zone``, ``Undo.replace_source``; docs/sources.md)."""
    path = Path(path)
    result = LoadResult(source=source or str(path.resolve()))
    with logged_run(wh, "sacct", label or result.source) as run:
        old = history_as_of(wh)
        undo = Undo(wh, result.source)
        grains_touched = False
        try:
            try:
                zone = _load_sacct(wh, path, result, fmt=fmt, delimiter=delimiter, fields=fields, tz=tz,
                                   cluster=cluster, progress=progress, undo=undo,
                                   window=TimeWindow.of(wh.cfg, now))
            finally:
                run.count(result.records_read, result.loaded, result.quarantined)
            before, gone = None if zone is None else last_zone(wh, result.source), None
            if before is not None and before != zone and source is not None:
                # a named source gathers many reads (the nightly's sacct:<cluster>, a window at a time): one
                # load cannot stand for all it holds, so it is refused rather than replacing them
                raise OpsError(f"{path}: refused, {result.source} was loaded with times in {before}, and this load "
                               f"reads them in {zone}: its runs would be stored twice (Submit is part of a run's "
                               f"key); nothing was loaded; load it with --timezone {before}")
            grains_touched = True  # (from here job_run and the grains may change: a failure rebuilds them)
            if before is not None and before != zone:
                gone = undo.replace_source()
                if gone is not None:
                    result.first_ts = min(gone[0], result.first_ts) if result.first_ts else gone[0]
                result.replaced_zone = before
            if extracted_through is not None:
                # the cluster the rows went to: the one named, else the one the file's Cluster column gave them
                # (recorded under the default name, the as-of time of that cluster's history never moved)
                target = cluster or _one_cluster(wh, result.source) or wh.cfg.default_cluster
                undo.note_extract(target, result.source)
                set_extracted_through(wh, target, result.source, extracted_through)
            if refresh and (result.jobs_loaded or extracted_through is not None or result.replaced_zone):
                # job_run for the jobs this load wrote (by their ids; not where it deleted another zone's runs)
                refresh_after_jobs(wh, result.first_ts, old, None if gone else result.job_ids, result.jobs_loaded)
                if gone is not None:  # the replaced runs' hours, also past where the history now ends
                    refresh_capacity(wh, "", gone[0], gone[1] + timedelta(hours=1))
            if zone is not None and before != zone:  # (``before``: the source's last mark, read above)
                set_zone(wh, result.source, zone)
        except BaseException:
            undo.take_back(grains_touched)
            raise
        finally:
            undo.close()
    return result


# etl_watermark marks "sacct zone <zone>: <source>": the zone a text source was last loaded in is the one whose
# mark was written last (updated_at); the time is fixed (the mark says only "loaded in"), as grains' marks are
_ZONE, _MARK_TS = "sacct zone ", datetime(2000, 1, 2, tzinfo=timezone.utc)


def last_zone(wh, source: str) -> str | None:
    """The zone ``source`` (a text file: its times as printed in a zone) was last loaded in, if it was."""
    rows = wh.query_rows(
        "SELECT source FROM etl_watermark FINAL WHERE startsWith(source, {p:String}) AND endsWith(source, {s:String}) "
        "ORDER BY updated_at DESC LIMIT 1", {"p": _ZONE, "s": f": {source}"})
    if not rows:
        return None
    return rows[0][0][len(_ZONE):-len(f": {source}")]


def set_zone(wh, source: str, zone: str) -> None:
    """Mark ``source`` loaded in ``zone``; the caller has read its last mark (``last_zone``) and it differs."""
    wh.command("INSERT INTO etl_watermark (source, watermark_ts, updated_at) "
               "VALUES ({s:String}, {t:DateTime('UTC')}, now64(3))",
               {"s": f"{_ZONE}{zone}: {source}", "t": _MARK_TS})


def _load_sacct(wh, path: Path, result: LoadResult, *, fmt: str, delimiter: str, fields: list[str] | None,
                tz: str | None, cluster: str | None, progress: Callable[[int, int], None] | None,
                undo: Undo | None = None, window: TimeWindow | None = None) -> str | None:
    """Read, normalize and insert the file chunk by chunk. Returns the zone its times were read in (None for
    --json, whose times are epoch seconds)."""
    check_readable(path)
    form = capacity_form_of(path)
    if form:  # read as a sacct file before: "no sacct header line", or a whole-file quarantine of JSON
        raise OpsError(f"{path.name}: {describe(form)}, not sacct's: give it to "
                       f"`ops-report etl capacity {option_for(form)}`")
    tz = tz or wh.cfg.timezone
    _check_tz(tz)
    cluster = cluster or wh.cfg.default_cluster
    source = result.source
    fmt = detect_format(path) if fmt == "auto" else fmt
    started = time.time()
    stage = staging_dir(wh)
    total = path.stat().st_size
    # The engine inserts chunk i (it releases the GIL) while polars parses chunk i+1; one insert in flight
    # at a time keeps memory to two chunks.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ops-load")
    pending = None
    copies = CopyCounter()  # identical bad lines of this file are numbered, not merged
    parents = sacct_contract.StepParents()  # steps load with their job only
    try:
        for i, (records, bad, raw, tz_override) in enumerate(_chunks(path, fmt, delimiter, fields)):
            # (a header further down may bring fields the first did not have: sacct_text.read_text)
            result.defaults += [d for d in sacct_contract.defaults(records.columns, cluster, json=fmt == "json")
                                if d not in result.defaults]
            zone = tz_override or tz
            runs, steps, q = normalize(records, tz=zone, cluster=cluster, source=source, raw=raw, window=window)
            steps, orphans = parents.split(runs, steps)
            if orphans.height:
                lines = records.filter(pl.col("line_no").is_in(orphans.get_column("line_no").implode()))
                lines = lines.select("line_no", raw.alias("raw")).unique("line_no", keep="first")
                q = pl.concat([q, orphans.join(lines, on="line_no", how="left").select(
                    "line_no", reason=pl.lit(parents.REASON), raw="raw").cast(QUARANTINE_SCHEMA)])
            result.records_read += records.height + bad.height
            del records
            quarantine = copies.number(pl.concat([bad.cast(QUARANTINE_SCHEMA), q]))
            result.saw_runs(runs)
            result.steps_loaded += steps.height
            result.quarantined += quarantine.height
            for r in quarantine.get_column("reason").str.replace(r" '.*'$", "").to_list():
                result.reasons[r] = result.reasons.get(r, 0) + 1
            if pending is not None:
                pending.result()
            pending = pool.submit(stage_job_frames, wh, stage, i, runs, steps, quarantine, source, undo)
            if progress:
                progress(min(total, (i + 1) * sacct_text.CHUNK_BYTES), total)
        if pending is not None:
            pending.result()
    except (pl.exceptions.ComputeError, UnicodeDecodeError) as e:
        raise OpsError(f"{path}: {e}") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(stage, ignore_errors=True)
        result.seconds = time.time() - started
    return None if fmt == "json" else tz


def stage_job_frames(wh, stage: Path, i: int, runs, steps, quarantine, source: str, undo: Undo | None = None) -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    frames = {"slurm_job_run": runs, "slurm_job_step": steps}
    if quarantine.height:
        if "occurrence" not in quarantine.columns:  # one read in one frame (slurmdbd)
            quarantine = CopyCounter().number(quarantine)
        frames["etl_quarantine"] = quarantine.select(
            pl.lit(source).alias("source"), "line_no", "reason", "raw", "occurrence",
            pl.lit(now).cast(pl.Datetime("ms", "UTC")).alias("loaded_at"),
        )
    if undo is not None:
        undo.before_insert(i, frames)
    stage_and_load(wh, stage, f"{i:05d}", frames)


def _check_tz(tz: str) -> None:
    try:
        pl.Series(["2020-01-01T00:00:00"]).str.to_datetime().dt.replace_time_zone(tz)
    except Exception:
        raise OpsError(f"unknown time zone {tz!r} (use an IANA name such as UTC or Asia/Tokyo)") from None

