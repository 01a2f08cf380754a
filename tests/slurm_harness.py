"""A real Slurm 22.05 cluster on loopback for the tests: munged, MariaDB, slurmdbd, slurmctld and four slurmd
(two with 8 fake H100s, two with 8 fake H200s), all from Debian's packages, configured in one temporary
folder, started in seconds and stopped by PID (facts found by starting each daemon on a machine of this kind).

    with SlurmCluster(tmp_path) as sc:
        sc.run(["sbatch", ...]); sc.wait_jobs_done(); sc.run(["sacct", ...])

The tests share one cluster per test run (tests/conftest.py: ``slurm``); a test module calls
``sc.forget_jobs()`` before its workload, so it sees only its own jobs, events and reservations.

Needs root (daemons run as munge / mysql, jobs as the test users alice and bob, created when missing).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

CLUSTER = "lt1"
NODES = {"g1": "h100", "g2": "h100", "g3": "h200", "g4": "h200"}
ALL_PARTITION = "all"  # a partition every node is in beside its model's (Partitions=h100,all)
USERS = {"alice": "proja", "bob": "projb"}
READ_ONLY_USER, READ_ONLY_PASSWORD = "ops_ro", "ro-secret-42"
SLURMDBD_DB_USER, SLURMDBD_DB_PASSWORD = "slurm", "dbd-secret-17"
PACKAGES = ("slurm-wlm", "slurmdbd", "slurm-client", "munge", "mariadb-server")


def available() -> bool:
    return all(shutil.which(x) for x in ("slurmctld", "slurmd", "slurmdbd", "sacctmgr", "sreport", "munged",
                                         "mariadbd", "mysql_install_db")) and os.geteuid() == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(check, what: str, timeout_s: float = 30, every_s: float = 0.1):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        v = check()
        if v:
            return v
        time.sleep(every_s)
    raise RuntimeError(f"timed out waiting for {what}")


def _alive(pid: int) -> bool:
    """Running (a zombie, exited but not yet reaped by its parent, is not)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class SlurmCluster:
    def __init__(self, base: Path):
        self.base = Path(base)
        self.mysql_port, self.dbd_port, self.ctld_port = free_port(), free_port(), free_port()
        self.node_ports = {n: free_port() for n in NODES}
        self.pids: list[tuple[str, Path]] = []
        self.env = {**os.environ, "SLURM_CONF": str(self.base / "etc" / "slurm.conf"), "TZ": "UTC"}
        self.submitted: set[int] = set()
        self.mariadb_proc: subprocess.Popen | None = None

    # --- set-up -------------------------------------------------------------------------------------------
    def __enter__(self) -> "SlurmCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        b = self.base
        for d in ("etc", "state", "spool", "log", "dev", "run", "mysql"):
            (b / d).mkdir(parents=True, exist_ok=True)
        os.chmod(b, 0o755)
        for user in USERS:
            try:
                pwd.getpwnam(user)
            except KeyError:
                subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", user], check=True)
        for i in range(8):
            dev = b / "dev" / f"nvidia{i}"
            if not dev.exists():
                subprocess.run(["mknod", str(dev), "c", "1", "3"], check=True)
        self._munge()
        self._mariadb()
        self._write_conf()
        self._daemon("slurmdbd", ["slurmdbd"], b / "run" / "slurmdbd.pid")
        _wait(lambda: _port_open(self.dbd_port), "slurmdbd")
        # the cluster, its accounts and users in one `sacctmgr load` (sacctmgr dump's format): each sacctmgr
        # command costs 0.6-1.4 s of slurmdbd's commit, six of them were 4.7 s of the cluster's 10 s start
        assoc = b / "etc" / "associations.cfg"
        assoc.write_text(f"Cluster - '{CLUSTER}'\nParent - 'root'\n"
                         + "".join(f"Account - '{a}':Description='{a}':Organization='{a}'\n" for a in USERS.values())
                         + "".join(f"Parent - '{a}'\n" + "".join(f"User - '{u}':DefaultAccount='{a}'\n"
                                                                  for u, ua in USERS.items() if ua == a)
                                   + ("User - 'root'\n" if a == "proja" else "") for a in USERS.values()))
        self.run(["sacctmgr", "-i", "load", f"file={assoc}"])
        self._daemon("slurmctld", ["slurmctld"], b / "run" / "slurmctld.pid")
        _wait(lambda: _port_open(self.ctld_port), "slurmctld")
        for n in NODES:
            self._daemon(f"slurmd {n}", ["slurmd", "-N", n], b / "run" / f"slurmd-{n}.pid")
        _wait(lambda: all(s.startswith("idle") for s in self.node_states().values()) and len(self.node_states()) == 4,
              "4 idle nodes", timeout_s=40, every_s=0.3)

    def _munge(self) -> None:
        # Slurm's client commands talk to munged at its default socket whatever AuthInfo says: run it there
        d = Path("/run/munge")
        d.mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "munge", "munge")
        os.chmod(d, 0o755)
        self.munge_socket = d / "munge.socket.2"
        if self.munge_socket.exists() and subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            return  # one is running already (another test's cluster): share it, leave it running
        subprocess.run(["runuser", "-u", "munge", "--", "munged", "--force"],
                       check=True, capture_output=True)
        self.pids.append(("munged", d / "munged.pid"))
        _wait(lambda: subprocess.run(["munge", "-n"], capture_output=True).returncode == 0, "munged")

    def _mariadb(self) -> None:
        data = self.base / "mysql"
        shutil.chown(data, "mysql", "mysql")
        run_dir = self.base / "run"
        os.chmod(run_dir, 0o777)
        subprocess.run(["mysql_install_db", "--user=mysql", f"--datadir={data}", "--skip-test-db",
                        "--auth-root-authentication-method=normal"], check=True, capture_output=True)
        self.mysql_socket = run_dir / "mysqld.sock"
        self.start_mariadb()
        self.pids.append(("mariadbd", run_dir / "mysqld.pid"))
        self.sql(f"CREATE USER '{SLURMDBD_DB_USER}'@'127.0.0.1' IDENTIFIED BY '{SLURMDBD_DB_PASSWORD}';"
                 f"CREATE USER '{SLURMDBD_DB_USER}'@'localhost' IDENTIFIED BY '{SLURMDBD_DB_PASSWORD}';"
                 f"GRANT ALL ON slurm_acct_db.* TO '{SLURMDBD_DB_USER}'@'127.0.0.1';"
                 f"GRANT ALL ON slurm_acct_db.* TO '{SLURMDBD_DB_USER}'@'localhost';"
                 # what the warehouse reads with: SELECT only
                 f"CREATE USER '{READ_ONLY_USER}'@'%' IDENTIFIED BY '{READ_ONLY_PASSWORD}';"
                 f"GRANT SELECT ON slurm_acct_db.* TO '{READ_ONLY_USER}'@'%';")

    def start_mariadb(self) -> None:
        """Start the database server (again, after stop_mariadb: same data, port and socket)."""
        data, run_dir = self.base / "mysql", self.base / "run"
        log = open(self.base / "log" / "mariadb.log", "ab")
        self.mariadb_proc = subprocess.Popen(
            ["mariadbd", "--user=mysql", f"--datadir={data}", f"--socket={self.mysql_socket}",
             f"--port={self.mysql_port}", "--bind-address=127.0.0.1", f"--pid-file={run_dir / 'mysqld.pid'}",
             "--skip-name-resolve", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M",
             "--innodb-flush-log-at-trx-commit=0"], stdout=log, stderr=log)
        log.close()
        _wait(lambda: (run_dir / "mysqld.pid").exists() and _port_open(self.mysql_port), "mariadbd")

    def stop_mariadb(self) -> None:
        """Stop the database server (SIGTERM, a clean shutdown) and wait until its port is closed: a fault
        for the slurmdbd source, and for slurmdbd itself."""
        p = self.mariadb_proc
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
        _wait(lambda: not _port_open(self.mysql_port), "mariadbd's port to close", 10)

    def stop_slurmdbd(self) -> None:
        """Stop slurmdbd (sacct then fails: "Problem talking to the database"); slurmctld keeps its records
        for it until it is back."""
        pid_file = self.base / "run" / "slurmdbd.pid"
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 15)
        _wait(lambda: not _alive(pid), "slurmdbd to stop", 20)
        pid_file.unlink(missing_ok=True)
        _wait(lambda: not _port_open(self.dbd_port), "slurmdbd's port to close", 10)

    def start_slurmdbd(self) -> None:
        pid_file = self.base / "run" / "slurmdbd.pid"
        p = subprocess.run(["slurmdbd"], env=self.env, capture_output=True, text=True, timeout=60)
        if p.returncode:
            raise RuntimeError(f"slurmdbd did not start: {p.stderr.strip()[-500:]}")
        _wait(pid_file.exists, "slurmdbd pid file")
        _wait(lambda: _port_open(self.dbd_port), "slurmdbd")

    def sql(self, statements: str) -> str:
        """Run SQL as the database's root over its socket (tests: back-dating jobs, inspecting). A deadlock
        with slurmdbd, which writes the same tables (node events as the nodes resume), is retried as MariaDB
        asks ("try restarting transaction"): the harness's statements are deletes and updates that give the
        same tables when run again (seen in CI: forget_jobs' DELETE of the event table, ERROR 1213)."""
        for attempt in range(6):
            p = subprocess.run(["mariadb", f"--socket={self.mysql_socket}", "-uroot", "--batch",
                                "--skip-column-names", "-e", statements], capture_output=True, text=True, timeout=60)
            if not (p.returncode and "ERROR 1213" in p.stderr) or attempt == 5:
                break
            time.sleep(0.5 * (attempt + 1))
        if p.returncode:
            raise RuntimeError(f"mariadb: {p.stderr.strip()}")
        return p.stdout

    def _write_conf(self) -> None:
        b = self.base
        auth = "AuthType=auth/munge\n"
        dbd = b / "etc" / "slurmdbd.conf"
        dbd.write_text(
            f"{auth}DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort={self.dbd_port}\nSlurmUser=root\n"
            f"PidFile={b / 'run' / 'slurmdbd.pid'}\nLogFile={b / 'log' / 'slurmdbd.log'}\n"
            "StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\n"
            f"StoragePort={self.mysql_port}\nStorageUser={SLURMDBD_DB_USER}\nStoragePass={SLURMDBD_DB_PASSWORD}\n"
            "StorageLoc=slurm_acct_db\n")
        os.chmod(dbd, 0o600)
        models = sorted(set(NODES.values()))
        lines = [
            f"ClusterName={CLUSTER}", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root", "SlurmdUser=root", auth.strip(), "CryptoType=crypto/munge",
            f"StateSaveLocation={b / 'state'}", f"SlurmdSpoolDir={b / 'spool'}/%n",
            f"SlurmctldPidFile={b / 'run' / 'slurmctld.pid'}", f"SlurmdPidFile={b / 'run'}/slurmd-%n.pid",
            f"SlurmctldLogFile={b / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={b / 'log'}/slurmd-%n.log",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={self.dbd_port}",
            "AccountingStorageTRES=gres/gpu," + ",".join(f"gres/gpu:{m}" for m in models),
            "AccountingStorageEnforce=associations", "JobAcctGatherType=jobacct_gather/none",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "SchedulerParameters=sched_interval=1,bf_interval=1",
            "MailProg=/bin/true", "SlurmdParameters=config_overrides", "GresTypes=gpu", "ReturnToService=2",
            "MinJobAge=60", "KillWait=2", "InactiveLimit=0", "OverTimeLimit=0", "JobRequeue=1",
            "SlurmctldTimeout=30", "SlurmdTimeout=60", "PriorityType=priority/basic",
        ]
        for n, model in NODES.items():
            lines.append(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={self.node_ports[n]} "
                         f"CPUs=32 RealMemory=128000 Gres=gpu:{model}:8 State=UNKNOWN")
        for model in models:
            nodes = ",".join(n for n, m in NODES.items() if m == model)
            lines.append(f"PartitionName={model} Nodes={nodes} Default={'YES' if model == models[0] else 'NO'} "
                         "MaxTime=INFINITE State=UP")
        # every node in a second partition too, as sites have them (a node prints Partitions=h100,all): the
        # tests' jobs name their partition, so nothing runs there
        lines.append(f"PartitionName={ALL_PARTITION} Nodes={','.join(NODES)} Default=NO MaxTime=INFINITE State=UP")
        (b / "etc" / "slurm.conf").write_text("\n".join(lines) + "\n")
        (b / "etc" / "gres.conf").write_text("AutoDetect=off\n" + "".join(
            f"NodeName={n} Name=gpu Type={m} File={b / 'dev'}/nvidia[0-7]\n" for n, m in NODES.items()))

    def _daemon(self, name: str, argv: list[str], pid_file: Path) -> None:
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if p.returncode:
            raise RuntimeError(f"{name} did not start: {p.stderr.strip()[-500:]}")
        self.pids.append((name, pid_file))
        _wait(pid_file.exists, f"{name} pid file")

    # --- use ------------------------------------------------------------------------------------------------
    def run(self, argv: list[str], check: bool = True, **kw) -> str:
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=120, **kw)
        if check and p.returncode:
            raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip() or p.stdout.strip()}")
        return p.stdout

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
        return dict(line.split() for line in out.splitlines() if line.strip())

    def sbatch(self, *args: str, user: str = "alice") -> int:
        out = self.run(["sbatch", "--parsable", f"--uid={user}", f"--gid={user}", "--chdir=/tmp",
                        "--output=/dev/null", *args])
        job = int(out.strip().split(";")[0])
        self.submitted.add(job)
        return job

    def wait_jobs_done(self, timeout_s: float = 240) -> None:
        """Until slurmctld has no job left and the accounting database has every job ended."""
        left = lambda: self.run(["squeue", "-h", "-o", "%i %T %r"]).strip()  # noqa: E731
        try:
            # polled every 0.25 s (squeue: ~3 ms of CPU a call): a one-second poll left the jobs' ends waiting
            _wait(lambda: not left(), "the queue to drain", timeout_s, 0.25)
        except RuntimeError:
            raise RuntimeError(f"jobs still queued after {timeout_s} s: {left()}") from None
        # sacct -s selects jobs that were in a state at any time in the window: read the current states instead
        def settled() -> bool:
            # steps too (no -X): a step's end reaches the database after its job's, through the same agent
            out = self.run(["sacct", "-a", "-n", "-P", "--duplicates", "-S", "2020-01-01", "-E", "now",
                            "-o", "JobIDRaw,JobID,State"])
            rows = [line.split("|") for line in out.splitlines() if line.strip()]
            rows = [[r[0].split(".")[0], r[1].split(".")[0], r[2]] for r in rows]
            seen = {int(r[0]) for r in rows} | {int(r[1].split("_")[0]) for r in rows if r[1].split("_")[0].isdigit()}
            for job in self.submitted - seen:  # a job held and cancelled was never eligible: sacct -j finds it
                rows += [line.split("|") for line in self.run(["sacct", "-X", "-n", "-P", "-j", str(job), "-o",
                                                               "JobIDRaw,JobID,State"]).splitlines() if line.strip()]
                seen |= {int(r[0]) for r in rows}
            return self.submitted <= seen and not any(
                r[2].split()[0] in ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING") for r in rows)
        try:
            _wait(settled, "accounting to catch up", 60, 0.25)
        except RuntimeError:
            raise RuntimeError("accounting has not caught up after 60 s: submitted "
                               f"{sorted(self.submitted)}; sacct says\n" + self.run(
                                   ["sacct", "-X", "-a", "-n", "-P", "--duplicates", "-S", "2020-01-01", "-E",
                                    "now", "-o", "JobIDRaw,JobID,State"])) from None
        # a step's exit code can still change after its state is final (slurmstepd reports late): wait until
        # two readings of every record, 2 s apart, are the same
        def snapshot() -> str:
            return self.run(["sacct", "-a", "-n", "-P", "--duplicates", "-S", "2020-01-01", "-E", "now", "-o",
                             "JobIDRaw,State,ExitCode,Start,End,AllocTRES,NodeList"])

        prev = snapshot()
        for _ in range(30):
            time.sleep(2)
            cur = snapshot()
            if cur == prev:
                break
            prev = cur

    def forget_jobs(self) -> None:
        """Back to a cluster that has run nothing: every job cancelled, every reservation deleted, nodes
        resumed, and the accounting database emptied of jobs, steps, node events, reservations and usage
        rollups (the cluster's registration kept: backdate() counts from it; the hours already rolled up stay
        so). A test module that shares the run's cluster calls this first, so what it reads is its own
        workload alone."""
        jobs = self.run(["squeue", "-h", "-o", "%i"]).split()
        if jobs:
            self.run(["scancel", *jobs], check=False)
        _wait(lambda: not self.run(["squeue", "-h", "-o", "%i"]).strip(), "the queue to empty", 60, 0.5)
        for line in self.run(["scontrol", "-o", "show", "reservation"], check=False).splitlines():
            if line.startswith("ReservationName="):
                self.run(["scontrol", "delete", line.split()[0]])
        for node, state in self.node_states().items():
            if not state.startswith("idle"):
                self.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
        db = "slurm_acct_db"
        tables = self.sql(f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{db}' AND "
                          f"(table_name LIKE '{CLUSTER}\\_%usage%' OR table_name IN ('{CLUSTER}_job_table', "
                          f"'{CLUSTER}_step_table', '{CLUSTER}_resv_table'))").split()
        self.sql("".join(f"DELETE FROM {db}.{t};" for t in tables)
                 + f"DELETE FROM {db}.{CLUSTER}_event_table WHERE node_name != '';")
        self.submitted.clear()
        _wait(lambda: all(s.startswith("idle") for s in self.node_states().values()), "4 idle nodes", 40, 0.3)

    def backdate(self, hour_start: int, lead_s: int = 60) -> int:
        """Move every job, step, node event and reservation in the accounting database so that the cluster's
        first event falls ``lead_s`` after ``hour_start`` (epoch seconds), and make slurmdbd roll up its
        usage again (sreport reads the rollups). Returns the shift in seconds. This is how a test lines a
        workload up with historical telemetry, or with a whole past hour for sreport."""
        db = "slurm_acct_db"
        t0 = int(self.sql(f"SELECT min(time_start) FROM {db}.{CLUSTER}_event_table").strip())
        shift = t0 - (hour_start + lead_s)
        stmts = []
        for table, cols in (("job_table", ("time_submit", "time_eligible", "time_start", "time_end")),
                            ("step_table", ("time_start", "time_end")), ("event_table", ("time_start", "time_end")),
                            ("resv_table", ("time_start", "time_end"))):
            stmts += [f"UPDATE {db}.{CLUSTER}_{table} SET {c} = {c} - {shift} WHERE {c} != 0;" for c in cols]
        # forget what was rolled up: on start slurmdbd rolls up from the earliest record to the last whole hour
        stmts.append(f"DELETE FROM {db}.{CLUSTER}_last_ran_table;")
        self.sql("".join(stmts))
        pid_file = self.base / "run" / "slurmdbd.pid"
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 15)
        _wait(lambda: not _alive(pid), "slurmdbd to stop", 20)
        pid_file.unlink(missing_ok=True)
        self._daemon("slurmdbd", ["slurmdbd"], pid_file)
        _wait(lambda: _port_open(self.dbd_port), "slurmdbd")
        # the first rolled-up hour starts at the cluster's first event, not at the top of the hour
        _wait(lambda: self.sql(f"SELECT count(*) FROM {db}.{CLUSTER}_usage_hour_table WHERE time_start >= "
                               f"{hour_start} AND time_start < {hour_start + 3600}").strip() not in ("", "0"),
              "the usage rollup", 60, 0.5)
        return shift

    def stop(self) -> None:
        for name, pid_file in reversed(self.pids):
            try:
                pid = int(pid_file.read_text().split()[0])
                os.kill(pid, 15)
            except (OSError, ValueError):
                continue
            deadline = time.time() + 10
            while time.time() < deadline:
                if not _alive(pid):  # gone, or a zombie its parent (init, for the daemons) has not reaped yet
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
        self.pids.clear()
        if self.mariadb_proc is not None:  # our child: reap it
            try:
                self.mariadb_proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
