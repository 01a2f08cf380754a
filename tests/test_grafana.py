"""Grafana on the warehouse (issue 32): `ops-report grafana` writes the provisioning files, and every panel's
query, expanded as Grafana's ClickHouse data source expands it, runs on the warehouse in both forms and
returns the columns its panel type needs. The macros are checked against the plugin's own test cases
(grafana/clickhouse-datasource pkg/macros/macros_test.go at 1d04063, Apache-2.0), and one panel's figure
against the report's mart for the same window (one number everywhere)."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from ops_warehouse.reports.grafana_macros import expand

UTC = timezone.utc
T0 = datetime(2014, 11, 12, 11, 45, 26, 371000, tzinfo=UTC)
T1 = datetime(2015, 11, 12, 11, 45, 26, 371000, tzinfo=UTC)
I0 = datetime(2014, 11, 12, 11, 45, 26, 123000, tzinfo=UTC)  # TestInterpolate's range
I1 = datetime(2015, 11, 12, 11, 45, 26, 456000, tzinfo=UTC)


@pytest.mark.parametrize("sql,t0,t1,interval_s,want", [
    # TestMacroFromTimeFilter, ToTimeFilter, FromTimeFilterMs, ToTimeFilterMs, DateFilter, DateTimeFilter
    ("$__fromTime", T0, T1, 0, "toDateTime(1415792726)"),
    ("$__toTime", T0, T1, 0, "toDateTime(1447328726)"),
    ("$__fromTime_ms", T0, T1, 0, "fromUnixTimestamp64Milli(1415792726371)"),
    ("$__toTime_ms", T0, T1, 0, "fromUnixTimestamp64Milli(1447328726371)"),
    ("$__dateFilter(dateCol)", T0, T1, 0, "dateCol >= toDate('2014-11-12') AND dateCol <= toDate('2015-11-12')"),
    ("$__dateTimeFilter(dateCol, timeCol)", T0, T1, 0,
     "(dateCol >= toDate('2014-11-12') AND dateCol <= toDate('2015-11-12')) AND (timeCol >= toDateTime(1415792726) "
     "AND timeCol <= toDateTime(1447328726))"),
    # TestMacroTimeInterval, TimeIntervalMs, IntervalSeconds (an interval of 20 s)
    ("$__timeInterval(col)", T0, T1, 20, "toStartOfInterval(toDateTime(col), INTERVAL 20 second)"),
    ("$__timeInterval_ms(col)", T0, T1, 20, "toStartOfInterval(toDateTime64(col, 3), INTERVAL 20000 millisecond)"),
    ("$__interval_s", T0, T1, 20, "20"),
    # TestInterpolate
    ("select * from foo where $__timeFilter(cast(sth as timestamp))", I0, I1, 0,
     "select * from foo where cast(sth as timestamp) >= toDateTime(1415792726) AND cast(sth as timestamp) <= "
     "toDateTime(1447328726)"),
    ("select * from foo where $__timeFilter(cast(sth as timestamp) )", I0, I1, 0,
     "select * from foo where cast(sth as timestamp) >= toDateTime(1415792726) AND cast(sth as timestamp) <= "
     "toDateTime(1447328726)"),
    ("select * from foo where $__timeFilter_ms(cast(sth as timestamp))", I0, I1, 0,
     "select * from foo where cast(sth as timestamp) >= fromUnixTimestamp64Milli(1415792726123) AND cast(sth as "
     "timestamp) <= fromUnixTimestamp64Milli(1447328726456)"),
    ("select * from foo where ( date >= $__fromTime and date <= $__toTime ) limit 100", I0, I1, 0,
     "select * from foo where ( date >= toDateTime(1415792726) and date <= toDateTime(1447328726) ) limit 100"),
    ("select * from foo where ( date >= $__fromTime_ms ) and ( date <= $__toTime_ms ) limit 100", I0, I1, 0,
     "select * from foo where ( date >= fromUnixTimestamp64Milli(1415792726123) ) and ( date <= "
     "fromUnixTimestamp64Milli(1447328726456) ) limit 100"),
])
def test_macros_expand_as_the_plugin_expands_them(sql, t0, t1, interval_s, want):
    assert expand(sql, t0, t1, interval_s) == want


def test_a_macro_inside_a_macros_argument_expands_too():
    # TestInterpolateNestedMacros' shape: the inner macro reached ClickHouse verbatim in one plugin version
    got = expand("$__timeFilter(toDateTime($__interval_s))", I0, I1, 20)
    assert got == "toDateTime(20) >= toDateTime(1415792726) AND toDateTime(20) <= toDateTime(1447328726)"


def _panels(folder):
    for f in sorted((folder / "dashboards").glob("*.json")):
        for p in json.loads(f.read_text())["panels"]:
            yield f.stem, p


def _check_panels(wh, out, cluster: str, t0: datetime, t1: datetime) -> dict[str, list]:
    """Every panel's query expanded for [t0, t1] with the dashboard's variables, run; its rows by title."""
    import polars as pl

    got = {}
    for board, p in _panels(out):
        (target,) = p["targets"]
        assert target["datasource"] == {"type": "grafana-clickhouse-datasource", "uid": "ops-warehouse"}
        sql = expand(target["rawSql"], t0, t1, 3600, {"cluster": cluster, "project": "", "partition": "",
                                                     "gpu_model": ""})
        assert "$" not in sql, (p["title"], sql)
        df = pl.from_arrow(wh.query_arrow(sql))
        names = df.columns
        assert names and all(names) and len(set(names)) == len(names), (p["title"], names)
        if p["type"] == "timeseries":
            assert target["format"] == 0 and names[0] == "time", (p["title"], names)
            # Grafana's time series frame needs a time field: a DateTime (or epoch integer) column
            assert isinstance(df.schema["time"], (pl.Datetime, pl.Date)) or df["time"].dtype.is_integer(), \
                (p["title"], df.schema)
        else:
            assert target["format"] == 1
        got[f"{board}/{p['title']}"] = df.to_dicts()
    return got


@pytest.mark.both_forms
def test_every_panel_runs_on_the_warehouse_with_its_columns(wh, tmp_path):
    """A generated day (4 nodes, 200 jobs) loaded into the warehouse of each form; `ops-report grafana`'s views
    created in it; each panel of the three dashboards run as Grafana would for the day. The utilization stat is
    the utilization mart's figure for the day, and the daily panel's allocated GPU-hours its cluster row's."""
    from ops_warehouse.analytics.marts import run_mart
    from ops_warehouse.cli.grafana import provision
    from ops_warehouse.etl.capacity_sources import load_capacity
    from ops_warehouse.etl.grains import refresh_capacity
    from ops_warehouse.etl.sacct_load import load_sacct
    from ops_warehouse.etl.telemetry_load import load_parquet_dir
    from ops_warehouse.generate import generate

    site = tmp_path / "site"
    day = date(2026, 10, 1)
    t0 = datetime(2026, 10, 1, tzinfo=UTC)
    t1 = t0 + timedelta(days=1)
    h = generate(site, start=t0, days=1, jobs_per_day=200, nodes=4, seed=3, metrics_step_s=600)
    cluster = h.spec.name
    load_sacct(wh, site / "sacct" / "sacct.psv")
    load_capacity(wh, inventory=site / "inventory.csv", events=site / "slurm" / "events.psv",
                  reservations=site / "slurm" / "reservations.txt", cluster=cluster)
    load_parquet_dir(wh, site, day, day, cluster=cluster)
    refresh_capacity(wh, cluster, t0, t1)
    out = tmp_path / "grafana"
    files, views, _ = provision(wh, wh.cfg, out, url="http://ch.example:8123/ops", user="ops_analyst",
                                password_env="OPS_GRAFANA_PASSWORD")
    assert len(files) == 5 and "grafana_utilization" in views
    ds = (out / "provisioning" / "datasources" / "ops-warehouse.yaml").read_text()
    assert "type: grafana-clickhouse-datasource" in ds and "password: $OPS_GRAFANA_PASSWORD" in ds
    got = _check_panels(wh, out, cluster, t0, t1)
    assert len(got) == 18
    u = run_mart(wh, "utilization", cluster=cluster, window=(t0, t1)).to_dicts()
    cl = next(r for r in u if r["level"] == "cluster")
    assert got["ops-capacity/Utilization"] == [{"utilization": cl["utilization"]}] and 0 < cl["utilization"] <= 1
    (daily,) = got["ops-capacity/Capacity and its use, by day"]
    assert daily["allocated_busy_gpu_h"] + daily["allocated_idle_gpu_h"] == pytest.approx(cl["allocated_gpu_h"])
    assert sum(len(v) for v in got.values()) > 16  # the day has rows in most panels
    # the GPU grid against DuckDB over the generated exporter's files: every GPU, its hottest sample
    grid = got["ops-gpus/GPU grid: utilization, power, temperature, throttling"]
    raw = dict(((n, g), t) for n, g, t in duckdb.connect().execute(f"""
        SELECT Hostname, CAST(gpu AS INT), max(DCGM_FI_DEV_GPU_TEMP) FROM read_parquet('{site}/telemetry/dcgm/*.parquet')
        WHERE timestamp >= '{t0:%Y-%m-%d %H:%M:%S}' AND timestamp < '{t1:%Y-%m-%d %H:%M:%S}' GROUP BY ALL""").fetchall())
    assert len(grid) == len(raw) == 4 * h.spec.gpus_per_node
    assert {(r["node"], r["gpu"]): r["temp_c_max"] for r in grid} == pytest.approx(raw)
    assert all(0 <= r["throttled_share"] <= 1 for r in grid)
    # the month's stacked parts add up to what was bought: every GPU of the inventory's nodes in service by the
    # day (the site's B200 node comes on 2026-10-06), for its 24 hours
    (month,) = got["ops-capacity/Capacity and its use, by month"]
    assert month["month"] == "2026-10"
    parts = ("allocated busy", "allocated idle", "reserved idle", "free", "down", "drained")
    (gpus,) = duckdb.connect().execute(f"SELECT sum(gpus) FROM read_csv('{site}/inventory.csv') "
                                       f"WHERE in_service_date <= DATE '{day}'").fetchone()
    assert gpus == 32 and sum(month[k] for k in parts) == pytest.approx(gpus * 24)
    # the run-time CDF read across: each class's column never decreases, and its 100% row is the longest run
    # of the class's GPU jobs that ended in the day, worked out by DuckDB from the raw sacct lines (a job's last
    # record: requeued runs share its id)
    cdf = got["ops-jobs/Run-time distribution by size (CDF)"]
    # its columns are the size classes of sql/functions/gpu_size_class.sql, every one (the panel names them)
    (panel,) = [p for _, p in _panels(out) if p["title"] == "Run-time distribution by size (CDF)"]
    named = re.findall(r"size_class = '([^']+)'", panel["targets"][0]["rawSql"])
    classes = [r[0] for r in wh.query_rows("SELECT gpu_size_class(number) AS c FROM numbers(1, 8192) GROUP BY c "
                                           "ORDER BY min(number)")]
    assert named == classes, (named, classes)
    assert [r["share_of_jobs"] for r in cdf] == [f"{q}%" for q in range(5, 101, 5)]
    longest = dict(duckdb.connect().execute(f"""
        WITH jobs AS (
            SELECT arg_max(ElapsedRaw, Submit) AS run_s, arg_max("End", Submit) AS e,
                   CAST(arg_max(regexp_extract(AllocTRES, 'gres/gpu=([0-9]+)', 1), Submit) AS INT) AS gpus
            FROM read_csv('{site}/sacct/sacct.psv', delim='|', header=true, all_varchar=true)
            WHERE NOT contains(JobID, '.') AND "End" != 'Unknown' AND Start != 'Unknown'
            GROUP BY JobIDRaw)
        SELECT CASE WHEN gpus = 1 THEN '1 GPU' WHEN gpus <= 8 THEN '2-8 GPUs' WHEN gpus <= 64 THEN '9-64 GPUs'
                    ELSE '65-256 GPUs' END, max(CAST(run_s AS BIGINT)) / 3600
        FROM jobs WHERE gpus > 0 AND e >= '{t0:%Y-%m-%dT%H:%M:%S}' AND e < '{t1:%Y-%m-%dT%H:%M:%S}'
        GROUP BY 1""").fetchall())
    assert longest and {k: cdf[-1][k] for k in longest} == pytest.approx(longest)
    for k in cdf[0]:
        if k != "share_of_jobs" and cdf[0][k] is not None:
            assert [r[k] for r in cdf] == sorted(r[k] for r in cdf), k


