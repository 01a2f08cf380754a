"""`ops-report job JOBID` (issue 52 item 1) on a hand-built day whose every figure DuckDB works out here from
the raw files the warehouse loaded (the dcgm-exporter Parquet and the sacct lines), never from the product's
SQL (sql/marts/run_gpus.sql, job_detail.sql, job_notes.sql).

Cluster t3: two 8-GPU H100 nodes n1, n2; dcgm-exporter samples every minute of 2026-10-05 (a sample at t is
the GPU's state over [t, t + 60 s)). Jobs:

  4001 carol proja  8 GPUs n1  10:00 .. 13:00  GPUs 0-6 at 80 %, 40,000 MiB; GPU 7 idle at 0 %, 500 MiB;
                    hpc_job labels name 4001 on its GPUs (attribution 'gpu'); steps: .batch TotalCPU 01:30:00,
                    MaxRSS 20G; .extern 00:00:01, 1024K; 112 CPUs, AllocTRES mem=500G
  4002 dave  projb  8 GPUs n2  requeued: run 1 08:00 .. 09:00 NODE_FAIL, run 2 09:30 .. 11:00 COMPLETED, at
                    50 %, 2,000 MiB of each GPU's 81,559 (under 10 %); no labels (attribution 'node share',
                    exact: the run holds the whole node)

The grain: with 4001's samples deleted (the fine samples expired), its figures come from gpu_hour, the same
within the hourly grain's rounding (the run is whole hours, so exactly the same means here), and say so.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import duckdb
import polars as pl
import pytest

from ops_warehouse.analytics.job import job_report
from ops_warehouse.etl.capacity_sources import load_capacity
from ops_warehouse.etl.grains import one_refresh, refresh_capacity
from ops_warehouse.etl.sacct_load import load_sacct
from ops_warehouse.etl.telemetry_load import load_parquet_dir
from ops_warehouse.errors import OpsError
from ops_warehouse.reports.job_render import render_job
from tests.test_hung_and_idle_jobs import DAY, OCT, at

pytestmark = pytest.mark.slow

HEAD = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|ElapsedRaw|"
        "TimelimitRaw|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|NodeList|Reservation|JobName|"
        "TotalCPU|MaxRSS")
TOTAL_MIB = 81559.0
# (job id, submit, start, end, state, node, user, account, per-GPU (util %, FB used MiB, power W, labelled))
RUNS = [
    ("4001", "09:50", "10:00", "13:00", "COMPLETED", "n1", "carol", "proja",
     [(80.0, 40000.0, 400.0, True)] * 7 + [(0.0, 500.0, 70.0, True)]),
    ("4002", "07:55", "08:00", "09:00", "NODE_FAIL", "n2", "dave", "projb", [(50.0, 2000.0, 300.0, False)] * 8),
    ("4002", "09:01", "09:30", "11:00", "COMPLETED", "n2", "dave", "projb", [(50.0, 2000.0, 300.0, False)] * 8),
]


def _sacct(path):
    lines = [HEAD]
    for jid, sub, s, e, state, node, user, acct, _ in RUNS:
        sub, s, e = at(sub), at(s), at(e)
        el = int((e - s).total_seconds())
        tres = "billing=112,cpu=112,gres/gpu=8,mem=500G,node=1"
        t = lambda x: x.strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
        lines.append(f"{jid}|{jid}|t3|gpu|normal|{acct}|{acct}|1|{user}|1|{t(sub)}|{t(sub)}|{t(s)}|{t(e)}|{el}|"
                     f"2880|0:0|{state}|1|112|112|500G|{tres}|{tres}|{node}||train|"
                     + ("01:30:00|" if jid == "4001" else "00:40:00|"))
        lines.append(f"{jid}.batch|{jid}.batch|t3||||||||{t(s)}|{t(s)}|{t(s)}|{t(e)}|{el}||0:0|{state}|1|112|||"
                     f"|cpu=112,mem=500G,node=1|{node}||batch|" + ("01:30:00|20G" if jid == "4001" else "00:40:00|3G"))
        lines.append(f"{jid}.extern|{jid}.extern|t3||||||||{t(s)}|{t(s)}|{t(s)}|{t(e)}|{el}||0:0|COMPLETED|1|112|||"
                     f"|cpu=112,mem=500G,node=1|{node}||extern|00:00:01|1024K")
    path.write_text("\n".join(lines) + "\n")


def _telemetry(root):
    rows = []
    for k in range(1440):
        t = at("00:00") + timedelta(minutes=k)
        for node in ("n1", "n2"):
            for gpu in range(8):
                util, fb, power, job = 0.0, 300.0, 60.0, ""
                for jid, _, s, e, _, jnode, _, _, per_gpu in RUNS:
                    if jnode == node and at(s) <= t < at(e):
                        util, fb, power, labelled = per_gpu[gpu]
                        job = jid if labelled else ""
                busy = util > 0
                rows.append({"timestamp": t, "Hostname": node, "gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}",
                             "modelName": "NVIDIA H100 80GB HBM3", "hpc_job": job, "DCGM_FI_DEV_GPU_UTIL": util,
                             "DCGM_FI_PROF_SM_ACTIVE": 0.6 if busy else 0.0,
                             "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.4 if busy else 0.0,
                             "DCGM_FI_PROF_DRAM_ACTIVE": 0.3 if busy else 0.0,
                             "DCGM_FI_DEV_FB_USED": fb, "DCGM_FI_DEV_FB_FREE": TOTAL_MIB - fb,
                             "DCGM_FI_DEV_POWER_USAGE": power})
    (root / "dcgm").mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows).with_columns(pl.col("timestamp").dt.cast_time_unit("ms")).write_parquet(
        root / "dcgm" / f"{DAY}.parquet")


def _loaded(d):
    """The day's files written in ``d`` and loaded into ``d``/warehouse (embedded, cluster t3)."""
    from ops_warehouse.config import Config
    from ops_warehouse.warehouse import open_warehouse

    cfg = Config(dsn=f"chdb://{d / 'warehouse'}")
    cfg.projects = {"proja": "A", "projb": "B"}
    wh = open_warehouse(cfg)
    _sacct(d / "sacct.psv")
    (d / "inventory.csv").write_text("node,gpu_model,gpus,partition,rack,in_service_date\n"
                                     "n1,h100,8,gpu,r1,2025-01-01\nn2,h100,8,gpu,r1,2025-01-01\n")
    _telemetry(d / "telemetry")
    # the loads and the month's grains in one refresh at the end (etl/grains.py one_refresh, as `etl nightly`
    # runs a night's): every table's checksum as with each load refreshing its hours and the month again after
    # them (docs/benchmarks.md, issue 51 round 9)
    with one_refresh(wh):
        assert load_sacct(wh, d / "sacct.psv").quarantined == 0
        load_capacity(wh, inventory=d / "inventory.csv", cluster="t3")
        load_parquet_dir(wh, d, DAY, DAY, cluster="t3")
        refresh_capacity(wh, "t3", *OCT)
    return wh


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from ops_warehouse.warehouse import close_embedded

    d = tmp_path_factory.mktemp("job-report")
    wh = _loaded(d)
    yield wh, d
    wh.close()
    close_embedded()


