"""dcgm-exporter's versions and deployments as the loader meets them (issue 31), on real scrapes
(tests/data/metrics/, sources in tests/data/README.md):

- NVIDIA's own MIG example (the GPU Telemetry docs, an A100 with GPU instance 13, 1g.5gb): the physical GPU's
  series and the instance's, and no DCGM_FI_DEV_GPU_UTIL at all (MIG has no device utilization);
- `hostname` (dcgm-exporter's spelling since its change #655) and `uuid` (--use-old-namespace) for
  `Hostname` and `UUID`;
- under Kubernetes, Prometheus' `node` label (the relabelling of dcgm-exporter issue #78) where `Hostname` is
  the exporter's pod.
Expected figures are the numbers printed on the raw lines."""

from __future__ import annotations

import re
from datetime import date, datetime, timezone

from ops_warehouse.analytics.marts import run_mart
from ops_warehouse.etl.openmetrics_source import load_text_files
from ops_warehouse.etl.sacct_load import load_sacct
from tests.conftest import DATA, rows

M = DATA / "metrics"
MIG = M / "dcgm-exporter" / "nvidia-docs-a100-mig.txt"
DCGM_T4 = M / "dcgm-exporter-scrape-t4.txt"
DCGM_K8S = M / "dcgm-exporter" / "datadog-label-remap.txt"
AT = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
DAY = date(2026, 10, 1)


def _value(path, metric: str, *, instance: bool) -> float:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(metric + "{") and ("GPU_I_ID=" in line) == instance:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(metric)


def test_a_mig_gpu_keeps_its_own_series_and_its_instance_has_a_row(wh):
    load_text_files(wh, [MIG], DAY, DAY, at=AT, cluster="c")
    gr, tensor, dram = (_value(MIG, f"DCGM_FI_PROF_{m}", instance=False)
                        for m in ("GR_ENGINE_ACTIVE", "PIPE_TENSOR_ACTIVE", "DRAM_ACTIVE"))
    assert (gr, tensor, dram) == (0.995630, 0.929260, 0.690789)
    got = rows(wh, "SELECT node, gpu, uuid, gr_engine_active, tensor_active, dram_active, gpu_util_pct, "
                   "util_source, fb_used_mib FROM gpu_sample FINAL")
    assert len(got) == 1
    node, gpu, uuid, g, t, d, util, source, fb = got[0]
    assert (node, gpu, uuid) == ("ub20-a100-k8s", 0, "GPU-34319582-d595-d1c7-d1d2-179bcfa61660")
    # the GPU's own values (before, the instance's lines, later in the file, replaced them: 0.995687, ...)
    assert (round(g, 6), round(t, 6), round(d, 6), fb) == (gr, tensor, dram, 4845)
    # no DCGM_FI_DEV_GPU_UTIL in the scrape: activity from GR_ENGINE_ACTIVE, and said so
    assert round(util, 4) == round(gr * 100, 4) and source == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    inst = rows(wh, "SELECT node, gpu, gpu_instance, profile, gr_engine_active, tensor_active, dram_active "
                    "FROM gpu_instance_sample FINAL")
    assert [(n, gp, i, p, round(a, 6), round(b, 6), round(c, 6)) for n, gp, i, p, a, b, c in inst] == [
        ("ub20-a100-k8s", 0, 13, "1g.5gb", 0.995687, 0.930433, 0.800339)]


def test_gpu_util_is_read_where_the_exporter_has_it(wh):
    # the T4 scrape has DCGM_FI_DEV_GPU_UTIL for host 424773df46e0 (0) and no GR_ENGINE_ACTIVE at all
    load_text_files(wh, [DCGM_T4], DAY, DAY, at=AT, cluster="c")
    assert rows(wh, "SELECT node, gpu_util_pct, util_source FROM gpu_sample FINAL ORDER BY node") == [
        ("424773df46e0", 0.0, "DCGM_FI_DEV_GPU_UTIL"), ("551bdf382151", None, ""), ("ip-11111", None, "")]


