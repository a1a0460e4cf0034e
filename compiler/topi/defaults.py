"""Default knobs of the VTA templates: the best of each template's space as ranked by
vta.sim.perf, the kit's one cycle estimator.

A candidate is built (te compute -> schedule -> the tir pass pipeline -> code generation in
record mode) and its recorded program timed by the performance model. Spaces of at most
:data:`BUDGET` valid settings are searched exhaustively; larger ones start from a few seeds
(per virtual-thread arrangement, the largest tile that fits and, for a 1x1 conv2d, the one with
the most reduction tiles per load) and, from each seed in turn
(the fastest first), move to the best neighbour (one knob one step up or down) until no
neighbour is faster; the search stops when the budget is spent.
The search is deterministic. Results are cached per (workload, configuration, kit version) in
the user cache (``vta.isa.fileio.user_cache_dir("knobs")``), so recompiles are fast.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vta.isa import Config
from vta.isa.errors import VTAError
from vta.isa.fileio import user_cache_dir, write_atomic

from ..errors import ScheduleError

#: Evaluations per workload before the search stops (exhaustive below this).
BUDGET = 24
#: Bump when what a cached entry means changes (template, search or cost model).
SCHEMA = 7


@dataclass(frozen=True)
class Choice:
    """The chosen knobs, their perf-model cycles and how many settings were timed."""

    knobs: dict[str, int]
    cycles: float
    evaluated: int
    cached: bool = False


def kit_version() -> str:
    try:
        from importlib.metadata import version

        return version("vta-kit")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "dev"


def program_cycles(op: Any) -> tuple[float, Any]:
    """Lower an unbuilt operator, record its program and time it on vta.sim.perf."""
    from vta.sim.perf import estimate

    from ..build import lower_vta, placed_offsets, record_func

    func = lower_vta(op.sch, op.args, op.cfg, op.name, verify_each=False,
                     **op.build_opts)
    rec = record_func(func, op.cfg)
    uop_base = placed_offsets(_param_bytes(func), op.cfg)[1] + 4096
    return float(estimate(rec.relocate(0, uop_base), op.cfg).cycles), rec


def _param_bytes(func: Any) -> list[int]:
    import numpy as np

    return [int(np.prod(p.shape)) * np.dtype(p.dtype).itemsize for p in func.params]


# ----------------------------------------------------------------------------- search
def search(space: dict[str, list[int]], valid: Callable[[dict[str, int]], bool],
           seed_keys: Sequence[Callable[[dict[str, int]], tuple]],
           cost: Callable[[dict[str, int]], float], budget: int = BUDGET) -> Choice:
    """The fastest valid setting of ``space`` by ``cost`` (exhaustive when at most ``budget``
    settings are valid, else seeds + best-neighbour descent within the budget). The seeds: per
    virtual-thread arrangement, the largest setting by each of ``seed_keys``."""
    names = list(space)
    cands = [dict(zip(names, vals)) for vals in itertools.product(*space.values())]
    cands = [c for c in cands if valid(c)]
    if not cands:
        raise ScheduleError("no knob setting fits this configuration's buffers")
    seen: dict[tuple, float] = {}

    def ev(c: dict[str, int]) -> float:
        key = tuple(c[n] for n in names)
        if key not in seen:
            try:
                seen[key] = cost(c)
            except VTAError:
                seen[key] = float("inf")
        return seen[key]

    if len(cands) <= budget:
        for c in cands:
            ev(c)
    else:
        threads = sorted({(c.get("oc_nthread", 1), c.get("h_nthread", 1)) for c in cands})
        seeds: list[dict[str, int]] = []
        for t in threads:
            group = [c for c in cands if (c.get("oc_nthread", 1), c.get("h_nthread", 1)) == t]
            for key in seed_keys:
                best_c = max(group, key=key)
                if best_c not in seeds:
                    seeds.append(best_c)
        for c in seeds:
            ev(c)
        valid_keys = {tuple(c[n] for n in names) for c in cands}
        # descend from every seed, the fastest first, while the budget lasts
        for start in sorted((tuple(c[n] for n in names) for c in seeds),
                            key=lambda k: (seen[k], k)):
            _descend(start, space, names, valid_keys, seen, ev, budget)
    best = min(seen, key=lambda k: (seen[k], k))
    if seen[best] == float("inf"):
        raise ScheduleError("no knob setting of this layer lowers onto this configuration")
    return Choice(dict(zip(names, best)), seen[best], len(seen))


def _descend(cur: tuple, space: dict[str, list[int]], names: list[str], valid_keys: set,
             seen: dict[tuple, float], ev: Callable[[dict[str, int]], float],
             budget: int) -> None:
    """Best-neighbour descent (one knob one step up or down) from ``cur``."""
    while len(seen) < budget:
        nbrs = []
        for i, n in enumerate(names):
            vals = space[n]
            j = vals.index(cur[i])
            for jj in (j - 1, j + 1):
                if 0 <= jj < len(vals):
                    k = cur[:i] + (vals[jj],) + cur[i + 1:]
                    if k in valid_keys and k not in seen:
                        nbrs.append(k)
        if not nbrs:
            return
        for k in nbrs[:budget - len(seen)]:
            ev(dict(zip(names, k)))
        best = min([cur, *nbrs], key=lambda k: (seen.get(k, float("inf")), k))
        if best == cur:
            return
        cur = best


# ----------------------------------------------------------------------------- cache
def _cached(workload: dict[str, Any], cfg: Config, compute: Callable[[], Choice]) -> Choice:
    key = json.dumps({"workload": workload, "config": cfg.to_dict(), "kit": kit_version(),
                      "schema": SCHEMA}, sort_keys=True)
    path = user_cache_dir("knobs") / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")
    try:
        d = json.loads(path.read_text())
        if d.get("key") == key:
            return Choice(dict(d["knobs"]), float(d["cycles"]), int(d["evaluated"]), True)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    ch = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"key": key, "knobs": ch.knobs, "cycles": ch.cycles,
                                       "evaluated": ch.evaluated}), "knob cache entry")
    except (OSError, VTAError):
        pass  # a read-only cache only costs the search again
    return ch


def _epi_key(epi: Any) -> dict[str, Any]:
    # what changes the program's shape: which ALU passes run (not their immediates)
    return {"bias": bool(epi.bias), "shift": bool(epi.shift), "relu": bool(epi.relu),
            "clip": epi.clip is not None, "shift_vector": bool(epi.shift_vector),
            "mul": epi.mul != 1, "mul_vector": bool(epi.mul_vector),
            "shift2": bool(epi.shift2)}


def _requant(epi: Any) -> dict[str, Any]:
    """The epilogue's requantization arguments of the topi operators."""
    return {"mul": epi.mul, "mul_vector": epi.mul_vector, "shift2": epi.shift2}