def _duck_gpus(d, node, start, end):
    """Per GPU of ``node`` over the samples in [start, end), from the Parquet file alone."""
    q = f"""
        SELECT CAST(gpu AS INTEGER) AS gpu, avg(DCGM_FI_DEV_GPU_UTIL) AS util_mean_pct,
               max(DCGM_FI_DEV_GPU_UTIL) AS util_peak_pct, avg(DCGM_FI_PROF_SM_ACTIVE) AS sm_active,
               avg(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) AS tensor_active, avg(DCGM_FI_PROF_DRAM_ACTIVE) AS dram_active,
               max(DCGM_FI_DEV_FB_USED) AS fb_peak_mib,
               max(DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) AS fb_total_mib,
               avg(DCGM_FI_DEV_POWER_USAGE) AS power_mean_w,
               sum(DCGM_FI_DEV_POWER_USAGE * 60) / 3.6e6 AS energy_kwh,
               count(*) * 60 AS observed_s
        FROM read_parquet('{d / "telemetry" / "dcgm" / f"{DAY}.parquet"}')
        WHERE Hostname = '{node}' AND timestamp >= TIMESTAMPTZ '{start.isoformat()}'
          AND timestamp < TIMESTAMPTZ '{end.isoformat()}'
        GROUP BY gpu ORDER BY 1"""
    return duckdb.sql(q).pl()


