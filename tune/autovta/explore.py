"""The AutoVTA search: hardware knobs under a board's budget, for a target network.

1. The space (:func:`~vta.tune.autovta.space.hardware_space`) holds the valid configurations that
   fit the board's budget by the resource model; the bus width is limited to what the board's
   memory port offers.
2. A search budget of ``n_trial`` evaluations: when the space has at most that many points it is
   searched exhaustively (the grid tuner), otherwise with the AutoTVM machinery (XGBoost ranking
   model + simulated annealing, :class:`vta.tune.XGBTuner`) minimising the network's cycles.
   Evaluations run on :func:`vta.tune.make_executor` (local processes or a Dask cluster).
3. Every evaluated point keeps its cycles and resource estimate; the Pareto front is taken over
   (cycles, LUT, DSP, BRAM), and the best point is the fastest one (ties: the smallest).
4. Finalists can be checked by real synthesis (cached) and on tsim.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vta.boards import get_board
from vta.isa import Config
from vta.isa.errors import VTAError

from ..measure import Measurer, close_executor, make_executor
from ..task import Task
from ..tuner import TUNERS
from .network import Network, network_cycles
from .pareto import pareto_front
from .resources import KINDS, ResourceModel, dsp_ceiling
from .space import DEFAULT_RANGES, HardwareCandidate, candidate_from_values
from .template import MEASURER, TEMPLATE


class ExploreError(VTAError):
    """A bad exploration request (empty space, bad budget, bad ranges)."""


@dataclass
class Point:
    """One evaluated hardware candidate."""

    index: int
    cand: HardwareCandidate
    resources: dict[str, float]
    fits: bool
    cycles: int | None = None
    status: str = "ok"  # ok | error kind of the measurement
    error: str | None = None
    pareto: bool = False
    synth: dict[str, Any] | None = None
    tsim: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return self.cand.key

    def to_json(self) -> dict[str, Any]:
        d = {"index": self.index, "key": self.key, "config": self.cand.cfg.params,
             "bus_width": self.cand.bus_width, "macs_per_cycle": self.cand.cfg.macs_per_cycle,
             "resources": {k: round(v, 1) for k, v in self.resources.items()},
             "fits": self.fits, "cycles": self.cycles, "status": self.status,
             "error": self.error, "pareto": self.pareto}
        if self.synth is not None:
            d["synth"] = self.synth
        if self.tsim is not None:
            d["tsim"] = self.tsim
        return d


@dataclass
class ExploreResult:
    board: str
    network: Network
    budget: dict[str, float]
    points: list[Point]
    reference: Point
    model: ResourceModel
    tuner: str
    space_size: int
    fitting_size: int
    seconds: float
    ranges: dict[str, list[int]]
    notes: list[str] = field(default_factory=list)

    @property
    def measured(self) -> list[Point]:
        return [p for p in self.points if p.cycles is not None and p.fits]

    @property
    def pareto(self) -> list[Point]:
        return sorted((p for p in self.points if p.pareto), key=lambda p: p.cycles or 0)

    @property
    def best(self) -> Point | None:
        ok = self.measured
        if not ok:
            return None
        return min(ok, key=lambda p: (p.cycles, _footprint(p.resources, self.budget), p.index))

    @property
    def speedup(self) -> float | None:
        b = self.best
        if b is None or not self.reference.cycles:
            return None
        return self.reference.cycles / b.cycles

    def dsp_ceilings(self) -> dict[str, Any]:
        """The board's DSP ceiling (:func:`~vta.tune.autovta.resources.dsp_ceiling`: the
        square GEMM core with the most MACs whose multipliers all fit its DSPs) with and
        without packed multipliers, and whether the model (the board's core) packs."""
        out: dict[str, Any] = {"packed": self.model.packed}
        for key, packed in (("with_packing", True), ("without_packing", False)):
            c = dsp_ceiling(self.model.family, self.budget["dsp"], self.reference.cand.cfg,
                            packed)
            out[key] = None if c is None else {"batch": c[0], "block": c[1],
                                               "macs_per_cycle": c[0] * c[1] * c[1]}
        return out

    def to_json(self) -> dict[str, Any]:
        best = self.best
        return {
            "format": "vta-autovta", "version": 1,
            "board": self.board, "budget": self.budget,
            "network": {"name": self.network.name, "source": self.network.source,
                        "vta_layers": len(self.network.layers),
                        "cpu_layers": list(self.network.cpu_layers),
                        "macs": self.network.macs},
            "search": {"tuner": self.tuner, "space_size": self.space_size,
                       "fitting_points": self.fitting_size, "evaluated": len(self.points),
                       "ranges": self.ranges, "seconds": round(self.seconds, 1),
                       "objectives": ["cycles", "lut", "dsp", "bram"]},
            "resource_model": self.model.to_json(),
            "calibration_error": self.model.calibration_error,
            "dsp_ceiling": self.dsp_ceilings(),
            "reference": self.reference.to_json(),
            "best": None if best is None else {**best.to_json(),
                                               "speedup_vs_reference": self.speedup},
            "pareto": [p.index for p in self.pareto],
            "points": [p.to_json() for p in self.points],
            "notes": self.notes,
        }


def _footprint(res: Mapping[str, float], budget: Mapping[str, float]) -> float:
    return sum(res[k] / budget[k] for k in KINDS if budget.get(k))


def board_ranges(board: Any, ranges: Mapping[str, Sequence[int]] | None = None
                 ) -> dict[str, list[int]]:
    """The knob ranges for ``board``: the defaults, with the bus width limited to the board's
    memory port (a wider core than the port gains nothing), overridden by ``ranges``."""
    out = {k: list(v) for k, v in DEFAULT_RANGES.items()}
    out["bus_width"] = [w for w in out["bus_width"] if w <= board.bus_width]
    for k, v in (ranges or {}).items():
        if k not in DEFAULT_RANGES:
            raise ExploreError(f"unknown knob {k!r}; knobs: {', '.join(DEFAULT_RANGES)}")
        out[k] = sorted({int(x) for x in v})
    bad = [w for w in out["bus_width"] if w not in (64, 128)]
    if bad or not out["bus_width"]:
        raise ExploreError(f"bus widths must be 64 or 128, not {out['bus_width']}")
    for k, v in out.items():
        if not v:
            raise ExploreError(f"knob {k} has no candidates")
    return out


def make_task(board: Any, net: Network, model: ResourceModel,
              ranges: Mapping[str, Sequence[int]], base: Config) -> Task:
    """The ``autovta.hw`` tuning task (its space: valid configs that fit the board; ``base``
    gives the parameters the knobs do not set)."""
    return Task.create(TEMPLATE, (
        {k: list(v) for k, v in ranges.items()}, dict(board.budget.as_dict()), model.to_json(),
        net.to_json(), base.params, board.bus_width))


def explore(board: Any, net: Network, *, base: Config, n_trial: int = 200,
            model: ResourceModel | None = None,
            ranges: Mapping[str, Sequence[int]] | None = None, jobs: int = 1,
            scheduler: str | None = None, seed: int = 0, tuner: str = "auto",
            batch_size: int = 16, timeout: float = 600.0,
            progress: Callable[[dict[str, Any]], None] | None = None) -> ExploreResult:
    """Search the hardware knobs of ``board`` for ``net`` with ``n_trial`` evaluations; the
    parameters the knobs do not set (the data widths) are ``base``'s, the configuration ``net``
    was extracted with."""
    t0 = time.perf_counter()
    board = get_board(board)
    if n_trial < 1:
        raise ExploreError(f"the search budget must be at least 1 evaluation, not {n_trial}")
    model = model or ResourceModel.for_board(board)
    rng = board_ranges(board, ranges)
    task = make_task(board, net, model, rng, base)
    space = task.space
    fitting = space.valid_indices()
    if not fitting:
        raise ExploreError(f"no configuration of the space fits {board.title}'s budget by the "
                           f"resource model; widen the ranges (smaller buffers or GEMM)")
    name = tuner
    if tuner == "auto":
        name = "grid" if len(fitting) <= n_trial else "xgb"
    if name not in TUNERS:
        raise ExploreError(f"unknown tuner {tuner!r}; choose auto, {', '.join(TUNERS)}")
    if name == "xgb":  # hardware spaces have thousands of points, not billions: a light SA
        tun = TUNERS[name](task, seed=seed, plan_size=32, sa_iter=60, parallel_size=32)
    else:
        tun = TUNERS[name](task, seed=seed)
    ex = make_executor(jobs, scheduler)
    try:
        measurer = _RecordingMeasurer(MEASURER, executor=ex, timeout=timeout)
        res = tun.tune(min(n_trial, len(fitting)), measurer, batch_size=batch_size,
                       progress=progress)
    finally:
        close_executor(ex)
    points = []
    for index, cost, kind in res.history:
        cand = candidate_from_values(dict(space.get(index).values), base)
        est = model.estimate(cand.cfg)
        err = None if cost is not None else measurer.errors.get(index)
        points.append(Point(index, cand, est, model.fits(est, board.budget.as_dict()),
                            int(cost) if cost is not None else None, kind, err))
    mark_pareto(points)
    ref = reference_point(board, net, model)
    notes = []
    if not any(p.cycles is not None for p in points):
        notes.append("no evaluated point ran every layer on VTA")
    return ExploreResult(board.name, net, board.budget.as_dict(), points, ref, model, name,
                         len(space), len(fitting), time.perf_counter() - t0, rng, notes)


class _RecordingMeasurer(Measurer):
    """A measurer that keeps the error message of every failed point."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.errors: dict[int, str] = {}

    def measure(self, task: Task, indices: Sequence[int]) -> list[Any]:
        out = super().measure(task, indices)
        for r in out:
            if not r.ok:
                self.errors[r.index] = r.error or r.kind
        return out


def mark_pareto(points: list[Point]) -> None:
    """Set ``pareto`` on the fitting, measured points no other such point dominates in
    (cycles, LUT, DSP, BRAM)."""
    ok = [p for p in points if p.cycles is not None and p.fits]
    objs = [(p.cycles, p.resources["lut"], p.resources["dsp"], p.resources["bram"]) for p in ok]
    front = set(pareto_front(objs))
    for k, p in enumerate(ok):
        p.pareto = k in front


def reference_point(board: Any, net: Network, model: ResourceModel) -> Point:
    """The board's default configuration, evaluated the same way."""
    cand = HardwareCandidate(board.default_config)
    est = model.estimate(cand.cfg)
    perf = network_cycles(net, cand.cfg, board.bus_width)
    p = Point(-1, cand, est, model.fits(est, board.budget.as_dict()))
    if perf.unmapped:
        p.status, p.error = "run", f"{len(perf.unmapped)} layer(s) do not fit the buffers"
    else:
        p.cycles = perf.cycles
    return p
