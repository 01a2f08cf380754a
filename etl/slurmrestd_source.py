"""slurmrestd as a source: ``GET <url>/slurm/v0.0.4x/nodes`` and ``.../reservations`` (capacity) and
``<url>/slurmdb/v0.0.4x/jobs`` (the job records, sacct --json's document) with the site's JWT (``SLURM_JWT``, as ``scontrol token`` prints it; from the environment only, never argv), the
newest data_parser the daemon serves first (v0.0.44 down to v0.0.40). The answers are saved to the load's
staging folder and read as saved responses are (etl/slurmrestd_json.py), so a fetched response and a saved one
load the same rows.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

from ops_warehouse.dsn import redact
from ops_warehouse.errors import OpsError

VERSIONS = ("v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40")
TOKEN_ENV = "SLURM_JWT"
TIMEOUT_S = 60


def token() -> str:
    t = os.environ.get(TOKEN_ENV, "").strip()
    if not t:
        raise OpsError(f"slurmrestd needs a token: set {TOKEN_ENV} (`scontrol token` prints "
                       f"{TOKEN_ENV}=...); it is read from the environment only")
    return t


def fetch(url: str, what: str, out: Path, jwt: str, *, plugin: str = "slurm", query: str = "") -> tuple[Path, str]:
    """``what`` (nodes or reservations of /slurm, jobs of /slurmdb: ``plugin``) from slurmrestd at ``url`` into
    ``out``; (the file, the data_parser version it was served with). A version the daemon lacks answers 404
    and the next older one is tried. ``query``: the request's query string (already encoded)."""
    base = url.rstrip("/")
    shown = redact(base)
    for v in VERSIONS:
        req = urllib.request.Request(f"{base}/{plugin}/{v}/{what}" + (f"?{query}" if query else ""), headers={
            "X-SLURM-USER-TOKEN": jwt, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
                body = r.read()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                continue
            detail = _error_text(e)
            raise OpsError(f"slurmrestd {shown}/{plugin}/{v}/{what}: HTTP {e.code}"
                           + (f": {detail}" if detail else "")
                           + (f" (check {TOKEN_ENV})" if e.code in (401, 403) else "")) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise OpsError(f"slurmrestd {shown}: cannot connect ({str(reason)[:200]})") from None
        path = out / f"slurmrestd-{what}.json"
        path.write_bytes(body)
        return path, v
    raise OpsError(f"slurmrestd {shown} serves /{plugin}/{VERSIONS[-1]}..{VERSIONS[0]}/{what} in none of those "
                   "versions (404 for each): an older Slurm's slurmrestd (data_parser before v0.0.40) is not read")


def _error_text(e: urllib.error.HTTPError) -> str:
    """slurmrestd's own words for an error (its JSON errors list), one line."""
    try:
        doc = json.loads(e.read() or b"{}")
        errs = [x.get("description") or x.get("error") for x in doc.get("errors") or [] if isinstance(x, dict)]
        return str(errs[0]).splitlines()[0][:200] if errs and errs[0] else ""
    except (ValueError, AttributeError, OSError):
        return ""


def fetch_jobs(url: str, start: datetime, end: datetime, out: Path, jwt: str) -> tuple[Path, str]:
    """The job records slurmdbd holds for [start, end) from ``/slurmdb/v0.0.4x/jobs?start_time=…&end_time=…``
    (epoch seconds; slurmdbd selects as ``sacct -S -E`` does: the jobs that were eligible or running then),
    into ``out`` as sacct --json's document; (the file, the data_parser version)."""
    query = urllib.parse.urlencode({"start_time": int(start.timestamp()), "end_time": int(end.timestamp())})
    return fetch(url, "jobs", out, jwt, plugin="slurmdb", query=query)
