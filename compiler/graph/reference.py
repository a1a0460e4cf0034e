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
                   dilations=n.attrs["dilations"], group=n.attrs["group"],
                   input_strides=n.attrs.get("input_strides"))
    return [_activation(n, y)]


def _activation(n: Node, y: np.ndarray) -> np.ndarray:
    act = n.attrs.get("activation")
    if act is None:
        return y
    lo, hi = n.attrs["act_min"], n.attrs["act_max"]
    # in place: every caller passes the array its kernel has just made
    return np.clip(y, lo if lo is not None else -np.inf, hi if hi is not None else np.inf,
                   out=y)


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
    y = (x * s.reshape(shape)).astype(np.float32, copy=False)
    y += (b - m * s).reshape(shape)  # in place: one pass fewer over the activation
    return [y]


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
    if n.attrs.get("mode", "nearest") == "linear":
        return [ops.resize_linear(a[0], sizes, scales,
                                  n.attrs["coordinate_transformation_mode"])]
    return [ops.resize_nearest(a[0], sizes, scales,
                               n.attrs["coordinate_transformation_mode"],
                               n.attrs["nearest_mode"])]


def _slice(n: Node, a: list[Any]) -> list[np.ndarray]:
    idx = [slice(None)] * a[0].ndim
    for ax, b, e, st in zip(n.attrs["axes"], n.attrs["starts"], n.attrs["ends"],
                            n.attrs["steps"]):
        idx[ax] = slice(b, e, st)
    return [np.ascontiguousarray(a[0][tuple(idx)])]


def _take(n: Node, a: list[Any]) -> list[np.ndarray]:
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


def _where(n: Node, a: list[Any]) -> list[np.ndarray]:
    x, y = np.asarray(a[1]), np.asarray(a[2])
    out = np.where(a[0], x, y)
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        out = out.astype(np.float32, copy=False)
    return [out]


def _boolean(fn: Callable[[Any, Any], Any]) -> Kernel:
    """A comparison or logic kernel of two inputs (a boolean tensor)."""
    return lambda n, a: [np.asarray(fn(a[0], a[1]))]


def _f32(fn: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    """An element-wise float kernel of one input."""
    return lambda n, a: [np.asarray(fn(a[0]), dtype=np.float32)]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))  # no overflow for large |x|
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _hardsigmoid(n: Node, x: np.ndarray) -> np.ndarray:
    return np.clip(n.attrs["alpha"] * x + n.attrs["beta"], 0, 1)


def _fake_quant(n: Node, a: list[Any]) -> list[np.ndarray]:
    """QuantizeLinear then DequantizeLinear (what a QDQ model computes in float)."""
    s, z = n.attrs["scale"], n.attrs["zero_point"]
    q = np.clip(np.rint(a[0].astype(np.float64) / s) + z, n.attrs["qmin"], n.attrs["qmax"])
    return [((q - z) * s).astype(np.float32)]


