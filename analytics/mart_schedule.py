"""Which engine handle evaluates which mart when a report's marts are evaluated over two handles at once
(analytics/marts.py: evaluate_ahead).

A mart evaluated inside each_mart_once becomes a temporary table, and a temporary table is its handle's
session's: a mart is evaluated where every mart it includes already is. So the marts to evaluate are split
into groups joined by their includes (the declarations' ``{{mart ...}}``, never a list kept by hand), each
group evaluated on one handle: a group that includes a table made earlier goes to that table's handle, the
others to whichever handle is free first, largest first. Each mart is evaluated once: a shared include keeps
its readers on its handle rather than being evaluated on both (measured: docs/benchmarks.md, issue 51,
round 6).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence


def groups(includes: Mapping[Hashable, Sequence[Hashable]],
           placed: Mapping[Hashable, int]) -> list[tuple[int | None, list[Hashable]]]:
    """The marts of ``includes`` (mart -> the marts it includes, each a key of ``includes`` or of ``placed``)
    in groups that share no include: [(the handle the group must run on, or None: any), its marts in the
    order of ``includes``], largest group first (ties: first met first). ``placed``: the marts already
    evaluated, with their handles. A group including tables of two handles runs on the lower-numbered one (the
    other's tables are inlined there: the same figures, evaluated again)."""
    parent = {k: k for k in includes}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for k, deps in includes.items():
        for d in deps:
            if d in parent:
                a, b = root(k), root(d)
                if a != b:
                    parent[b] = a
    members: dict[Hashable, list[Hashable]] = {}
    for k in includes:
        members.setdefault(root(k), []).append(k)
    out = []
    for keys in members.values():
        pins = [placed[d] for k in keys for d in includes[k] if d in placed]
        out.append((min(pins) if pins else None, keys))
    return sorted(out, key=lambda g: -len(g[1]))
