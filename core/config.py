"""Configuration: one TOML file, overridden by environment variables, overridden by CLI flags.

Looked up in order: the path in ``OPS_CONFIG``, ``./ops-warehouse.toml``,
``~/.config/ops-warehouse/config.toml``. Every key is optional; the defaults run the embedded warehouse.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from ops_warehouse.dsn import dsn_secret, redact
from ops_warehouse.errors import OpsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the package tomllib came from (a dependency there: pyproject.toml)
    import tomli as tomllib

DEFAULT_DSN = "chdb://./warehouse"

# Illustrative list prices of an 8-GPU node (USD), 5-year write-off, 0.15 USD/kWh, PUE 1.3; peak dense
# BF16 tensor rates from NVIDIA's data sheets (H100/H200 SXM 989 TFLOPS, B200 2,250). Sites put their own in
# [cost.<gpu_model>]: every cost figure of a report says which model it used.
DEFAULT_COST_MODEL = {
    "h100": {"node_price": 300000.0, "amortization_years": 5.0, "power_price_per_kwh": 0.15, "pue": 1.3,
             "peak_bf16_tflops": 989.0, "currency": "USD"},
    "h200": {"node_price": 350000.0, "amortization_years": 5.0, "power_price_per_kwh": 0.15, "pue": 1.3,
             "peak_bf16_tflops": 989.0, "currency": "USD"},
    "b200": {"node_price": 500000.0, "amortization_years": 5.0, "power_price_per_kwh": 0.15, "pue": 1.3,
             "peak_bf16_tflops": 2250.0, "currency": "USD"},
}
_COST_KEYS = ("node_price", "amortization_years", "power_price_per_kwh", "pue", "peak_bf16_tflops")


@dataclass
class Config:
    dsn: str = DEFAULT_DSN
    # "single" (one server or embedded) or "cluster" (ON CLUSTER, Replicated*MergeTree + Distributed).
    deployment: str = "single"
    cluster_name: str = "ops"
    # how long a command waits for its turn on a busy embedded warehouse ([warehouse] wait_s; --no-wait: 0);
    # generous so that a cron job started during a long backfill still runs (core/turns.py)
    wait_s: float = 1800.0
    # what this process is, for the line another process prints while it waits for us
    purpose: str = "ops-warehouse"
    timezone: str = "UTC"
    default_cluster: str = "cluster"
    # whether the site named it ([sacct] cluster): then rows without a cluster of their own go there, else
    # under the warehouse's one cluster of jobs (etl/row_cluster.py)
    default_cluster_configured: bool = False
    sacct_command: list[str] = field(default_factory=lambda: ["sacct"])
    # sacct times outside [sacct_earliest, the load's clock + sacct_max_future_hours] are quarantined with their
    # reason ([sacct] earliest, max_future_hours): a node with a bad clock (etl/normalize.py, TimeWindow)
    sacct_earliest: date = date(2000, 1, 1)
    sacct_max_future_hours: float = 24.0
    # Slurm account -> reporting project. Accounts not listed are their own project. The warehouse keeps the
    # mapping it was last given (account_project): only a config with a [projects] table replaces it, so a
    # notebook or a command run without the site's config does not erase it.
    projects: dict[str, str] = field(default_factory=dict)
    projects_configured: bool = False
    # telemetry: days the fine (per-step) rows are kept (None: forever); catalog overrides
    telemetry_ttl_days: int | None = None
    metric_catalog: dict = field(default_factory=dict)
    # reports: a GPU-hour whose mean GPU utilization is under this is idle (allocated-but-idle)
    idle_util_pct: float = 5.0
    # what the loads read from each run's samples (run_telemetry, sql/intermediate/run_telemetry.sql): a node
    # moving under hang_nic_bytes_per_s over its NICs is quiet (a hung run's signature, with its GPUs idle); one
    # writing ckpt_write_bytes_per_s or more to Lustre is checkpointing ([reports]; `etl refresh` after a change)
    hang_nic_bytes_per_s: float = 1e6
    ckpt_write_bytes_per_s: float = 1e8
    # energy: grid carbon intensity, gCO2e per kWh ([energy] carbon_g_per_kwh; None: carbon is not reported,
    # the energy is)
    carbon_g_per_kwh: float | None = None
    # ClickHouse server password ([warehouse] password; OPS_WAREHOUSE_PASSWORD wins)
    warehouse_password: str | None = None
    # slurmdbd database password ([slurmdbd] password; OPS_SLURMDBD_PASSWORD wins)
    slurmdbd_password: str | None = None
    # `ops-report etl nightly` sources ([[nightly.slurm]], [nightly.telemetry], [nightly.capacity])
    nightly: dict = field(default_factory=dict)
    # what-if scenarios the monthly report replays ([[whatif]]: name, add, remove, reservation, scale_load)
    whatif: list = field(default_factory=list)
    # how patiently `ops-report etl nightly` retries a network source ([nightly] retries, backoff_s): up to
    # `retries` more tries after waits of backoff_s, twice that, four times that... (10+20+40+80 s by default)
    nightly_retries: int = 4
    nightly_backoff_s: float = 10.0
    # key of the stable user pseudonyms of --anonymize-users (empty: a random key kept per warehouse,
    # core/pseudonyms.py)
    pseudonym_key: str = ""
    # whether the config file named a cost model ([cost.*]): only then does it replace the warehouse's
    cost_configured: bool = False
    # cost model per GPU model: node_price, amortization_years, power_price_per_kwh, pue, peak_bf16_tflops,
    # currency (config [cost.<gpu_model>]; DEFAULT_COST_MODEL when the file has none)
    cost_model: dict[str, dict] = field(default_factory=lambda: dict(DEFAULT_COST_MODEL))
    path: Path | None = None


def _candidate_paths() -> list[Path]:
    paths = []
    if os.environ.get("OPS_CONFIG"):
        paths.append(Path(os.environ["OPS_CONFIG"]))
    paths.append(Path("ops-warehouse.toml"))
    paths.append(Path.home() / ".config" / "ops-warehouse" / "config.toml")
    return paths


def load_config(path: str | Path | None = None) -> Config:
    cfg = Config()
    candidates = [Path(path)] if path else _candidate_paths()
    for p in candidates:
        if p.is_file():
            _apply_file(cfg, p)
            break
        if path:
            raise OpsError(f"config file not found: {p}")
    if os.environ.get("OPS_WAREHOUSE"):
        cfg.dsn = os.environ["OPS_WAREHOUSE"]
        secret = dsn_secret(cfg.dsn)
        if secret:
            raise OpsError(f"OPS_WAREHOUSE ({redact(cfg.dsn)}) holds {secret}: put the password in "
                           "OPS_WAREHOUSE_PASSWORD and leave it out of the DSN")
    return cfg


def _private(p: Path, what: str) -> None:
    """Secrets only in a file no one else can read (as ssh does for its keys)."""
    if p.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH):
        raise OpsError(f"{p} holds {what} but is readable by others: chmod 600 {p}")


def _apply_file(cfg: Config, p: Path) -> None:
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise OpsError(f"cannot read config {p}: {e}") from None
    wh = data.get("warehouse", {})
    if "dsn" in wh:
        cfg.dsn = str(wh["dsn"])
    # A password in the DSN would be printed wherever the DSN is (messages, labels): refused whatever the
    # file's mode (core/dsn.py). One on its own is a secret: refuse a file others can read.
    secret = dsn_secret(cfg.dsn) if "dsn" in wh else None
    if secret:
        exposed = p.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH)
        raise OpsError(f"{p}: [warehouse] dsn holds {secret}: move the password to [warehouse] password (in a "
                       "chmod 600 file) or OPS_WAREHOUSE_PASSWORD"
                       + ("; the file is readable by others: chmod 600 it and change that password" if exposed else ""))
    if "password" in wh:
        _private(p, "a warehouse password")
        cfg.warehouse_password = str(wh["password"])
    cfg.deployment = wh.get("deployment", cfg.deployment)
    cfg.cluster_name = wh.get("cluster_name", cfg.cluster_name)
    if "wait_s" in wh:
        try:
            cfg.wait_s = float(wh["wait_s"])
        except (TypeError, ValueError):
            raise OpsError(f"{p}: warehouse.wait_s must be a number of seconds, not {wh['wait_s']!r}") from None
    if cfg.deployment not in ("single", "cluster"):
        raise OpsError(f"{p}: warehouse.deployment must be 'single' or 'cluster', not {cfg.deployment!r}")
    cfg.timezone = data.get("timezone", cfg.timezone)
    sacct = data.get("sacct", {})
    cfg.timezone = sacct.get("timezone", cfg.timezone)
    cfg.default_cluster = sacct.get("cluster", cfg.default_cluster)
    cfg.default_cluster_configured = "cluster" in sacct
    cmd = sacct.get("command")
    if cmd is not None:
        cfg.sacct_command = [cmd] if isinstance(cmd, str) else list(cmd)
    ahead = sacct.get("max_future_hours", cfg.sacct_max_future_hours)
    if not isinstance(ahead, (int, float)) or isinstance(ahead, bool) or not 0 <= ahead <= 24 * 366:
        raise OpsError(f"{p}: sacct.max_future_hours must be a number of hours (0 to a year)")
    cfg.sacct_max_future_hours = float(ahead)
    first = sacct.get("earliest", cfg.sacct_earliest)
    try:  # a TOML date (earliest = 2000-01-01) or the same as text
        cfg.sacct_earliest = first if isinstance(first, date) and not isinstance(first, datetime) \
            else date.fromisoformat(str(first))
    except ValueError:
        raise OpsError(f"{p}: sacct.earliest must be a date (YYYY-MM-DD), not {first!r}") from None
    if "projects" in data:
        cfg.projects = {str(k).lower(): str(v) for k, v in data["projects"].items()}
        cfg.projects_configured = True
    tel = data.get("telemetry", {})
    ttl = tel.get("fine_ttl_days")
    if ttl is not None and (not isinstance(ttl, int) or ttl < 1):
        raise OpsError(f"{p}: telemetry.fine_ttl_days must be a positive number of days")
    cfg.telemetry_ttl_days = ttl
    cfg.metric_catalog = dict(tel.get("catalog", {}))
    cfg.nightly = dict(data.get("nightly", {}))
    retries = cfg.nightly.get("retries", cfg.nightly_retries)
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 20:
        raise OpsError(f"{p}: nightly.retries must be a whole number of retries (0-20)")
    backoff = cfg.nightly.get("backoff_s", cfg.nightly_backoff_s)
    if not isinstance(backoff, (int, float)) or isinstance(backoff, bool) or backoff < 0:
        raise OpsError(f"{p}: nightly.backoff_s must be a number of seconds (0 or more)")
    cfg.nightly_retries, cfg.nightly_backoff_s = retries, float(backoff)
    nt = cfg.nightly.get("telemetry")
    timeout = nt.get("timeout_s", 60) if isinstance(nt, dict) else 60
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise OpsError(f"{p}: nightly.telemetry.timeout_s must be a positive number of seconds")
    dbd = data.get("slurmdbd", {})
    if "password" in dbd:
        _private(p, "the slurmdbd password")
        cfg.slurmdbd_password = str(dbd["password"])
    wi = data.get("whatif", [])
    if not isinstance(wi, list) or not all(isinstance(e, dict) for e in wi):
        raise OpsError(f"{p}: whatif must be [[whatif]] tables (name, add, remove, reservation, scale_load)")
    for e in wi:
        unknown = set(e) - {"name", "add", "remove", "reservation", "scale_load"}
        if unknown:
            raise OpsError(f"{p}: [[whatif]] has unknown keys: {', '.join(sorted(unknown))}")
        for key in ("add", "remove", "reservation"):
            if not isinstance(e.get(key, []), list):
                raise OpsError(f"{p}: [[whatif]] {key} must be a list such as [\"h200:16\"]")
    cfg.whatif = wi
    rep = data.get("reports", {})
    idle = rep.get("idle_util_pct", cfg.idle_util_pct)
    if not isinstance(idle, (int, float)) or isinstance(idle, bool):  # "five", "5%": TOML text, not a number
        raise OpsError(f"{p}: reports.idle_util_pct must be a percentage (0-100), not {idle!r}")
    cfg.idle_util_pct = float(idle)
    if "pseudonym_key" in rep:  # whoever has the key can tell which pseudonym is which user
        _private(p, "the pseudonym key")
        cfg.pseudonym_key = str(rep["pseudonym_key"])
    if not 0 <= cfg.idle_util_pct <= 100:
        raise OpsError(f"{p}: reports.idle_util_pct must be a percentage (0-100)")
    for key in ("hang_nic_bytes_per_s", "ckpt_write_bytes_per_s"):
        v = rep.get(key, getattr(cfg, key))
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
            raise OpsError(f"{p}: reports.{key} must be a positive number of bytes a second")
        setattr(cfg, key, float(v))
    carbon = data.get("energy", {}).get("carbon_g_per_kwh")
    if carbon is not None:
        if not isinstance(carbon, (int, float)) or isinstance(carbon, bool) or not 0 <= carbon <= 2000:
            raise OpsError(f"{p}: energy.carbon_g_per_kwh must be grams of CO2e per kWh (0-2000)")
        cfg.carbon_g_per_kwh = float(carbon)
    if "cost" in data:
        models = {}
        for model, spec in data["cost"].items():
            missing = [k for k in _COST_KEYS if k not in spec]
            if missing:
                raise OpsError(f"{p}: [cost.{model}] lacks {', '.join(missing)}")
            try:
                models[model.lower()] = {**{k: float(spec[k]) for k in _COST_KEYS},
                                         "currency": str(spec.get("currency", "USD"))}
            except (TypeError, ValueError):
                raise OpsError(f"{p}: [cost.{model}] values must be numbers") from None
            if models[model.lower()]["amortization_years"] <= 0:
                raise OpsError(f"{p}: [cost.{model}] amortization_years must be positive")
        cfg.cost_model = models
        cfg.cost_configured = True
    cfg.path = p