def conv2d_default(data_shape: Sequence[int], kernel_shape: Sequence[int],
                   strides: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                   groups: int, cfg: Config, epilogue: Any, *, threads: bool = True) -> Choice:
    """Default conv2d knobs; shapes in tiles: data (N, CI, H, W), kernel (CO, CI/g, KH, KW)."""
    from . import vta as T

    n, ci, h, w = data_shape
    co, ci2, kh, kw = kernel_shape
    ds = (n, ci, h, w, cfg.batch, cfg.block_in)
    ks = (co, ci2, kh, kw, cfg.block_out, cfg.block_in)
    space = T.conv2d_knob_space(ds, ks, strides, padding, dilation)
    if not threads:
        space["oc_nthread"] = space["h_nthread"] = [1]
    _, ow = T.conv2d_out_hw(h, w, kh, kw, strides, padding, dilation)

    def valid(k: dict[str, int]) -> bool:
        return T.conv2d_valid(k, ds, ks, strides, padding, cfg, dilation, groups)

    def seed_key(k: dict[str, int]) -> tuple:
        return (k["tile_w"] == ow, k["tile_b"] * k["tile_co"] * k["tile_h"] * k["tile_w"],
                k["tile_ci"], k["tile_h"])

    def seed_key_ci(k: dict[str, int]) -> tuple:
        # the whole reduction per load (fewer, longer GEMMs): what 1x1 layers want, and out of
        # reach of one-knob steps from the largest tile when the threads must change too
        return (k["tile_w"] == ow, k["tile_ci"], k["tile_co"],
                k["tile_b"] * k["tile_co"] * k["tile_h"] * k["tile_w"], k["tile_h"])

    # only for 1x1 kernels: with a window, most reduction tiles per load means small output
    # tiles, slow to time and never the fastest on the zoo networks
    seed_keys = (seed_key, seed_key_ci) if kh * kw == 1 else (seed_key,)

    def cost(k: dict[str, int]) -> float:
        op = T.conv2d_packed(ds, ks, config=cfg, strides=strides, padding=padding,
                             dilation=dilation, groups=groups, knobs=k, target=None,
                             bias=epilogue.bias, shift=epilogue.shift, relu=epilogue.relu,
                             clip=epilogue.clip, shift_vector=epilogue.shift_vector,
                             **_requant(epilogue))
        return program_cycles(op)[0]

    wl = {"template": "conv2d", "data": list(data_shape), "kernel": list(kernel_shape),
          "strides": list(strides), "padding": list(padding), "dilation": list(dilation),
          "groups": groups, "epilogue": _epi_key(epilogue), "threads": threads}
    return _cached(wl, cfg, lambda: search(space, valid, seed_keys, cost, BUDGET))


def dense_default(n: int, k: int, m: int, cfg: Config, epilogue: Any) -> Choice:
    """Default dense knobs; shapes in tiles (N/BATCH, K/BLOCK_IN, M/BLOCK_OUT)."""
    from . import vta as T

    space = T.dense_knob_space(n, k, m)

    def cost(kn: dict[str, int]) -> float:
        op = T.dense_packed((n, k, cfg.batch, cfg.block_in), (m, k, cfg.block_out, cfg.block_in),
                            config=cfg, knobs=kn, target=None, bias=epilogue.bias,
                            shift=epilogue.shift, relu=epilogue.relu, clip=epilogue.clip,
                            shift_vector=epilogue.shift_vector, **_requant(epilogue))
        return program_cycles(op)[0]

    wl = {"template": "dense", "shape": [n, k, m], "epilogue": _epi_key(epilogue)}
    return _cached(wl, cfg, lambda: search(
        space, lambda v: T.dense_valid(v, n, k, m, cfg),
        (lambda v: (v["tile_b"] * v["tile_co"], v["tile_ci"]),), cost, BUDGET))


__all__ = ["BUDGET", "Choice", "search", "conv2d_default", "dense_default", "program_cycles"]
