"""A residual add in the epilogue of a conv2d or dense layer (graph-level fusion on VTA).

The int8 rule is the graph's ``QAdd`` (:mod:`vta.compiler.graph.quantize`): with ``x`` the
layer's own int8 result (its requantization and clip kept, so the result is bit-exact with the
unfused graph) and ``y`` the other int8 operand,
``out = clip(rshift(x * mul_a + y * mul_b, shift), lo, hi)``.

On VTA, while ``x`` is still in the accumulator: ``y``'s tile is loaded once (LOAD INP, one
byte per element) and widened into a second accumulator region by a GEMM with the identity
weight (a reset and one micro-op per entry: the accumulator holds int32 only and VTA has no
widening load), scaled by ``mul_b`` (MUL immediate), then ``x`` is scaled by ``mul_a``, the
two-operand ADD joins them and the rounding shift and clip run as one ALU chain
(:mod:`vta.isa.fusion`) before the one STORE of the tile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import te
from ..env import Env
from ..errors import ScheduleError
from ..te.tensor import Tensor
from .alu import fits_imm, rshift


@dataclass(frozen=True)
class Residual:
    """The fused add's integer attributes (those of the graph's ``QAdd``)."""

    mul_a: int  #: multiplier of the layer's own result
    mul_b: int  #: multiplier of the other operand
    shift: int
    lo: int = -128
    hi: int = 127

    def __post_init__(self) -> None:
        for k in ("mul_a", "mul_b", "lo", "hi"):
            if not fits_imm(getattr(self, k)):
                raise ScheduleError(f"fused add: {k} = {getattr(self, k)} does not fit the "
                                    "ALU's 16-bit immediate")
        if not 0 <= self.shift <= 31:
            raise ScheduleError(f"fused add: shift {self.shift} is not a shift of 0..31")

    @classmethod
    def of(cls, attrs: Any) -> Residual | None:
        """From a node's ``residual`` attribute (a dict or a Residual), None when absent."""
        if attrs is None or isinstance(attrs, Residual):
            return attrs
        return cls(*(int(attrs[k]) for k in ("mul_a", "mul_b", "shift", "lo", "hi")))

    def to_json(self) -> dict[str, int]:
        return {"mul_a": self.mul_a, "mul_b": self.mul_b, "shift": self.shift,
                "lo": self.lo, "hi": self.hi}

    def reference(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The int8 result from the layer's int8 result ``x`` and the other operand ``y``."""
        s = x.astype(np.int64) * self.mul_a + y.astype(np.int64) * self.mul_b
        r = (s + (1 << self.shift >> 1)) >> self.shift
        return np.clip(r, self.lo, self.hi).astype(np.int8)


@dataclass
class ResidualTensors:
    """A :class:`Residual` as tensors: the other operand (int8, shaped like the output) and
    the identity weight (placeholders), their copies in the input and weight scratchpads, the
    operand widened into the accumulator (a GEMM) and the ALU stages after the layer's own."""

    operand: Tensor
    eye: Tensor
    operand_buf: Tensor
    eye_buf: Tensor
    wide: Tensor
    stages: list[Tensor]


def residual_compute(env: Env, r: Residual, x: Tensor) -> ResidualTensors:
    """The fused add after the layer's last epilogue stage ``x`` (its shape is the output's,
    ending with the ``(BATCH, BLOCK_OUT)`` tile)."""
    shape = tuple(x.shape)
    y = te.placeholder(shape, name="residual", dtype=env.inp_dtype)
    eye = te.placeholder((1, 1, env.BLOCK_OUT, env.BLOCK_IN), name="eye", dtype=env.wgt_dtype)
    y_buf = te.compute(shape, lambda *i: y(*i), name="residual_buf")
    eye_buf = te.compute(eye.shape, lambda *i: eye(*i), name="eye_buf")
    # an outer reduction of one step: its GEMM reset goes before the whole tile's loops, so
    # both the reset and the product fold into one GEMM instruction each
    rk = te.reduce_axis((0, 1), name="res_ko")
    rt = te.reduce_axis((0, env.BLOCK_IN), name="res_k")
    wide = te.compute(shape, lambda *i: te.sum(
        y_buf[(*i[:-1], rt)].astype(env.acc_dtype)
        * eye_buf[0, rk, i[-1], rt].astype(env.acc_dtype), axis=[rk, rt]),
        name="residual_wide")
    stages = []
    yb = wide
    if r.mul_b != 1:
        yb = te.compute(shape, lambda *i: wide(*i) * r.mul_b, name="res_radd_b")
        stages.append(yb)
    xa = (lambda *i: x(*i) * r.mul_a) if r.mul_a != 1 else x
    stages.append(te.compute(shape, lambda *i: te.clip(rshift(xa(*i) + yb(*i), r.shift),
                                                       r.lo, r.hi), name="res_radd"))
    return ResidualTensors(y, eye, y_buf, eye_buf, wide, stages)


def residual_entries(knobs: dict[str, int]) -> int:
    """Accumulator (and input) entries the fused add's operand takes per output tile of a
    conv2d/dense knob setting, per virtual thread."""
    return (knobs.get("tile_b", 1) * knobs.get("tile_co", 1) * knobs.get("tile_h", 1)
            * knobs.get("tile_w", 1))


#: The tile knobs :func:`fitted_knobs` shrinks, in the order it first tries them.
SHRINKABLE = ("tile_co", "tile_h", "tile_w", "tile_b")


def fitted_knobs(knobs: dict[str, int], valid: Callable[[dict[str, int]], bool]
                 ) -> list[dict[str, int]]:
    """Knob settings for a fused layer derived from its unfused layer's ``knobs`` (``valid``:
    whether a setting fits the fused layer): ``knobs`` when they fit, else one setting per
    tile knob it starts from, that knob and then the following ones (:data:`SHRINKABLE`,
    cyclically) each cut to its next smaller divisor until the setting fits (distinct
    settings, possibly none). The extra operand's tiles change no other choice of the layer's
    search, so its knobs shrunk stand in for a search of the fused layer's own at the price of
    a timing per setting."""
    if valid(knobs):
        return [dict(knobs)]
    names = [k for k in SHRINKABLE if k in knobs]
    out: list[dict[str, int]] = []
    for start in range(len(names)):
        k = dict(knobs)
        order = names[start:] + names[:start]
        while not valid(k) and any(k[n] > 1 for n in order):
            n = next(n for n in order if k[n] > 1)
            k[n] = _next_divisor(k[n])
            order = order[order.index(n) + 1:] + order[:order.index(n) + 1]
        if valid(k) and k not in out:
            out.append(k)
    return out


def _next_divisor(v: int) -> int:
    """The largest proper divisor of ``v`` > 1 (1 for a prime)."""
    return next((v // d for d in range(2, v + 1) if v % d == 0), 1)


__all__ = ["Residual", "ResidualTensors", "residual_compute", "residual_entries",
           "SHRINKABLE", "fitted_knobs"]
