"""The simulation's run records made into frames (generate/schedule.py `_chunk`), on three hand-made records:
every expected value below is read off the records and the drawn jobs by hand, not from the function.

- run 0: drawn job 0, a task of an array (array 1,000,001, task 2; job id 1,000,003), 8 GPUs for 120 minutes,
  user 5 of account 2 (projc), placed on node n1 GPUs 0-1 and node n0 GPU 3 (3 allocation rows), no id of its own
  ("raw" absent: the drawn job's), no campaign given (its own id);
- run 1: drawn job 1, a resubmission (job id 1,000,010 of campaign 1,000,004), no time limit, hung from 500 s;
- run 2: drawn job 1 again, never started (pending: no start, end or nodes).
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from ops_warehouse.generate.model import ClusterSpec
from ops_warehouse.generate.schedule import _chunk


def _inputs():
    J = {"user_idx": np.array([5, 0]), "account_idx": np.array([2, 0]), "unlimited": np.array([False, True]),
         "name": np.array(["train", "nb"]), "qos": np.array(["high", "low"]), "gpus": np.array([3, 1]),
         "timelimit_min": np.array([120, 0]), "ckpt_period_s": np.array([600, 0]),
         "campaign": np.array([False, True]), "util": np.array([90.0, 5.0]), "sm_active": np.array([0.5, 0.1]),
         "tensor_active": np.array([0.25, 0.0]), "dram_active": np.array([0.4, 0.1]),
         "fb_used_frac": np.array([0.7, 0.1]), "cpu_eff": np.array([0.3, 0.9]), "mem_eff": np.array([0.5, 0.2]),
         "plant": np.array(["", "cpu_bound"], dtype=object), "idle_gpu_rank": np.array([-1, -1]),
         "idle_gpu_util": np.array([2.4, 1.0])}
    raw_id, array_of, task_of = np.array([1_000_003, 1_000_004]), np.array([1_000_001, -1]), np.array([2, 0])
    out = [
        {"i": 0, "run": 0, "submit": 100, "partition": "h100", "start": 200, "end": 7400, "state": "COMPLETED",
         "exit": "0:0", "nodes": ["n0", "n1"], "hang_from": None, "reservation": "", "lost_s": 0, "startup_s": 0,
         "busy_from": 200},
        {"i": 1, "run": 1, "submit": 300, "partition": "h200", "start": 400, "end": 2400, "state": "FAILED",
         "exit": "1:0", "nodes": ["n1"], "hang_from": 900, "reservation": "resv", "raw": 1_000_010,
         "campaign": 1_000_004, "lost_s": 1500, "startup_s": 180, "busy_from": 580},
        {"i": 1, "run": 2, "submit": 2500, "partition": "h200", "start": None, "end": None, "state": "PENDING",
         "exit": "0:0", "nodes": [], "hang_from": None, "reservation": "", "raw": 1_000_011, "campaign": 1_000_004,
         "lost_s": 0, "startup_s": 0},
    ]
    alloc_rows = [(10, np.array([1, 0]), [np.array([0, 1]), np.array([3])])]
    return J, raw_id, array_of, task_of, out, alloc_rows, np.array([1.0, 0.5])


def test_run_records_become_the_runs_frame():
    J, raw_id, array_of, task_of, out, alloc_rows, slow = _inputs()
    runs, _ = _chunk(ClusterSpec(), ["n0", "n1"], J, raw_id, array_of, task_of, out, alloc_rows, slow, 10)
    assert runs["run_idx"].to_list() == [10, 11, 12]
    assert runs["job_id_raw"].to_list() == [1_000_003, 1_000_010, 1_000_011]
    assert runs["job_id"].to_list() == ["1000001_2", "1000010", "1000011"]
    assert runs["array_job_id"].to_list() == [1_000_001, 0, 0]
    assert runs["user"].to_list() == ["user006", "user001", "user001"]
    assert runs["uid"].to_list() == [10006, 10001, 10001] and runs["gid"].to_list() == [20003, 20001, 20001]
    assert runs["account"].to_list() == ["projc", "proja", "proja"]
    assert runs["name"].to_list() == ["train", "nb", "nb"] and runs["qos"].to_list() == ["high", "low", "low"]
    assert runs["timelimit_min"].to_list() == [120, None, None]
    assert runs["start"].to_list() == [200, 400, None] and runs["end"].to_list() == [7400, 2400, None]
    assert runs["nodes"].to_list() == [["n0", "n1"], ["n1"], []]
    assert runs["hang_from"].to_list() == [None, 900, None] and runs["busy_from"].to_list() == [200, 580, None]
    assert runs["campaign"].to_list() == [1_000_003, 1_000_004, 1_000_004]
    assert runs["planted_campaign"].to_list() == [False, True, True]
    assert runs["lost_s"].to_list() == [0, 1500, 0] and runs["startup_s"].to_list() == [0, 180, 0]
    assert runs["gpus"].to_list() == [3, 1, 1] and runs["ckpt_period_s"].to_list() == [600, 0, 0]
    assert runs["cpu_eff"].to_list() == [0.3, 0.9, 0.9] and runs["mem_eff"].to_list() == [0.5, 0.2, 0.2]
    assert runs["plant"].to_list() == ["", "cpu_bound", "cpu_bound"]  # a job's every run
    assert runs["run"].dtype == runs["gpus"].dtype  # Int32 both, as sacct_writer reads them
    assert str(runs["run"].dtype) == "Int32"


def test_allocation_rows_one_per_gpu():
    J, raw_id, array_of, task_of, out, alloc_rows, slow = _inputs()
    _, alloc = _chunk(ClusterSpec(), ["n0", "n1"], J, raw_id, array_of, task_of, out, alloc_rows, slow, 10)
    assert alloc.select("job_id", "node", "gpu").rows() == [("1000001_2", "n1", 0), ("1000001_2", "n1", 1),
                                                           ("1000001_2", "n0", 3)]
    assert alloc["slowdown"].to_list() == [0.5, 0.5, 1.0]
    utc = timezone.utc
    assert set(alloc["start_ts"]) == {datetime(1970, 1, 1, 0, 3, 20, tzinfo=utc)}
    assert set(alloc["end_ts"]) == {datetime(1970, 1, 1, 2, 3, 20, tzinfo=utc)}
    # power from the profile: 0.35 + 0.65 x (0.6 x 0.5 + 0.4 x 0.25) = 0.61; 3 GPUs x 12 GB a checkpoint
    assert alloc["power_frac"].to_list() == [pytest.approx(0.61)] * 3
    assert alloc["ckpt_bytes"].to_list() == [36e9] * 3
    assert alloc["gpu_util"].to_list() == [90.0] * 3



def test_the_idle_gpu_of_an_idle_gpu_of_n_run():
    """Job 0 planted idle_gpu_of_n with rank 1: its GPUs in (node, gpu) order are (n0, 3), (n1, 0), (n1, 1), so
    (n1, 0) holds the planted 2.4 % util, 2.4 / 300 = 0.008 SM, DRAM and memory, no tensor work, power
    0.35 + 0.65 x 0.6 x 0.008 = 0.35312; the other two as drawn (90 %, power 0.61, memory 0.7)."""
    J, raw_id, array_of, task_of, out, alloc_rows, slow = _inputs()
    J["plant"][0], J["idle_gpu_rank"][0] = "idle_gpu_of_n", 1
    _, alloc = _chunk(ClusterSpec(), ["n0", "n1"], J, raw_id, array_of, task_of, out, alloc_rows, slow, 10)
    assert alloc.select("node", "gpu").rows() == [("n1", 0), ("n1", 1), ("n0", 3)]  # row order kept
    assert alloc["gpu_util"].to_list() == [2.4, 90.0, 90.0]
    assert alloc["sm_active"].to_list() == [pytest.approx(0.008), 0.5, 0.5]
    assert alloc["tensor_active"].to_list() == [0.0, 0.25, 0.25]
    assert alloc["dram_active"].to_list() == [pytest.approx(0.008), 0.4, 0.4]
    assert alloc["fb_used_frac"].to_list() == [pytest.approx(0.008), 0.7, 0.7]
    assert alloc["power_frac"].to_list() == [pytest.approx(0.35312), pytest.approx(0.61), pytest.approx(0.61)]
