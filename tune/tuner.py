"""Tuners: random, grid and the XGBoost-guided one (cost model + simulated annealing).

All share :meth:`Tuner.tune`: measure in batches on a :class:`~vta.tune.measure.Measurer`, log
every result (crash-safe), resume from a log, stop early when the best has not improved for a
while, and report progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cost_model import XGBoostCostModel
from .log import LogRecord, TuningLog
from .measure import Measurer, MeasureResult
from .sa import SimulatedAnnealing, diverse_batch
from .task import Task, task_features


@dataclass
class TuneResult:
    task: Task
    best_index: int | None
    best_cost: float | None
    trials: int
    history: list[tuple[int, float | None, str]] = field(default_factory=list)

    @property
    def best_values(self) -> dict[str, Any] | None:
        if self.best_index is None:
            return None
        return self.task.space.get(self.best_index).to_json()["values"]

    def best_curve(self) -> list[float]:
        """Best cost so far after each trial (inf until the first valid one)."""
        out, best = [], float("inf")
        for _, c, _ in self.history:
            if c is not None:
                best = min(best, c)
            out.append(best)
        return out


class Tuner:
    name = "base"

    def __init__(self, task: Task, *, seed: int = 0) -> None:
        self.task = task
        self.space = task.space
        self.rng = np.random.default_rng(seed)
        self.visited: set[int] = set()
        self.measured: list[tuple[int, float | None]] = []

    # subclasses override these two
    def next_batch(self, size: int) -> list[int]:
        raise NotImplementedError

    def update(self, results: list[MeasureResult]) -> None:
        for r in results:
            self.measured.append((r.index, r.cost if r.ok else None))

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    def batch_size_for(self, round_: int, batch_size: int) -> int:
        """The size of batch number ``round_`` (0-based); ``batch_size`` by default."""
        return batch_size

    def tune(self, n_trial: int, measurer: Measurer, *, batch_size: int = 16,
             log: TuningLog | None = None, early_stopping: int | None = None,
             progress: Callable[[dict[str, Any]], None] | None = None,
             target: float | None = None) -> TuneResult:
        """Measure up to ``n_trial`` configurations (including ones already in ``log``); stop
        early when the best has not improved for ``early_stopping`` trials or, with
        ``target``, once a cost at or below it has been measured."""
        key = self.task.key
        result = TuneResult(self.task, None, None, 0)
        best_trial = 0
        if log is not None:  # resume: what the log has counts as measured
            prior = log.for_workload(key)
            if prior:
                res = [MeasureResult(int(r.config["index"]), r.cost, r.kind, r.error, r.elapsed)
                       for r in prior]
                self._record(res, result)
                best_trial = result.trials
                self.update(res)
        t0 = time.perf_counter()
        start_trials = result.trials
        round_ = 0
        while result.trials < n_trial and self.has_next():
            if target is not None and result.best_cost is not None and result.best_cost <= target:
                break
            size = min(self.batch_size_for(round_, batch_size), n_trial - result.trials)
            round_ += 1
            batch = [i for i in self.next_batch(size) if i not in self.visited]
            if not batch:
                break
            self.visited.update(batch)
            res = measurer.measure(self.task, batch)
            before = result.best_cost
            self._record(res, result)
            if log is not None:
                log.append(LogRecord(key, self.task.to_json(), self.space.get(r.index).to_json(),
                                  r.cost, r.error, r.kind, r.elapsed, self.name,
                                  result.trials - len(res) + k + 1)
                           for k, r in enumerate(res))
            self.update(res)
            if result.best_cost is not None and (before is None or result.best_cost < before):
                best_trial = result.trials
            if progress is not None:
                dt = time.perf_counter() - t0
                progress({"trials": result.trials - start_trials,  # of this run only
                          "n_trial": max(0, n_trial - start_trials), "resumed": start_trials,
                          "best_cost": result.best_cost,
                          "rate": (result.trials - start_trials) / dt if dt > 0 else 0.0,
                          "errors": sum(1 for _, c, _ in result.history if c is None)})
            if early_stopping and result.trials - best_trial >= early_stopping:
                break
        return result

    def _record(self, res: list[MeasureResult], result: TuneResult) -> None:
        for r in res:
            self.visited.add(r.index)
            result.trials += 1
            cost = r.cost if r.ok else None
            result.history.append((r.index, cost, r.kind))
            if cost is not None and (result.best_cost is None or cost < result.best_cost):
                result.best_cost, result.best_index = cost, r.index


class RandomTuner(Tuner):
    """Uniform sampling without replacement over the valid configurations."""

    name = "random"

    def next_batch(self, size: int) -> list[int]:
        out: list[int] = []
        tries = 0
        while len(out) < size and tries < 100 * size and self.has_next():
            tries += 1
            i = int(self.rng.integers(len(self.space)))
            if i not in self.visited and i not in out and self.space.is_valid(i):
                out.append(i)
        if not out:  # dense fallback near the end of a small space
            rest = [i for i in range(len(self.space))
                    if i not in self.visited and self.space.is_valid(i)]
            self.rng.shuffle(rest)
            out = rest[:size]
            if not rest:
                self.visited.update(range(len(self.space)))
        return out


class GridTuner(Tuner):
    """Every valid configuration in index order (exhaustive search)."""

    name = "grid"

    def __init__(self, task: Task, **kw: Any) -> None:
        super().__init__(task, **kw)
        self._next = 0

    def next_batch(self, size: int) -> list[int]:
        out = []
        while len(out) < size and self._next < len(self.space):
            if self._next not in self.visited and self.space.is_valid(self._next):
                out.append(self._next)
            self._next += 1
        if self._next >= len(self.space) and not out:
            self.visited.update(range(len(self.space)))
        return out


class XGBTuner(Tuner):
    """AutoTVM's model-guided tuner: XGBoost ranking + parallel simulated annealing.

    ``warmup``: the sizes of the first batches (smaller than ``batch_size``, so the model is
    refitted often while it knows little); ``epsilon``: the chance of each batch slot being a
    uniformly random configuration; ``feature_fn(task, index)``: a configuration's features, for
    this task and for the earlier workloads of :meth:`add_prior` (default: the knobs and the
    lowered IR's features, :func:`~vta.tune.task.task_features`).
    """

    name = "xgb"

    def __init__(self, task: Task, *, seed: int = 0, plan_size: int = 64, epsilon: float = 0.05,
                 sa_iter: int = 300, parallel_size: int = 128,
                 warmup: tuple[int, ...] = (2, 2, 4, 4),
                 feature_fn: Callable[[Task, int], np.ndarray] | None = None) -> None:
        super().__init__(task, seed=seed)
        self.feature_fn = feature_fn or task_features
        self.model = XGBoostCostModel(lambda i: self.feature_fn(task, i), seed=seed)
        self.sa = SimulatedAnnealing(task.space, n_iter=sa_iter, parallel_size=parallel_size,
                                     seed=seed)
        self.plan_size = plan_size
        self.epsilon = epsilon
        self.warmup = tuple(warmup)

    def batch_size_for(self, round_: int, batch_size: int) -> int:
        if round_ < len(self.warmup):
            return max(1, min(batch_size, self.warmup[round_]))
        return batch_size

    def add_prior(self, records: list[LogRecord]) -> int:
        """Transfer: train on earlier records of similar workloads (same template), one ranking
        group per workload, and fit the model so that the first batch is already model-ranked.
        Each record's features are computed in its own workload's space; records of this task's
        own workload and records whose features differ in length from this task's are skipped.
        Returns the number used."""
        tasks: dict[str, Task | None] = {}
        groups: dict[str, tuple[list[np.ndarray], list[float | None]]] = {}
        first = next((i for i in range(len(self.space)) if self.space.is_valid(i)), 0)
        width = len(self.feature_fn(self.task, first))
        for r in records:
            if r.workload == self.task.key:
                continue
            if r.workload not in tasks:
                try:
                    tasks[r.workload] = Task.from_json(r.task)
                except Exception:  # noqa: BLE001 - a template this process cannot build
                    tasks[r.workload] = None
            t = tasks[r.workload]
            if t is None or t.name != self.task.name:
                continue
            f = self.feature_fn(t, int(r.config["index"]))
            if len(f) == width:
                g = groups.setdefault(r.workload, ([], []))
                g[0].append(f)
                g[1].append(r.cost if r.ok else None)
        return self.add_prior_groups([(np.stack(f), c) for f, c in groups.values()])

    def add_prior_groups(self, groups: list[tuple[np.ndarray, list[float | None]]]) -> int:
        """Transfer from ``(features, costs)`` of earlier workloads (one pair per workload,
        never this task's); refits the model. Returns the number of records given."""
        for feats, costs in groups:
            self.model.add_prior(feats, costs)
        self._refit()
        return sum(len(c) for _, c in groups)

    def next_batch(self, size: int) -> list[int]:
        if not self.model.fitted:
            ranked = []
        else:
            ranked = self.sa.find_maximums(self.model.predict, max(self.plan_size, 2 * size),
                                           self.visited)
        return diverse_batch(self.space, ranked, size, self.rng, epsilon=self.epsilon,
                             exclude=self.visited)

    def update(self, results: list[MeasureResult]) -> None:
        super().update(results)
        self._refit()

    def _refit(self) -> None:
        idx = [i for i, _ in self.measured]
        self.model.fit(idx, [c for _, c in self.measured])


TUNERS = {"xgb": XGBTuner, "random": RandomTuner, "grid": GridTuner}
