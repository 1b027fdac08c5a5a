"""What consumer group tests check about an assignment."""

from __future__ import annotations

from collections.abc import Iterable


def split_evenly(assignments: Iterable[set[int]], partitions: int = 4) -> bool:
    """Every partition assigned once, to members whose shares differ by at most one, none empty."""
    sets = list(assignments)
    union = set().union(*sets)
    disjoint = sum(len(s) for s in sets) == len(union)
    sizes = sorted(len(s) for s in sets)
    return union == set(range(partitions)) and disjoint and sizes[0] > 0 and sizes[-1] - sizes[0] <= 1
