"""A real Prometheus on loopback for the tests: backfilled with promtool from OpenMetrics files, started
and stopped by PID (facts found by starting it on a machine of this kind: backfill before starting, keep a long
retention, one promtool run per 2-hour file)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def available() -> bool:
    return bool(shutil.which("prometheus") and shutil.which("promtool"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backfill(om_files: list[Path], data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)

    def one(f: Path) -> None:
        p = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(f), str(data_dir)],
                           capture_output=True, text=True, timeout=600)
        if p.returncode:
            raise RuntimeError(f"promtool failed on {f}: {p.stderr[-500:]}")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, om_files))


class _Server:
    """A server process on a loopback port, started and stopped by PID."""

    def __init__(self, data_dir: Path, port: int | None = None):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, argv: list[str], log: str, ready_path: str, timeout_s: float):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(self.data_dir.parent / log, "ab"))
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + ready_path, timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{argv[0]} did not become ready")

    def kill(self) -> None:
        """SIGKILL: the server disappears at once, mid-answer (restart with start())."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(20)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the port stays open and the kernel still accepts connections, nothing answers."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused one would not see SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


class Prometheus(_Server):
    def __init__(self, data_dir: Path, port: int | None = None):
        super().__init__(data_dir, port)
        self.config = data_dir.parent / "prometheus.yml"
        self.config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")

    def start(self, timeout_s: float = 60, extra_args: tuple[str, ...] = ()) -> "Prometheus":
        """``extra_args``: more flags, e.g. ``("--query.timeout=1ms",)`` (every range query answers 503)."""
        return self._run(["prometheus", f"--config.file={self.config}", f"--storage.tsdb.path={self.data_dir}",
                          "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{self.port}",
                          *extra_args], "prometheus.log", "/-/ready", timeout_s)


def vm_available() -> bool:
    return bool(shutil.which("victoria-metrics"))


class VictoriaMetrics(_Server):
    """Debian's victoria-metrics single-node server on loopback."""

    def start(self, timeout_s: float = 60) -> "VictoriaMetrics":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self._run(["victoria-metrics", f"-storageDataPath={self.data_dir}",
                          f"-httpListenAddr=127.0.0.1:{self.port}", "-retentionPeriod=100y",
                          "-search.latencyOffset=0s"], "vm.log", "/health", timeout_s)

    def import_openmetrics(self, om_files: list[Path]) -> None:
        """Load promtool-style OpenMetrics files (timestamps in seconds) through /api/v1/import/prometheus."""
        import polars as pl

        for f in om_files:
            lines = pl.DataFrame({"l": f.read_text().splitlines()}).filter(
                ~pl.col("l").str.starts_with("#") & (pl.col("l") != ""))
            text = lines.select(pl.col("l").str.replace(r" (\d+)$", " ${1}000")).to_series().str.join("\n").item()
            req = urllib.request.Request(self.url + "/api/v1/import/prometheus", data=text.encode(), method="POST")
            with urllib.request.urlopen(req, timeout=120) as r:
                assert r.status in (200, 204)
        urllib.request.urlopen(self.url + "/internal/force_flush", timeout=30).read()
