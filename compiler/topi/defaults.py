"""Default knobs of the VTA templates: the best of each template's space as ranked by
vta.sim.perf, the kit's one cycle estimator.

A candidate is built (te compute -> schedule -> the tir pass pipeline -> code generation in
record mode) and its recorded program timed by the performance model. The search ranks
candidates on a *reduced program*: the same template and knobs on the layer cut to at most
two outer tile iterations per tiled dimension (output-channel tiles, rows, columns; one batch
tile), whose cycles are scaled by the exact ratio of outer tile iterations (full / reduced);
when the reduced layer is the layer itself the rank is its exact cycles. Ranking costs then do
not grow with the layer's size. Spaces of at most :data:`BUDGET` valid settings are ranked
exhaustively; larger ones start from a few seeds (per virtual-thread arrangement, the largest
tile that fits and, for a 1x1 conv2d, the one with the most reduction tiles per load) and, from
each seed in turn (the best first), move to the best
neighbour (one knob one step up or down) until no neighbour is better, within the budget.
The :data:`FINALISTS` best-ranked settings are then timed on their full programs and the
fastest wins (ties by knob tuple), so the chosen cycles are always the full program's; for
conv2d the timed settings within :data:`TIE` of the fastest tie, and the fewest instructions
win (a stride-2 conv then takes the larger tile, with half the instructions fsim spends its
time on, for a few tenths of a percent of its cycles).
The search is deterministic. Results are cached per (workload, configuration, kit version) in
the user cache (``vta.isa.fileio.user_cache_dir("knobs")``, one file per entry, written
atomically: concurrent compiles and search workers may write entries at once), so recompiles
are fast. :func:`probe` tells, without searching, which cache entry a default-knob function
reads and whether it is there (a compile searches the missing ones in parallel:
:mod:`vta.compiler.graph.module`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa import Config
from vta.isa.errors import VTAError
from vta.isa.fileio import (
    SMALL_INPUT,
    kit_version,
    loads_json,
    read_bytes,
    user_cache_dir,
    write_atomic,
)
from vta.isa.gcpause import paused_gc
from vta.sim.perf import estimate

from ..build import lower_vta, placed_offsets, record_func
from ..errors import ScheduleError
from . import vta as T

#: Ranked settings per workload before the search stops (exhaustive below this).
BUDGET = 24
#: Best-ranked settings timed on their full programs.
FINALISTS = 4
#: Outer tile iterations per tiled dimension of a reduced program.
REDUCED_ITERS = 2
#: Timed settings whose full-program cycles are within this fraction of the fastest tie; of
#: those, the one with the fewest instructions wins where the search is told their counts
#: (conv2d: fsim's time and the program's size go with its instructions, and a stride-2 conv's
#: fastest setting often has twice the instructions per MAC of a larger tile 0.2-0.5% slower;
#: ResNet-18: 0.08% more cycles, bench/bench_knob_tie.py). Part of conv2d's cache key.
TIE = 0.005
#: Bump when what a cached entry means changes (template, search or cost model).
SCHEMA = 15


@dataclass(frozen=True)
class Choice:
    """The chosen knobs, their perf-model cycles and how many settings were timed."""

    knobs: dict[str, int]
    cycles: float
    evaluated: int
    cached: bool = False


def program_cycles(op: Any, *, keep: bool = False) -> tuple[float, Any]:
    """Lower an unbuilt operator, record its program (operands one after another, micro-ops
    after them) and time it on vta.sim.perf: (cycles, the RecordedProgram). With ``keep``
    (the default-knob searches' conv2d/dense programs, whose template, shapes, knobs and
    ``info`` say all a program depends on) the result is kept among the last :data:`RECENT`,
    so a compile records the chosen knobs' program, which the search has just timed, once."""
    key = _op_key(op)
    hit = _RECENT.get(key)
    if hit is not None:
        _RECENT.move_to_end(key)
        return hit
    rec, nbytes = _lowered_recording(op)
    uop_base = placed_offsets(nbytes, op.cfg)[1]
    out = float(estimate(rec.relocate(0, uop_base), op.cfg).cycles), rec
    if keep:
        _RECENT[key] = out
        if len(_RECENT) > RECENT:
            _RECENT.popitem(last=False)
    return out


def recorded_program(op: Any) -> Any:
    """The RecordedProgram of an unbuilt operator, untimed: the one :func:`program_cycles`
    kept (a default-knob search has just timed it), else lowered and recorded now."""
    key = _op_key(op)
    hit = _RECENT.get(key)
    if hit is not None:
        _RECENT.move_to_end(key)
        return hit[1]
    return _lowered_recording(op)[0]


