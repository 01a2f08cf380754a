"""Passwords and DSNs (issue 27): a DSN never carries a secret, and messages never show one.

Passwords come from ``OPS_WAREHOUSE_PASSWORD`` (``OPS_SLURMDBD_PASSWORD``) or a config file only its owner
can read (docs/reliability.md, Secrets), never from a DSN: a DSN is printed in messages, kept in the run
log's labels and shown by the process list when it is on the command line. :func:`dsn_secret` says what
secret a DSN holds (a password in its user part, a ``password=`` parameter), for the callers to refuse it;
:func:`redact` masks one in whatever is printed, also where the DSN cannot be parsed (a ``/``, ``#`` or
``?`` in a password ends the host part early for every URL parser).
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, urlsplit

# query parameters that carry a secret: password, passwd, pwd, secret, token, access_token, and any name
# ending in one of them after an underscore (db_password, api_token)
_SECRET_KEY = re.compile(r"(?i)(?:[^=&;#?]*_)?(?:password|passwd|pwd|secret|token|access_token)")
_SECRET_PARAM = re.compile(r"(?i)([?&;](?:[^=&;#?]*_)?(?:password|passwd|pwd|secret|token|access_token)=)[^&;#]*")


def _parsed(dsn: str) -> SplitResult | None:
    """The DSN split into its parts, or None where a parser would cut it somewhere else than its writer
    meant: a port that is not a number (``user:pa/ss@host`` reads as host ``user``, port ``pa``), or an
    ``@`` after the host part other than in a plain query value (``user:12/ss@host`` reads as port 12 and
    path ``/ss@host``)."""
    try:
        parts = urlsplit(dsn)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        return None
    if "@" in parts.path or "@" in parts.fragment:
        return None
    for piece in re.split(r"[&;]", parts.query):
        key, _, value = piece.partition("=")
        if "@" in key or re.search(r"@.*[/:]", value):
            return None
    return parts


def _is_path(scheme: str) -> bool:
    return scheme.lower() == "chdb"  # the embedded warehouse: a folder, no user and no password


def dsn_secret(dsn: str) -> str | None:
    """What secret ``dsn`` holds ("a password in its user part", "a password= parameter"), or None."""
    scheme, sep, rest = str(dsn).partition("://")
    if not sep or _is_path(scheme):
        return None
    parts = _parsed(dsn)
    if parts is None:
        # cannot be split as written: an '@' after '//' then ends a user part that holds a '/', '#' or '?'
        return "a password in its user part" if "@" in rest else None
    if parts.password:
        return "a password in its user part"
    for key, _ in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_KEY.fullmatch(key):
            return f"a {key}= parameter"
    return None


def redact(dsn: str) -> str:
    """The DSN without its secrets, for messages and logs: the password of its user part and the value of
    every secret parameter as ``***``. A DSN that cannot be split as written shows ``***`` for everything
    between ``//`` and its last ``@``."""
    dsn = str(dsn)
    scheme, sep, rest = dsn.partition("://")
    if sep and not _is_path(scheme):
        parts = _parsed(dsn)
        if parts is None:
            at = rest.rfind("@")
            if at >= 0:
                dsn = f"{scheme}://***@{rest[at + 1:]}"
        elif parts.password is not None:
            userinfo, _, host = parts.netloc.rpartition("@")
            dsn = parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{host}").geturl()
    return _SECRET_PARAM.sub(r"\1***", dsn)