def _duck_sacct(d):
    """Per run: CPU time summed over the steps, their largest MaxRSS (MiB), CPUs, elapsed, requested memory."""
    q = f"""
        WITH l AS (SELECT * FROM read_csv('{d / "sacct.psv"}', delim='|', header=true, all_varchar=true)),
        steps AS (
            SELECT split_part(JobID, '.', 1) AS job, Start,
                   CAST(split_part(TotalCPU, ':', 1) AS DOUBLE) * 3600
                   + CAST(split_part(TotalCPU, ':', 2) AS DOUBLE) * 60
                   + CAST(split_part(TotalCPU, ':', 3) AS DOUBLE) AS cpu_s,
                   CASE WHEN MaxRSS LIKE '%G' THEN CAST(rtrim(MaxRSS, 'G') AS DOUBLE) * 1024
                        WHEN MaxRSS LIKE '%K' THEN CAST(rtrim(MaxRSS, 'K') AS DOUBLE) / 1024 END AS rss_mib
            FROM l WHERE JobID LIKE '%.%')
        SELECT j.JobID AS job, j.Start AS start, sum(s.cpu_s) AS cpu_s, max(s.rss_mib) AS rss_mib,
               any_value(CAST(j.NCPUS AS DOUBLE)) AS ncpus, any_value(CAST(j.ElapsedRaw AS DOUBLE)) AS elapsed_s,
               500 * 1024.0 AS req_mib
        FROM l AS j JOIN steps AS s ON s.job = j.JobID AND s.Start = j.Start
        WHERE j.JobID NOT LIKE '%.%' GROUP BY j.JobID, j.Start ORDER BY 1, 2"""
    return duckdb.sql(q).pl()


def _check_gpus(got: pl.DataFrame, want: pl.DataFrame, cols):
    got = got.sort("gpu")
    assert got["gpu"].to_list() == want["gpu"].to_list()
    for c in cols:
        assert got[c].to_list() == pytest.approx(want[c].to_list(), rel=1e-6, abs=1e-9), c


GPU_COLS = ("util_mean_pct", "util_peak_pct", "sm_active", "tensor_active", "dram_active", "fb_peak_mib",
            "fb_total_mib", "power_mean_w", "energy_kwh", "observed_s")


def test_each_gpu_figure_of_a_labelled_run_is_duckdbs_over_the_samples(site):
    wh, d = site
    j = job_report(wh, "4001", "t3")
    assert j.gpus["attribution"].unique().to_list() == ["gpu"] and j.gpus["grain"].unique().to_list() == ["sample"]
    _check_gpus(j.gpus, _duck_gpus(d, "n1", at("10:00"), at("13:00")), GPU_COLS)
    assert j.gpus["gpu_h"].to_list() == pytest.approx([3.0] * 8)
    r = j.runs.row(0, named=True)
    # pooled over the 8 GPUs, equal time: (7 × 80 + 0) / 8; its GPU memory: 40,000 of 81,559 MiB
    assert (r["gpu_h"], r["gpu_util_pct"], r["util_peak_pct"]) == pytest.approx((24.0, 70.0, 80.0))
    assert r["fb_peak_share"] == pytest.approx(40000 / TOTAL_MIB)
    assert (r["grain"], r["attribution"], r["wait_s"]) == ("sample", "gpu", 600)