def _lowered_recording(op: Any) -> tuple[Any, list[int]]:
    """Lower an operator, record its program: (the RecordedProgram, its parameters' bytes)."""
    func = lower_vta(op.sch, op.args, op.cfg, op.name, verify_each=False, **op.build_opts)
    return record_func(func, op.cfg), _param_bytes(func)


#: Programs :func:`program_cycles` keeps (the most recently used).
RECENT = 32
_RECENT: OrderedDict[tuple, tuple[float, Any]] = OrderedDict()
#: Reduced programs' cycles by what they are a function of (:func:`_timing_key`): layers of
#: different sizes often share their reduced programs; cleared at _MAX_RANKED entries.
_RANKED: dict[tuple, float] = {}
_MAX_RANKED = 1 << 16


def ranked_cycles(op: Any, epilogue: Any) -> float:
    """The perf-model cycles of a reduced program (:func:`program_cycles`, remembered per
    :func:`_timing_key`: the epilogue's immediates do not change the instruction timing)."""
    key = _timing_key(op, epilogue)
    c = _RANKED.get(key)
    if c is None:
        if len(_RANKED) >= _MAX_RANKED:
            _RANKED.clear()
        c = _RANKED[key] = program_cycles(op)[0]
    return c


def _timing_key(op: Any, epilogue: Any) -> tuple:
    geometry = {k: v for k, v in op.info.items() if k != "epilogue"}
    return (op.name, tuple((tuple(a.shape), a.dtype) for a in op.args),
            tuple(sorted(op.knobs.items())), repr(sorted(geometry.items())),
            repr(sorted(_epi_key(epilogue).items())), repr(sorted(op.build_opts.items())),
            op.cfg)


def _op_key(op: Any) -> tuple:
    """What an operator's program is a function of: template, operand shapes, knobs, epilogue
    and geometry, build options, configuration."""
    return (op.name, tuple((tuple(a.shape), a.dtype) for a in op.args),
            tuple(sorted(op.knobs.items())), repr(sorted(op.info.items())),
            repr(sorted(op.build_opts.items())), op.cfg)


def _param_bytes(func: Any) -> list[int]:
    return [int(np.prod(p.shape)) * np.dtype(p.dtype).itemsize for p in func.params]


# ----------------------------------------------------------------------------- search
#: A ranking: (estimated full-program cycles, whether that is the full program's exact count).
Rank = Callable[[dict[str, int]], tuple[float, bool]]


def search(space: dict[str, list[int]], valid: Callable[[dict[str, int]], bool],
           seed_keys: Sequence[Callable[[dict[str, int]], tuple]],
           cost: Callable[[dict[str, int]], float], budget: int = BUDGET,
           rank: Rank | None = None, finalists: int = FINALISTS,
           insns: Callable[[dict[str, int]], int] | None = None) -> Choice:
    """The fastest valid setting of ``space`` by ``cost`` (the full program's cycles).

    Settings are ranked by ``rank`` (default: ``cost`` itself): exhaustively when at most
    ``budget`` are valid, else seeds (per virtual-thread arrangement, the largest setting by
    each of ``seed_keys``) + best-neighbour descent within the budget. The
    ``finalists`` best-ranked settings (and every setting whose rank was exact) are compared
    by ``cost``; ties go to the smaller knob tuple. With ``insns`` (a setting's instruction
    count, asked of compared settings only), every compared setting within :data:`TIE` of the
    fastest ties, and the fewest instructions win (then the fewer cycles)."""
    names = list(space)
    cands = [dict(zip(names, vals)) for vals in itertools.product(*space.values())]
    cands = [c for c in cands if valid(c)]
    if not cands:
        raise ScheduleError("no knob setting fits this configuration's buffers")
    full: dict[tuple, float] = {}
    ranked: dict[tuple, float] = {}

    def ev(c: dict[str, int]) -> float:
        key = tuple(c[n] for n in names)
        if key not in ranked:
            v, exact = _ranked(c)
            ranked[key] = v
            if exact:
                full[key] = v
        return ranked[key]

    def _ranked(c: dict[str, int]) -> tuple[float, bool]:
        if rank is None:
            return _timed(cost, c), True
        try:
            with paused_gc():
                return rank(c)
        except VTAError:  # the reduced layer does not lower: time the layer itself
            return _timed(cost, c), True

    _rank_all(cands, space, names, seed_keys, ranked, ev, budget)
    for key in sorted(ranked, key=lambda k: (ranked[k], k))[:finalists]:
        if key not in full:
            full[key] = _timed(cost, dict(zip(names, key)))
    best = min(full, key=lambda k: (full[k], k))
    if full[best] == float("inf"):
        raise ScheduleError("no knob setting of this layer lowers onto this configuration")
    if insns is not None:
        near = [k for k in full if full[k] <= full[best] * (1 + TIE)]
        best = min(near, key=lambda k: (insns(dict(zip(names, k))), full[k], k))
    return Choice(dict(zip(names, best)), full[best], len(ranked.keys() | full.keys()))