FLOAT_KERNELS: dict[str, Kernel] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "Dense": _dense,
    "Gemm": _gemm,
    "MatMul": lambda n, a: [np.matmul(a[0], a[1]).astype(np.float32)],
    "Add": lambda n, a: [_activation(n, (a[0] + a[1]).astype(np.float32))],
    "Sub": lambda n, a: [(a[0] - a[1]).astype(np.float32)],
    "Mul": lambda n, a: [(a[0] * a[1]).astype(np.float32)],
    "Div": lambda n, a: [(a[0] / a[1]).astype(np.float32)],
    "Pow": lambda n, a: [np.power(a[0], a[1]).astype(np.float32)],
    "Relu": lambda n, a: [np.maximum(a[0], 0)],
    "Clip": _clip,
    "Tanh": lambda n, a: [np.tanh(a[0])],
    "Sigmoid": _f32(_sigmoid),
    "Erf": _f32(ops.erf),
    "Sqrt": _f32(np.sqrt),
    "Exp": _f32(np.exp),
    "Neg": _f32(np.negative),
    "Abs": _f32(np.abs),
    "Reciprocal": _f32(np.reciprocal),
    "Max": lambda n, a: [np.maximum(a[0], a[1]).astype(np.float32)],
    "Min": lambda n, a: [np.minimum(a[0], a[1]).astype(np.float32)],
    "Softplus": _f32(lambda x: np.logaddexp(0, x)),
    "Mish": _f32(lambda x: x * np.tanh(np.logaddexp(0, x))),
    "Elu": lambda n, a: [np.where(a[0] > 0, a[0], n.attrs["alpha"] * np.expm1(a[0]))
                         .astype(np.float32)],
    "HardSigmoid": lambda n, a: [_hardsigmoid(n, a[0]).astype(np.float32)],
    "HardSwish": _f32(lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    "Silu": _f32(lambda x: x * _sigmoid(x)),
    "Gelu": lambda n, a: [ops.gelu(a[0], n.attrs.get("approximate", "none"))],
    "LeakyRelu": lambda n, a: [np.where(a[0] >= 0, a[0], a[0] * np.float32(n.attrs["alpha"]))
                               .astype(np.float32)],
    "PRelu": lambda n, a: [np.where(a[0] >= 0, a[0], a[0] * a[1]).astype(np.float32)],
    "BatchNormalization": _bn,
    "LayerNormalization": lambda n, a: [ops.layer_norm(a[0], a[1], a[2] if len(a) > 2
                                                       else None, n.attrs["axes"],
                                                       n.attrs["epsilon"])],
    "MaxPool": lambda n, a: [ops.max_pool(a[0], n.attrs["kernel_shape"], n.attrs["strides"],
                                          n.attrs["pads"])],
    "AveragePool": lambda n, a: [ops.avg_pool(a[0], n.attrs["kernel_shape"],
                                              n.attrs["strides"], n.attrs["pads"],
                                              n.attrs["count_include_pad"],
                                              n.attrs.get("ceil_extra"))],
    "GlobalAveragePool": lambda n, a: [a[0].mean(axis=(2, 3), keepdims=True,
                                                 dtype=np.float32)],
    "GlobalMaxPool": lambda n, a: [a[0].max(axis=(2, 3), keepdims=True)],
    "ReduceMean": lambda n, a: [a[0].mean(axis=tuple(n.attrs["axes"]),
                                          keepdims=n.attrs["keepdims"], dtype=np.float32)],
    "ReduceMax": lambda n, a: [a[0].max(axis=tuple(n.attrs["axes"]),
                                        keepdims=n.attrs["keepdims"])],
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Transpose": lambda n, a: [np.ascontiguousarray(a[0].transpose(n.attrs["perm"]))],
    "Slice": _slice,
    "Gather": lambda n, a: [np.take(a[0], np.asarray(n.attrs["indices"], np.int64),
                                    axis=n.attrs["axis"])],
    "Concat": lambda n, a: [np.concatenate(a, axis=n.attrs["axis"])],
    "Softmax": lambda n, a: [ops.softmax(a[0], n.attrs["axis"], n.attrs["legacy"])],
    "LogSoftmax": lambda n, a: [np.log(ops.softmax(a[0].astype(np.float64), n.attrs["axis"],
                                                   n.attrs["legacy"])).astype(np.float32)],
    "Expand": lambda n, a: [np.ascontiguousarray(np.broadcast_to(a[0], n.attrs["shape"]))],
    "Pad": _pad,
    "Resize": _resize,
    "Identity": lambda n, a: [a[0]],
    "FakeQuant": _fake_quant,
    "Take": _take,
    "Where": _where,
    "Cast": lambda n, a: [np.asarray(a[0]).astype(n.attrs["to"])],
    **{op: _boolean(fn)
       for op, fn in (("Equal", np.equal), ("Less", np.less), ("Greater", np.greater),
                      ("LessOrEqual", np.less_equal), ("GreaterOrEqual", np.greater_equal),
                      ("And", np.logical_and), ("Or", np.logical_or),
                      ("Xor", np.logical_xor))},
    "Not": lambda n, a: [np.logical_not(a[0])],
    "IsNaN": lambda n, a: [np.isnan(a[0])],
    "IsInf": lambda n, a: [(np.isposinf(a[0]) & bool(n.attrs["detect_positive"]))
                           | (np.isneginf(a[0]) & bool(n.attrs["detect_negative"]))],
}

#: Ops of boolean output (comparisons and logic): attention masks, on the CPU.
BOOLEAN = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                     "Xor", "Not", "IsNaN", "IsInf"})

#: Element-wise ops: the output has the inputs' broadcast shape.
ELEMENTWISE = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Relu", "Clip", "Tanh", "Sigmoid", "Erf", "Sqrt", "Exp",
    "Neg", "Abs", "Reciprocal", "HardSigmoid", "HardSwish", "Silu", "Gelu", "LeakyRelu",
    "PRelu", "Identity", "Max", "Min", "Softplus", "Mish", "Elu"})


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


# ------------------------------------------------------------------ shape inference
Shape = tuple[int, ...]


def _pool_shape(n: Node, s: list[Shape]) -> Shape:
    (kh, kw), (sh, sw), (t, left, b, r) = (n.attrs["kernel_shape"], n.attrs["strides"],
                                           n.attrs["pads"])
    return (*s[0][:2], ops.conv_out_size(s[0][2], kh, sh, t, b, 1),
            ops.conv_out_size(s[0][3], kw, sw, left, r, 1))


def _conv_shape(n: Node, s: list[Shape]) -> Shape:
    (kh, kw), (sh, sw) = s[1][2:], n.attrs["strides"]
    (t, left, b, r), (dh, dw) = n.attrs["pads"], n.attrs["dilations"]
    ih, iw = n.attrs.get("input_strides", [1, 1])
    return (s[0][0], s[1][0], ops.conv_out_size((s[0][2] - 1) * ih + 1, kh, sh, t, b, dh),
            ops.conv_out_size((s[0][3] - 1) * iw + 1, kw, sw, left, r, dw))