def test_cpu_and_memory_efficiency_are_the_sacct_lines(site):
    wh, d = site
    want = _duck_sacct(d)
    got = pl.concat([job_report(wh, j, "t3").runs for j in ("4001", "4002")]).sort("job_id", "submit_ts")
    assert got.height == want.height == 3
    assert got["cpu_time_s"].to_list() == pytest.approx(want["cpu_s"].to_list())
    cpu_eff = (want["cpu_s"] / (want["ncpus"] * want["elapsed_s"])).to_list()
    assert got["cpu_eff"].to_list() == pytest.approx(cpu_eff)
    assert got["max_rss_mib"].to_list() == pytest.approx(want["rss_mib"].to_list())
    assert got["mem_eff"].to_list() == pytest.approx((want["rss_mib"] / want["req_mib"]).to_list())
    # by hand, 4001: (5,400 + 1) CPU-s ÷ (112 CPUs × 10,800 s); 20 GiB of 500 GiB
    assert got["cpu_eff"][0] == pytest.approx(5401 / (112 * 10800)) and got["mem_eff"][0] == pytest.approx(0.04)


def test_a_requeued_job_shows_every_run_and_its_notes(site):
    wh, d = site
    j = job_report(wh, "4002", "t3")
    assert j.runs.select("run", "runs", "state", "is_superseded").rows() == [(1, 2, "NODE_FAIL", 1),
                                                                               (2, 2, "COMPLETED", 0)]
    assert set(j.gpus["attribution"]) == {"node share"}
    _check_gpus(j.gpus.filter(pl.col("submit_ts") == j.runs["submit_ts"][1]),
                _duck_gpus(d, "n2", at("09:30"), at("11:00")), GPU_COLS)
    low = j.notes.filter(pl.col("note") == "low_gpu_memory")
    # 2,000 of 81,559 MiB used: 2.45 %, under the 10 % threshold, on both runs
    assert low["figure"].to_list() == pytest.approx([2000 / TOTAL_MIB * 100] * 2)
    assert "idle_gpu" not in j.notes["note"].to_list()


def test_the_idle_gpu_is_named_with_its_figure(site):
    wh, _ = site
    j = job_report(wh, "4001", "t3")
    idle = j.notes.filter(pl.col("note") == "idle_gpu")
    assert idle.select("detail", "figure").rows() == [("n1 GPU 7", 0.0)]
    text = render_job(j.as_dict(), "text")
    assert "GPU idle the whole run (mean utilization): 0.0 % (threshold 5.0; n1 GPU 7)" in text
    assert "telemetry read at grain: sample" in text
    page = render_job(j.as_dict(), "html")
    assert page.count("<svg") == 8 and "n1 GPU 7" in page
    assert json.loads(render_job(j.as_dict(), "json"))["runs"][0]["job_id"] == "4001"


def test_an_unknown_job_is_one_line(site):
    with pytest.raises(OpsError, match=r"^no job 999 on cluster t3 in the warehouse"):
        job_report(site[0], "999", "t3")


def test_once_the_samples_expired_the_hourly_grain_gives_the_same_figures_and_says_so(site, tmp_path):
    wh, d = site
    before = job_report(wh, "4001", "t3")
    wh.command("ALTER TABLE gpu_sample DELETE WHERE cluster = 't3' AND node = 'n1' SETTINGS mutations_sync = 2")
    try:
        after = job_report(wh, "4001", "t3")
    finally:  # the module's other tests read the samples: put them back
        load_parquet_dir(wh, d, DAY, DAY, cluster="t3")
    assert set(after.gpus["grain"]) == {"hour"} and set(after.gpus["attribution"]) == {"node share"}
    assert after.runs["grain"][0] == "hour"
    # whole hours: the hourly means are the samples' means (DuckDB's, above); no GPU memory total at that grain
    _check_gpus(after.gpus, _duck_gpus(d, "n1", at("10:00"), at("13:00")),
                ("util_mean_pct", "util_peak_pct", "sm_active", "tensor_active", "dram_active", "fb_peak_mib",
                 "power_mean_w", "energy_kwh"))
    assert after.gpus["fb_total_mib"].null_count() == 8
    assert after.runs["gpu_h"][0] == pytest.approx(before.runs["gpu_h"][0])
    assert after.notes.filter(pl.col("note") == "idle_gpu")["detail"].to_list() == ["n1 GPU 7"]
    assert "telemetry read at grain: hour (hourly rollup: the samples expired)" in render_job(after.as_dict(), "text")