def _timed(cost: Callable[[dict[str, int]], float], c: dict[str, int]) -> float:
    try:
        with paused_gc():
            return cost(c)
    except VTAError:
        return float("inf")


def _rank_all(cands: list[dict[str, int]], space: dict[str, list[int]], names: list[str],
              seed_keys: Sequence[Callable[[dict[str, int]], tuple]], seen: dict[tuple, float],
              ev: Callable[[dict[str, int]], float], budget: int) -> None:
    """Rank every candidate (at most ``budget``), else seeds + best-neighbour descent."""
    if len(cands) <= budget:
        for c in cands:
            ev(c)
        return
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
    # descend from every seed, the best first, while the budget lasts
    for start in sorted((tuple(c[n] for n in names) for c in seeds),
                        key=lambda k: (seen[k], k)):
        _descend(start, space, names, valid_keys, seen, ev, budget)


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
class _Miss(Exception):
    """Raised by :func:`_cached` inside :func:`probe` where a search would run."""


#: The cache keys :func:`_cached` met, while :func:`probe` runs (None otherwise).
_PROBE: ContextVar[list[str] | None] = ContextVar("_PROBE", default=None)


def probe(choose: Callable[[], Choice]) -> tuple[str | None, Choice | None]:
    """Run a default-knob function (e.g. ``lambda: conv2d_default(...)``) without searching:
    (the knob cache key it reads, the cached Choice or None when it would search). The key is
    None when ``choose`` reads no cache entry. Its VTAErrors (a layer that does not fit) pass."""
    keys: list[str] = []
    token = _PROBE.set(keys)
    try:
        choice: Choice | None = choose()
    except _Miss:
        choice = None
    finally:
        _PROBE.reset(token)
    return (keys[-1] if keys else None), choice


#: The cache keys :func:`_cached` met while :func:`search_unstored` runs (None otherwise).
_UNSTORED: ContextVar[list[str] | None] = ContextVar("_UNSTORED", default=None)


def search_unstored(choose: Callable[[], Choice]) -> tuple[str | None, Choice]:
    """Run a default-knob function without writing the knob cache: (the cache key it reads,
    as :func:`probe` gives it, and its Choice). A compile searches the workloads it expects
    ahead of knowing them exactly, and :func:`store` writes only the entries it uses."""
    keys: list[str] = []
    token = _UNSTORED.set(keys)
    try:
        choice = choose()
    finally:
        _UNSTORED.reset(token)
    return (keys[-1] if keys else None), choice


def _entry_path(key: str) -> Path:
    return user_cache_dir("knobs") / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def store(key: str, ch: Choice) -> None:
    """Write the cache entry ``key`` (what a search writes; :func:`search_unstored`)."""
    path = _entry_path(key)
    entry = {"key": key, "knobs": ch.knobs, "cycles": ch.cycles, "evaluated": ch.evaluated}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(entry | {"sha256": _entry_digest(entry)}),
                     "knob cache entry")
    except (OSError, VTAError):
        pass  # a read-only cache only costs the search again


