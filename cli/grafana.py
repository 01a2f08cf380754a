"""`ops-report grafana`: the provisioning files for a site's Grafana, and the views its panels read."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from ops_warehouse import grafana_views
from ops_warehouse.analytics.marts import site_parameters
from ops_warehouse.errors import OpsError
from ops_warehouse.reports import grafana_dashboards as boards


def provision(wh, cfg, out: Path, *, url: str | None, user: str, password_env: str) -> tuple[list[Path], list[str], str]:
    """Write the files under ``out`` and (re)create the marts' views in ``wh``; (files, views, the server the
    data source names)."""
    server = url or (cfg.dsn if cfg.dsn.startswith(("http://", "https://")) else "")
    if not server:
        raise OpsError("the warehouse is embedded (chdb://): Grafana reads a ClickHouse server. Give --url "
                       "http(s)://HOST:PORT/DATABASE of the server that holds the warehouse (docs/deployment.md)")
    u = urlsplit(server)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise OpsError(f"--url must be http(s)://HOST:PORT/DATABASE, not {server!r}")
    if u.password:
        raise OpsError("--url must not hold a password: Grafana reads it from the environment variable "
                       f"{password_env} (--password-env)")
    marts = boards.marts()
    params = {m: grafana_views.parameters(m) for m in marts}
    values = site_parameters(cfg)
    views = grafana_views.create_views(wh, marts)
    datasource = boards.datasource_yaml(u.hostname, u.port or (8443 if u.scheme == "https" else 8123), "http",
                                        u.scheme == "https", u.path.strip("/") or "default", user, password_env)
    files = boards.write(out, params, values, datasource=datasource)
    return files, views, f"{u.scheme}://{u.hostname}:{u.port or ''}"
