"""Xids from the kernel log (issue 28, item 4): the driver's real `NVRM: Xid` lines from public issues
(tests/data/kernel_log/, each file's source and the rows it must load worked out by hand in its README), in
the forms sites keep them (syslog, journalctl -o json and -o short-iso, VictoriaLogs answers served by a real
HTTP server), the PCI bus id placed on a GPU through dcgm-exporter's pci_bus_id label, the Xid gauge's row of
the same Xid counted once, and a generated site whose every planted Xid (the fatal ones the gauge never
sees included) is in xid_event.
"""

from __future__ import annotations

import base64
import threading
from datetime import date, datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import polars as pl
import pytest
from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.kernel_log_xid import load_kernel_log
from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.etl.victorialogs_source import load_victorialogs
from ops_warehouse.warehouse import close_embedded

from tests.cli_runner import cli
from tests.sites import built_site, generated_site, open_site

DATA = Path(__file__).parent / "data" / "kernel_log"
UTC = timezone.utc
C = "t1"
# the GPU index of the hosts whose issues do not give one (README: *assumed*); phx8-2fa's is the issue's own
ASSUMED = [("Gipfeli", 1, "00000000:41:00.0"), ("red", 0, "00000000:01:00.0"), ("gpu-node-1", 5, "00000000:CB:00.0"),
           ("gb200-n17", 1, "00000019:01:00.0"), ("gb200-n17", 0, "00000018:01:00.0")]


def _t(*a) -> datetime:
    return datetime(*a, tzinfo=UTC)


def _scrape(tmp: Path, gpus: list[tuple[str, int, str]], name: str = "mapping.prom") -> Path:
    """A dcgm-exporter scrape of the given GPUs (one metric; the labels dcgm-exporter 4.x gives)."""
    p = tmp / name
    p.write_text("".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{g}",UUID="GPU-{h}-{g}",pci_bus_id="{pci}",device="nvidia{g}",'
                         f'modelName="NVIDIA H100 80GB HBM3",Hostname="{h}"}} 0\n' for h, g, pci in gpus))
    return p


def _map(wh, tmp: Path, gpus=ASSUMED) -> None:
    load_text_files(wh, [_scrape(tmp, gpus)], date(2026, 1, 1), date(2026, 1, 1), at=_t(2026, 1, 1, 12), cluster=C)


def _events(wh) -> list[tuple]:
    return wh.query_rows("SELECT node, pci_bus_id, gpu, ts, xid FROM xid_event FINAL WHERE cluster = {c:String} "
                         "ORDER BY ts, node, gpu, xid", {"c": C})


def _quarantine(wh, source: str) -> list[tuple]:
    return wh.query_rows("SELECT line_no, reason FROM etl_quarantine FINAL WHERE source = {s:String} "
                         "ORDER BY line_no", {"s": source})


def test_the_pci_bus_key_rule_meets_the_kernel_and_dcgm_exporter(wh):
    """functions/pci_bus_key.sql: the driver's `PCI:0000:af:00` and dcgm-exporter's `00000000:AF:00.0` (the
    DCGM issue's pair), another domain (`0019`, Grace), lspci's short form; text that is no bus id gives ''."""
    got = wh.query_rows("SELECT pci_bus_key('PCI:0000:af:00'), pci_bus_key('00000000:AF:00.0'), "
                        "pci_bus_key('PCI:0019:01:00'), pci_bus_key('00000019:01:00.0'), pci_bus_key('af:00.0'), "
                        "pci_bus_key('0000:af'), pci_bus_key('')")[0]
    assert got == ("0000:af:00", "0000:af:00", "0019:01:00", "0019:01:00", "0000:af:00", "", "")


