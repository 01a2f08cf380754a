"""A ClickHouse HTTP server for the tests: the embedded engine (chDB) behind ClickHouse's HTTP interface.

No ClickHouse server package installs on the test machines, yet the product's server branch (uploads through
clickhouse-connect into the warehouse, no engine reads of the client's files, state only in tables) must run
in the suite. This process holds a chDB warehouse of its own and answers clickhouse-connect's HTTP client as
a server does: queries in the body or the ``query`` parameter, ``param_<name>`` query parameters, settings and
``database`` as URL parameters, inserts as a body in the format the INSERT names (Native, Parquet, ...),
sessions (``session_id``: one engine handle each, so SET and temporary tables live as long as the session;
URL settings apply to their request alone, as on a server: set before it and reset after it in a session,
on a handle of its own outside one),
errors as ``Code: N. DB::Exception: ...`` with the X-ClickHouse-Exception-Code header, and the
X-ClickHouse-Summary/-Format/-Timezone headers.

The user ``analyst`` is read-only (readonly = 1, as a profile sets it on a server). What a remote server
cannot do, it refuses: a client's query that reads files (``file()``, ``FROM INFILE``)
fails with ACCESS_DENIED, because on a real deployment the server does not see the client's disk.

    python tests/chdb_server.py --path DIR --port-file FILE      # prints nothing; FILE gets the port
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import tempfile
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import chdb

# URL parameters the HTTP layer consumes; every other one is a setting for the query
TRANSPORT = {
    "query", "database", "default_format", "session_id", "session_timeout", "session_check", "query_id",
    "compress", "decompress", "enable_http_compression", "wait_end_of_query", "buffer_size", "user",
    "password", "quota_key", "client_protocol_version", "role", "send_progress_in_http_headers",
    "http_headers_progress_interval_ms", "http_zlib_compression_level",
}
# a client's query must not make the engine read files (the path a remote server cannot take)
READS_FILES = re.compile(r"\bfile\s*\(|\bINFILE\b|\bfileCluster\s*\(", re.IGNORECASE)
INSERT_FORMAT = re.compile(r"^(\s*INSERT\s+INTO\s+.+?)\s+FORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
INSERT_IN_BODY = re.compile(rb"^(\s*INSERT\s+INTO\s.*?\sFORMAT\s+\w+)[ \t]*\r?\n?", re.IGNORECASE | re.DOTALL)
CODE = re.compile(r"Code:\s*(\d+)")


class Engine:
    def __init__(self, path: str):
        self.path = path
        self.anchor = chdb.connect(path)  # keeps the engine up between requests
        self.lock = threading.Lock()  # one query at a time: chDB's handles share one engine
        self.sessions: dict[str, object] = {}
        self.spool = tempfile.mkdtemp(prefix="chdb-server-")

    def handle(self, session: str | None):
        if not session:
            return chdb.connect(self.path), True
        if session not in self.sessions:
            self.sessions[session] = chdb.connect(self.path)
        return self.sessions[session], False


def _decompress(data: bytes, encoding: str) -> bytes:
    encoding = (encoding or "").lower()
    if not encoding or encoding == "identity":
        return data
    if encoding == "gzip":
        return gzip.decompress(data)
    if encoding == "deflate":
        return zlib.decompress(data)
    if encoding == "lz4":
        import lz4.frame

        out = bytearray()  # the client streams one frame per block: decode them all
        while data:
            d = lz4.frame.LZ4FrameDecompressor()
            out += d.decompress(data)
            data = d.unused_data
        return bytes(out)
    if encoding == "zstd":
        from backports import zstd  # what clickhouse-connect itself compresses with

        return zstd.decompress(data)
    if encoding == "br":
        import brotli

        return brotli.decompress(data)
    raise ValueError(f"unsupported Content-Encoding {encoding}")


# users the server gives readonly = 1 (as a profile does on a real server): docs/deployment.md's analyst
READONLY_USERS = {"analyst"}


def _user(headers, params) -> str:
    if params.get("user"):
        return params["user"]
    if headers.get("X-ClickHouse-User"):
        return headers["X-ClickHouse-User"]
    auth = headers.get("Authorization", "")
    if auth.startswith("Basic "):
        import base64

        return base64.b64decode(auth[6:]).decode("utf-8", "replace").split(":", 1)[0]
    return "default"


def make_handler(engine: Engine):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # a response is two writes (the headers, then the body): with Nagle's algorithm on, the body waited for
        # the client's delayed ACK of the headers, ~40 ms a request (55-75 ms against 2.5-4 ms for a small
        # SELECT through clickhouse-connect, docs/benchmarks.md issue 51 round 6), dozens of them a load
        disable_nagle_algorithm = True

        def log_message(self, *args):  # quiet: the tests read the product's output, not ours
            pass

        def _send(self, status: int, body: bytes, headers: dict | None = None):
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, message: str, status: int = 500):
            m = CODE.search(message)
            code = m.group(1) if m else "1001"
            text = message if message.startswith("Code:") else f"Code: {code}. DB::Exception: {message}"
            self._send(status, (text.rstrip() + "\n").encode(), {"X-ClickHouse-Exception-Code": code,
                                                                   "Content-Type": "text/plain; charset=UTF-8"})

        def do_GET(self):
            self._serve(b"")

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self._read_chunked()
            try:
                body = _decompress(body, self.headers.get("Content-Encoding"))
            except Exception as e:
                self._error(f"Code: 432. DB::Exception: cannot decompress the body: {e}", 400)
                return
            self._serve(body)

        def _read_chunked(self) -> bytes:
            out = bytearray()
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()

        def _serve(self, body: bytes):
            url = urlsplit(self.path)
            if url.path.rstrip("/") == "/ping":
                self._send(200, b"Ok.\n")
                return
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            if "query" in params:
                query, data = params["query"], body
            else:
                # an INSERT's statement may open the body, its data following the format's name
                head = INSERT_IN_BODY.match(body[:65536])
                if head:
                    query, data = head.group(1).decode("utf-8"), body[head.end():]
                else:
                    query, data = body.decode("utf-8"), b""
            qparams = {k[len("param_"):]: v for k, v in params.items() if k.startswith("param_")}
            settings = {k: v for k, v in params.items() if k not in TRANSPORT and not k.startswith("param_")}
            if READS_FILES.search(query):
                self._error("Code: 497. DB::Exception: the test server refuses queries that read files: a remote "
                            "server cannot see the client's files (ACCESS_DENIED)", 403)
                return
            spooled = None
            m = INSERT_FORMAT.match(query)
            if m and data:
                spooled = os.path.join(engine.spool, uuid.uuid4().hex)
                with open(spooled, "wb") as f:
                    f.write(data)
                query = f"{m.group(1)} FROM INFILE '{spooled}' FORMAT {m.group(2)}"
            if settings:
                clause = ", ".join(f"{k} = '{v}'" if not re.fullmatch(r"-?\d+(\.\d+)?", v) else f"{k} = {v}"
                                   for k, v in settings.items())
            fmt = params.get("default_format") or "TabSeparated"
            readonly = _user(self.headers, params) in READONLY_USERS
            query_id = params.get("query_id") or str(uuid.uuid4())
            t0 = time.monotonic()
            try:
                with engine.lock:
                    # a read-only user's every request runs on a handle of its own (readonly = 1 is the user's);
                    # URL settings apply to their query only: outside a session on a handle of its own, in a
                    # session (whose temporary tables the query may read) on the session's, reset after it
                    conn, transient = engine.handle(None if readonly else params.get("session_id"))
                    try:
                        if params.get("database"):
                            conn.query(f"USE `{params['database']}`", "TabSeparated")
                        if readonly:
                            conn.query("SET readonly = 1", "TabSeparated")
                        if settings:
                            conn.query(f"SET {clause}", "TabSeparated")
                        res = conn.query(query, fmt, params=qparams)
                        out = res.bytes() if res is not None else b""
                        read_rows = getattr(res, "rows_read", lambda: 0)()
                        read_bytes = getattr(res, "bytes_read", lambda: 0)()
                    finally:
                        if transient:
                            conn.close()
                        elif settings:
                            conn.query("SET " + ", ".join(f"{k} = DEFAULT" for k in settings), "TabSeparated")
            except Exception as e:
                self._error(str(e))
                return
            finally:
                if spooled:
                    os.unlink(spooled)
            summary = {"read_rows": str(read_rows), "read_bytes": str(read_bytes), "written_rows": "0",
                       "written_bytes": "0", "total_rows_to_read": "0", "result_rows": "0", "result_bytes": "0",
                       "elapsed_ns": str(int((time.monotonic() - t0) * 1e9))}
            m_fmt = re.search(r"\bFORMAT\s+(\w+)\s*;?\s*$", query, re.IGNORECASE)
            self._send(200, out, {
                "Content-Type": "application/octet-stream",
                "X-ClickHouse-Format": m_fmt.group(1) if m_fmt else fmt,
                "X-ClickHouse-Timezone": "UTC",
                "X-ClickHouse-Query-Id": query_id,
                "X-ClickHouse-Server-Display-Name": "chdb-test-server",
                "X-ClickHouse-Summary": json.dumps(summary),
            })

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", required=True, help="the server's own data directory")
    ap.add_argument("--port-file", required=True, help="written with the port once the server listens")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    os.environ["TZ"] = "UTC"  # a server's timezone is its own, not the client's
    time.tzset()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), make_handler(Engine(a.path)))
    server.daemon_threads = True
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