def test_the_command_refuses_an_embedded_warehouse_without_a_server(tmp_path):
    from tests.cli_runner import cli

    p = cli("--warehouse", f"chdb://{tmp_path / 'wh'}", "grafana", "--out", str(tmp_path / "g"), check=False)
    assert p.returncode == 2 and "Grafana reads a ClickHouse server. Give --url" in p.stderr, p.stderr
    p = cli("--warehouse", f"chdb://{tmp_path / 'wh'}", "grafana", "--out", str(tmp_path / "g"),
            "--url", "http://u:secret@ch:8123/ops", check=False)
    assert p.returncode == 2 and "must not hold a password" in p.stderr and "secret" not in p.stderr


def test_a_view_is_made_only_for_a_marts_name():
    # the view's name and text come from the argument: a path would read a file outside sql/marts/
    from ops_warehouse import grafana_views
    from ops_warehouse.errors import OpsError

    for bad in ("../checks/capacity_order", "cost; DROP TABLE x", ""):
        with pytest.raises(OpsError, match=r"^no mart named "):
            grafana_views.view_query(bad)
    assert grafana_views.parameters("cost")["from_ts"] == "DateTime('UTC')"
    # the mart's own text, its includes inlined: cost reads the capacity grain, and no include is left over
    assert "FROM capacity_node_hour FINAL" in grafana_views.view_query("cost")
    assert "{{" not in grafana_views.view_query("goodput")