def test_the_dcgm_issue_kernel_log_on_its_own_scrape(wh, tmp_path):
    """NVIDIA/DCGM #303: its scrape places PCI 0000:af:00 on GPU 3 of phx8-2fa (gpu_pci), then its 4 kernel lines
    load the 2 Xid events of the README, at the driver's time; reloading changes nothing."""
    load_text_files(wh, [DATA / "dcgm-exporter-phx8-2fa.prom"], date(2026, 6, 10), date(2026, 6, 10),
                    at=_t(2026, 6, 10, 3, 20), cluster=C)
    assert wh.query_rows("SELECT node, pci_bus_id, gpu, uuid FROM gpu_pci FINAL ORDER BY gpu") == [
        ("phx8-2fa", "0000:86:00", 2, "GPU-a76358a7-c820-d3dc-ad4e-2ff0d26935b2"),
        ("phx8-2fa", "0000:af:00", 3, "GPU-893e8405-030d-31eb-a44e-982d4d646a22")]
    want = [("phx8-2fa", "0000:af:00", 3, datetime(2026, 6, 10, 3, 9, 55), 13),
            ("phx8-2fa", "0000:af:00", 3, datetime(2026, 6, 10, 3, 9, 55), 31)]
    for _ in range(2):
        c = load_kernel_log(wh, [DATA / "syslog-dcgm303-phx8-2fa.log"], year=2026, cluster=C)
        assert c == {"lines": 2, "xid_events": 2, "gauge_rows_replaced": 0, "quarantined": 0}
        assert _events(wh) == want


@pytest.mark.parametrize("name, kw, want", [
    ("syslog-relion436-gipfeli.log", {"year": 2019},
     [("Gipfeli", "0000:41:00", 1, datetime(2019, 2, 15, 17, 37, 45), 13)]),
    ("journal-ikllama425-red.json", {}, [("red", "0000:01:00", 0, datetime(2025, 5, 15, 13, 57, 36), 31)]),
    ("journal-ikllama425-red.short-iso", {}, [("red", "0000:01:00", 0, datetime(2025, 5, 15, 13, 57, 36), 31)]),
])
def test_each_real_file_loads_its_hand_worked_rows(wh, tmp_path, name, kw, want):
    """The README's rows: relion's 8 lines of one Xid 13 (no pid/name, the kernel's [uptime] before it) are one
    event; ik_llama.cpp's journal as real journalctl printed it, JSON (µs UTC) and short-iso (-0500), gives
    13:57:36 UTC both ways, the segfault and the service's lines left out."""
    _map(wh, tmp_path)
    lines = {"syslog-relion436-gipfeli.log": 8}.get(name, 1)
    for _ in range(2):  # a reload replaces
        assert load_kernel_log(wh, [DATA / name], cluster=C, **kw) == {
            "lines": lines, "xid_events": len(want), "gauge_rows_replaced": 0, "quarantined": 0}
        assert _events(wh) == want


def test_two_forms_of_one_journal_are_one_event(wh, tmp_path):
    _map(wh, tmp_path)
    c = load_kernel_log(wh, [DATA / "journal-ikllama425-red.json", DATA / "journal-ikllama425-red.short-iso"],
                        cluster=C)
    assert c["lines"] == 2 and c["xid_events"] == 1
    assert _events(wh) == [("red", "0000:01:00", 0, datetime(2025, 5, 15, 13, 57, 36), 31)]


def test_a_line_no_gpu_is_known_by_is_quarantined_then_placed(wh, tmp_path):
    """Without the node's pci_bus_id mapping the lines are quarantined with a reason naming the node and the bus
    id; after the node's telemetry, reloading the log places them and the quarantine keeps its record."""
    path = DATA / "syslog-relion436-gipfeli.log"
    c = load_kernel_log(wh, [path], year=2019, cluster=C)
    assert c == {"lines": 8, "xid_events": 0, "gauge_rows_replaced": 0, "quarantined": 8}
    q = _quarantine(wh, str(path.resolve()))
    assert [n for n, _ in q] == list(range(1, 9))
    assert {r for _, r in q} == {"no GPU of Gipfeli is known by PCI bus id 0000:41:00 (load the node's "
                                 "dcgm-exporter telemetry, with its pci_bus_id label, first)"}
    _map(wh, tmp_path)
    assert load_kernel_log(wh, [path], year=2019, cluster=C)["xid_events"] == 1
    assert len(_quarantine(wh, str(path.resolve()))) == 8  # the same 8 records, not 16