def _conv_t_shape(n: Node, s: list[Shape]) -> Shape:
    (kh, kw), (sh, sw) = s[1][2:], n.attrs["strides"]
    (t, left, b, r), (dh, dw) = n.attrs["pads"], n.attrs["dilations"]
    op = n.attrs["output_padding"]
    return (s[0][0], s[1][1] * n.attrs["group"],
            (s[0][2] - 1) * sh + dh * (kh - 1) + 1 + op[0] - t - b,
            (s[0][3] - 1) * sw + dw * (kw - 1) + 1 + op[1] - left - r)


def _gemm_shape(n: Node, s: list[Shape]) -> Shape:
    m = s[0][1] if n.attrs["transA"] else s[0][0]
    return (m, s[1][0] if n.attrs["transB"] else s[1][1])


def _matmul_shape(n: Node, s: list[Shape]) -> Shape:
    a, b = s[0], s[1]
    if len(b) == 1:
        return a[:-1]
    if len(a) == 1:
        return (*b[:-2], b[-1])
    return (*np.broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])


def _reduce_shape(n: Node, s: list[Shape]) -> Shape:
    axes = set(n.attrs["axes"])
    if n.attrs["keepdims"]:
        return tuple(1 if k in axes else d for k, d in enumerate(s[0]))
    return tuple(d for k, d in enumerate(s[0]) if k not in axes)


#: Output shape of the ops whose kernels do arithmetic; the others (copies, which cost no
#: more than the shape they make) get theirs by running the kernel on zeros.
SHAPE_RULES: dict[str, Callable[[Node, list[Shape]], Shape]] = {
    "Conv": _conv_shape,
    "ConvTranspose": _conv_t_shape,
    "Dense": lambda n, s: (*s[0][:-1], s[1][0]),
    "Gemm": _gemm_shape,
    "MatMul": _matmul_shape,
    "MaxPool": _pool_shape,
    "AveragePool": _pool_shape,
    "GlobalAveragePool": lambda n, s: (*s[0][:2], 1, 1),
    "GlobalMaxPool": lambda n, s: (*s[0][:2], 1, 1),
    "ReduceMean": _reduce_shape,
    "ReduceMax": _reduce_shape,
    **{op: lambda n, s: tuple(np.broadcast_shapes(*s)) for op in ELEMENTWISE},
    **{op: lambda n, s: s[0] for op in ("BatchNormalization", "LayerNormalization", "Softmax",
                                        "LogSoftmax")},
    "Expand": lambda n, s: tuple(n.attrs["shape"]),
    "Take": lambda n, s: (*s[0][:n.attrs["axis"]], *s[1], *s[0][n.attrs["axis"] + 1:]),
    "Cast": lambda n, s: s[0],
    **{op: lambda n, s: tuple(np.broadcast_shapes(*s)) for op in (*BOOLEAN, "Where")},
}


def output_dtype(n: Node, in_dtypes: list[str | None]) -> str:
    """The dtype of node ``n``'s (first) output from its inputs' dtypes: float32 for the
    arithmetic ops, bool for comparisons and logic, the target of a Cast, the table's for a
    Take, the common type of a Where's values, and the input's for the ops that move values."""
    if n.op in BOOLEAN:
        return "bool"
    if n.op == "Cast":
        return str(np.dtype(n.attrs["to"]))
    if n.op == "Take":
        return in_dtypes[0] or "float32"
    if n.op == "Where":
        kinds = {np.dtype(d).kind for d in in_dtypes[1:] if d}
        return "float32" if "f" in kinds else str(np.result_type(*[d for d in in_dtypes[1:]
                                                                    if d]))
    if n.op in SHAPE_RULES:
        return "float32"
    return in_dtypes[0] if in_dtypes and in_dtypes[0] else "float32"


def output_shape(n: Node, in_shapes: list[Shape | None],
                 params: Mapping[str, np.ndarray]) -> Shape:
    """The shape of node ``n``'s (first) output from its inputs' shapes."""
    rule = SHAPE_RULES.get(n.op)
    if rule is not None:
        return tuple(int(d) for d in rule(n, [s for s in in_shapes if s is not None]))
    args = [params[i] if i in params else (np.zeros(s, np.float32) if s is not None else None)
            for i, s in zip(n.inputs, in_shapes)]
    return tuple(np.shape(FLOAT_KERNELS[n.op](n, args)[0]))


def infer_shapes(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Shapes of every tensor (graph inputs, parameters and node outputs)."""
    shapes: dict[str, Shape] = {k: tuple(v.shape) for k, v in graph.params.items()}
    shapes.update({k: tuple(v.shape) for k, v in graph.inputs.items()})
    for n in graph.nodes:
        out = output_shape(n, [shapes.get(i) if i else None for i in n.inputs], graph.params)
        shapes[n.outputs[0]] = out
    return shapes
