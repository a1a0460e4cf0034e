"""Two signed products in one multiplier that share an operand (Xilinx WP486's int8 packing).

VTA's GEMM multiplies every input element by the weights of all output channels, so two output
channels ``n`` and ``n + 1`` can share one DSP slice: with ``s = inp_width + wgt_width`` (16 for
int8; every product fits ``s`` signed bits),

    A = w1 * 2**s + w0          (25 bits for int8: DSP48E1's A port is 25 bits wide)
    P = A * x = (w1 * x) * 2**s + w0 * x

The low ``s`` bits of ``P``, read as a signed number, are ``w0 * x`` exactly. The bits above
them are ``floor(P / 2**s) = w1 * x - [w0 * x < 0]``, and ``w0 * x < 0`` exactly when bit
``s - 1`` of ``P`` (the low half's sign bit) is set, so ``w1 * x = P[s:2s] + P[s - 1]`` (the
high half read as a signed ``s``-bit number: ``w1 * x`` minus one bit fits ``s`` bits).

``A`` is one addition, ``(w1 << s) + w0``: yosys maps it to the DSP48 slice's pre-adder (the
25-bit ``A + D`` of DSP48E1, 27-bit on DSP48E2), so it costs no fabric.

The packed products cannot be summed across ``block_in`` before they are split (the low half has
no guard bits), so the adder trees stay in fabric: the GEMM lanes sum the low halves of one
channel and the high halves of the other, and add the sign bits of the low halves (a popcount)
to the high channel's sum (:class:`vta.hw.gemm.GemmPair`).

:func:`packed_operand_np` and :func:`split_np` are a numpy model of exactly these bit slices
(the tests check it against ``w0 * x`` and ``w1 * x`` for every int8 triple, and the Amaranth
form against it).
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Value

__all__ = ["PACKED_ATTR", "packed_operand", "packed_width", "split_product",
           "packed_operand_np", "split_np"]

#: Attribute of the signals that packed products drive (one multiplier, two products each):
#: ``vta synth`` names the multipliers that drive them ``vta_pmul_N`` and counts them as pairs.
PACKED_ATTR = "vta_packed"


def packed_width(inp_width: int, wgt_width: int) -> int:
    """Bits of the packed operand ``A`` (25 for int8): two weights ``inp + wgt`` bits apart,
    plus one (``w1 * 2**s + w0`` reaches ``-128 * 2**16 - 128`` for int8)."""
    return inp_width + 2 * wgt_width + 1


def packed_operand(w0: Value, w1: Value, inp_width: int) -> Value:
    """``A = w1 * 2**s + w0`` (``s = inp_width + wgt_width``) as a signed value of
    :func:`packed_width` bits: one addition, for the DSP slice's pre-adder."""
    s = inp_width + len(w0)
    return w1.as_signed().shift_left(s) + w0.as_signed()  # s + wgt_width + 1 bits


def split_product(p: Value, inp_width: int, wgt_width: int) -> tuple[Value, Value, Value]:
    """(``w0 * x``, ``P[s:2s]``, ``P[s - 1]``) of a packed product ``P``: the low product, the
    high half (``w1 * x`` minus the third) and the low half's sign bit to add back."""
    s = inp_width + wgt_width
    return p[:s].as_signed(), p[s:2 * s].as_signed(), p[s - 1]


def packed_operand_np(w0: np.ndarray, w1: np.ndarray, inp_width: int = 8,
                      wgt_width: int = 8) -> np.ndarray:
    """numpy model of :func:`packed_operand` (int64): ``(w1 << s) + w0`` in
    :func:`packed_width` signed bits."""
    s = inp_width + wgt_width
    w0, w1 = np.asarray(w0, np.int64), np.asarray(w1, np.int64)
    return _wrap((w1 << s) + w0, packed_width(inp_width, wgt_width))


def split_np(p: np.ndarray, inp_width: int = 8, wgt_width: int = 8
             ) -> tuple[np.ndarray, np.ndarray]:
    """numpy model of :func:`split_product` and the correction: (``w0 * x``, ``w1 * x``) from
    the packed product ``p`` (int64)."""
    s = inp_width + wgt_width
    p = np.asarray(p, np.int64)
    low = _wrap(p, s)
    high = _wrap(p >> s, s)
    sign = (p >> (s - 1)) & 1
    return low, high + sign


def _wrap(v: np.ndarray, bits: int) -> np.ndarray:
    """The low ``bits`` bits of ``v`` read as a signed number."""
    half = 1 << (bits - 1)
    return ((v + half) & ((1 << bits) - 1)) - half

