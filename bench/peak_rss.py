"""A measured child's own peak memory, for every bench."""

from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    """This process's own peak resident set (MB): VmHWM of /proc/self/status. ru_maxrss would not do: a child
    started from the parent (fork, then exec) starts out with the parent's peak, e.g. that of generating the
    input, and would report it as its own."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