def _entry_digest(entry: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()


def _read_entry(path: Path, key: str) -> Choice | None:
    """The cache entry at ``path`` if it is the one of ``key`` and whole (its sha256 holds and
    its fields have their types); None otherwise (missing or damaged: it is searched again
    and rewritten)."""
    try:
        d = loads_json(read_bytes(path, "knob cache entry", limit=SMALL_INPUT), path)
        entry = {k: d[k] for k in ("key", "knobs", "cycles", "evaluated")}
        if d["sha256"] != _entry_digest(entry) or entry["key"] != key:
            return None
        knobs = dict(entry["knobs"])
        if not all(isinstance(k, str) and isinstance(v, int) for k, v in knobs.items()):
            return None
        return Choice(knobs, float(entry["cycles"]), int(entry["evaluated"]), True)
    except (VTAError, ValueError, KeyError, TypeError):
        return None


def _cached(workload: dict[str, Any], cfg: Config, compute: Callable[[], Choice]) -> Choice:
    key = json.dumps({"workload": workload, "config": cfg.to_dict(), "kit": kit_version(),
                      "schema": SCHEMA}, sort_keys=True)
    path = _entry_path(key)
    probing, unstored = _PROBE.get(), _UNSTORED.get()
    for keys in (probing, unstored):
        if keys is not None:
            keys.append(key)
    hit = _read_entry(path, key)
    if hit is not None:
        return hit
    if probing is not None:
        raise _Miss(key)
    ch = compute()
    if unstored is None:
        store(key, ch)
    return ch


def _epi_key(epi: Any) -> dict[str, Any]:
    # what changes the program's shape: which ALU passes run (not their immediates)
    key = {"bias": bool(epi.bias), "shift": bool(epi.shift), "relu": bool(epi.relu),
           "clip": epi.clip is not None, "shift_vector": bool(epi.shift_vector),
           "mul": epi.mul != 1, "mul_vector": bool(epi.mul_vector),
           "shift2": bool(epi.shift2)}
    r = getattr(epi, "residual", None)
    if r is not None:  # a fused add (absent otherwise: unfused layers keep their entries)
        key["residual"] = {"mul_a": r.mul_a != 1, "mul_b": r.mul_b != 1}
    return key


def _requant(epi: Any) -> dict[str, Any]:
    """The epilogue's requantization arguments of the topi operators."""
    return {"mul": epi.mul, "mul_vector": epi.mul_vector, "shift2": epi.shift2,
            "residual": getattr(epi, "residual", None)}


def conv2d_default(data_shape: Sequence[int], kernel_shape: Sequence[int],
                   strides: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                   groups: int, cfg: Config, epilogue: Any, *, threads: bool = True) -> Choice:
    """Default conv2d knobs; shapes in tiles: data (N, CI, H, W), kernel (CO, CI/g, KH, KW)."""
    n, ci, h, w = data_shape
    co, ci2, kh, kw = kernel_shape
    ds = (n, ci, h, w, cfg.batch, cfg.block_in)
    ks = (co, ci2, kh, kw, cfg.block_out, cfg.block_in)
    space = T.conv2d_knob_space(ds, ks, strides, padding, dilation)
    if not threads:
        space["oc_nthread"] = space["h_nthread"] = [1]
    _, ow = T.conv2d_out_hw(h, w, kh, kw, strides, padding, dilation)

    def valid(k: dict[str, int]) -> bool:
        return T.conv2d_valid(k, ds, ks, strides, padding, cfg, dilation, groups,
                              epilogue.residual is not None)

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

    def operator(d: Sequence[int], kr: Sequence[int], g: int, k: dict[str, int]) -> Any:
        return T.conv2d_operator((*d, cfg.batch, cfg.block_in),
                                 (*kr, cfg.block_out, cfg.block_in), config=cfg,
                                 strides=strides, padding=padding, dilation=dilation,
                                 groups=g, knobs=k, target=None, bias=epilogue.bias,
                                 shift=epilogue.shift, relu=epilogue.relu, clip=epilogue.clip,
                                 shift_vector=epilogue.shift_vector, **_requant(epilogue))

    counts: dict[tuple, int] = {}  # instructions of the fully timed settings' programs

    def cost(k: dict[str, int]) -> float:
        c, rec = program_cycles(operator(data_shape, kernel_shape, groups, k), keep=True)
        counts[tuple(sorted(k.items()))] = rec.insn_count
        return c

    def insns(k: dict[str, int]) -> int:  # asked of settings ``cost`` timed
        return counts[tuple(sorted(k.items()))]

    def rank(k: dict[str, int]) -> tuple[float, bool]:
        d, kr, g, scale = conv2d_reduced(k, data_shape, kernel_shape, strides, padding,
                                         dilation, groups)
        if scale == 1:
            return cost(k), True
        return ranked_cycles(operator(d, kr, g, k), epilogue) * scale, False

    wl = {"template": "conv2d", "data": list(data_shape), "kernel": list(kernel_shape),
          "strides": list(strides), "padding": list(padding), "dilation": list(dilation),
          "groups": groups, "epilogue": _epi_key(epilogue), "threads": threads, "tie": TIE}
    return _cached(wl, cfg, lambda: search(space, valid, seed_keys, cost, BUDGET, rank,
                                           insns=insns))


def dense_default(n: int, k: int, m: int, cfg: Config, epilogue: Any) -> Choice:
    """Default dense knobs; shapes in tiles (N/BATCH, K/BLOCK_IN, M/BLOCK_OUT)."""
    space = T.dense_knob_space(n, k, m)

    def operator(nn: int, mm: int, kn: dict[str, int]) -> Any:
        return T.dense_operator((nn, k, cfg.batch, cfg.block_in),
                                (mm, k, cfg.block_out, cfg.block_in),
                                config=cfg, knobs=kn, target=None, bias=epilogue.bias,
                                shift=epilogue.shift, relu=epilogue.relu, clip=epilogue.clip,
                                shift_vector=epilogue.shift_vector, **_requant(epilogue))

    def cost(kn: dict[str, int]) -> float:
        return program_cycles(operator(n, m, kn), keep=True)[0]

    def rank(kn: dict[str, int]) -> tuple[float, bool]:
        (nn, bi), (mm, mi) = (_cut(n, kn["tile_b"]), _cut(m, kn["tile_co"] * kn["oc_nthread"]))
        if bi * mi == 1:
            return cost(kn), True
        return ranked_cycles(operator(nn, mm, kn), epilogue) * bi * mi, False

    wl = {"template": "dense", "shape": [n, k, m], "epilogue": _epi_key(epilogue)}
    return _cached(wl, cfg, lambda: search(
        space, lambda v: T.dense_valid(v, n, k, m, cfg, epilogue.residual is not None),
        (lambda v: (v["tile_b"] * v["tile_co"], v["tile_ci"]),), cost, BUDGET, rank))


def given_knobs(workload: str, knobs: dict[str, int], cfg: Config,
                operator: Callable[[], Any]) -> Choice:
    """The Choice of knobs given for a workload (``operator()``: its unbuilt operator with
    them), timed by vta.sim.perf and cached like a search (a fused layer takes its unfused
    layer's knobs: :mod:`vta.compiler.graph.fuse`)."""
    wl = {"template": "given", "workload": workload, "knobs": dict(knobs)}
    return _cached(wl, cfg, lambda: Choice(dict(knobs), program_cycles(operator(), keep=True)[0],
                                           1))


# ----------------------------------------------------------------------------- reduced programs
def _cut(extent: int, unit: int, iters: int = 0) -> tuple[int, int]:
    """An extent cut to ``iters`` (default :data:`REDUCED_ITERS`) iterations of ``unit``, and
    the exact ratio full / reduced of the iterations (``unit`` divides ``extent``)."""
    n = extent // unit
    r = min(n, iters or REDUCED_ITERS)
    return unit * r, n // r if n % r == 0 else n / r


def conv2d_reduced(k: dict[str, int], data_shape: Sequence[int], kernel_shape: Sequence[int],
                   strides: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                   groups: int) -> tuple[tuple[int, ...], tuple[int, ...], int, float]:
    """The layer cut to a few outer tile iterations of knobs ``k`` (one batch tile, at most
    :data:`REDUCED_ITERS` output-channel tiles per thread, rows and columns, the same padding
    and geometry): (data, kernel, groups, scale), ``scale`` the exact ratio of the full
    layer's outer tile iterations to the reduced one's (1: the reduced layer is the layer).
    Shapes in tiles."""
    n, ci, h, w = data_shape
    co, ci2, kh, kw = kernel_shape
    oh, ow = T.conv2d_out_hw(h, w, kh, kw, strides, padding, dilation)
    pt, pl, pb, pr = T.pads4(padding)
    nb, sb = _cut(n, k["tile_b"], 1)
    unit = k["tile_co"] * k["oc_nthread"]
    opg = co // groups
    if groups > 1:  # whole groups: their input tiles come with them
        unit = math.lcm(unit, opg)
    nco, sco = _cut(co, unit) if co % unit == 0 else (co, 1)
    g = groups * nco // co if groups > 1 else 1
    noh, sy = _cut(oh, k["tile_h"] * k["h_nthread"])
    now, sx = _cut(ow, k["tile_w"])
    # the smallest input with that output, the same padding on both sides
    nh = (noh - 1) * strides[0] + dilation[0] * (kh - 1) + 1 - pt - pb
    nw = (now - 1) * strides[1] + dilation[1] * (kw - 1) + 1 - pl - pr
    if nh < 1 or nw < 1 or (noh, now) == (oh, ow):
        nh, nw, sy, sx = h, w, 1, 1
    d = (nb, ci2 * g if groups > 1 else ci, nh, nw)
    return d, (nco, ci2, kh, kw), g if groups > 1 else groups, sb * sco * sy * sx


__all__ = ["BUDGET", "FINALISTS", "Choice", "search", "conv2d_default", "dense_default",
           "conv2d_reduced", "given_knobs", "probe", "program_cycles", "recorded_program",
           "search_unstored", "store"]
