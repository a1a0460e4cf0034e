"""Parallel simulated annealing over a configuration space, scored by the cost model.

``parallel_size`` chains walk the space by changing one knob at a time; a move is accepted
with probability ``exp((new - old) / T)`` as T cools linearly. The best ``num`` distinct unseen
points are kept. A batch is then picked from them with a diversity criterion (greedy: prefer
candidates that differ from those already picked in more knobs) plus epsilon-greedy random picks.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import numpy as np

from .space import ConfigSpace


class SimulatedAnnealing:
    def __init__(
        self,
        space: ConfigSpace,
        *,
        n_iter: int = 200,
        parallel_size: int = 64,
        temp: tuple[float, float] = (1.0, 0.0),
        early_stop: int = 40,
        seed: int = 0,
    ) -> None:
        self.space = space
        self.n_iter = n_iter
        self.parallel_size = parallel_size
        self.temp = temp
        self.early_stop = early_stop
        self.rng = np.random.default_rng(seed)
        self._points: list[int] = []  # persistent chain positions across calls

    def _random_move(self, index: int) -> int:
        digits = self.space.digits(index)
        dims = self.space.dims
        movable = [p for p, d in enumerate(dims) if d > 1]
        if not movable:
            return index
        pos = movable[int(self.rng.integers(len(movable)))]
        alt = int(self.rng.integers(dims[pos] - 1))
        digits[pos] = alt if alt < digits[pos] else alt + 1
        return self.space.index_of_digits(digits)

    def find_maximums(
        self, score: Callable[[Sequence[int]], np.ndarray], num: int, exclude: set[int]
    ) -> list[int]:
        """Up to ``num`` valid, unseen indices with the highest scores found."""
        n = min(self.parallel_size, len(self.space))
        pts = [p for p in self._points if self.space.is_valid(p)][:n]
        while len(pts) < n:
            p = self.space.random_valid(self.rng)
            if p is None:
                break
            pts.append(p)
        if not pts:
            return []
        scores = np.asarray(score(pts), dtype=np.float64)
        heap: list[tuple[float, int]] = []
        in_heap: set[int] = set()

        def offer(s: float, p: int) -> None:
            if p in exclude or p in in_heap:
                return
            if len(heap) < num:
                heapq.heappush(heap, (s, p))
                in_heap.add(p)
            elif s > heap[0][0]:
                _, old = heapq.heapreplace(heap, (s, p))
                in_heap.discard(old)
                in_heap.add(p)

        for s, p in zip(scores, pts):
            offer(float(s), p)
        t0, t1 = self.temp
        since_improve, best_floor = 0, heap[0][0] if heap else -np.inf
        for k in range(self.n_iter):
            cand = [self._random_move(p) for p in pts]
            valid = [self.space.is_valid(c) for c in cand]
            # only valid points are scored (features of an invalid one may not exist)
            cs = np.full(len(cand), -np.inf)
            ok_idx = [j for j, ok in enumerate(valid) if ok]
            if ok_idx:
                cs[ok_idx] = np.asarray(score([cand[j] for j in ok_idx]), dtype=np.float64)
            t = t0 - (t0 - t1) * k / max(1, self.n_iter - 1)
            for j, (c, ok) in enumerate(zip(cand, valid)):
                if not ok:
                    continue
                delta = cs[j] - scores[j]
                if delta >= 0 or (t > 0 and self.rng.random() < np.exp(delta / max(t, 1e-9))):
                    pts[j], scores[j] = c, cs[j]
                offer(float(cs[j]), c)
            floor = heap[0][0] if len(heap) >= num else -np.inf
            if floor > best_floor:
                best_floor, since_improve = floor, 0
            else:
                since_improve += 1
                if since_improve >= self.early_stop:
                    break
        self._points = pts
        return [p for _, p in sorted(heap, reverse=True)]


def diverse_batch(
    space: ConfigSpace,
    ranked: Sequence[int],
    size: int,
    rng: np.random.Generator,
    *,
    epsilon: float = 0.05,
    exclude: set[int] = frozenset(),
) -> list[int]:  # type: ignore[assignment]
    """Pick ``size`` points: mostly from ``ranked`` (best first) balancing score and diversity
    (knob digits not yet covered by the batch); epsilon-greedy: each slot is, with probability
    ``epsilon``, a uniformly random configuration instead (all of them while ``ranked`` is
    empty, i.e. before the model has been fitted)."""
    n_rand = int(rng.binomial(size, epsilon)) if epsilon > 0 else 0
    chosen: list[int] = []
    covered: list[set[int]] = [set() for _ in space.dims]
    pool = [p for p in ranked if p not in exclude]
    pool_digits = {p: space.digits(p) for p in pool[: 2 * size]}
    while len(chosen) < size - n_rand and pool_digits:

        def gain(p: int, rank: int) -> float:
            new = sum(d not in covered[k] for k, d in enumerate(pool_digits[p]))
            return new - 0.25 * rank

        ranks = {p: r for r, p in enumerate(pool_digits)}
        best = max(pool_digits, key=lambda p: gain(p, ranks[p]))
        chosen.append(best)
        for k, d in enumerate(pool_digits.pop(best)):
            covered[k].add(d)
    taken = set(chosen) | set(exclude)
    tries = 0
    while len(chosen) < size and tries < 20 * size:
        tries += 1
        p = space.random_valid(rng)
        if p is None:
            break
        if p not in taken:
            chosen.append(p)
            taken.add(p)
    return chosen
