"""int8 arithmetic: the integer rules VTA's ALU computes on int32 accumulators that wrap
(ADD, MAX, MIN, SHR by an amount, MUL by a 16-bit signed immediate), and the mapping between
float values and int8 (``q * scale``, or ``(q + offset) * scale``).

The int8 kernels (:mod:`.int8_kernels`), the quantizer (:mod:`vta.compiler.graph.quantize`)
and the ALU templates (:mod:`vta.compiler.topi.elementwise`) all compute with these.
"""

from __future__ import annotations

import math

import numpy as np

QMIN, QMAX = -128, 127
#: A tensor that is never negative (a conv's Relu/Clip output) and that only convs read is
#: stored as ``q - OFFSET`` with ``q`` in ``[0, UMAX]``: twice the steps of a signed scale.
OFFSET, UMAX = 128, 255
#: Float element-wise ops of one input that run on int8 as a 256-entry table (``QLut``) when
#: only conv/dense layers read their output (see :mod:`vta.compiler.graph.quantize`).
TABLE_OPS = frozenset({"Gelu", "Sigmoid", "Tanh", "Silu"})

#: Bits of a fixed-point multiplier: the ALU's MUL immediate is 16-bit signed.
MUL_BITS = 15


def exponent_for(max_abs: float, bits: int = 8) -> int:
    """The largest ``e`` with ``max_abs * 2**e <= 2**(bits-1) - 1`` (0 for an all-zero tensor)."""
    if not np.isfinite(max_abs) or max_abs <= 0:
        return 0
    return int(math.floor(math.log2(((1 << (bits - 1)) - 1) / max_abs)))


def scale_for(max_abs: float, pow2: bool = False) -> float:
    """The scale mapping ``[-max_abs, max_abs]`` onto int8 (a power of two with ``pow2``)."""
    if pow2:
        return 2.0 ** -exponent_for(max_abs)
    if not np.isfinite(max_abs) or max_abs <= 0:
        return 1.0
    return float(max_abs) / QMAX


def quantize_array(x: np.ndarray, scale: float | np.ndarray, offset: int = 0) -> np.ndarray:
    """``clip(rint(x / scale) - offset)`` to int8 (see :data:`OFFSET`)."""
    q = np.rint(x.astype(np.float64) / scale)
    return np.clip(q - offset if offset else q, QMIN, QMAX).astype(np.int8)


def dequantize_array(q: np.ndarray, scale: float, offset: int = 0) -> np.ndarray:
    return ((q.astype(np.float64) + offset) * scale).astype(np.float32)


def wrap_int32(v: np.ndarray) -> np.ndarray:
    """``v`` wrapped to int32 (two's complement, as int64): numpy's int64 -> int32 cast keeps
    the low 32 bits (``((v + 2**31) mod 2**32) - 2**31`` without an integer division)."""
    a = np.asarray(v)
    return (a if a.dtype == np.int64 else a.astype(np.int64)).astype(np.int32).astype(np.int64)


def shr(v: np.ndarray, k: int | np.ndarray) -> np.ndarray:
    """The ALU's SHR on int32: arithmetic right shift, a negative amount shifts left (wraps)."""
    k = np.asarray(k, np.int64)
    if k.ndim == 0:  # one amount: one shift
        return wrap_int32(v >> min(int(k), 31) if k >= 0 else v << min(-int(k), 32))
    return wrap_int32(np.where(k >= 0, v >> np.clip(k, 0, 31), v << np.clip(-k, 0, 32)))


def rescale(v: np.ndarray, m: int, k: int) -> np.ndarray:
    """``(v * m + 2**(k-1)) >> k`` in int64 (the callers keep it within int32)."""
    v = np.asarray(v).astype(np.int64) * int(m)
    return (v + (1 << (k - 1))) >> k if k > 0 else v


