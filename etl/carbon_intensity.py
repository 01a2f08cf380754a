"""The grid's carbon intensity hour by hour, from a CSV, into carbon_intensity (sql/migrations/0013).

The energy marts price a run's energy at the intensity of each hour it used it (sql/marts/job_energy.sql),
falling back to the config's constant [energy] carbon_g_per_kwh for an hour the table does not hold. The
forms read, told apart by their header (names matched without regard to case, ``₂`` read as ``2``):

- Electricity Maps' hourly exports (the data portal's ``<zone>_<year>_hourly.csv``): ``Datetime (UTC)``,
  ``Zone Id``, ``Carbon Intensity gCO₂eq/kWh (direct)`` and ``(LCA)``; its later header spells them
  ``Zone id``, ``Carbon intensity gCO₂eq/kWh (direct)`` and ``(Life cycle)``. ``basis`` picks the figure:
  ``direct`` (the default: what is burnt to make the electricity, the figure location-based Scope 2
  reporting uses) or ``lifecycle`` (with the plants' and fuels' life-cycle emissions).
- NESO's historic generation mix for Great Britain (``df_fuel_ckan.csv``): ``DATETIME`` and
  ``CARBON_INTENSITY`` (gCO2/kWh), half-hourly; the zone is GB.
- a site's own: ``hour`` (or ``datetime``) and ``g_co2e_per_kwh``, ``zone`` optional.

Times are UTC unless they carry an offset (``+01:00``, ``Z``). A row finer than an hour (NESO's half hours)
counts towards its hour, whose intensity is the mean of its rows. A row whose time or intensity cannot be
read, or whose intensity is outside 0-2000 g/kWh, goes to etl_quarantine with its line and a reason, and is
counted; a file without a time or an intensity column is refused with a one-line error naming it. Loading is
idempotent: an hour loaded again replaces itself (the table is a ReplacingMergeTree on cluster and hour).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from ops_warehouse.errors import OpsError
from ops_warehouse.etl.frames import fmt
from ops_warehouse.etl.quarantine import CopyCounter
from ops_warehouse.etl.row_cluster import cluster_for_rows
from ops_warehouse.etl.run_log import logged_load
from ops_warehouse.etl.staging import load_frames
from ops_warehouse.input_files import check_readable

BASES = ("direct", "lifecycle")
# Electricity Maps' intensity columns by basis, as _key() spells them (its first header, then its later one)
_EM_COLUMNS = {"direct": ("carbon intensity gco2eq/kwh (direct)",),
               "lifecycle": ("carbon intensity gco2eq/kwh (lca)", "carbon intensity gco2eq/kwh (life cycle)")}
MAX_G_PER_KWH = 2000.0  # as the config's constant: no grid burns more than lignite's ~1,200
# the time formats read, after 'T' became ' ' and 'Z' '+00:00' (True: with an offset)
_FORMATS = (("%Y-%m-%d %H:%M:%S%:z", True), ("%Y-%m-%d %H:%M%:z", True), ("%Y-%m-%d %H:%M:%S", False),
            ("%Y-%m-%d %H:%M", False), ("%Y-%m-%d %H:%M:%S%.f", False))


def _key(name: str) -> str:
    return " ".join(name.replace("\ufeff", "").replace("₂", "2").lower().split())


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise OpsError(f"{path}: line {line} is not UTF-8 text") from None


def _form(path: Path, columns: list[str], basis: str) -> tuple[str, str, str | None, str]:
    """(form, time column, zone column or None, intensity column) of a header, or the one-line refusal
    naming what it lacks."""
    have = {_key(c): c for c in columns}
    time_col = next((have[n] for n in ("datetime (utc)", "datetime", "hour") if n in have), None)
    if time_col is None:
        raise OpsError(f"{path}: no time column: expected 'Datetime (UTC)' (Electricity Maps), 'DATETIME' (NESO) "
                       "or 'hour'")
    if "datetime (utc)" in have:
        value = next((have[n] for n in _EM_COLUMNS[basis] if n in have), None)
        if value is None:
            raise OpsError(f"{path}: no carbon intensity column for --basis {basis}: expected "
                           f"'Carbon Intensity gCO₂eq/kWh ({'direct' if basis == 'direct' else 'LCA'})'")
        return "electricitymaps", time_col, have.get("zone id"), value
    if "carbon_intensity" in have:
        form, zone_col, value = "neso", None, have["carbon_intensity"]
    elif "g_co2e_per_kwh" in have:
        form, zone_col, value = "csv", have.get("zone"), have["g_co2e_per_kwh"]
    else:
        raise OpsError(f"{path}: no carbon intensity column: expected 'Carbon Intensity gCO₂eq/kWh (direct)' "
                       "(Electricity Maps), 'CARBON_INTENSITY' (NESO) or 'g_co2e_per_kwh'")
    if basis != "direct":
        raise OpsError(f"{path}: --basis {basis} is for Electricity Maps' files; this one has one figure")
    return form, time_col, zone_col, value


def _hour_start(col: str) -> pl.Expr:
    text = pl.col(col).str.strip_chars().str.replace("T", " ", literal=True).str.replace(r"Z$", "+00:00")
    parsed = [text.str.to_datetime(f, strict=False, time_zone="UTC", time_unit="ms") if aware else
              text.str.to_datetime(f, strict=False, time_unit="ms").dt.replace_time_zone("UTC")
              for f, aware in _FORMATS]
    return pl.coalesce(parsed).dt.truncate("1h")


def read_carbon_intensity(path: str | Path, *, zone: str | None = None, basis: str = "direct"
                          ) -> tuple[pl.DataFrame, pl.DataFrame, int, str]:
    """(hours: zone, hour, g_co2e_per_kwh; quarantine: line_no, reason, raw; the rows read (of the zone
    loaded); what was read: the form, the file, the basis) of an hourly carbon intensity CSV."""
    path = Path(path)
    if basis not in BASES:
        raise OpsError(f"--basis must be one of {', '.join(BASES)}, not {basis!r}")
    check_readable(path)
    text = _read_text(path)
    if not text.strip():
        raise OpsError(f"{path}: empty")
    try:
        df = pl.read_csv(text.encode(), infer_schema=False, truncate_ragged_lines=True)
    except pl.exceptions.PolarsError as e:
        raise OpsError(f"{path}: not a CSV ({(str(e).splitlines() or [type(e).__name__])[0][:200]})") from None
    form, time_col, zone_col, value_col = _form(path, df.columns, basis)
    if not df.height:
        raise OpsError(f"{path}: a header and no rows")
    what = f"{form}:{path.name}" + (f" {basis}" if form == "electricitymaps" else "")
    # line numbers: the header is line 1 (a quoted field holding a line break would shift the raw text kept
    # for a quarantined row, not what is loaded)
    lines = pl.DataFrame({"raw": text.splitlines()[1:]}).with_row_index("i")
    value = pl.col(value_col).str.strip_chars()
    rows = df.with_row_index("i").select(
        "i", hour=_hour_start(time_col),
        zone=(pl.col(zone_col).fill_null("") if zone_col else pl.lit("GB" if form == "neso" else "")),
        g_co2e_per_kwh=value.cast(pl.Float64, strict=False), _time=pl.col(time_col), _value=value)
    reason = (pl.when(pl.col("hour").is_null())
              .then(fmt("cannot read time '{}'", pl.col("_time").str.slice(0, 100)))
              .when(~pl.col("hour").dt.year().is_between(1970, 2105))
              .then(fmt("time '{}' is out of range", pl.col("_time").str.slice(0, 100)))
              .when(pl.col("_value").fill_null("") == "").then(pl.lit("no carbon intensity"))
              .when(pl.col("g_co2e_per_kwh").is_null())
              .then(fmt("carbon intensity '{}' is not a number", pl.col("_value").str.slice(0, 100)))
              .when(~pl.col("g_co2e_per_kwh").is_between(0, MAX_G_PER_KWH))
              .then(fmt("carbon intensity {} is not 0-2000 gCO2e/kWh", pl.col("g_co2e_per_kwh"))))
    rows = rows.with_columns(reason=reason)
    zones = sorted(set(rows.filter(pl.col("reason").is_null()).get_column("zone").unique().to_list()))
    if zone is not None:
        if zone_col:
            if zone not in zones:
                raise OpsError(f"{path}: no rows of zone {zone!r} (it holds {', '.join(zones) or 'none'})")
            rows = rows.filter(pl.col("zone") == zone)
        else:
            rows = rows.with_columns(zone=pl.lit(zone))
    elif len(zones) > 1:
        raise OpsError(f"{path}: holds zones {', '.join(zones)}: load one at a time with --zone")
    bad = rows.filter(pl.col("reason").is_not_null()).join(lines, on="i", how="left").select(
        line_no=(pl.col("i") + 2).cast(pl.UInt64), reason="reason", raw=pl.col("raw").fill_null(""))
    hours = (rows.filter(pl.col("reason").is_null())
             .group_by("zone", "hour").agg(pl.col("g_co2e_per_kwh").mean())
             .sort("hour"))
    return hours, bad, rows.height, what


def _source(a: dict) -> str:
    return str(Path(a["path"]).resolve())


def _counts(r: dict) -> tuple[int, int, int]:
    return r["rows"], r["rows"] - r["quarantined"], r["quarantined"]


@logged_load("carbon", _source, _counts)
def load_carbon_intensity(wh, path: str | Path, *, cluster: str | None = None, zone: str | None = None,
                          basis: str = "direct") -> dict:
    """Load an hourly carbon intensity CSV for ``cluster`` (default: the config's); returns hours (loaded),
    rows (read), quarantined, zone, first and last hour. Loading the same file again changes nothing."""
    hours, bad, rows, what = read_carbon_intensity(path, zone=zone, basis=basis)
    cluster = cluster_for_rows(wh, cluster)
    now = datetime.now(timezone.utc)
    frames = {"carbon_intensity": hours.select(
        pl.lit(cluster).alias("cluster"), "hour", "zone", "g_co2e_per_kwh", pl.lit(what).alias("source"),
        pl.lit(now, dtype=pl.Datetime("ms", "UTC")).alias("loaded_at"))}
    if bad.height:
        frames["etl_quarantine"] = CopyCounter().number(bad).select(
            pl.lit(_source({"path": path})).alias("source"), "line_no", "reason", "raw", "occurrence",
            pl.lit(now.replace(microsecond=0), dtype=pl.Datetime("ms", "UTC")).alias("loaded_at"))
    load_frames(wh, frames)
    return {"hours": hours.height, "rows": rows, "quarantined": bad.height,
            "zone": ", ".join(sorted(set(hours.get_column("zone").to_list()))),
            "first": hours.get_column("hour").min(), "last": hours.get_column("hour").max(), "source": what}