def test_a_reading_another_jobs_label_names_is_left_out_of_a_labelled_gpu(site):
    """On the GPUs the run's label names, a reading labelled with another job id is that job's: GPU 0's first
    sample of 4001's run relabelled 3999 at 5 % leaves its figures those of the other 179 samples (DuckDB over
    the Parquet file from 10:01), while GPU 1 keeps all 180; the node's other readings stay the run's."""
    wh, d = site
    cut = ("ALTER TABLE gpu_sample UPDATE hpc_job = '{job}', gpu_util_pct = {util} WHERE cluster = 't3'"
           " AND node = 'n1' AND gpu = 0 AND ts = toDateTime('2026-10-05 10:00:00', 'UTC') SETTINGS mutations_sync = 2")
    wh.command(cut.format(job="3999", util=5))
    try:
        j = job_report(wh, "4001", "t3")
    finally:  # the module's other tests read the sample as loaded
        wh.command(cut.format(job="4001", util=80))
    gpus = j.gpus.sort("gpu")
    assert gpus["attribution"].unique().to_list() == ["gpu"] and gpus.height == 8
    want0 = _duck_gpus(d, "n1", at("10:01"), at("13:00")).filter(pl.col("gpu") == 0)
    _check_gpus(gpus.filter(pl.col("gpu") == 0), want0, GPU_COLS)
    assert gpus["observed_s"].to_list()[:2] == [179 * 60, 180 * 60]

def test_run_gpus_reads_the_samples_once(site):
    """The run's GPU figures come from one read of its nodes' samples (each sample cut at the run-hours it
    reaches, every figure a sum or a max of those pieces), not one read per figure joined back: the engine
    reads the day's samples (DuckDB's count of the Parquet file) once, with the day's hourly
    rollups and runs beside them, under twice the day's samples. Before: the per-sample join was evaluated once
    per use (named, by_sample, by_hour): 74,363 rows."""
    from ops_warehouse.analytics import marts

    wh, d = site
    samples = duckdb.sql(f"SELECT count(*) FROM read_parquet('{d / 'telemetry' / 'dcgm' / f'{DAY}.parquet'}')"
                         ).fetchall()[0][0]
    assert samples == 2 * 8 * 1440
    window = (datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, tzinfo=timezone.utc))

    def selected() -> int:
        return wh.query_rows("SELECT value FROM system.events WHERE event = 'SelectedRows'")[0][0]

    before = selected()
    gpus = marts.run_mart(wh, "run_gpus", cluster="t3", window=window, job_id="4001")
    read = selected() - before
    assert gpus.height == 8
    assert read < 2 * samples, read


# --- the generator's planted cases (issue 52 item 5, generate/workload.py; docs/efficiency.md "What the generator
# plants"): on a small generated site, `ops-report job` names each planted fault with its figure, the truth's
# (truth/efficiency.parquet), which the generator drew, never the product's SQL
PLANT_START = datetime(2026, 10, 1, tzinfo=timezone.utc)
PLANT_DAYS = 10


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from tests.sites import built_site, generated_site, open_site

    s = built_site(tmp_path_factory, "job-plants", generated_site, start=PLANT_START, days=PLANT_DAYS,
                   jobs_per_day=500, nodes=24, seed=11, metrics_step_s=300,
                   telemetry_days=(date(2026, 10, 1), date(2026, 10, PLANT_DAYS)))
    truth = pl.read_parquet(s.path / "truth" / "efficiency.parquet").filter(pl.col("kind") != "idle_user")
    wh = open_site(s, tmp_path_factory.mktemp("job-plants-copy"))
    yield wh, s.facts["cluster"], truth, s
    try:
        wh.close()
    except Exception:  # the CLI test (last) opened another folder: this process's one engine closed it already
        pass