def test_lines_without_a_time_a_pci_id_or_a_code_are_refused(wh, tmp_path):
    """vllm #5901's plain dmesg lines (seconds since boot) are quarantined with the reason; a line without the
    GPU's bus id or the code (the DCGM issue's line with it cut out) too; syslog lines without --year stop the
    load with one line naming the option."""
    path = DATA / "dmesg-vllm5901-uptime.log"
    assert load_kernel_log(wh, [path], cluster=C) == {
        "lines": 2, "xid_events": 0, "gauge_rows_replaced": 0, "quarantined": 2}
    assert [r for _, r in _quarantine(wh, str(path.resolve()))] == [
        "not a journalctl or syslog line with a time and a host (dmesg's [seconds since boot] is no wall-clock "
        "time)"] * 2
    real = (DATA / "syslog-dcgm303-phx8-2fa.log").read_text().splitlines()[2]
    cut = tmp_path / "cut.log"
    cut.write_text(real.replace("(PCI:0000:af:00)", "") + "\n" + real.replace("): 13,", "): GPU,") + "\n")
    _map(wh, tmp_path, [("phx8-2fa", 3, "00000000:AF:00.0")])
    assert load_kernel_log(wh, [cut], year=2026, cluster=C)["quarantined"] == 2
    assert _quarantine(wh, str(cut.resolve())) == [(1, "an NVRM Xid line without the GPU's PCI bus id"),
                                                   (2, "an NVRM Xid line without an Xid code")]
    with pytest.raises(OpsError, match=r"^syslog lines without a year .*give --year"):
        load_kernel_log(wh, [DATA / "syslog-dcgm303-phx8-2fa.log"], cluster=C)


def _gauge(tmp: Path) -> Path:
    """phx8-2fa GPU 3's DCGM_FI_DEV_XID_ERRORS at a 60 s scrape: 31 from 03:10:00 (the driver logged it at
    03:09:55), then 79 at 03:30:00, which the kernel log does not have."""
    lab = 'gpu="3",UUID="GPU-893e8405-030d-31eb-a44e-982d4d646a22",pci_bus_id="00000000:AF:00.0",Hostname="phx8-2fa"'
    vals = [("03:08:00", 0), ("03:09:00", 0), ("03:10:00", 31), ("03:11:00", 31), ("03:29:00", 31), ("03:30:00", 79)]
    p = tmp / "gauge.prom"
    p.write_text("".join(f"DCGM_FI_DEV_XID_ERRORS{{{lab}}} {v} "
                         f"{int(datetime.fromisoformat(f'2026-06-10T{t}+00:00').timestamp() * 1000)}\n"
                         for t, v in vals))
    return p


@pytest.mark.parametrize("kernel_first", [False, True])
def test_the_gauge_and_the_kernel_log_of_one_xid_count_once(wh, tmp_path, kernel_first):
    """The gauge's Xid 31 at 03:10:00 (step 60 s) is the kernel log's of 03:09:55 (xid_same_event: within the
    step and the exporter's collect interval before it): one row, at the kernel's time, whichever was loaded
    first; the gauge's 79 stays; reloading either changes nothing."""
    def gauge():
        return load_text_files(wh, [_gauge(tmp_path)], date(2026, 6, 10), date(2026, 6, 10), cluster=C)

    def kernel():
        return load_kernel_log(wh, [DATA / "syslog-dcgm303-phx8-2fa.log"], year=2026, cluster=C)

    _map(wh, tmp_path, [("phx8-2fa", 3, "00000000:AF:00.0")])
    if kernel_first:
        assert kernel()["gauge_rows_replaced"] == 0
        assert gauge()["xid_events"] == 1  # the 79 only
    else:
        assert gauge()["xid_events"] == 2
        assert kernel()["gauge_rows_replaced"] == 1
    want = [("phx8-2fa", "0000:af:00", 3, datetime(2026, 6, 10, 3, 9, 55), 13),
            ("phx8-2fa", "0000:af:00", 3, datetime(2026, 6, 10, 3, 9, 55), 31),
            ("phx8-2fa", "", 3, datetime(2026, 6, 10, 3, 30), 79)]
    assert _events(wh) == want
    gauge(), kernel(), gauge()
    assert _events(wh) == want
    assert wh.query_rows("SELECT step_s FROM xid_event FINAL WHERE xid = 79")[0][0] == 60