def fixed_point(r: float, bits: int = MUL_BITS, kmax: int = 30) -> tuple[int, int]:
    """``(m, k)`` with ``m * 2**-k ~= r``, ``0 < m < 2**bits`` and ``0 <= k <= kmax``."""
    if r <= 0:
        return 0, 0
    k = max(0, min(kmax, bits - 1 - math.floor(math.log2(r))))
    m = int(round(r * 2.0 ** k))
    while m >= 1 << bits and k > 0:
        k -= 1
        m = int(round(r * 2.0 ** k))
    return m, k


def requantize(acc: np.ndarray, shift: int | list[int], lo: int, hi: int, mul: int | list[int]
               = 1, shift2: int = 0) -> np.ndarray:
    """The VTA epilogue after the bias: SHR ``shift`` (one amount or one per output channel,
    axis 1), then (when ``mul`` is not 1) MUL ``mul``, ADD ``2**(shift2-1)``, SHR ``shift2``;
    then MAX ``lo``, MIN ``hi``. Every step wraps to int32."""
    acc = wrap_int32(acc)
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    sh = np.asarray(shift, np.int64)
    acc = shr(acc, sh.reshape(shape) if sh.ndim else sh)
    m = np.asarray(mul, np.int64)
    if m.ndim or int(m) != 1:
        acc = wrap_int32(acc * (m.reshape(shape) if m.ndim else m))
        if shift2 > 0:
            acc = shr(wrap_int32(acc + (1 << (shift2 - 1))), shift2)
    return np.clip(acc, lo, hi).astype(np.int8)



#: int8 softmax (``QSoftmax``): ``exp(-d * scale)`` of a score ``d`` steps below its row's
#: maximum is the integer ``round(2**SOFTMAX_BITS * exp(-d * scale))`` of a table; the table
#: stops at the first zero entry and may hold :data:`SOFTMAX_TABLE_MAX` entries.
SOFTMAX_BITS, SOFTMAX_TABLE_MAX = 20, 4096
#: A score plus its additive bias (mask) in steps of the scores' scale is clipped to
#: ``[-MASK_STEPS, MASK_STEPS]`` (a bias to twice that): every score of a row masked by a huge
#: finite value (``finfo.min``) is then the same, so the row is uniform as in float; a bias
#: below ``-DROP_BIAS`` (``-inf``) drops its score (a row dropped entirely is 0).
MASK_STEPS, DROP_BIAS = 1 << 20, 1e308


def exp_table(scale: float) -> list[int] | None:
    """``round(2**SOFTMAX_BITS * exp(-d * scale))`` for ``d = 0, 1, ...`` up to the last
    non-zero entry; None when that takes more than :data:`SOFTMAX_TABLE_MAX` entries."""
    if not (np.isfinite(scale) and scale > 0):
        return None
    n = int(math.ceil((SOFTMAX_BITS + 1) * math.log(2) / scale)) + 1
    if n > SOFTMAX_TABLE_MAX:
        return None
    t = np.rint(np.ldexp(np.exp(-np.arange(n, dtype=np.float64) * scale), SOFTMAX_BITS))
    return [int(v) for v in t[t > 0]]


def softmax_bias_steps(b: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """An additive float bias (mask) in steps of the scores' ``scale``: ``clip(rint(float64(b)
    / scale), -2 MASK_STEPS, 2 MASK_STEPS)`` as int64, and where it drops the score."""
    f = np.asarray(b).astype(np.float64)
    steps = np.clip(np.rint(f / scale), -2 * MASK_STEPS, 2 * MASK_STEPS).astype(np.int64)
    return steps, f < -DROP_BIAS


#: int8 LayerNorm (``QLayerNorm``): the normalised value ``(x - mean) / std`` in steps of
#: ``2**-LN_FRAC``, from a per-row multiplier of ``LN_BITS`` fraction bits; gamma and beta at
#: the output's scale as ``2**LN_SHIFT``-scaled integers (gamma ``LN_SHIFT - LN_FRAC`` bits).
LN_BITS, LN_FRAC, LN_SHIFT = 40, 12, 20
#: The per-row multiplier's bound (a row of equal values under a tiny epsilon).
LN_RMAX = float(1 << 52)
