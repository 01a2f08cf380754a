"""Local times in the autumn DST fold (issue 49, items 4 and 5): sacct text read with --timezone, the kernel
log's --tz, capacity records (sacctmgr events, scontrol reservations) that end before they start.

The sacct files are hand-made in sacct's parsable2 form (tests/data/dst, its README.md says what each line
holds); America/New_York repeats 01:00-02:00 on 2026-11-01 (EDT = UTC-4, then EST = UTC-5), Europe/Berlin
02:00-03:00 on 2026-10-25 (CEST = UTC+2, then CET = UTC+1). Every UTC time below is worked out by hand from
those offsets.
"""

from __future__ import annotations

from datetime import date, datetime

import pytest

from ops_warehouse.analytics.summary import summary
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.kernel_log_xid import parse_text
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.sacct_text import XDMOD_FIELDS, parse_fields
from tests.conftest import DATA, rows

DST = DATA / "dst"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)  # naive UTC, as the warehouse hands it back


def _runs(wh) -> list[tuple]:
    return rows(wh, "SELECT job_id, submit_ts, start_ts, end_ts, dateDiff('second', start_ts, end_ts) "
                    "FROM slurm_job_run FINAL ORDER BY job_id")


def test_new_york_fold_reads_each_time_as_its_record_says(wh):
    """701 ran 01:10 EDT (05:10Z) to 01:20 EST (06:20Z), ElapsedRaw 4200: End - Start is 4200 s (600 before).
    702 started 01:50 EDT (05:50Z) and ended 01:10 EST (06:10Z), 1200 s; 703 was submitted 01:55 EDT (05:55Z)
    and started 01:05 EST (06:05Z), ending 02:30 EST (07:30Z), 5100 s: both were quarantined before (`End
    before Start`, `Start before Submit`). 704 (Start 01:10, End 01:40, ElapsedRaw 9000) fits no reading
    (1800, 5400 or 1800 s): quarantined `ambiguous local time` naming both fields. 705 lies wholly inside the
    repeated hour (600 s either way): the first pass, 05:25Z. The step 701.batch takes 701's reading. The
    day's GPU-hours: 8 x 4200 + 4 x 1200 + 4 x 5100 + 4 x 600 s = 61,200 GPU-s = 17.0 GPU-h; its waits 15 + 5
    + 10 + 5 = 35 min."""
    r = load_sacct(wh, DST / "new-york-fold.psv", tz="America/New_York")
    assert (r.jobs_loaded, r.quarantined, r.reasons) == (4, 1, {"ambiguous local time": 1})
    assert _runs(wh) == [
        ("701", utc("2026-11-01T04:55:00"), utc("2026-11-01T05:10:00"), utc("2026-11-01T06:20:00"), 4200),
        ("702", utc("2026-11-01T05:45:00"), utc("2026-11-01T05:50:00"), utc("2026-11-01T06:10:00"), 1200),
        ("703", utc("2026-11-01T05:55:00"), utc("2026-11-01T06:05:00"), utc("2026-11-01T07:30:00"), 5100),
        ("705", utc("2026-11-01T05:20:00"), utc("2026-11-01T05:25:00"), utc("2026-11-01T05:35:00"), 600)]
    assert rows(wh, "SELECT job_id, step_id, start_ts, end_ts FROM slurm_job_step FINAL") == [
        ("701", "batch", utc("2026-11-01T05:10:00"), utc("2026-11-01T06:20:00"))]
    assert rows(wh, "SELECT line_no, reason FROM etl_quarantine FINAL") == [
        (6, "ambiguous local time 'Start=2026-11-01T01:10:00, End=2026-11-01T01:40:00'")]
    (s,) = summary(wh, date(2026, 11, 1), date(2026, 11, 1), tz="UTC").to_dicts()
    assert (s["gpu_h"], s["wait_hours"]) == (pytest.approx(17.0), pytest.approx(35 / 60))


def test_berlin_fold(wh):
    """801: 02:10 CEST (00:10Z) to 02:20 CET (01:20Z), ElapsedRaw 4200, submitted 01:50 CEST (10-24 23:50Z);
    802: 02:40 CEST (00:40Z) to 02:05 CET (01:05Z), 1500 s, submitted 02:30 CEST (00:30Z)."""
    r = load_sacct(wh, DST / "berlin-fold.psv", tz="Europe/Berlin")
    assert (r.jobs_loaded, r.quarantined) == (2, 0)
    assert _runs(wh) == [
        ("801", utc("2026-10-24T23:50:00"), utc("2026-10-25T00:10:00"), utc("2026-10-25T01:20:00"), 4200),
        ("802", utc("2026-10-25T00:30:00"), utc("2026-10-25T00:40:00"), utc("2026-10-25T01:05:00"), 1500)]


