"""ALU rules shared by the VTA templates' ALU stages: the conv2d/dense/conv2d_transpose
epilogue (:class:`vta.compiler.topi.vta.Epilogue`) and the int8 element-wise operators
(:mod:`vta.compiler.topi.elementwise`).

An ALU stage is a ``te.compute`` over accumulator tiles whose value is a chain of ALU
operations (add/min/max/shifts/multiply by a 16-bit immediate or by another accumulator
buffer); the ALU pass (:mod:`vta.compiler.passes.alu`) lowers it in place, one ALU loop nest
per operation (:func:`vta.compiler.topi.vta.place_alu_stages` schedules stages).

The int8 rounding shift ``rshift(v, k) = (v + 2**(k-1)) >> k`` (the rounding of
:func:`vta.compiler.graph.quantize.rescale` and of the fixed-point requantization) needs the
immediate ``2**(k-1)``, and ALU immediates are 16-bit signed: for ``k > 15`` it runs as
``((v >> j) + 2**(k-1-j)) >> (k - j)`` with ``j = k - 15``, which is the same integer for every
``v`` whose ``v + 2**(k-1)`` does not overflow int32 (floor division composes).
"""

from __future__ import annotations

from typing import Any

from vta.isa.layout import IMM_BITS

#: The ALU's immediate range (16-bit signed).
IMM_MIN = -(1 << (IMM_BITS - 1))
IMM_MAX = (1 << (IMM_BITS - 1)) - 1
#: Largest rounding shift whose term ``2**(k-1)`` is one ALU immediate.
MAX_ROUND_SHIFT = IMM_BITS - 1


def fits_imm(v: int) -> bool:
    """Whether ``v`` is one ALU immediate."""
    return IMM_MIN <= v <= IMM_MAX


def rshift_steps(k: int, add: int = 0) -> list[tuple[str, int]]:
    """The ALU steps of :func:`rshift` as ``("add", imm)`` / ``("shr", imm)`` pairs, in order
    (every immediate within 16 bits; see the module doc)."""
    r = 1 << k >> 1
    if fits_imm(add + r):
        return [("add", add + r)] * bool(add + r) + [("shr", k)] * (k > 0)
    j = max(0, k - MAX_ROUND_SHIFT)
    return [("add", add)] * bool(add) + [("shr", j)] * bool(j) + \
        [("add", 1 << (k - j - 1)), ("shr", k - j)]


def rshift(e: Any, k: int, add: int = 0) -> Any:
    """``(e + add + 2**(k-1)) >> k`` (``e + add`` for ``k = 0``; ``add`` is one immediate) as
    ALU operations with every immediate within 16 bits (:func:`rshift_steps`): one ADD when
    ``add`` and the rounding term fit one immediate."""
    for op, v in rshift_steps(k, add):
        e = e + v if op == "add" else e >> v
    return e


__all__ = ["IMM_MIN", "IMM_MAX", "MAX_ROUND_SHIFT", "fits_imm", "rshift_steps", "rshift"]