class _VictoriaLogs(BaseHTTPRequestHandler):
    """Answers /select/logsql/query with the saved answer (self.server.answer), recording each request."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        self.server.seen.append((self.path, parse_qs(body), self.headers.get("Authorization")))
        code, data = self.server.reply
        self.send_response(code)
        self.send_header("Content-Type", "application/stream+json" if code == 200 else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture
def victorialogs():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _VictoriaLogs)
    server.seen, server.reply = [], (200, b"")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("name, day, want", [
    ("victorialogs-journald-gpud46.jsonl", date(2024, 8, 30),
     [("gpu-node-1", "0000:cb:00", 5, datetime(2024, 8, 30, 11, 43, 9), 13),
      ("gpu-node-1", "0000:cb:00", 5, datetime(2024, 8, 30, 11, 43, 14), 109)]),
    ("victorialogs-otel-gpud1174.jsonl", date(2025, 12, 8),
     [("gb200-n17", "0019:01:00", 1, datetime(2025, 12, 8, 4, 21, 37), 149),
      ("gb200-n17", "0018:01:00", 0, datetime(2025, 12, 8, 4, 21, 39), 145)]),
])
def test_victorialogs_answers_over_http(wh, tmp_path, victorialogs, name, day, want):
    """The saved answers served by an HTTP server: the LogsQL query and the window the loader sends, the rows of
    the README (journald's _HOSTNAME; the OpenTelemetry path's too), a window the entries are not in loads
    nothing, a reload replaces."""
    _map(wh, tmp_path)
    victorialogs.reply = (200, (DATA / name).read_bytes())
    url = f"http://127.0.0.1:{victorialogs.server_address[1]}"
    lines = len((DATA / name).read_text().splitlines())
    for _ in range(2):
        assert load_victorialogs(wh, url, day, day, cluster=C) == {
            "lines": lines, "xid_events": 2, "gauge_rows_replaced": 0, "quarantined": 0}
        assert _events(wh) == want
    path, form, auth = victorialogs.seen[0]
    assert path == "/select/logsql/query" and auth is None
    assert form == {"query": ['_msg:"NVRM: Xid"'], "start": [f"{day}T00:00:00.000000Z"],
                    "end": [f"{day}T23:59:59.999999Z"]}
    nxt = date.fromordinal(day.toordinal() + 1)
    assert load_victorialogs(wh, url, nxt, nxt, cluster=C)["xid_events"] == 0


def test_victorialogs_credentials_and_refusals(wh, tmp_path, victorialogs):
    """A URL's user and password go as basic auth and appear nowhere (messages, the run log, the rows); a 4xx
    answer fails in one line with VictoriaLogs' reason."""
    _map(wh, tmp_path)
    victorialogs.reply = (200, (DATA / "victorialogs-journald-gpud46.jsonl").read_bytes())
    port = victorialogs.server_address[1]
    load_victorialogs(wh, f"http://ops:s3cret-pw@127.0.0.1:{port}", date(2024, 8, 30), date(2024, 8, 30), cluster=C)
    assert victorialogs.seen[-1][2] == "Basic " + base64.b64encode(b"ops:s3cret-pw").decode()
    logged = wh.query_rows("SELECT source FROM etl_run_log WHERE source_kind = 'kernel-log'")
    sources = wh.query_rows("SELECT DISTINCT source FROM xid_event")
    assert logged and all("s3cret" not in s for (s,) in logged + sources), (logged, sources)
    victorialogs.reply = (400, b"cannot parse query [_msg:\"NVRM: Xid\"]: unexpected token")
    with pytest.raises(OpsError) as e:
        load_victorialogs(wh, f"http://ops:s3cret-pw@127.0.0.1:{port}", date(2024, 8, 30), date(2024, 8, 30),
                          cluster=C)
    assert str(e.value) == (f"victorialogs at http://ops:***@127.0.0.1:{port} refused the query (HTTP 400): "
                            'cannot parse query [_msg:"NVRM: Xid"]: unexpected token')


def test_the_command_line(cfg, tmp_path):
    """`ops-report etl kernel-log` prints what it loaded; a --victorialogs URL with a password on the command line
    and syslog lines without --year are refused in one line."""
    dsn = cfg.dsn
    cli("-w", dsn, "etl", "metrics", "--source", "file", "--file", str(DATA / "dcgm-exporter-phx8-2fa.prom"),
        "--at", "2026-06-10T03:20:00Z", "--from", "2026-06-10", "--to", "2026-06-10", "--cluster", C)
    log = str(DATA / "syslog-dcgm303-phx8-2fa.log")
    out = cli("-w", dsn, "etl", "kernel-log", log, "--year", "2026", "--cluster", C).stdout
    assert out == f"{log}: 2 Xid lines, 2 Xid events, 0 gauge rows of the same Xids replaced, quarantined 0\n"
    p = cli("-w", dsn, "etl", "kernel-log", log, "--cluster", C, check=False)
    assert p.returncode == 2 and p.stderr.startswith("ops-report: error: syslog lines without a year")
    assert len(p.stderr.splitlines()) == 1
    p = cli("-w", dsn, "etl", "kernel-log", "--victorialogs", "http://ops:pw1234@vl:9428", "--from", "2026-06-10",
            "--to", "2026-06-10", check=False)
    assert p.returncode == 2 and "pw1234" not in p.stderr + p.stdout
    assert p.stderr == ("ops-report: error: --victorialogs must not hold a password (the process list shows it to "
                        "every user): put the URL in OPS_VICTORIALOGS_URL\n")
    p = cli("-w", dsn, "etl", "kernel-log", log, "--tz", "Mars/Olympus", check=False)
    assert p.returncode == 2 and p.stderr == ("ops-report: error: --tz 'Mars/Olympus': not a time zone (an IANA name "
                                              "such as UTC or Asia/Tokyo)\n")


