"""The int8 kernels: the bit-exact numpy rule of every int8 op of the quantized graph (the
specification VTA's results are checked against bit for bit; the rules are described in
:mod:`vta.compiler.graph.quantize`). Each takes a node (``op``, ``attrs``) and its inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import kernels as ops
from .int8 import (
    LN_BITS,
    LN_FRAC,
    LN_RMAX,
    LN_SHIFT,
    MASK_STEPS,
    QMAX,
    QMIN,
    dequantize_array,
    quantize_array,
    requantize,
    rescale,
    softmax_bias_steps,
)

Node = Any  # a node of the graph IR: its ``op`` and ``attrs``

def qconv(n: Node, a: list[Any]) -> list[np.ndarray]:
    acc = ops.conv2d(a[0], a[1], None, strides=n.attrs["strides"], pads=n.attrs["pads"],
                     dilations=n.attrs["dilations"], group=n.attrs["group"],
                     input_strides=n.attrs.get("input_strides"))
    acc = acc + a[2].astype(np.int64)[None, :, None, None]
    return [_requant(n, acc, a)]


def _requant(n: Node, acc: np.ndarray, a: list[Any]) -> np.ndarray:
    y = requantize(acc, n.attrs["shift"], n.attrs["lo"], n.attrs["hi"],
                   n.attrs.get("mul", 1), n.attrs.get("shift2", 0))
    r = n.attrs.get("residual")  # a QAdd fused into the epilogue (vta.compiler.graph.fuse)
    return y if r is None else _add(r, y, a[3])


def qdense(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [_requant(n, ops.int8_matmul(a[0], a[1]) + a[2].astype(np.int64), a)]


def qmatmul(n: Node, a: list[Any]) -> list[np.ndarray]:
    """A product of two int8 activations, batched (``QMatMul``), requantized; no bias."""
    # int8 products summed in float64 are exact (|sum| < 2**53), and BLAS is fast
    acc = np.matmul(a[0].astype(np.float64), a[1].astype(np.float64)).astype(np.int64)
    return [_requant(n, acc, a)]


def qadd(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [_add(n.attrs, a[0], a[1])]


def _add(attrs: dict[str, Any], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s = x.astype(np.int64) * attrs["mul_a"] + y.astype(np.int64) * attrs["mul_b"]
    return np.clip(rescale(s, 1, attrs["shift"]), attrs["lo"], attrs["hi"]).astype(np.int8)


def qavg(n: Node, a: list[Any]) -> list[np.ndarray]:
    x = a[0]
    if n.op == "QGlobalAveragePool":
        s = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
        cnt = np.int64(x.shape[2] * x.shape[3])
    else:
        s, cnt = ops.pool_sum_count(x, n.attrs["kernel_shape"], n.attrs["strides"],
                                    n.attrs["pads"], n.attrs["count_include_pad"],
                                    n.attrs.get("ceil_extra"))
    num = s * n.attrs["mul"]
    den = cnt * (1 << n.attrs["shift"])
    return [np.clip((2 * num + den) // (2 * den), QMIN, QMAX).astype(np.int8)]


def qconcat(n: Node, a: list[Any]) -> list[np.ndarray]:
    parts = [np.clip(rescale(x, m, k), QMIN, QMAX) for x, (m, k) in zip(a, n.attrs["rescale"])]
    return [np.concatenate(parts, axis=n.attrs["axis"]).astype(np.int8)]


def qpad(n: Node, a: list[Any]) -> list[np.ndarray]:
    pads = n.attrs["pads"]
    r = a[0].ndim
    width = [(pads[i], pads[i + r]) for i in range(r)]
    if n.attrs["mode"] == "constant":
        return [np.pad(a[0], width, constant_values=n.attrs["qvalue"])]
    return [np.pad(a[0], width, mode=n.attrs["mode"])]


def qleaky(n: Node, a: list[Any]) -> list[np.ndarray]:
    x = a[0].astype(np.int64)
    neg = rescale(np.minimum(x, 0), n.attrs["mul"], n.attrs["shift"])
    return [np.clip(np.maximum(x, 0) + neg, QMIN, QMAX).astype(np.int8)]


def _hsig_int(n: Node, x: np.ndarray) -> np.ndarray:
    v = x.astype(np.int64) * n.attrs["mul"] + n.attrs["bias"]
    return np.clip(rescale(v, 1, n.attrs["shift"]), 0, n.attrs["one"])


def qhardswish(n: Node, a: list[Any]) -> list[np.ndarray]:
    h = _hsig_int(n, a[0])
    y = rescale(a[0].astype(np.int64) * h, n.attrs["mul2"], n.attrs["shift2"])
    return [np.clip(y, QMIN, QMAX).astype(np.int8)]


def qlut(n: Node, a: list[Any]) -> list[np.ndarray]:
    """``table[q + 128]``: a float element-wise op of one int8 input as its 256 int8 results."""
    return [np.asarray(n.attrs["table"], np.int8)[a[0].astype(np.int16) + 128]]



def qmaxpool(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [ops.max_pool(a[0], n.attrs["kernel_shape"], n.attrs["strides"], n.attrs["pads"])]


def qclip(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [np.clip(a[0], n.attrs["lo"], n.attrs["hi"]).astype(np.int8)]


def qhardsigmoid(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [_hsig_int(n, a[0]).astype(np.int8)]


def qfakequant(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [np.clip(rescale(a[0], *n.attrs["rescale"]), n.attrs["lo"],
                    n.attrs["hi"]).astype(np.int8)]


def quantize(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [quantize_array(a[0], n.attrs["scale"], n.attrs.get("offset", 0))]


def dequantize(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [dequantize_array(a[0], n.attrs["scale"], n.attrs.get("offset", 0))]


def qsoftmax(n: Node, a: list[Any]) -> list[np.ndarray]:
    """int8 softmax over the last axis of int8 scores ``x`` (scale ``scale``) plus an optional
    float bias ``b`` (an attention mask, broadcast): ``z = clip(x + steps(b), -M, M)``
    (:func:`softmax_bias_steps`, ``M`` = :data:`MASK_STEPS`), ``e = table[max(z) - z]`` (0
    beyond the table and where ``b`` drops the score), ``y = clip(round(e * mul / (sum(e) *
    2**shift)), 0, 127)`` (0 on a row of zero sum): integer after the bias."""
    x = a[0].astype(np.int64)
    drop = np.zeros(x.shape, bool)
    if len(a) > 1 and a[1] is not None:
        steps, drop = softmax_bias_steps(a[1], n.attrs["scale"])
        x = np.clip(x + steps, -MASK_STEPS, MASK_STEPS)
        drop = np.broadcast_to(drop, x.shape)
    table = np.asarray(n.attrs["table"], np.int64)
    zm = np.where(drop, np.int64(-1 << 30), x)
    d = zm.max(axis=-1, keepdims=True) - zm
    e = np.where(drop | (d >= len(table)), 0, table[np.minimum(d, len(table) - 1)])
    s = e.sum(axis=-1, keepdims=True)
    mul, k = n.attrs["mul"], n.attrs["shift"]
    y = (2 * e * mul + (s << k)) // np.maximum(s << (k + 1), 1)
    return [np.where(s > 0, np.clip(y, 0, QMAX), 0).astype(np.int8)]


def qlayernorm(n: Node, a: list[Any]) -> list[np.ndarray]:
    """int8 LayerNorm over the last axis of ``C`` values (an input offset cancels): ``d = C x
    - sum(x)``, ``v = sum(d**2)``; per row ``r = rint(2**LN_BITS / sqrt(float64(v) / C +
    eps_c2))`` (``eps_c2`` = eps / scale**2 * C**2: one float64 division, addition, square
    root, division and ``rint``, at most ``LN_RMAX``); with ``k = LN_BITS - LN_FRAC``,
    ``z = (d r + 2**(k-1)) >> k``
    (the normalised value in ``2**-LN_FRAC`` steps); ``y = clip((z g + b) >> LN_SHIFT)`` with
    the int32 per-channel ``g`` and ``b`` (inputs 1 and 2: gamma, and beta with the rounding
    term and the output offset)."""
    x = a[0].astype(np.int64)
    c = x.shape[-1]
    d = c * x - x.sum(axis=-1, keepdims=True)
    v = (d * d).sum(axis=-1, keepdims=True)
    var = v.astype(np.float64) / np.float64(c) + np.float64(n.attrs["eps_c2"])
    r = np.minimum(np.rint(np.float64(1 << LN_BITS) / np.sqrt(var)), LN_RMAX).astype(np.int64)
    sh = LN_BITS - LN_FRAC
    z = (d * r + (1 << (sh - 1))) >> sh
    y = (z * a[1].astype(np.int64) + a[2].astype(np.int64)) >> LN_SHIFT
    return [np.clip(y, QMIN, QMAX).astype(np.int8)]
