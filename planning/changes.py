"""What-if changes (issue 18): the scenarios a planner asks for, parsed from the command line's forms and
checked before any replay runs (planning/scenarios.py replays them). Light on purpose: no numpy, no polars,
so that the CLI and the API import it at the top.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ops_warehouse.errors import OpsError

_SPEC = re.compile(r"^([A-Za-z0-9_.-]+):(\d+)$")


@dataclass(frozen=True)
class Change:
    """One scenario: ``add``/``remove`` nodes per GPU model, ``reservation`` nodes per project (0: none),
    ``scale_load`` the submitted jobs × (a copy of a job a few minutes later for each whole step above 1, a
    random share of jobs for the fraction; under 1, that share of jobs dropped)."""
    add: tuple[tuple[str, int], ...] = ()
    remove: tuple[tuple[str, int], ...] = ()
    reservation: tuple[tuple[str, int], ...] = ()
    scale_load: float = 1.0
    name: str = ""

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        parts = [f"+{n} {m}" for m, n in self.add] + [f"-{n} {m}" for m, n in self.remove]
        parts += [f"reservation {p}:{n}" for p, n in self.reservation]
        if self.scale_load != 1.0:
            parts.append(f"load x{self.scale_load:g}")
        return ", ".join(parts) or "unchanged"


# The most nodes one change may name: several times the largest GPU machines built so far (some 10,000 to
# 25,000 nodes), so no site's plan is refused, while a typo's 99999999999 is: the replay holds a row per node
# (a name, free GPUs, times); 100,000 added nodes took 0.5 GB and 4 CPU s on a small month, 10^8 ran out of
# memory (23 GB RSS for 10^11).
MAX_NODES = 100_000


def parse_change(add: list[str] | tuple = (), remove: list[str] | tuple = (), reservation: list[str] | tuple = (),
                 scale_load: float = 1.0, name: str = "") -> Change:
    """A Change from the command line's forms: ``h200:16`` (GPU model and nodes), ``A:0`` (project and nodes)."""
    def pairs(specs, what: str) -> tuple[tuple[str, int], ...]:
        out = []
        for s in specs:
            m = _SPEC.match(str(s).strip())
            if not m:
                raise OpsError(f"--{what} {s!r}: expected NAME:NODES, e.g. h200:16")
            digits = m.group(2).lstrip("0") or "0"  # long digit strings are refused before int() reads them
            if len(digits) > len(str(MAX_NODES)) or int(digits) > MAX_NODES:
                shown = repr(str(s)) if len(str(s)) <= 40 else repr(str(s)[:37]) + "..."
                raise OpsError(f"--{what} {shown}: too many nodes; expected NAME:NODES with 0 to {MAX_NODES:,} nodes")
            out.append((m.group(1), int(digits)))
        return tuple(out)

    if not 0 < scale_load <= 10:
        raise OpsError(f"--scale-load {scale_load:g}: expected a factor above 0 and at most 10")
    return Change(pairs(add, "add"), pairs(remove, "remove"), pairs(reservation, "reservation"), float(scale_load),
                  name)
