"""The Prometheus source's fast path (issue 50): answers decoded without a Python object per sample
(etl/prom_matrix.py), the GPU metrics loaded node batch by node batch. Against an HTTP stand-in serving
hand-written query_range answers, so every figure below is read off the answers themselves:

- n1 has every metric; n2's GPU has no DCGM_FI_DEV_GPU_UTIL (a MIG-mode GPU, or an exporter without the
  field), so its rows come from the later metrics only: its model must still be its modelName label;
- n2's power comes twice, the device-level series and a pod's copy (999 W): the device-level one is kept;
- a NaN power is a point the load quarantines and stores NULL;
- n1's UUID holds the text a series starts with (``},{"metric":``) and an escaped quote;
- the Xid gauge goes 0 -> 79 on n1 at +60 s and 0 -> 48 on n2 at +120 s: two events, whatever the batches.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from datetime import date, datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ops_warehouse.errors import OpsError
from ops_warehouse.etl import prometheus_source
from ops_warehouse.etl.prom_matrix import decode_matrix
from ops_warehouse.etl.prometheus_source import PromClient, load_prometheus
from ops_warehouse.warehouse import close_embedded, open_warehouse

DAY = date(2026, 10, 1)
W0 = int(datetime(2026, 10, 1, tzinfo=timezone.utc).timestamp())
H100 = "NVIDIA H100 80GB HBM3"
UUID1 = 'GPU-1"},{"metric":x'
# the rows and Xid events worked out by hand from SERIES below (node, gpu, seconds after W0, model, uuid,
# utilization %, power W), what a load of its answers must store however they are batched or pipelined
HAND_ROWS = [
    ("n1", 0, 0, H100, UUID1, 10.0, 100.0), ("n1", 0, 60, H100, UUID1, 20.0, 110.0),
    ("n1", 0, 120, H100, UUID1, 30.0, 120.0),
    ("n2", 0, 0, H100, "GPU-2", None, 200.0), ("n2", 0, 60, H100, "GPU-2", None, None),
    ("n2", 0, 120, H100, "GPU-2", None, 220.0),
]
HAND_XIDS = [("n1", 60, 79), ("n2", 120, 48)]
# metric -> [(labels, [values at W0-60 (the seed), W0, W0+60, W0+120])]
SERIES = {
    "DCGM_FI_DEV_GPU_UTIL": [({"Hostname": "n1", "gpu": "0", "modelName": H100, "UUID": UUID1}, ["5", "10", "20", "30"])],
    "DCGM_FI_DEV_POWER_USAGE": [
        ({"Hostname": "n1", "gpu": "0", "modelName": H100, "UUID": UUID1}, ["90", "100", "110", "120"]),
        ({"Hostname": "n2", "gpu": "0", "modelName": H100, "UUID": "GPU-2", "pod": "train-1"},
         ["999", "999", "999", "999"]),
        ({"Hostname": "n2", "gpu": "0", "modelName": H100, "UUID": "GPU-2"}, ["190", "200", "NaN", "220"]),
    ],
    "DCGM_FI_DEV_XID_ERRORS": [
        ({"Hostname": "n1", "gpu": "0", "modelName": H100, "UUID": UUID1}, ["0", "0", "79", "79"]),
        ({"Hostname": "n2", "gpu": "0", "modelName": H100, "UUID": "GPU-2"}, ["0", "0", "0", "48"]),
    ],
}


class _Handler(BaseHTTPRequestHandler):
    bad_value = False

    def log_message(self, *a):
        pass

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        label = u.path.split("/")[4]
        name = urllib.parse.parse_qs(u.query)["match[]"][0]
        values = sorted({lab[label] for lab, _ in SERIES.get(name, []) if label in lab})
        self._send(json.dumps({"status": "success", "data": values}).encode())

    def do_POST(self):
        q = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        expr, start = q["query"][0], float(q["start"][0])
        name = re.search(r"\((\w+)", expr).group(1)
        nodes = re.search(r'Hostname=~"([^"]*)"', expr)
        want = set(re.findall(r"(n\d)\(", nodes.group(1))) if nodes else set()
        result = []
        for lab, vals in SERIES.get(name, []):
            if lab["Hostname"] in want:
                v = ["abc" if self.bad_value else x for x in vals]
                result.append({"metric": lab, "values": [[round(start + 60 * k, 3), x] for k, x in enumerate(v)]})
        self._send(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}},
                              separators=(",", ":")).encode())


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    _Handler.bad_value = False


def _load(cfg, tmp_path, url, name):
    cfg.dsn = f"chdb://{tmp_path / name}"
    w = open_warehouse(cfg)
    try:
        c = load_prometheus(w, url, DAY, DAY, step_s=60, cluster="c")
        rows = w.query_rows("SELECT node, gpu, toUnixTimestamp(ts) - {w0:Int64}, model_name, uuid, gpu_util_pct, "
                            "power_w FROM gpu_sample FINAL ORDER BY node, gpu, ts", {"w0": W0})
        xids = w.query_rows("SELECT node, toUnixTimestamp(ts) - {w0:Int64}, xid FROM xid_event FINAL ORDER BY node",
                            {"w0": W0})
    finally:
        close_embedded()
    return c, rows, xids


@pytest.mark.parametrize("batch_nodes", [32, 1])
def test_answers_load_as_written(server, cfg, tmp_path, monkeypatch, batch_nodes):
    monkeypatch.setattr(prometheus_source, "BATCH_NODES", batch_nodes)
    inserted = []
    real = prometheus_source.insert_frames

    def spy(wh, frames, *a, **k):
        inserted.append({kind: sorted({n for f in fs if f is not None for n in f.get_column("Hostname")})
                         for kind, fs in frames.items() if kind == "gpu"})
        return real(wh, frames, *a, **k)

    monkeypatch.setattr(prometheus_source, "insert_frames", spy)
    c, rows, xids = _load(cfg, tmp_path, server, "wh")
    assert (rows, xids) == (HAND_ROWS, HAND_XIDS)
    assert (c["gpu_rows"], c["xid_events"], c["quarantined"]) == (6, 2, 1)
    # memory holds a batch of nodes, not the day: each insert has at most BATCH_NODES nodes' GPUs
    gpu_inserts = [i["gpu"] for i in inserted if i.get("gpu")]
    assert gpu_inserts == ([["n1", "n2"]] if batch_nodes == 32 else [["n1"], ["n2"]])


def test_unreadable_values_fail_in_one_line(server, cfg, tmp_path):
    _Handler.bad_value = True
    with pytest.raises(OpsError, match=r"^prometheus query_range \(DCGM_FI_DEV_GPU_UTIL\): the answer's values are "
                                       r"not \[time, \"number\"\] pairs$"):
        _load(cfg, tmp_path, server, "bad")


def test_decode_reads_what_json_reads():
    """Escapes in labels, every number form the API writes, an empty series, and what is not a matrix."""
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "m", "a": 'x"},{"metric":]}', "b": "\\"}, "values": [[1.001, "+Inf"], [61.001, "-Inf"]]},
        {"metric": {"a": "y"}, "values": []},
        {"metric": {}, "values": [[121, "NaN"], [181.5, "1e-05"], [241, "-3.25E+2"]]}]}}
    for raw in (json.dumps(answer, separators=(",", ":")).encode(), json.dumps(answer, indent=1).encode()):
        m = decode_matrix(raw, "m")  # compact as the servers write it, and re-indented
        assert m.labels == [r["metric"] for r in answer["data"]["result"]]
        assert m.counts.tolist() == [2, 0, 3]
        assert m.ts_s.tolist() == [1, 61, 121, 181, 241]
        assert [str(v) for v in m.values] == ["inf", "-inf", "nan", "1e-05", "-325.0"]
    with pytest.raises(OpsError, match="not a matrix"):
        decode_matrix(b'{"status":"success","data":{"resultType":"vector"}}', "m")


def test_client_keeps_its_json_answers(server):
    assert PromClient(server).label_values("Hostname", "DCGM_FI_DEV_POWER_USAGE", 0, 1) == ["n1", "n2"]


def test_next_request_leaves_while_an_answer_is_decoded(server, cfg, tmp_path, monkeypatch):
    """The fetching thread only waits on the server: the second request is sent while the first answer is
    still being decoded (before, one thread fetched and decoded in turn), and the rows are those the answers
    hold, as in test_answers_load_as_written (figures read off SERIES by hand)."""
    monkeypatch.setattr(prometheus_source, "BATCH_NODES", 1)
    asked = threading.Semaphore(0)
    real_ask, real_decode = PromClient.query_range_raw, prometheus_source.decode_matrix
    sent_while_decoding = []

    def ask(self, *a, **k):
        raw = real_ask(self, *a, **k)
        asked.release()
        return raw

    def decode(raw, name):
        if not sent_while_decoding:  # the first answer: hold its decoding until a second answer came back
            asked.acquire(timeout=10)  # the first one's own release
            sent_while_decoding.append(asked.acquire(timeout=5))
        return real_decode(raw, name)

    monkeypatch.setattr(PromClient, "query_range_raw", ask)
    monkeypatch.setattr(prometheus_source, "decode_matrix", decode)
    c, rows, xids = _load(cfg, tmp_path, server, "pipelined")
    assert sent_while_decoding == [True]
    assert (rows, xids) == (HAND_ROWS, HAND_XIDS)
    assert (c["gpu_rows"], c["xid_events"], c["quarantined"]) == (6, 2, 1)