def _sacct(tmp_path, job_id: int, start: str, end: str):
    header = ("JobIDRaw|JobID|Cluster|Partition|QOS|Account|Group|User|Submit|Eligible|Start|End|ElapsedRaw|"
              "TimelimitRaw|ExitCode|State|NNodes|NCPUS|AllocTRES|NodeList|JobName")
    p = tmp_path / f"sacct-{job_id}.psv"
    p.write_text(f"{header}\n{job_id}|{job_id}|c|mig|normal|proja|grp|alice|{start}|{start}|{start}|{end}|3600|"
                 f"600|0:0|COMPLETED|1|8|billing=8,cpu=8,gres/gpu:1g.5gb=1,gres/gpu=1,mem=16G,node=1|ub20-a100-k8s|"
                 f"infer\n", encoding="utf-8")
    return p


def test_a_mig_instance_is_attributed_to_the_job_its_mapping_names(wh, tmp_path):
    """dcgm-exporter's HPC job mapping (--hpc-job-mapping-dir, a file named 0.13 holding the job id) labels the
    instance's series hpc_job="4711" (internal/pkg/transformation/hpc.go: the key <gpu>.<instance>); the GPU's
    own series carry no job. Two scrapes of NVIDIA's example a minute apart, labelled so, and Slurm job 4711
    holding that slice from 11:30 to 12:30: the job's row is the instance's two samples."""
    text = MIG.read_text(encoding="utf-8")
    labelled = re.sub(r'(GPU_I_ID="13")', r'\1,hpc_job="4711"', text)
    files = []
    for k, t in enumerate((AT, AT.replace(minute=1))):
        p = tmp_path / f"s{k}.txt"
        ms = int(t.timestamp() * 1000)
        p.write_text("".join(f"{ln} {ms}\n" for ln in labelled.splitlines() if ln.strip()), encoding="utf-8")
        files.append(p)
    load_text_files(wh, files, DAY, DAY, cluster="c")
    load_sacct(wh, _sacct(tmp_path, 4711, "2026-10-01T11:30:00", "2026-10-01T12:30:00"), cluster="c")
    got = run_mart(wh, "mig_jobs", cluster="c", window=(datetime(2026, 10, 1, tzinfo=timezone.utc),
                                                          datetime(2026, 10, 2, tzinfo=timezone.utc))).to_dicts()
    gr = _value(MIG, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", instance=True)
    assert [(r["job_id"], r["node"], r["gpu"], r["gpu_instance"], r["profile"], r["samples"],
             round(r["gr_engine_active_mean"], 6), r["project"]) for r in got] == [
        ("4711", "ub20-a100-k8s", 0, 13, "1g.5gb", 2, gr, "proja")]


def test_hostname_and_uuid_spellings_and_the_kubernetes_node_label(wh, tmp_path):
    # dcgm-exporter after #655 prints hostname=, with --use-old-namespace uuid=: the same GPU as before
    t4 = DCGM_T4.read_text(encoding="utf-8")
    lower = tmp_path / "lower.txt"
    lower.write_text(t4.replace('Hostname="', 'hostname="').replace('UUID="', 'uuid="'), encoding="utf-8")
    load_text_files(wh, [lower], DAY, DAY, at=AT, cluster="a")
    assert rows(wh, "SELECT node, uuid FROM gpu_sample FINAL WHERE cluster = 'a' ORDER BY node")[0] == (
        "424773df46e0", "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e")
    # the Kubernetes form: Hostname is the exporter's container; Prometheus relabelled
    # __meta_kubernetes_pod_node_name into node="gpu-node-07" (dcgm-exporter issue #78's scrape config)
    k8s = tmp_path / "k8s.txt"
    k8s.write_text(DCGM_K8S.read_text(encoding="utf-8").replace('container="baz"', 'container="baz",node="gpu-node-07"'),
                   encoding="utf-8")
    load_text_files(wh, [k8s], DAY, DAY, at=AT, cluster="k")
    assert rows(wh, "SELECT node, gpu, gpu_util_pct FROM gpu_sample FINAL WHERE cluster = 'k'") == [
        ("gpu-node-07", 0, 0.0)]
