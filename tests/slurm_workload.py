"""The scripted workload the live-Slurm tests run: everything the reports must handle, in 60-90 s (the TIMEOUT
job is the long pole: Slurm's limits are whole minutes, enforced by slurmctld's check every 30 s).

Returns what was done, by name, so tests can find each job in the accounting."""

from __future__ import annotations

import time

from tests.slurm_harness import SlurmCluster, _wait


def _running(sc: SlurmCluster, job: int) -> bool:
    return sc.run(["squeue", "-h", "-j", str(job), "-o", "%T"]).strip() == "RUNNING"


def run_workload(sc: SlurmCluster) -> dict[str, int]:
    jobs: dict[str, int] = {}
    # the long pole first: killed at slurmctld's first time-limit check (every 30 s) after its minute, so any
    # second before its start is a second on the workload's end; on h200, away from the reservation below
    jobs["timeout"] = sc.sbatch("-p", "h200", "--gpus=1", "--time=1", "--wrap", "sleep 600", user="bob")
    # a reservation of node g2 for account proja, started before the job that uses it (Slurm records the
    # reservation on a job only if it began strictly earlier)
    sc.run(["scontrol", "create", "reservation", "ReservationName=resA", "StartTime=now", "Duration=10",
            "Nodes=g2", "Accounts=proja", "Flags=IGNORE_JOBS"])
    time.sleep(1.5)
    jobs["small"] = sc.sbatch("-p", "h100", "--gpus=1", "-x", "g2", "--wrap", "sleep 2", user="alice")
    jobs["h200x8"] = sc.sbatch("-p", "h200", "--gpus=8", "--wrap", "sleep 3", user="bob")
    jobs["multi"] = sc.sbatch("-p", "h200", "-N", "2", "--gpus-per-node=4", "--wrap", "sleep 4", user="alice")
    jobs["fail_exit3"] = sc.sbatch("-p", "h200", "--gpus=2", "--wrap", "sleep 1; exit 3", user="bob")
    jobs["fail_signal"] = sc.sbatch("-p", "h100", "--gpus=1", "-x", "g2", "--wrap", "kill -9 $$", user="alice")
    jobs["resv"] = sc.sbatch("-p", "h100", "--gpus=8", "--reservation=resA", "--wrap", "sleep 3", user="alice")
    jobs["array"] = sc.sbatch("-p", "h100", "--gpus=1", "-x", "g2", "--array=1-3", "--wrap", "sleep 2", user="alice")
    jobs["cancel_pending"] = sc.sbatch("-p", "h200", "--gpus=1", "--hold", "--wrap", "sleep 5", user="bob")
    jobs["cancel_running"] = sc.sbatch("-p", "h100", "--gpus=2", "-x", "g2", "--wrap", "sleep 600", user="alice")
    jobs["requeue"] = sc.sbatch("-p", "h200", "--gpus=4", "--wrap", "sleep 8", user="bob")
    _wait(lambda: _running(sc, jobs["cancel_running"]) and _running(sc, jobs["requeue"]), "jobs to start", 60, 0.5)
    time.sleep(2)
    sc.run(["scancel", str(jobs["cancel_running"])])
    sc.run(["scancel", str(jobs["cancel_pending"])])
    sc.run(["scontrol", "requeue", str(jobs["requeue"])])
    # a requeued job waits two minutes before it may start again: let it go as soon as its first run has
    # left the node (started while the node still cleans up, the second run fails at once)
    _wait(lambda: sc.run(["squeue", "-h", "-j", str(jobs["requeue"]), "-o", "%T"]).strip() == "PENDING",
          "the requeued job to be pending", 60, 0.5)
    time.sleep(3)
    sc.run(["scontrol", "update", f"JobId={jobs['requeue']}", "StartTime=now"], check=False)
    # an operator drains a node with a reason and resumes it. slurmctld writes the drain's node event only once
    # the node holds no job (a DRAINING node writes none; under load a short job may still be on g4), so the
    # node is resumed only once it is DRAINED, or the database would never hear of the drain
    sc.run(["scontrol", "update", "NodeName=g4", "State=DRAIN", "Reason=thermal: GPU over temp"])
    time.sleep(3)
    _wait(lambda: sc.run(["sinfo", "-h", "-n", "g4", "-o", "%T"]).strip().startswith("drained"),
          "g4 to be drained", 120, 0.25)
    sc.run(["scontrol", "update", "NodeName=g4", "State=RESUME"])
    sc.wait_jobs_done(timeout_s=240)
    return jobs
