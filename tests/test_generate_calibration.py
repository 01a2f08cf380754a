"""The cluster generator against published figures and against itself.

One month of the default cluster (114 nodes, 912 GPUs) is simulated once for the module:
``simulate(start=2026-10-01 UTC, days=31, jobs_per_day=900, seed=7)`` (about 10 s). Every figure below is
computed here, independently, from the simulation's frames with polars; nothing is read back from the
generator's own constants.

Definitions used throughout:

* period: [T0, T1) with T0 = 2026-10-01 00:00 UTC and T1 = T0 + 31 days;
* GPU job: ``gpus >= 1``; a job is one submitted job id (its first run), a run is one row of ``runs``;
* run time of a started run: ``min(end, T1) - start`` (a run still running at T1 is clipped there);
* GPU-hours: ``gpus x run time`` over the runs that started;
* outcome classes: COMPLETED -> completed; CANCELLED, PREEMPTED -> cancelled; FAILED, NODE_FAIL, TIMEOUT,
  OUT_OF_MEMORY -> failed; runs still RUNNING at T1 (or PENDING) are left out.

Targets and their sources:

1. Job-size shape (Kokolis et al., HPCA 2025, Meta RSC-1/RSC-2, as summarised in the operators' domain notes):
   over 40% of jobs on 1 GPU, over 90% on fewer than 8 GPUs yet under 10% of GPU time, jobs of 256+ GPUs
   over half of GPU time (66% / 52%). Run times heavy-tailed: median GPU-job run time of minutes (AcmeTrace
   Seren 122 s, Kalos 124 s, Helios 206 s), large jobs in hours with a long tail.
2. Outcome shares by count and by GPU time: within the [min, max] of the published clusters widened by
   ``MARGIN`` (see ``published_ranges``).
3. Failure rate: a few node failures per 1,000 node-days (RSC-1 6.50, RSC-2 2.34); lemon nodes stand out.
4. Coherence of the frames (what a real Slurm + DCGM history can never show).
5. The events the failure and efficiency reports must find.
6. Determinism of the seed.
7. The nightly sacct extracts (sacct_writer.sacct_text with as_of/window).
8. Queue waits (start - submit of each run that started) by GPU-count class (sql/functions/gpu_size_class.sql):
   each class's median under the largest p90 published for jobs of that size (Philly per virtual cluster,
   AcmeTrace's Seren and Kalos: tests/data/published/queue_waits.csv, see ``published_wait_bounds``); the
   median and mean wait of all GPU runs within the published clusters' [min, max] (the cluster summaries).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from ops_warehouse.generate import simulate
from ops_warehouse.generate.sacct_writer import sacct_text
from tests.conftest import DATA

pytestmark = pytest.mark.slow  # a generated site, many processes or a long load: docs/testing.md

UTC = timezone.utc
START = datetime(2026, 10, 1, tzinfo=UTC)
DAYS = 31
T0 = int(START.timestamp())
T1 = T0 + DAYS * 86400
PUBLISHED = DATA / "published"
MARGIN = 0.10  # absolute, added on both sides of the published [min, max] of each outcome share

OUTCOME = (
    pl.when(pl.col("state") == "COMPLETED").then(pl.lit("completed"))
    .when(pl.col("state").is_in(["CANCELLED", "PREEMPTED"])).then(pl.lit("cancelled"))
    .when(pl.col("state").is_in(["FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"])).then(pl.lit("failed"))
    .otherwise(pl.lit(None, pl.String))
)
OUTCOMES = ("completed", "cancelled", "failed")


def _epoch(c: str) -> pl.Expr:
    return pl.col(c).dt.epoch("s")


@pytest.fixture(scope="module")
def h():
    hist = simulate(start=START, days=DAYS, jobs_per_day=900, seed=7)
    assert int(hist.end.timestamp()) == T1
    return hist


@pytest.fixture(scope="module")
def started(h) -> pl.DataFrame:
    """Runs that started, with their run time clipped to the period end and their GPU-seconds."""
    s = h.runs.filter(pl.col("start").is_not_null(), pl.col("gpus") >= 1)
    return s.with_columns(
        dur=pl.min_horizontal(pl.col("end").fill_null(T1), pl.lit(T1)) - pl.col("start"),
    ).with_columns(gpu_s=pl.col("gpus").cast(pl.Int64) * pl.col("dur"))


@pytest.fixture(scope="module")
def jobs(h) -> pl.DataFrame:
    """One row per submitted GPU job (its first run)."""
    return h.runs.filter(pl.col("gpus") >= 1, pl.col("run") == 0)


# --------------------------------------------------------------------------- 1. shape


def test_job_size_shares(jobs, started):
    n = jobs.height
    one = jobs.filter(pl.col("gpus") == 1).height / n
    under8 = jobs.filter(pl.col("gpus") < 8).height / n
    total = started["gpu_s"].sum()
    gh_under8 = started.filter(pl.col("gpus") < 8)["gpu_s"].sum() / total
    gh_256 = started.filter(pl.col("gpus") >= 256)["gpu_s"].sum() / total
    assert one > 0.40, f"1-GPU share of jobs {one:.3f}"
    assert under8 > 0.90, f"<8-GPU share of jobs {under8:.3f}"
    assert gh_under8 < 0.10, f"<8-GPU share of GPU-hours {gh_under8:.3f}"
    assert gh_256 > 0.50, f"256+-GPU share of GPU-hours {gh_256:.3f}"


def test_run_times_heavy_tailed(started):
    med_all = started["dur"].median()
    small_med = started.filter(pl.col("gpus") < 8)["dur"].median()
    large = started.filter(pl.col("gpus") >= 64)["dur"]
    assert 30 <= med_all <= 15 * 60, f"median GPU-job run time {med_all} s"
    assert large.len() > 0
    p99 = large.quantile(0.99, interpolation="nearest")
    assert p99 >= 10 * small_med, f"large p99 {p99} s vs small median {small_med} s"
    large_med = large.median()
    assert 3600 <= large_med < 48 * 3600, f"large-job median run time {large_med / 3600:.2f} h"


# --------------------------------------------------------------------------- 2. outcomes


def published_ranges() -> dict[tuple[str, str], tuple[float, float]]:
    """[min, max] of each outcome share over the published clusters that report it, widened by MARGIN.

    Clusters: AcmeTrace (tests/data/published/acmetrace_cluster_summary.csv) Seren, Kalos, Philly and
    Helios, by count (``complete_rate_gpu``, ``cancel_rate_gpu``, ``fail_rate_gpu``) and by GPU time
    (``*_rate_gpu_time``); PAI is left out (it reports no outcomes). Helios
    (tests/data/published/helios_cluster_summary.csv) Venus, Earth, Saturn and Uranus, by count
    (``*_rate_gpu``) and by GPU time (shares of ``complete_gpu_time + cancel_gpu_time + fail_gpu_time``);
    its ``total`` row is the AcmeTrace Helios row again and is left out. Margin: 0.10 absolute each side.
    """
    acme = pl.read_csv(PUBLISHED / "acmetrace_cluster_summary.csv").filter(pl.col("complete_rate_gpu").is_not_null())
    hel = pl.read_csv(PUBLISHED / "helios_cluster_summary.csv").filter(pl.col("id") != "total")
    assert set(acme["id"]) == {"Seren", "Kalos", "Philly", "Helios"}
    assert set(hel["id"]) == {"Venus", "Earth", "Saturn", "Uranus"}
    cols = {"completed": "complete", "cancelled": "cancel", "failed": "fail"}
    hel_time = sum(hel[f"{c}_gpu_time"] for c in cols.values())
    out = {}
    for o, c in cols.items():
        by_count = acme[f"{c}_rate_gpu"].to_list() + hel[f"{c}_rate_gpu"].to_list()
        by_time = acme[f"{c}_rate_gpu_time"].to_list() + (hel[f"{c}_gpu_time"] / hel_time).to_list()
        out[(o, "count")] = (max(0.0, min(by_count) - MARGIN), min(1.0, max(by_count) + MARGIN))
        out[(o, "gpu_time")] = (max(0.0, min(by_time) - MARGIN), min(1.0, max(by_time) + MARGIN))
    return out


def test_published_ranges_sane():
    r = published_ranges()
    # spot checks against the CSVs: Seren by count (49.7 / 7.5 / 42.9%) and by GPU time (21.2 / 66.4 / 12.4%)
    assert r[("completed", "count")][0] == pytest.approx(0.497 - MARGIN)
    assert r[("failed", "count")][1] == pytest.approx(0.429 + MARGIN)
    assert r[("completed", "gpu_time")][0] == pytest.approx(0.212 - MARGIN)
    assert r[("cancelled", "gpu_time")][1] == pytest.approx(0.664 + MARGIN)


def outcome_shares(h) -> dict[tuple[str, str], float]:
    """Shares per run (sacct --duplicates row) of the runs that ended by T1, jobs cancelled while pending
    included (they count by number, with no GPU time); runs still running or pending at T1 are left out."""
    ended = h.runs.filter(pl.col("gpus") >= 1, pl.col("end").is_not_null(), pl.col("end") <= T1).with_columns(
        o=OUTCOME, gpu_s=(pl.col("gpus").cast(pl.Int64) * (pl.col("end") - pl.col("start"))).fill_null(0))
    assert ended["o"].null_count() == 0, ended.filter(pl.col("o").is_null())["state"].unique().to_list()
    n, t = ended.height, ended["gpu_s"].sum()
    out = {}
    for o in OUTCOMES:
        e = ended.filter(pl.col("o") == o)
        out[(o, "count")] = e.height / n
        out[(o, "gpu_time")] = e["gpu_s"].sum() / t
    return out


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("basis", ["count", "gpu_time"])
def test_outcome_shares_within_published_range(h, outcome, basis):
    lo, hi = published_ranges()[(outcome, basis)]
    v = outcome_shares(h)[(outcome, basis)]
    assert lo <= v <= hi, f"{outcome} by {basis}: {v:.3f} outside [{lo:.3f}, {hi:.3f}]"


# --------------------------------------------------------------------------- 3. failures


def node_failures(h) -> pl.DataFrame:
    return h.node_events.filter(
        (pl.col("state") == "down") | ((pl.col("state") == "drain") & pl.col("reason").str.starts_with("Xid")))


def test_failure_rate_per_1000_node_days(h):
    inv = h.inventory.with_columns(
        days=(T1 - pl.max_horizontal(_epoch("in_service_ts"), pl.lit(T0))).clip(0) / 86400)
    node_days = inv["days"].sum()
    f = node_failures(h)
    assert f["node"].is_in(inv["node"].implode()).all()
    rate = f.height / node_days * 1000
    assert 1.0 <= rate <= 20.0, f"{f.height} failures in {node_days:.0f} node-days: {rate:.2f} per 1,000"


def test_lemon_nodes_fail_more(h):
    per = h.inventory.select("node").join(node_failures(h).group_by("node").len(), on="node", how="left") \
        .with_columns(pl.col("len").fill_null(0))
    median = per["len"].median()
    lemons = per.filter(pl.col("node").is_in(h.lemons))
    assert lemons.height == 2
    others_max = per.filter(~pl.col("node").is_in(h.lemons))["len"].max()
    for node, n in lemons.iter_rows():
        assert n >= median + 2, f"lemon {node}: {n} failures, median node {median}"
        assert n >= others_max, f"lemon {node}: {n} failures, a non-lemon node has {others_max}"


# --------------------------------------------------------------------------- 4. coherence


def test_no_gpu_allocated_twice(h):
    a = h.gpu_alloc.sort("node", "gpu", "start_ts").with_columns(
        prev_end=pl.col("end_ts").shift(1).over("node", "gpu"))
    overlap = a.filter(pl.col("prev_end") > pl.col("start_ts"))
    assert overlap.height == 0, overlap.head()
    assert h.gpu_alloc.filter(pl.col("end_ts") <= pl.col("start_ts")).height == 0


def test_gpu_alloc_matches_runs(h):
    s = h.runs.filter(pl.col("start").is_not_null())
    assert s.select("job_id", "start").is_duplicated().sum() == 0  # (job id, start) identifies a run
    a = h.gpu_alloc.group_by("job_id", _epoch("start_ts").alias("start")).agg(
        n=pl.len(), alloc_nodes=pl.col("node").unique().sort(), e_min=_epoch("end_ts").min(),
        e_max=_epoch("end_ts").max())
    assert a.height == s.height  # every allocation belongs to a started run and vice versa
    j = s.join(a, on=["job_id", "start"], how="left")
    assert j["n"].null_count() == 0, j.filter(pl.col("n").is_null()).head()
    assert (j["n"] == j["gpus"]).all(), j.filter(pl.col("n") != pl.col("gpus")).select("job_id", "gpus", "n")
    assert (j["alloc_nodes"] == j["nodes"].list.sort()).all()
    assert ((j["e_min"] == j["end"]) & (j["e_max"] == j["end"])).all()


def test_no_start_on_down_or_drained_node(h):
    s = h.runs.filter(pl.col("start").is_not_null()).select("job_id", "start", "nodes").explode("nodes") \
        .rename({"nodes": "node"})
    ev = h.node_events.select("node", _epoch("start_ts").alias("es"), _epoch("end_ts").alias("ee"), "state")
    bad = s.join(ev, on="node").filter((pl.col("es") <= pl.col("start")) & (pl.col("start") < pl.col("ee")))
    assert bad.height == 0, bad.head()


def test_node_fail_runs_end_at_a_down_event_after_an_xid(h):
    nf = h.runs.filter(pl.col("state") == "NODE_FAIL")
    assert nf.height > 0
    down = h.node_events.filter(pl.col("state") == "down").select("node", _epoch("start_ts").alias("t"))
    xid = h.xids.select("node", _epoch("ts").alias("xt"))
    for r in nf.iter_rows(named=True):
        hits = down.filter(pl.col("node").is_in(r["nodes"]), pl.col("t") == r["end"])
        assert hits.height >= 1, f"NODE_FAIL run {r['job_id']} ends at {r['end']} without a down event"
        node = hits["node"][0]
        before = xid.filter(pl.col("node") == node, pl.col("xt") < r["end"], pl.col("xt") >= r["end"] - 60)
        assert before.height >= 1, f"no Xid on {node} in the minute before {r['end']}"
    # and no run keeps running through a node going down under it
    through = h.runs.filter(pl.col("start").is_not_null()).explode("nodes").rename({"nodes": "node"}) \
        .join(down, on="node").filter(pl.col("start") < pl.col("t"), pl.col("t") < pl.col("end").fill_null(T1 + 1))
    assert through.height == 0, through.select("job_id", "node", "start", "end", "t", "state").head()


def test_reservation_respected(h):
    rv = h.reservations.row(0, named=True)
    rs, re_ = int(rv["start_ts"].timestamp()), int(rv["end_ts"].timestamp())
    rnodes = pl.Series(rv["nodes"]).implode()
    on_resv = h.runs.filter(pl.col("start").is_not_null()).with_columns(
        hit=pl.col("nodes").list.eval(pl.element().is_in(rnodes)).list.any())
    inside = on_resv.filter(pl.col("hit"), pl.col("start") >= rs, pl.col("start") < re_)
    assert inside.height > 0
    strangers = inside.filter(pl.col("account") != rv["accounts"])
    assert strangers.height == 0, strangers.select("job_id", "account", "start").head()
    assert (inside["reservation"] == rv["name"]).all()
    # stronger: no other account's run even overlaps the reservation on its nodes (Slurm starts no job
    # whose time limit would run into it)
    overlapping = on_resv.filter(pl.col("hit"), pl.col("account") != rv["accounts"], pl.col("start") < re_,
                                 pl.col("end").fill_null(T1) > rs)
    assert overlapping.height == 0, overlapping.select("job_id", "account", "start", "end").head()
    # and the reservation name appears nowhere else
    tagged = h.runs.filter(pl.col("reservation") != "")
    assert (tagged["account"] == rv["accounts"]).all()
    assert tagged.filter((pl.col("start") < rs) | (pl.col("start") >= re_)).height == 0


def test_starts_after_submit(h):
    s = h.runs.filter(pl.col("start").is_not_null())
    assert s.filter(pl.col("start") < pl.col("submit")).height == 0
    assert s.filter(pl.col("start") >= T1).height == 0
    assert h.runs.filter(pl.col("end").is_not_null(), pl.col("end") < pl.col("submit")).height == 0


def test_requeued_and_resubmitted_runs_follow_an_interruption(h):
    """A later run of a campaign (truth's ``campaign``, ``run``) follows the one before it: a requeue (the same job
    id) is submitted when a node failure or a preemption ended it; a resubmission (a new job id, a planted
    training campaign's) from half a minute to four hours after an interruption its owner did not make."""
    later = h.runs.filter(pl.col("run") >= 1)
    prev = h.runs.select("campaign", (pl.col("run") + 1).alias("run"), pl.col("state").alias("prev_state"),
                         pl.col("end").alias("prev_end"), pl.col("job_id").alias("prev_job_id"))
    j = later.join(prev, on=["campaign", "run"], how="left")
    assert j["prev_state"].null_count() == 0
    requeue = j.filter(pl.col("job_id") == pl.col("prev_job_id"))
    resub = j.filter(pl.col("job_id") != pl.col("prev_job_id"))
    assert requeue.height > 0 and resub.height > 0
    assert requeue["prev_state"].is_in(["NODE_FAIL", "PREEMPTED"]).all(), requeue.select("job_id", "prev_state")
    assert (requeue["submit"] == requeue["prev_end"]).all()
    assert resub["planted_campaign"].all() and resub["prev_state"].is_in(["FAILED", "TIMEOUT", "NODE_FAIL"]).all()
    delay = resub["submit"] - resub["prev_end"]
    assert ((delay >= 30) & (delay <= 4 * 3600)).all()
    assert j.filter(pl.col("start").is_not_null(), pl.col("start") < pl.col("prev_end")).height == 0


def test_running_at_period_end(h):
    s = h.runs.filter(pl.col("start").is_not_null())
    running = s.filter(pl.col("start") < T1, pl.col("end").is_null() | (pl.col("end") > T1))
    assert running.height > 0
    spec = h.spec
    txt = sacct_text(h.runs, cluster=spec.name, cpus_per_gpu=spec.cpus_per_node // spec.gpus_per_node,
                     mem_per_gpu_mib=spec.mem_per_node_mib // spec.gpus_per_node, as_of=T1, window=(T0, T1),
                     steps=False)
    rows = _parse(txt)
    shown = rows.filter(pl.col("State") == "RUNNING")
    want = running.select(pl.col("job_id_raw").cast(pl.String).alias("JobIDRaw"),
                          pl.from_epoch("start", "s").dt.strftime("%Y-%m-%dT%H:%M:%S").alias("Start"))
    assert sorted(shown.select("JobIDRaw", "Start").rows()) == sorted(want.rows())
    assert (shown["End"] == "Unknown").all()


# --------------------------------------------------------------------------- 5. events


def test_nccl_hang_ends_failed(h):
    hung = h.gpu_alloc.filter(pl.col("hang_from_ts").is_not_null()).select(
        "job_id", _epoch("start_ts").alias("start"), _epoch("hang_from_ts").alias("hf"),
        _epoch("end_ts").alias("e")).unique()
    assert hung.height >= 1
    j = hung.join(h.runs, on=["job_id", "start"])
    assert j.height == hung.height
    ended = j.filter(pl.col("end") <= T1)
    assert ended.height >= 1
    assert (ended["state"] == "FAILED").all(), ended["state"].to_list()
    assert (j["hf"] < j["e"]).all() and (j["hf"] > j["start"]).all()


def test_throttling_on_hot_gpus(h):
    th = h.throttle
    assert th.height > 0
    assert th.filter(pl.col("end_ts") <= pl.col("start_ts")).height == 0
    hot = th.group_by("node", "gpu").agg(days=pl.col("start_ts").dt.date().n_unique())
    assert hot["node"].is_in(h.inventory["node"].implode()).all()
    assert hot["gpu"].is_between(0, h.spec.gpus_per_node - 1).all()
    assert (hot["days"] >= DAYS // 2).all()  # they throttle repeatedly, not once
    thermal = h.node_events.filter(pl.col("reason").str.starts_with("thermal"))
    assert thermal["node"].is_in(hot["node"].implode()).all()


def test_straggler(h):
    slow = h.gpu_alloc.filter(pl.col("slowdown") < 1)
    assert slow.height > 0
    assert slow["node"].unique().to_list() == [h.straggler]
    assert (h.gpu_alloc.filter(pl.col("node") == h.straggler)["slowdown"] < 1).all()


def test_xid79_with_down_event(h):
    x79 = h.xids.filter(pl.col("xid") == 79)
    assert x79.height >= 1
    down = h.node_events.filter(pl.col("state") == "down",
                                pl.col("reason") == "Xid 79: GPU has fallen off the bus")
    j = x79.join(down, on="node").filter(pl.col("start_ts") > pl.col("ts"),
                                         pl.col("start_ts") - pl.col("ts") <= timedelta(minutes=1))
    assert j.height >= 1


def test_drain_reasons(h):
    reasons = h.node_events.filter(pl.col("state") == "drain")["reason"].to_list()
    assert any(r.startswith("maintenance") for r in reasons)
    assert any(r.startswith("thermal") for r in reasons)


# --------------------------------------------------------------------------- 6. determinism

FRAMES = ("runs", "gpu_alloc", "node_events", "xids", "throttle", "reservations", "inventory")


@pytest.fixture(scope="module")
def small():
    return simulate(start=START, days=3, jobs_per_day=900, seed=7)


def test_same_seed_same_history(small):
    again = simulate(start=START, days=3, jobs_per_day=900, seed=7)
    for f in FRAMES:
        assert getattr(small, f).equals(getattr(again, f)), f
    assert (small.lemons, small.straggler) == (again.lemons, again.straggler)


def test_other_seed_differs(small):
    other = simulate(start=START, days=3, jobs_per_day=900, seed=8)
    assert not small.runs.equals(other.runs)
    assert not small.gpu_alloc.equals(other.gpu_alloc)


# --------------------------------------------------------------------------- 7. nightly extracts


def _parse(txt: str) -> pl.DataFrame:
    lines = txt.rstrip("\n").split("\n")
    head = lines[0].split("|")
    recs = [ln.split("|") for ln in lines[1:]]
    assert all(len(r) == len(head) for r in recs)
    df = pl.DataFrame(recs, schema=head, orient="row")
    return df.filter(~pl.col("JobIDRaw").str.contains(r"\."))  # job rows only


def _fmt(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def test_nightly_extracts(small):
    spec = small.spec
    kw = dict(cluster=spec.name, cpus_per_gpu=spec.cpus_per_node // spec.gpus_per_node,
              mem_per_gpu_mib=spec.mem_per_node_mib // spec.gpus_per_node)
    m1, m2 = T0 + 2 * 86400, T0 + 3 * 86400  # the second midnight: on the first the queue is still short
    d1 = _parse(sacct_text(small.runs, as_of=m1, window=(T0, m1), **kw))
    d2 = _parse(sacct_text(small.runs, as_of=m2, window=(m1, m2), **kw))
    once = small.runs.filter(pl.col("job_id_raw").is_unique())  # one run: JobIDRaw identifies it

    spans = once.filter(pl.col("start") < m1, pl.col("end") > m1, pl.col("end") <= m2)
    assert spans.height >= 1
    for r in spans.iter_rows(named=True):
        a = d1.filter(pl.col("JobIDRaw") == str(r["job_id_raw"])).row(0, named=True)
        b = d2.filter(pl.col("JobIDRaw") == str(r["job_id_raw"])).row(0, named=True)
        assert (a["State"], a["End"], a["Start"]) == ("RUNNING", "Unknown", _fmt(r["start"]))
        assert a["NodeList"] != "None assigned"
        assert b["State"].split(" ")[0] == r["state"], (b["State"], r["state"])
        assert (b["Start"], b["End"]) == (_fmt(r["start"]), _fmt(r["end"]))

    waiting = once.filter(pl.col("submit") < m1, pl.col("start").is_null() | (pl.col("start") > m1),
                          pl.col("end").is_null() | (pl.col("end") > m1))
    assert waiting.filter(pl.col("start").is_not_null()).height >= 1  # one that starts later
    for r in waiting.iter_rows(named=True):
        a = d1.filter(pl.col("JobIDRaw") == str(r["job_id_raw"])).row(0, named=True)
        assert (a["State"], a["NodeList"], a["Start"], a["End"]) == \
            ("PENDING", "None assigned", "Unknown", "Unknown")
        if r["start"] is not None and r["start"] <= m2:  # started the next day: the next extract has it
            b = d2.filter(pl.col("JobIDRaw") == str(r["job_id_raw"])).row(0, named=True)
            assert b["Start"] == _fmt(r["start"]) and b["NodeList"] != "None assigned"
            want = "RUNNING" if r["end"] > m2 else r["state"]
            assert b["State"].split(" ")[0] == want


# --------------------------------------------------------------------------- 8. queue waits

# sql/functions/gpu_size_class.sql, the classes the reports show
SIZE_CLASS = (pl.when(pl.col("gpus") == 1).then(pl.lit("1")).when(pl.col("gpus") <= 8).then(pl.lit("2-8"))
              .when(pl.col("gpus") <= 64).then(pl.lit("9-64")).when(pl.col("gpus") <= 256).then(pl.lit("65-256"))
              .when(pl.col("gpus") <= 1024).then(pl.lit("257-1024")).otherwise(pl.lit(">1024")))
# published groups (tests/data/published/queue_waits.csv) that hold jobs of each class: Philly by GPUs per job;
# AcmeTrace by workload type, its evaluation jobs small-scale and its pretraining runs its large ones
PUBLISHED_GROUPS = {
    "1": [("Philly", "1"), ("AcmeTrace", "Evaluation")],
    "2-8": [("Philly", "2-4"), ("Philly", "5-8"), ("AcmeTrace", "Evaluation")],
    "9-64": [("Philly", ">8"), ("AcmeTrace", "Pretrain")],
    "65-256": [("Philly", ">8"), ("AcmeTrace", "Pretrain")],
    "257-1024": [("Philly", ">8"), ("AcmeTrace", "Pretrain")],
}


def published_wait_bounds() -> dict[str, float]:
    """For each GPU-count class, the largest p90 queue wait published for jobs of that size, in seconds: the
    upper bound of the class's median wait (a median above it would mean the site's typical job of that size
    waits longer than nine in ten such jobs at every published cluster). The lower end is 0 s: Helios's
    median GPU-job wait is 0 s on all four clusters (helios_cluster_summary.csv).

    From tests/data/published/queue_waits.csv (the upper end of each bracket): Philly per virtual cluster
    (15 VCs, jobs of 1, 2-4, 5-8 and more than 8 GPUs, up to 128) and AcmeTrace's Seren and Kalos (evaluation
    and pretraining jobs):

    * 1 GPU: 455,773 s (Philly VC 0e4a51, whose 1-GPU jobs wait days at the tail; the other VCs' p90s are
      minutes to an hour and a half, AcmeTrace's evaluation jobs' under 512 s);
    * 2-8 GPUs: 6,884 s (Philly VC 6214e9's 5-8-GPU jobs);
    * 9-64, 65-256 and 257-1024 GPUs: 7,374 s, about two hours (Philly VC 6c71a0's jobs of more than 8
      GPUs; AcmeTrace's pretraining runs, on capacity reserved for them, under 128 s).

    Published medians, for the record: Philly 7 s - 36 min (1 GPU), 10 s - 6 min (2-8), 43 s - 25 min (more
    than 8; most VCs about 3 min); AcmeTrace evaluation 1-32 s, pretraining 0-16 s."""
    q = pl.read_csv(PUBLISHED / "queue_waits.csv").filter(pl.col("statistic") == "p90")
    out = {}
    for cls, groups in PUBLISHED_GROUPS.items():
        rows = q.filter(pl.struct("source", "group").is_in([{"source": s, "group": g} for s, g in groups]))
        assert rows.height > 0, cls
        out[cls] = rows["seconds_high"].max()
    return out


def test_published_wait_bounds_sane():
    b = published_wait_bounds()
    assert b["1"] == 455_773 and b["2-8"] == 6_884
    assert b["9-64"] == b["65-256"] == b["257-1024"] == 7_374


@pytest.fixture(scope="module")
def waits(h) -> pl.DataFrame:
    """Each run that started: its GPU-count class and its wait, start - submit (sacct's Submit: a requeued
    run's is when its previous run ended), in seconds."""
    return h.runs.filter(pl.col("start").is_not_null(), pl.col("gpus") >= 1).with_columns(
        cls=SIZE_CLASS, wait=pl.col("start") - pl.col("submit"))


# MISSED for the largest class: its runs are the reservation owner's 12 hero runs of 320 GPUs (over four in
# nine of the H100 partition's nodes), median wait 5.9 h on this month (2026-12-01) against the published 2.0 h
# (AcmeTrace runs its pretraining on capacity reserved for it). Strict: it fails here once it holds.
HERO_MISS = pytest.mark.xfail(strict=True, reason="hero runs of 320 GPUs wait 5.9 h at the median (published: 2 h)")


@pytest.mark.parametrize("cls", [c if c != "257-1024" else pytest.param(c, marks=HERO_MISS) for c in PUBLISHED_GROUPS])
def test_median_wait_per_size_class_within_published_range(waits, cls):
    w = waits.filter(pl.col("cls") == cls)["wait"]
    assert w.len() > 0, f"no run of {cls} GPUs"
    assert 0 <= w.median() <= published_wait_bounds()[cls], (
        f"{cls} GPUs: median wait {w.median():.0f} s, published p90s up to {published_wait_bounds()[cls]:.0f} s")


def test_cluster_wait_within_published_range(waits):
    """The median and the mean wait of the GPU runs within the [min, max] of the published clusters' (the
    cluster summaries' med_que_time_gpu and avg_que_time_gpu: AcmeTrace's Seren, Kalos, Philly, Helios;
    Helios's Venus, Earth, Saturn, Uranus): median 0-189 s, mean 214-3,761 s."""
    acme = pl.read_csv(PUBLISHED / "acmetrace_cluster_summary.csv").filter(pl.col("med_que_time_gpu").is_not_null())
    hel = pl.read_csv(PUBLISHED / "helios_cluster_summary.csv").filter(pl.col("id") != "total")
    med = acme["med_que_time_gpu"].to_list() + hel["med_que_time_gpu"].to_list()
    avg = acme["avg_que_time_gpu"].to_list() + hel["avg_que_time_gpu"].to_list()
    assert (min(med), max(med), min(avg), max(avg)) == (0.0, 189.0, 214.179, 3760.604)
    assert min(med) <= waits["wait"].median() <= max(med)
    assert min(avg) <= waits["wait"].mean() <= max(avg), f"mean wait {waits['wait'].mean():.0f} s"
