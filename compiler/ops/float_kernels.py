"""The float kernels and shape rules of the graph IR's ops (in vectorised numpy: the float
reference and the ground truth for calibration). Each kernel takes a node (``op``, ``attrs``,
the canonical attributes of :mod:`vta.compiler.graph.onnx_frontend`) and its inputs; the
registry (:mod:`.table`) names the kernel and shape rule of every op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError
from . import kernels as ops

Node = Any  # a node of the graph IR: its ``op`` and ``attrs``
Kernel = Callable[[Node, list[Any]], list[np.ndarray]]


def conv_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    y = ops.conv2d(x, w, b, strides=n.attrs["strides"], pads=n.attrs["pads"],
                   dilations=n.attrs["dilations"], group=n.attrs["group"],
                   input_strides=n.attrs.get("input_strides"))
    return [activation(n, y)]


def activation(n: Node, y: np.ndarray) -> np.ndarray:
    act = n.attrs.get("activation")
    if act is None:
        return y
    lo, hi = n.attrs["act_min"], n.attrs["act_max"]
    # in place: every caller passes the array its kernel has just made
    return np.clip(y, lo if lo is not None else -np.inf, hi if hi is not None else np.inf,
                   out=y)


def conv_transpose_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    b = a[2] if len(a) > 2 else None
    y = ops.conv_transpose2d(a[0], a[1], b, strides=n.attrs["strides"], pads=n.attrs["pads"],
                             dilations=n.attrs["dilations"], group=n.attrs["group"],
                             output_padding=n.attrs["output_padding"])
    return [activation(n, y)]


def dense_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    y = a[0] @ a[1].T
    if len(a) > 2:
        y = y + a[2]
    return [activation(n, y.astype(np.float32))]


def gemm_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, w = a[0], a[1]
    if n.attrs["transA"]:
        x = x.T
    if n.attrs["transB"]:
        w = w.T
    y = n.attrs["alpha"] * (x @ w)
    if len(a) > 2:
        y = y + n.attrs["beta"] * a[2]
    return [y.astype(np.float32)]


def bn_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, g, b, m, v = a
    shape = (1, -1) + (1,) * (x.ndim - 2)
    s = g / np.sqrt(v + n.attrs["epsilon"])
    y = (x * s.reshape(shape)).astype(np.float32, copy=False)
    y += (b - m * s).reshape(shape)  # in place: one pass fewer over the activation
    return [y]


def clip_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    lo, hi = n.attrs["min"], n.attrs["max"]
    return [np.clip(a[0], -np.inf if lo is None else lo, np.inf if hi is None else hi)]


def reshape_target(in_shape: tuple[int, ...], shape: list[int], allowzero: bool) -> list[int]:
    """ONNX Reshape's target: 0 copies the input dimension (unless allowzero)."""
    return [in_shape[i] if s == 0 and not allowzero else s for i, s in enumerate(shape)]


def reshape_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [a[0].reshape(reshape_target(a[0].shape, n.attrs["shape"], n.attrs["allowzero"]))]


def flatten_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    ax = n.attrs["axis"] % (a[0].ndim + 1) if n.attrs["axis"] < 0 else n.attrs["axis"]
    return [a[0].reshape(math.prod(a[0].shape[:ax]), -1)]


def pad_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    pads = n.attrs["pads"]
    r = a[0].ndim
    width = [(pads[i], pads[i + r]) for i in range(r)]
    mode = n.attrs["mode"]
    if mode == "constant":
        return [np.pad(a[0], width, constant_values=n.attrs["value"])]
    return [np.pad(a[0], width, mode={"reflect": "reflect", "edge": "edge"}[mode])]


def resize_params(in_shape: tuple[int, ...], attrs: dict[str, Any]
                  ) -> tuple[list[int], list[float]]:
    """Output sizes and per-axis scales of a nearest Resize (from scales or from sizes)."""
    if attrs.get("sizes"):
        sizes = list(attrs["sizes"])
        return sizes, [o / i for o, i in zip(sizes, in_shape)]
    scales = list(attrs["scales"])
    return [int(math.floor(i * s)) for i, s in zip(in_shape, scales)], scales


def resize_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    sizes, scales = resize_params(a[0].shape, n.attrs)
    if n.attrs.get("mode", "nearest") == "linear":
        return [ops.resize_linear(a[0], sizes, scales,
                                  n.attrs["coordinate_transformation_mode"])]
    return [ops.resize_nearest(a[0], sizes, scales,
                               n.attrs["coordinate_transformation_mode"],
                               n.attrs["nearest_mode"])]


