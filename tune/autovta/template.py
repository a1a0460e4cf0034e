"""The AutoVTA tuning template and measurer: hardware knobs as an AutoTVM-style task.

The task ``autovta.hw`` takes JSON-able arguments only (so a worker process or a Dask worker
rebuilds it from its name): the knob ranges, the board's budget, the resource model, the
network's VTA layers and the board's memory port width. Its space holds the valid configurations
that fit the budget by the resource model (a constraint, so the tuners never measure a point
that does not fit). Measuring a point (measurer ``autovta.perf``) sums the performance model's
cycles over the network's layers; a point on which a layer does not fit the buffers fails with
the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vta.isa import Config
from vta.isa.errors import ConfigError

from ..measure import register_measurer
from ..task import template
from .network import Network, NetworkError, network_cycles
from .resources import ResourceModel
from .space import HardwareCandidate, candidate_from_values

TEMPLATE = "autovta.hw"
MEASURER = "autovta.perf"

_NET_CACHE: dict[str, Network] = {}
_MODEL_CACHE: dict[str, ResourceModel] = {}
_PERF_CACHE: dict[tuple, tuple[int | None, str | None]] = {}


def _network(d: Mapping[str, Any]) -> Network:
    key = repr(d.get("name")) + repr(len(d.get("layers", ()))) + repr(hash(str(d)))
    if key not in _NET_CACHE:
        _NET_CACHE[key] = Network.from_json(d)
    return _NET_CACHE[key]


def _model(d: Mapping[str, Any]) -> ResourceModel:
    key = str(sorted(d.items()))
    if key not in _MODEL_CACHE:
        _MODEL_CACHE[key] = ResourceModel.from_json(d)
    return _MODEL_CACHE[key]


@template(TEMPLATE)
def hardware_template(cfg: Any, ranges: Mapping[str, list[int]], budget: Mapping[str, float],
                      model: Mapping[str, Any], network: Mapping[str, Any],
                      base: Mapping[str, int], port_width: int | None = None) -> Any:
    """Define the hardware knobs (definition mode) or give ``(candidate, network, port
    width)``."""
    base_cfg = Config(**dict(base))
    for name, cands in ranges.items():
        cfg.define_knob(name, list(cands))
    if hasattr(cfg, "knobs"):  # definition mode: a ConfigSpace
        rm = _model(model)
        cache: dict[tuple, bool] = {}

        def valid(e: Any) -> bool:
            key = tuple(sorted(e.values.items()))
            if key not in cache:
                try:
                    cand = candidate_from_values(dict(e.values), base_cfg)
                except ConfigError:
                    cache[key] = False
                else:
                    cache[key] = rm.fits(rm.estimate(cand.cfg), budget)
            return cache[key]

        cfg.add_constraint(valid)
        return None
    return candidate_from_values(dict(cfg.values), base_cfg), _network(network), port_width


def evaluate_candidate(cand: HardwareCandidate, net: Network,
                       port_width: int | None = None) -> int:
    """Cycles of ``net`` on ``cand`` with the board's ``port_width``-bit memory port
    (memoised); raises NetworkError when a layer does not lower onto the candidate's
    buffers."""
    key = (tuple(sorted(cand.cfg.params.items())), cand.bus_width, port_width, net.name,
           len(net.layers), hash(net.layers))
    if key not in _PERF_CACHE:
        perf = network_cycles(net, cand.cfg, port_width)
        if perf.unmapped:
            name, why = next(iter(perf.unmapped.items()))
            _PERF_CACHE[key] = (None, f"{len(perf.unmapped)} layer(s) do not fit the buffers "
                                      f"(first: {name}: {why})")
        else:
            _PERF_CACHE[key] = (perf.cycles, None)
    cycles, err = _PERF_CACHE[key]
    if cycles is None:
        raise NetworkError(err or "layers do not fit")
    return cycles


def _perf_measurer(obj: Any, **_: Any) -> float:
    cand, net, port_width = obj
    return float(evaluate_candidate(cand, net, port_width))


register_measurer(MEASURER, _perf_measurer)