# the driver's Xid line (tests/data/kernel_log's forms) on hosts whose clock is America/New_York
_XID = "NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=python, GPU has fallen off the bus."
KERNEL_FOLD = "".join(f"Nov  1 {hms} {host} kernel: {boot}{_XID}\n" for hms, host, boot in [
    ("00:58:02", "gpu-a", "[1000.000000] "),
    ("01:40:12", "gpu-a", "[3530.000000] "),  # the first pass: 05:40:12Z
    ("01:40:12", "gpu-a", "[7130.000000] "),  # 3600 s of uptime later, the same wall clock: 06:40:12Z
    ("01:50:00", "gpu-b", ""),                # 05:50Z
    ("01:20:00", "gpu-b", ""),                # back 30 min: the second pass, 06:20Z
    ("01:30:00", "gpu-b", ""),                # still the second pass, 06:30Z
    ("01:15:00", "gpu-c", ""),                # gpu-c's only fold line, followed by 02:15: either pass
    ("02:15:00", "gpu-c", ""),                # after the fold, EST: 07:15Z
])


def test_kernel_log_fold_is_placed_by_each_hosts_line_order():
    """Two Xids of one GPU an hour apart in the fold (same wall clock, the kernel's uptime 3600 s apart) were
    both read 05:40:12Z, one event; now 05:40:12Z and 06:40:12Z. gpu-b's time goes back 30 min: that line and
    the next are the second pass. gpu-c's lone fold line cannot be placed: quarantined, not guessed."""
    good, bad = parse_text(KERNEL_FOLD.encode(), year=2026, tz="America/New_York")
    assert [(n, h, t.replace(tzinfo=None)) for n, h, t in good.select("line_no", "host", "ts").rows()] == [
        (1, "gpu-a", utc("2026-11-01T04:58:02")), (2, "gpu-a", utc("2026-11-01T05:40:12")),
        (3, "gpu-a", utc("2026-11-01T06:40:12")), (4, "gpu-b", utc("2026-11-01T05:50:00")),
        (5, "gpu-b", utc("2026-11-01T06:20:00")), (6, "gpu-b", utc("2026-11-01T06:30:00")),
        (8, "gpu-c", utc("2026-11-01T07:15:00"))]
    assert bad.select("line_no", "reason").rows() == [
        (7, "ambiguous local time 'Nov  1 01:15:00' (the DST fold of America/New_York: the host's line order "
            "does not say which pass)")]


# sacctmgr list event --parsable2 and scontrol show reservation, as Slurm prints them (tests/test_capacity_sources.py)
EVENTS_HEAD = "Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
EVENT_OK = "ai1|gpu-001|2026-10-02T01:00:00|2026-10-02T05:30:00|IDLE+DRAIN|thermal: GPU over temp|root(0)\n"
RESV = ("ReservationName={name} StartTime={start} EndTime={end} Duration=00:20:00\n"
        "   Nodes=gpu-005 NodeCnt=1 CoreCnt=112 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES\n"
        "   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE\n\n")


def _capacity_rows(wh) -> tuple:
    return (rows(wh, "SELECT count() FROM node_event FINAL")[0][0],
            rows(wh, "SELECT count() FROM reservation FINAL")[0][0])


def test_an_event_that_ends_before_it_starts_refuses_its_file(wh, tmp_path):
    """gpu-002's drain 2026-10-05T10:00 to 09:00 (UTC: no fold) was stored: a hardware fault of 0 hours.
    Now the file is refused in one line naming the line, the node and both times; nothing of it is loaded
    (gpu-001's good event on the line before included)."""
    p = tmp_path / "events.psv"
    p.write_text(EVENTS_HEAD + EVENT_OK
                 + "ai1|gpu-002|2026-10-05T10:00:00|2026-10-05T09:00:00|DOWN*|Xid 79|slurm(64030)\n")
    with pytest.raises(OpsError) as e:
        load_capacity(wh, events=p, tz="UTC")
    assert str(e.value) == ("events.psv line 3: node gpu-002 event: ends before it starts (start "
                            "2026-10-05T10:00:00, end 2026-10-05T09:00:00, read in UTC); nothing of the file "
                            "was loaded")
    assert "\n" not in str(e.value) and _capacity_rows(wh) == (0, 0)


