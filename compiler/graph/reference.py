"""The float reference executor: every operator of the IR in vectorised numpy.

This is the "cpu" target for float layers and the ground truth for calibration. Canonical
attributes come from :mod:`.onnx_frontend`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from . import ops
from .errors import InputError
from .ir import Graph, Node

Kernel = Callable[[Node, list[Any]], list[np.ndarray]]


def _conv(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    y = ops.conv2d(x, w, b, strides=n.attrs["strides"], pads=n.attrs["pads"],
                   dilations=n.attrs["dilations"], group=n.attrs["group"])
    return [_activation(n, y)]


def _activation(n: Node, y: np.ndarray) -> np.ndarray:
    act = n.attrs.get("activation")
    if act is None:
        return y
    lo, hi = n.attrs["act_min"], n.attrs["act_max"]
    return np.clip(y, lo if lo is not None else -np.inf, hi if hi is not None else np.inf)


def _conv_transpose(n: Node, a: list[Any]) -> list[np.ndarray]:
    b = a[2] if len(a) > 2 else None
    y = ops.conv_transpose2d(a[0], a[1], b, strides=n.attrs["strides"], pads=n.attrs["pads"],
                             dilations=n.attrs["dilations"], group=n.attrs["group"],
                             output_padding=n.attrs["output_padding"])
    return [_activation(n, y)]


def _dense(n: Node, a: list[Any]) -> list[np.ndarray]:
    y = a[0] @ a[1].T
    if len(a) > 2:
        y = y + a[2]
    return [_activation(n, y.astype(np.float32))]


def _gemm(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, w = a[0], a[1]
    if n.attrs["transA"]:
        x = x.T
    if n.attrs["transB"]:
        w = w.T
    y = n.attrs["alpha"] * (x @ w)
    if len(a) > 2:
        y = y + n.attrs["beta"] * a[2]
    return [y.astype(np.float32)]


def _bn(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, g, b, m, v = a
    shape = (1, -1) + (1,) * (x.ndim - 2)
    s = g / np.sqrt(v + n.attrs["epsilon"])
    return [(x * s.reshape(shape) + (b - m * s).reshape(shape)).astype(np.float32)]


def _clip(n: Node, a: list[Any]) -> list[np.ndarray]:
    lo, hi = n.attrs["min"], n.attrs["max"]
    return [np.clip(a[0], -np.inf if lo is None else lo, np.inf if hi is None else hi)]


def reshape_target(in_shape: tuple[int, ...], shape: list[int], allowzero: bool) -> list[int]:
    """ONNX Reshape's target: 0 copies the input dimension (unless allowzero)."""
    return [in_shape[i] if s == 0 and not allowzero else s for i, s in enumerate(shape)]


def _reshape(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [a[0].reshape(reshape_target(a[0].shape, n.attrs["shape"], n.attrs["allowzero"]))]


def _flatten(n: Node, a: list[Any]) -> list[np.ndarray]:
    ax = n.attrs["axis"] % (a[0].ndim + 1) if n.attrs["axis"] < 0 else n.attrs["axis"]
    return [a[0].reshape(math.prod(a[0].shape[:ax]), -1)]


def _pad(n: Node, a: list[Any]) -> list[np.ndarray]:
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


def _resize(n: Node, a: list[Any]) -> list[np.ndarray]:
    sizes, scales = resize_params(a[0].shape, n.attrs)
    return [ops.resize_nearest(a[0], sizes, scales,
                               n.attrs["coordinate_transformation_mode"],
                               n.attrs["nearest_mode"])]


def _dilate(n: Node, a: list[Any]) -> list[np.ndarray]:
    return [ops.dilate_pad(a[0], n.attrs["strides"], n.attrs["pads"])]


FLOAT_KERNELS: dict[str, Kernel] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "Dense": _dense,
    "Gemm": _gemm,
    "MatMul": lambda n, a: [np.matmul(a[0], a[1]).astype(np.float32)],
    "Add": lambda n, a: [_activation(n, (a[0] + a[1]).astype(np.float32))],
    "Mul": lambda n, a: [(a[0] * a[1]).astype(np.float32)],
    "Relu": lambda n, a: [np.maximum(a[0], 0)],
    "Clip": _clip,
    "Tanh": lambda n, a: [np.tanh(a[0])],
    "Sigmoid": lambda n, a: [(1 / (1 + np.exp(-a[0]))).astype(np.float32)],
    "BatchNormalization": _bn,
    "MaxPool": lambda n, a: [ops.max_pool(a[0], n.attrs["kernel_shape"], n.attrs["strides"],
                                          n.attrs["pads"])],
    "AveragePool": lambda n, a: [ops.avg_pool(a[0], n.attrs["kernel_shape"],
                                              n.attrs["strides"], n.attrs["pads"],
                                              n.attrs["count_include_pad"])],
    "GlobalAveragePool": lambda n, a: [a[0].mean(axis=(2, 3), keepdims=True,
                                                 dtype=np.float32)],
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Concat": lambda n, a: [np.concatenate(a, axis=n.attrs["axis"])],
    "Softmax": lambda n, a: [ops.softmax(a[0], n.attrs["axis"], n.attrs["legacy"])],
    "Pad": _pad,
    "Resize": _resize,
    "Identity": lambda n, a: [a[0]],
    "Dilate": _dilate,
}


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs present, with the declared shape and dtype (a one-line InputError otherwise)."""
    out = {}
    for name, info in graph.inputs.items():
        if name not in feeds:
            raise InputError(f"missing input {name!r} (the model takes "
                             f"{', '.join(graph.inputs)})")
        x = np.asarray(feeds[name])
        if tuple(x.shape) != tuple(info.shape):
            raise InputError(f"input {name!r} has shape {list(x.shape)}, the model expects "
                             f"{list(info.shape)}")
        if str(x.dtype) != info.dtype:
            raise InputError(f"input {name!r} has dtype {x.dtype}, the model expects "
                             f"{info.dtype} (convert it with x.astype('{info.dtype}'))")
        out[name] = x
    return out


def run_float(graph: Graph, feeds: Mapping[str, np.ndarray], *, keep: bool = False,
              times: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """Execute ``graph`` in float32; returns the outputs (every tensor when ``keep``)."""
    env: dict[str, Any] = dict(graph.params)
    env.update(check_feeds(graph, feeds))
    last_use = _last_use(graph) if not keep else {}
    for k, n in enumerate(graph.nodes):
        t0 = time.perf_counter()
        res = FLOAT_KERNELS[n.op](n, [env[i] if i else None for i in n.inputs])
        if times is not None:
            times[n.name] = time.perf_counter() - t0
        for o, v in zip(n.outputs, res):
            env[o] = v
        if not keep:
            for i in n.inputs:
                if last_use.get(i) == k and i not in graph.params and i not in graph.outputs:
                    env.pop(i, None)
    if keep:
        return env
    return {o: env[o] for o in graph.outputs}


def _last_use(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for k, n in enumerate(graph.nodes):
        for i in n.inputs:
            last[i] = k
    return last


def infer_shapes(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Shapes of every tensor, by running the graph once on zeros."""
    feeds = {k: np.zeros(v.shape, dtype=v.dtype) for k, v in graph.inputs.items()}
    env = run_float(graph, feeds, keep=True)
    return {k: tuple(np.shape(v)) for k, v in env.items()}
