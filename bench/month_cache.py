"""Where bench_monthly's prepared month is kept: one folder per checkout.

The month takes 11-25 minutes to generate and load, so it is kept between runs; but a warehouse belongs to the
code that built its grains, and a second checkout (a worktree on another branch) running the same bench would
upgrade or rebuild the first one's month under it ("holds grains built by an earlier version"). The folder's
name therefore carries a digest of the checkout's path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def month_workdir(nodes: int = 32, days: int = 31) -> Path:
    """~/.cache/ops-warehouse/bench-monthly-n<nodes>-d<days>-<checkout>: this checkout's prepared month."""
    tree = hashlib.sha1(str(REPO).encode()).hexdigest()[:8]
    return Path.home() / ".cache" / "ops-warehouse" / f"bench-monthly-n{nodes}-d{days}-{tree}"
