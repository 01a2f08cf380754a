"""Kernel-log Xids from VictoriaLogs: the site ships journald through an OpenTelemetry collector (or
systemd-journal-upload) into VictoriaLogs, and this asks its HTTP API for the driver's lines with LogsQL.

``/select/logsql/query`` (POST, form-encoded: ``query``, ``start``, ``end`` in RFC 3339) answers JSON lines, one
log entry each: ``_time``, ``_msg``, ``_stream`` and the entry's fields (journald's ``_HOSTNAME``,
``_TRANSPORT``, ...; an OpenTelemetry resource attribute such as ``host.name``). The answer is streamed to a
temporary file (a month of a cluster's Xid lines is small, but the query has no limit), then parsed and
loaded as a kernel log file is (etl/kernel_log_xid.py), for whole UTC days, the rows outside the window left
out. Retried with backoff like the Prometheus source (etl/retry.py): timeouts, refused connections and 5xx
answers; a 4xx answer (a bad query, no access) fails at once with VictoriaLogs' own one-line reason.

Credentials: a URL with a user and password (``https://user:pass@vlselect:9428``, a vmauth in front) is sent
as HTTP basic auth and never shown: messages and the run log name the URL redacted (core/dsn.py), and the
command line refuses such a URL in its arguments (OPS_VICTORIALOGS_URL holds it instead).
"""

from __future__ import annotations

import base64
import http.client
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.kernel_log_xid import insert_rows, parse_victorialogs, xid_rows
from ops_warehouse.etl.retry import Retry, Transient, first_line
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load, window_text
from ops_warehouse.warehouse import redact

# LogsQL: the entries whose _msg holds the phrase (the loader keeps the kernel's own and reads the code)
XID_QUERY = '_msg:"NVRM: Xid"'


class LogsClient:
    """POST /select/logsql/query against VictoriaLogs, the answer streamed to a file."""

    def __init__(self, url: str, timeout_s: float = 300, retries: int = 4, backoff_s: float = 1.0,
                 retry: Retry | None = None):
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        self.auth = None
        if parts.username is not None:  # basic auth from the URL's user part, never sent in the URL itself
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        self.url = urllib.parse.urlunsplit(parts)
        self.shown = redact(url.rstrip("/"))
        self.timeout_s = timeout_s
        self.retry = retry or Retry(retries, backoff_s, f"victorialogs {self.shown}")

    def query(self, logsql: str, start: datetime, end: datetime, out: Path) -> Path:
        """The entries of ``logsql`` in [start, end) into ``out`` (JSON lines, as VictoriaLogs sent them)."""
        form = urllib.parse.urlencode({"query": logsql, "start": _rfc3339(start),
                                       "end": _rfc3339(end - timedelta(microseconds=1))})
        return self.retry.call(lambda: self._once(form, out), f"victorialogs at {self.shown} unreachable")

    def _once(self, form: str, out: Path) -> Path:
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self.auth:
            headers["Authorization"] = self.auth
        req = urllib.request.Request(f"{self.url}/select/logsql/query", data=form.encode(), method="POST",
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r, open(out, "wb") as f:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
        except urllib.error.HTTPError as e:
            try:
                why = " ".join(e.read()[:300].decode("utf-8", "replace").split())
            except (OSError, http.client.HTTPException):
                why = ""
            why = why or str(e.reason)
            if e.code >= 500 or e.code in (408, 429):
                raise Transient(f"HTTP {e.code}: {why}") from None
            raise OpsError(f"victorialogs at {self.shown} refused the query (HTTP {e.code}): {why}") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, OSError) and not isinstance(e.reason, ssl.SSLCertVerificationError):
                raise Transient(first_line(e.reason)) from None
            raise OpsError(f"victorialogs at {self.shown}: {e.reason}") from None
        except (http.client.InvalidURL, ValueError) as e:
            raise OpsError(f"victorialogs at {self.shown}: {e}") from None
        except TimeoutError:
            raise Transient(f"no answer within {self.timeout_s:g} s") from None
        except (OSError, http.client.HTTPException) as e:  # reset or cut off while reading the answer
            raise Transient(first_line(e)) from None
        return out


def _rfc3339(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _counts(c: dict) -> tuple[int, int, int]:
    return c["lines"], c["xid_events"], c["quarantined"]


@logged_load("kernel-log", lambda a: f"kernel:victorialogs:{redact(a['url'])} {window_text(a)}", _counts)
def load_victorialogs(wh, url: str, date_from: date, date_to: date, *, cluster: str | None = None,
                      query: str = XID_QUERY, client: LogsClient | None = None) -> dict:
    """The Xid lines VictoriaLogs holds for whole UTC days ``date_from`` .. ``date_to``, into xid_event
    (etl/kernel_log_xid.py insert_rows: idempotent, the gauge's rows of the same Xids replaced)."""
    client = client or LogsClient(url)
    cluster = cluster_for_rows(wh, cluster)
    w0 = datetime.combine(date_from, datetime.min.time(), timezone.utc)
    window = (w0, datetime.combine(date_to, datetime.min.time(), timezone.utc) + timedelta(days=1))
    fd, tmp = tempfile.mkstemp(prefix="victorialogs-", suffix=".jsonl")
    Path(tmp).chmod(0o600)
    try:
        with open(fd, "wb"):
            pass
        client.query(query, *window, Path(tmp))
        lines, bad = parse_victorialogs(Path(tmp).read_bytes())
    finally:
        Path(tmp).unlink(missing_ok=True)
    rows, bad_xid = xid_rows(lines, f"kernel:victorialogs:{client.shown}")
    rows = rows.filter(pl.col("ts") >= window[0], pl.col("ts") < window[1])
    return insert_rows(wh, rows, {f"victorialogs:{client.shown}": pl.concat([bad, bad_xid])}, cluster, window)