def test_a_reservation_that_ends_before_it_starts_refuses_its_file(wh, tmp_path):
    p = tmp_path / "resv.txt"
    p.write_text(RESV.format(name="ok", start="2026-10-20T06:00:00", end="2026-10-20T12:00:00")
                 + RESV.format(name="maint_gpu005", start="2026-10-21T06:00:00", end="2026-10-21T05:40:00"))
    with pytest.raises(OpsError) as e:
        load_capacity(wh, reservations=p, tz="UTC")
    assert str(e.value) == ("resv.txt reservation maint_gpu005: ends before it starts (start 2026-10-21T06:00:00, "
                            "end 2026-10-21T05:40:00, read in UTC); nothing of the file was loaded")
    assert _capacity_rows(wh) == (0, 0)


def test_a_drain_across_the_fold_is_read_across_it(wh, tmp_path):
    """sacctmgr printed a drain 01:50 EDT (05:50Z) to 01:10 EST (06:10Z) and a reservation 01:40 EDT (05:40Z) to
    01:00 EST (06:00Z): the later reading of the end is the one with start <= end, so both load, 20 min each
    (before: stored ending 40 min before they start). A fold time that is already in order keeps the first
    pass (gpu-003: 01:10 to 01:30 EDT)."""
    ev, resv = tmp_path / "events.psv", tmp_path / "resv.txt"
    ev.write_text(EVENTS_HEAD
                  + "ai1|gpu-002|2026-11-01T01:50:00|2026-11-01T01:10:00|IDLE+DRAIN|reboot|root(0)\n"
                  + "ai1|gpu-003|2026-11-01T01:10:00|2026-11-01T01:30:00|IDLE+DRAIN|reboot|root(0)\n")
    resv.write_text(RESV.format(name="fold", start="2026-11-01T01:40:00", end="2026-11-01T01:00:00"))
    load_capacity(wh, events=ev, reservations=resv, tz="America/New_York")
    assert rows(wh, "SELECT node, start_ts, end_ts FROM node_event FINAL ORDER BY node") == [
        ("gpu-002", utc("2026-11-01T05:50:00"), utc("2026-11-01T06:10:00")),
        ("gpu-003", utc("2026-11-01T05:10:00"), utc("2026-11-01T05:30:00"))]
    assert rows(wh, "SELECT name, start_ts, end_ts FROM reservation FINAL") == [
        ("fold", utc("2026-11-01T05:40:00"), utc("2026-11-01T06:00:00"))]


def test_headerless_xdmod_form_is_read_the_same(wh, tmp_path):
    """The same jobs 701 and 702 as Open XDMoD's headerless `--fields xdmod` dump writes them (Elapsed as text,
    01:10:00 and 00:20:00): every sacct text path goes through one normalize, so 4200 s and 1200 s again."""
    def xdmod(job: int, submit: str, start: str, end: str, elapsed: str) -> str:
        return "|".join([str(job), str(job), "c1", "h100", "normal", "proja", "grp", "1000", "kim", "1000",
                         submit, submit, start, end, elapsed, "0:0", "COMPLETED", "1", "16", "16", "64G",
                         "billing=16,cpu=16,gres/gpu=4,mem=64G,node=1", "billing=16,cpu=16,gres/gpu=4,mem=64G,node=1",
                         "10:00:00", "gpu001", "job"]) + "\n"
    p = tmp_path / "xdmod.log"
    p.write_text(xdmod(701, "2026-11-01T00:55:00", "2026-11-01T01:10:00", "2026-11-01T01:20:00", "01:10:00")
                 + xdmod(702, "2026-11-01T01:45:00", "2026-11-01T01:50:00", "2026-11-01T01:10:00", "00:20:00"))
    r = load_sacct(wh, p, fields=parse_fields(XDMOD_FIELDS), tz="America/New_York")
    assert (r.jobs_loaded, r.quarantined) == (2, 0)
    assert [(j, s, e, d) for j, _, s, e, d in _runs(wh)] == [
        ("701", utc("2026-11-01T05:10:00"), utc("2026-11-01T06:20:00"), 4200),
        ("702", utc("2026-11-01T05:50:00"), utc("2026-11-01T06:10:00"), 1200)]