SCHEMA = Path(__file__).parent / "data" / "grafana" / "schema-v10.1"


def _schema(kind: str, definition: str):
    import jsonschema

    s = json.loads((SCHEMA / f"{kind}.jsonschema.json").read_text())
    return jsonschema.Draft7Validator({**s, "$ref": f"#/definitions/{definition}"})


def test_the_dashboards_are_valid_grafana_10_1_json(tmp_path):
    """Each dashboard `ops-report grafana` writes, validated against the JSON schema of the Grafana version
    docs/grafana.md names (grafana-foundation-sdk's jsonschema/ at branch v10.1.x, 0daa90e, Apache-2.0):
    the dashboard, every panel, and each panel's options (and its field config where the type has one)
    against its panel type's schema. Without the options each type requires, Grafana 10.1's schema refuses
    the panel (an SDK panel given no option writes ``"options": null``)."""
    from ops_warehouse import grafana_views
    from ops_warehouse.analytics import declarations
    from ops_warehouse.reports import grafana_dashboards as boards

    assert boards.GRAFANA_VERSION == "10.1"
    params = {m: grafana_views.parameters(m) for m in boards.marts()}
    files = boards.write(tmp_path, params, {**declarations.parameters(), "idle_util_pct": 5.0,
                                            "carbon_g_per_kwh": -1.0}, datasource="")
    dashboards = [json.loads(f.read_text()) for f in files if f.suffix == ".json"]
    assert [d["uid"] for d in dashboards] == ["ops-capacity", "ops-jobs", "ops-gpus"]
    errors = [e.message for d in dashboards for e in _schema("dashboard", "Dashboard").iter_errors(d)]
    panels = [p for d in dashboards for p in d["panels"]]
    assert len(panels) == 18 and {p["type"] for p in panels} == {"stat", "timeseries", "table", "barchart"}
    for p in panels:
        errors += [f"{p['title']}: {e.message}" for e in _schema("dashboard", "Panel").iter_errors(p)]
        errors += [f"{p['title']}: {e.message}" for e in _schema(p["type"], "Options").iter_errors(p["options"])]
        if p["type"] in ("timeseries", "barchart"):
            custom = p["fieldConfig"]["defaults"].get("custom", {})
            errors += [f"{p['title']}: {e.message}" for e in _schema(p["type"], "FieldConfig").iter_errors(custom)]
    assert errors == []
    # and the schema does refuse what Grafana 10.1 would: a panel without its options, a variable's refresh
    # given as a word
    bad = {**panels[0], "options": None}
    assert list(_schema("dashboard", "Panel").iter_errors(bad))
    var = {**dashboards[0], "templating": {"list": [{**dashboards[0]["templating"]["list"][0],
                                                     "refresh": "onDashboardLoad"}]}}
    assert list(_schema("dashboard", "Dashboard").iter_errors(var))
