"""Activation x activation matrix products on VTA (attention's Q·Kᵀ and softmax·V).

A batched product ``out[g] = a[g] @ b[g]`` of two int8 activations, ``g`` over the flattened
batch and head axes. Both operands are inputs of the operator; the first one is packed as a
dense layer's data, the second one in VTA's weight layout:

- data ``a``: (G, N/BATCH, K/BLOCK_IN, BATCH, BLOCK_IN) from ``a`` (G, N, K);
- weight ``b``: (G, M/BLOCK_OUT, K/BLOCK_IN, BLOCK_OUT, BLOCK_IN) from ``b`` (G, K, M), i.e.
  a weight tile's row ``o`` holds ``b[:, o]`` (column ``o`` of ``b``: :func:`pack_operands`);
- output (G, N/BATCH, M/BLOCK_OUT, BATCH, BLOCK_OUT) int8 after the epilogue (``>> shift``,
  ``* mul``, the rounding ``>> shift2``, clip; no bias: both operands are activations).

The compute and schedule are the dense template's (:func:`vta.compiler.topi.vta.gemm_packed`,
one declaration for both) with the group axis outermost (each group loads its own weight
tiles); its knobs are the dense knobs (``tile_b``, ``tile_ci``, ``tile_co``,
``oc_nthread``), the default the best of them as ranked by vta.sim.perf (cached,
:func:`matmul_default`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from vta.isa import Config

from ..env import Env
from ..errors import ScheduleError
from . import defaults
from .pack import ceil_div
from .vta import Epilogue, Operator, dense_knob_space, dense_valid, gemm_packed

#: The knobs of the template (the dense template's).
MATMUL_KNOBS = ("tile_b", "tile_ci", "tile_co", "oc_nthread")


def matmul_packed(data_shape: Sequence[int], weight_shape: Sequence[int], *, config: Config,
                  shift: int = 0, clip: tuple[int, int] | None = (-128, 127), mul: int = 1,
                  shift2: int = 0, knobs: dict[str, int] | None = None,
                  target: str | None = "fsim") -> Operator:
    """Packed batched int8 matmul: data (G, N, K, BATCH, BLOCK_IN) x weight
    (G, M, K, BLOCK_OUT, BLOCK_IN) -> (G, N, M, BATCH, BLOCK_OUT) (shapes in tiles but the
    last two). Call it on ``(data, weight)`` numpy arrays. ``knobs=None``: the default
    (:func:`matmul_default`); ``target=None``: unbuilt (for tuners)."""
    env = Env(config)
    g, n, k, bb, bi = data_shape
    g2, m, k2, bo, bi2 = weight_shape
    if g != g2 or k != k2 or (bb, bi, bo, bi2) != (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT,
                                                    env.BLOCK_IN):
        raise ScheduleError(f"matmul: {tuple(data_shape)} x {tuple(weight_shape)} are not "
                            f"packed for {env}")
    epi = Epilogue(bias=False, shift=shift, clip=clip, mul=mul, shift2=shift2)
    kn = {"tile_b": 1, "tile_co": 1, "tile_ci": 1, "oc_nthread": 1}
    kn.update(knobs if knobs else matmul_default(g, n, k, m, config, epi).knobs)
    unknown = set(kn) - set(MATMUL_KNOBS)
    if unknown:
        raise ScheduleError(f"unknown knob(s) {', '.join(sorted(unknown))}; knobs are "
                            f"{', '.join(MATMUL_KNOBS)}")
    s, args, oshape = gemm_packed(env, data_shape, weight_shape, epi, kn)
    return Operator("matmul_packed", s, args, kn, config, oshape,
                    info={"epilogue": epi},
                    build_opts={"init_in_first_iteration": True}).built(target)


def matmul_knob_space(g: int, n: int, k: int, m: int) -> dict[str, list[int]]:
    """Candidate knob values (shapes in tiles; the group axis is not tiled)."""
    return dense_knob_space(n, k, m)


def matmul_valid(v: dict[str, int], g: int, n: int, k: int, m: int, cfg: Config) -> bool:
    """Whether knobs divide the product and fit the buffers (as a dense layer's)."""
    return dense_valid(v, n, k, m, cfg)


def matmul_default(g: int, n: int, k: int, m: int, cfg: Config, epilogue: Epilogue
                   ) -> defaults.Choice:
    """The default knobs (shapes in tiles): the dense search (vta.compiler.topi.defaults)
    over the product's knobs, ranked on one group and a few output tiles, the chosen
    setting timed on the whole product; cached per workload."""
    space = matmul_knob_space(g, n, k, m)

    def operator(gg: int, nn: int, mm: int, kn: dict[str, int]) -> Operator:
        return matmul_packed((gg, nn, k, cfg.batch, cfg.block_in),
                             (gg, mm, k, cfg.block_out, cfg.block_in), config=cfg,
                             shift=epilogue.shift, clip=epilogue.clip, mul=epilogue.mul,
                             shift2=epilogue.shift2, knobs=kn, target=None)

    def cost(kn: dict[str, int]) -> float:
        return defaults.program_cycles(operator(g, n, m, kn), keep=True)[0]

    def rank(kn: dict[str, int]) -> tuple[float, bool]:
        (nn, bi), (mm, mi) = (defaults._cut(n, kn["tile_b"]),
                              defaults._cut(m, kn["tile_co"] * kn["oc_nthread"]))
        if g * bi * mi == 1:
            return cost(kn), True
        return defaults.ranked_cycles(operator(1, nn, mm, kn), epilogue) * g * bi * mi, False

    wl = {"template": "matmul", "shape": [g, n, k, m], "epilogue": defaults._epi_key(epilogue)}
    return defaults._cached(wl, cfg, lambda: defaults.search(
        space, lambda v: matmul_valid(v, g, n, k, m, cfg),
        (lambda v: (v["tile_b"] * v["tile_co"], v["tile_ci"]),), cost, defaults.BUDGET, rank))


# ------------------------------------------------------------------------- layouts
def pack_operands(a: np.ndarray, b: np.ndarray, cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """``a`` (G, N, K) as the data and ``b`` (G, K, M) in weight layout, zero-padded to whole
    tiles: a weight tile's row ``o`` is column ``o`` of ``b`` (a transpose inside each tile,
    done here on the host)."""
    g, n, k = a.shape
    m = b.shape[2]
    bt, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    nt, kt, mt = ceil_div(n, bt), ceil_div(k, bi), ceil_div(m, bo)
    ap = np.zeros((g, nt * bt, kt * bi), np.int8)
    ap[:, :n, :k] = a
    bp = np.zeros((g, mt * bo, kt * bi), np.int8)
    bp[:, :m, :k] = b.transpose(0, 2, 1)
    data = ap.reshape(g, nt, bt, kt, bi).transpose(0, 1, 3, 2, 4)
    weight = bp.reshape(g, mt, bo, kt, bi).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(data), np.ascontiguousarray(weight)


def unpack_output(out: np.ndarray, n: int, m: int) -> np.ndarray:
    """The packed output (G, N/BATCH, M/BLOCK_OUT, BATCH, BLOCK_OUT) as (G, N, M)."""
    g, nt, mt, bt, bo = out.shape
    return out.transpose(0, 1, 3, 2, 4).reshape(g, nt * bt, mt * bo)[:, :n, :m]


def packed_tiles(g: int, n: int, k: int, m: int, cfg: Config) -> tuple[int, int, int]:
    """Tiles of the (G, N, K) x (G, K, M) product: (N/BATCH, K/BLOCK_IN, M/BLOCK_OUT)."""
    return ceil_div(n, cfg.batch), ceil_div(k, cfg.block_in), ceil_div(m, cfg.block_out)


def operand_bytes(g: int, n: int, k: int, m: int, cfg: Config) -> tuple[int, int, int]:
    """Bytes of the packed data, weight and output."""
    nt, kt, mt = packed_tiles(g, n, k, m, cfg)
    return (g * nt * kt * cfg.batch * cfg.block_in, g * mt * kt * cfg.block_out * cfg.block_in,
            g * nt * mt * cfg.batch * cfg.block_out)


def matmul_reference(data: np.ndarray, weight: np.ndarray, epilogue: Epilogue) -> np.ndarray:
    """Packed-layout numpy reference: int32 accumulator (wrap-around), then the epilogue."""
    acc = np.einsum("gnkbi,gmkoi->gnmbo", data.astype(np.int64), weight.astype(np.int64))
    return epilogue.reference(acc.astype(np.int32), None)


__all__ = ["MATMUL_KNOBS", "matmul_packed", "matmul_knob_space", "matmul_valid",
           "matmul_default", "pack_operands", "unpack_output", "packed_tiles", "operand_bytes",
           "matmul_reference"]
