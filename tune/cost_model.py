"""The learned cost model: XGBoost ranking (``rank:pairwise``) on configuration features.

Only the order of candidates matters to the explorer, so the model learns to rank: labels are
throughputs normalised to the best seen (``best_cost / cost``; invalid measurements get 0). Features
come from the task (the lowered loop IR's per-loop extents, bytes and reuse when the compiler
provides them) or default to the knob values. Earlier logs of similar workloads (same feature
length) can be added as a prior (transfer learning).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


class XGBoostCostModel:
    """Rank configurations by predicted throughput; refit after each measured batch.

    Priors (transfer learning) are kept one ranking group per earlier workload, so only
    configurations of the same workload are ever compared; the current workload's own group
    weighs ``own_weight`` times a prior group once it has ``min_own`` measurements.
    """

    def __init__(self, feature_fn: Callable[[int], np.ndarray], *, seed: int = 0,
                 num_boost_round: int = 60, max_cache: int = 200_000,
                 own_weight: float = 4.0, min_own: int = 2) -> None:
        self.feature_fn = feature_fn
        self.seed = seed
        self.num_boost_round = num_boost_round
        self.own_weight = own_weight
        self.min_own = min_own
        self._booster = None
        self._cache: dict[int, np.ndarray] = {}
        self._max_cache = max_cache
        self._priors: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def fitted(self) -> bool:
        return self._booster is not None

    @property
    def n_prior(self) -> int:
        """Records in the prior groups."""
        return sum(len(y) for _, y in self._priors)

    def features(self, indices: Sequence[int]) -> np.ndarray:
        rows = []
        for i in indices:
            f = self._cache.get(i)
            if f is None:
                f = np.asarray(self.feature_fn(int(i)), dtype=np.float32)
                if len(self._cache) < self._max_cache:
                    self._cache[int(i)] = f
            rows.append(f)
        return np.stack(rows) if rows else np.zeros((0, 0), np.float32)

    def add_prior(self, feats: np.ndarray, costs: Sequence[float | None]) -> None:
        """Data from earlier tuning of ONE similar workload (transfer learning): added as its
        own ranking group; call once per earlier workload."""
        y = _labels(costs)
        if len(y) >= 2 and not np.all(y == y[0]):
            self._priors.append((np.asarray(feats, np.float32), y))

    def fit(self, indices: Sequence[int], costs: Sequence[float | None]) -> None:
        """Fit on this workload's measurements (and the priors of matching feature width)."""
        import xgboost as xgb  # deferred: xgboost, only the XGB tuner

        xs, ys, groups, weights = [], [], [], []
        y = _labels(costs)
        width = None
        if len(y) >= 2 and not np.all(y == y[0]):
            x = self.features(indices)
            width = x.shape[1]
            xs.append(x)
            ys.append(y)
            groups.append(len(y))
            weights.append(self.own_weight if len(y) >= self.min_own else 1.0)
        for px, py in self._priors:
            if width is None:
                width = px.shape[1]
            if px.shape[1] == width:
                xs.append(px)
                ys.append(py)
                groups.append(len(py))
                weights.append(1.0)
        if not xs:
            return  # nothing to rank yet
        d = xgb.DMatrix(np.concatenate(xs), label=np.concatenate(ys), nthread=1)
        d.set_group(groups)
        d.set_weight(np.asarray(weights, np.float32))
        params = {"objective": "rank:pairwise", "max_depth": 6, "eta": 0.3, "gamma": 1e-4,
                  "min_child_weight": 1, "subsample": 1.0, "seed": self.seed, "nthread": 1,
                  "verbosity": 0}
        self._booster = xgb.train(params, d, num_boost_round=self.num_boost_round)

    def predict(self, indices: Sequence[int]) -> np.ndarray:
        """Scores (higher is better); zeros before the first fit."""
        if not self.fitted or not len(indices):
            return np.zeros(len(indices))
        import xgboost as xgb  # deferred: xgboost, only the XGB tuner

        return self._booster.predict(xgb.DMatrix(self.features(indices), nthread=1))


def _labels(costs: Sequence[float | None]) -> np.ndarray:
    c = np.array([np.nan if v is None else float(v) for v in costs], dtype=np.float64)
    ok = np.isfinite(c) & (c > 0)
    y = np.zeros(len(c))
    if ok.any():
        y[ok] = c[ok].min() / c[ok]
    return y.astype(np.float32)