# --- a generated site: every planted Xid -----------------------------------------------------------------

W0 = _t(2026, 10, 1)


def build(out, **params) -> dict:
    return generated_site(out, telemetry_days=(date(2026, 10, 1), date(2026, 10, 8)), kernel_log=True, **params)


@pytest.mark.slow
def test_a_generated_site_has_every_planted_xid(tmp_path_factory, tmp_path):
    """12 nodes, 8 days, seed 0 (30 Xids planted: a drain Xid 64 the gauge sees, a fatal Xid 74 the gauge never
    sees because the node went down, and Xid 31 at the end of failed runs): xid_event holds exactly
    truth/xids.parquet (node, GPU, second, code), every row from the kernel log (the gauge's twins replaced);
    the Xid table by code (xid_codes) has each code's events, nodes, GPUs, first and last time from the truth."""
    site = built_site(tmp_path_factory, "kernel-log-xid", build, start=W0, days=8, jobs_per_day=60, nodes=12, seed=0,
                      metrics_step_s=300)
    truth = pl.read_parquet(site.path / "truth" / "xids.parquet").select(
        "node", pl.col("gpu").cast(pl.Int64), pl.col("ts").dt.epoch("s").alias("ts"), pl.col("xid").cast(pl.Int64))
    assert truth.height == 30 and truth.unique().height == 30
    assert set(truth.filter(pl.col("xid") != 31)["xid"]) == {64, 74}
    lines = sum(len(p.read_text().splitlines()) for p in (site.path / "logs" / "kernel").glob("*.log"))
    assert lines == truth.height
    wh = open_site(site, tmp_path)
    try:
        got = pl.DataFrame(wh.query_rows(
            "SELECT node, gpu, toInt64(toUInt32(ts)), xid, source FROM xid_event FINAL WHERE cluster = 'ai1'"),
            schema={"node": pl.String, "gpu": pl.Int64, "ts": pl.Int64, "xid": pl.Int64, "source": pl.String},
            orient="row")
        assert got.filter(~pl.col("source").str.starts_with("kernel:")).height == 0
        assert got.drop("source").sort(got.columns[:4]).equals(truth.sort(truth.columns))
        codes = run_mart(wh, "xid_codes", cluster="ai1", window=(W0, _t(2026, 10, 9)))
        want = truth.group_by("xid").agg(
            pl.len().alias("events"), pl.col("node").n_unique().alias("nodes"),
            pl.struct("node", "gpu").n_unique().alias("gpus"),
            pl.from_epoch(pl.col("ts").min(), "s").alias("first_ts"),
            pl.from_epoch(pl.col("ts").max(), "s").alias("last_ts")).with_columns(
            hardware=pl.col("xid").is_in([48, 63, 64, 74, 79, 92, 94, 95]).cast(pl.Int64))
        cols = ["xid", "hardware", "events", "nodes", "gpus", "first_ts", "last_ts"]
        got_codes = codes.select(pl.col("xid").cast(pl.Int64), pl.col("hardware").cast(pl.Int64),
                                 *[pl.col(c).cast(pl.Int64) for c in ("events", "nodes", "gpus")],
                                 *[pl.col(c).dt.replace_time_zone(None).dt.cast_time_unit("us")
                                   for c in ("first_ts", "last_ts")])
        want = want.select(cols).with_columns(pl.col(["events", "nodes", "gpus"]).cast(pl.Int64),
                                              pl.col(["first_ts", "last_ts"]).dt.cast_time_unit("us"))
        assert got_codes.sort("xid").equals(want.sort("xid")), (got_codes, want)
    finally:
        wh.close()
        close_embedded()