def _planted_runs(truth, kind):
    # the notes look at runs seen for an hour or more (idle_min_minutes): a planted run shorter than that, and one
    # still running at the site's end, is not a case the note is for
    end_s = int(PLANT_START.timestamp()) + PLANT_DAYS * 86400
    return truth.filter((pl.col("kind") == kind) & (pl.col("end") - pl.col("start") >= 3600 + 300)
                        & (pl.col("end") <= end_s)).to_dicts()


@pytest.mark.parametrize("kind", ["idle_gpu_of_n", "low_gpu_memory", "cpu_bound"])
def test_each_planted_fault_is_named_with_its_figure(planted, kind):
    wh, cluster, truth, _ = planted
    runs = _planted_runs(truth, kind)
    assert runs, f"the site plants no {kind} run of an hour: the generator's draws changed"
    for t in runs:
        j = job_report(wh, t["job_id"], cluster)
        notes = j.notes.filter(pl.col("submit_ts").dt.epoch("s") == t["submit"])
        text = render_job(j.as_dict(), "text")
        if kind == "idle_gpu_of_n":
            idle = notes.filter(pl.col("note") == "idle_gpu")
            # the planted GPU alone, at its planted mean (the exporter's whole-percent noise: within 2 points)
            assert idle["detail"].to_list() == [f"{t['node']} GPU {t['gpu']}"], (t, notes)
            assert idle["figure"][0] == pytest.approx(t["gpu_util"], abs=2.0), t
            assert f"GPU idle the whole run (mean utilization): {idle['figure'][0]:,.1f} %" in text
        elif kind == "low_gpu_memory":
            low = notes.filter(pl.col("note") == "low_gpu_memory")
            assert low.height == 1, (t, notes)
            assert low["figure"][0] == pytest.approx(t["fb_used_frac"] * 100, abs=0.5), t
            assert "GPU memory under 10 % used" in text
        else:
            cpu = notes.filter(pl.col("note") == "cpu_bound")
            assert cpu.height == 1, (t, notes)
            # TotalCPU in whole seconds over NCPUS × elapsed
            assert cpu["figure"][0] == pytest.approx(t["cpu_eff"] * 100, abs=0.1), t
            assert "CPU-bound" in text


def test_the_command_prints_each_format_and_refuses_an_unknown_job_in_one_line(planted, tmp_path):
    """Last of the module: the command opens a copy of its own, and one process has one embedded engine."""
    from tests.cli_runner import cli

    _, cluster, truth, s = planted
    t = _planted_runs(truth, "idle_gpu_of_n")[0]
    env = {"OPS_WAREHOUSE": f"chdb://{s.open_copy(tmp_path)}"}
    text = cli("job", t["job_id"], "--cluster", cluster, env=env).stdout
    assert f"job {t['job_id']} on {cluster}" in text and f"{t['node']} GPU {t['gpu']}" in text
    doc = json.loads(cli("job", t["job_id"], "--format", "json", env=env).stdout)
    assert [n["detail"] for n in doc["notes"] if n["note"] == "idle_gpu"] == [f"{t['node']} GPU {t['gpu']}"]
    page = cli("job", t["job_id"], "--format", "html", env=env).stdout
    assert page.count("<svg") == len(doc["gpus"]) == t["gpus"]
    bad = cli("job", "999", "--cluster", cluster, env=env, check=False)
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [f"ops-report: error: no job 999 on cluster {cluster} in the warehouse "
                                               "(a job id as sacct prints it: 123, 123_4 for an array task, 123+1 "
                                               "for a het component)"]

