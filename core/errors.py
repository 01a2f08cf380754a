"""The error types of the package: the one meant for the operator, and the stop a service manager asks for."""

import signal
import threading


class OpsError(Exception):
    """An error meant for the operator: printed as one line, no traceback."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (cron's `timeout`, `systemctl stop`, a batch system's kill) taken as SIGINT is: a
    KeyboardInterrupt, so every load undoes what it wrote and its run-log row says failed (etl/undo.py,
    etl/run_log.py), instead of the process dying mid-insert with half a load in place and no row."""

    signal_name = "SIGTERM"
    exit_code = 128 + signal.SIGTERM  # 143, as a shell reports a process SIGTERM ended


_received = threading.Event()  # set once SIGTERM has been taken: typer reports any KeyboardInterrupt as 130


def sigterm_received() -> bool:
    return _received.is_set()


def stop_on_sigterm():
    """From now on SIGTERM raises Terminated in the main thread; returns the handler it replaced. The first one
    only: a second while the load undoes itself is ignored, so the undo is not cut short (the service
    manager's SIGKILL still ends it). Outside the main thread (a test calling main() from one) it does nothing
    and returns None: only the main thread may set handlers, and only it receives signals."""
    if threading.current_thread() is not threading.main_thread():
        return None
    _received.clear()

    def _raise(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _received.set()
        raise Terminated()

    return signal.signal(signal.SIGTERM, _raise)