def slice_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    idx = [slice(None)] * a[0].ndim
    for ax, b, e, st in zip(n.attrs["axes"], n.attrs["starts"], n.attrs["ends"],
                            n.attrs["steps"]):
        idx[ax] = slice(b, e, st)
    return [np.ascontiguousarray(a[0][tuple(idx)])]


def take_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    """ONNX Gather whose indices are computed at run time (token ids feeding an embedding
    table): an index outside ``[0, size)`` of the gathered axis is a one-line InputError (numpy,
    and ONNX for negative indices, would take a row from the end)."""
    data, idx = a[0], np.asarray(a[1])
    size = data.shape[n.attrs["axis"]]
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        at = tuple(int(v) for v in np.argwhere(bad)[0])
        raise InputError(f"index {int(idx[at])} at {list(at)} of {n.inputs[1]!r} is outside "
                         f"[0, {size}) (the rows of {n.inputs[0]!r}; node {n.name!r}, Gather): "
                         f"give token ids below the vocabulary size {size}")
    return [np.take(data, idx.astype(np.int64, copy=False), axis=n.attrs["axis"])]


def where_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, y = np.asarray(a[1]), np.asarray(a[2])
    out = np.where(a[0], x, y)
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        out = out.astype(np.float32, copy=False)
    return [out]


def boolean(fn: Callable[[Any, Any], Any]) -> Kernel:
    """A comparison or logic kernel of two inputs (a boolean tensor)."""
    return lambda n, a: [np.asarray(fn(a[0], a[1]))]


def f32(fn: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    """An element-wise float kernel of one input."""
    return lambda n, a: [np.asarray(fn(a[0]), dtype=np.float32)]


def sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))  # no overflow for large |x|
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def hardsigmoid(n: Node, x: np.ndarray) -> np.ndarray:
    return np.clip(n.attrs["alpha"] * x + n.attrs["beta"], 0, 1)


def fake_quant_kernel(n: Node, a: list[Any]) -> list[np.ndarray]:
    """QuantizeLinear then DequantizeLinear (what a QDQ model computes in float)."""
    s, z = n.attrs["scale"], n.attrs["zero_point"]
    q = np.clip(np.rint(a[0].astype(np.float64) / s) + z, n.attrs["qmin"], n.attrs["qmax"])
    return [((q - z) * s).astype(np.float32)]



Shape = tuple[int, ...]


def pool_shape(n: Node, s: list[Shape]) -> Shape:
    (kh, kw), (sh, sw), (t, left, b, r) = (n.attrs["kernel_shape"], n.attrs["strides"],
                                           n.attrs["pads"])
    return (*s[0][:2], ops.conv_out_size(s[0][2], kh, sh, t, b, 1),
            ops.conv_out_size(s[0][3], kw, sw, left, r, 1))


def conv_shape(n: Node, s: list[Shape]) -> Shape:
    (kh, kw), (sh, sw) = s[1][2:], n.attrs["strides"]
    (t, left, b, r), (dh, dw) = n.attrs["pads"], n.attrs["dilations"]
    ih, iw = n.attrs.get("input_strides", [1, 1])
    return (s[0][0], s[1][0], ops.conv_out_size((s[0][2] - 1) * ih + 1, kh, sh, t, b, dh),
            ops.conv_out_size((s[0][3] - 1) * iw + 1, kw, sw, left, r, dw))


def conv_t_shape(n: Node, s: list[Shape]) -> Shape:
    (kh, kw), (sh, sw) = s[1][2:], n.attrs["strides"]
    (t, left, b, r), (dh, dw) = n.attrs["pads"], n.attrs["dilations"]
    op = n.attrs["output_padding"]
    return (s[0][0], s[1][1] * n.attrs["group"],
            (s[0][2] - 1) * sh + dh * (kh - 1) + 1 + op[0] - t - b,
            (s[0][3] - 1) * sw + dw * (kw - 1) + 1 + op[1] - left - r)


def gemm_shape(n: Node, s: list[Shape]) -> Shape:
    m = s[0][1] if n.attrs["transA"] else s[0][0]
    return (m, s[1][0] if n.attrs["transB"] else s[1][1])


def matmul_shape(n: Node, s: list[Shape]) -> Shape:
    a, b = s[0], s[1]
    if len(b) == 1:
        return a[:-1]
    if len(a) == 1:
        return (*b[:-2], b[-1])
    return (*np.broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])


def reduce_shape(n: Node, s: list[Shape]) -> Shape:
    axes = set(n.attrs["axes"])
    if n.attrs["keepdims"]:
        return tuple(1 if k in axes else d for k, d in enumerate(s[0]))
    return tuple(d for k, d in enumerate(s[0]) if k not in axes)


#: Output shape of the ops whose kernels do arithmetic; the others (copies, which cost no
