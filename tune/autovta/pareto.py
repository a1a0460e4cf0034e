"""Pareto fronts: the points no other point beats in every objective (all minimised)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """True if ``a`` is no worse than ``b`` in every objective and better in at least one."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_front(points: Sequence[Sequence[float]]) -> list[int]:
    """Indices of the non-dominated points (duplicates of a front point are all kept)."""
    p = np.asarray(points, dtype=np.float64)
    if p.size == 0:
        return []
    keep = []
    for i in range(len(p)):
        le = np.all(p <= p[i], axis=1)
        lt = np.any(p < p[i], axis=1)
        if not np.any(le & lt):
            keep.append(i)
    return keep
