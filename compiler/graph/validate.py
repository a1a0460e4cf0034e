"""Model validation at import: what onnxruntime rejects is rejected here too, before anything is
allocated, with a one-line :class:`ModelError` naming the node or tensor.

- **Window ops** (Conv, ConvTranspose, MaxPool, AveragePool): strides and dilations at least 1,
  pads not negative (and, for pooling, smaller than the kernel), the weight's input channels
  times ``group`` equal to the input's channels, ``group`` dividing the channels, a bias of one
  value per output channel, and a window that fits the padded input.
- **Values:** a weight (a float constant of a layer with weights) must be finite: the int8
  path scales every weight into [-127, 127], which NaN and infinity have no place in. Folding
  (batch-norm into a convolution) must stay within float32's finite range
  (:func:`check_finite`).
- **Sizes:** every tensor a node reads or writes, and every tensor stored outside the model
  file, holds at most :data:`MAX_TENSOR_BYTES`; the float reference, calibration and the
  planner allocate them, so a bigger one is refused before it is allocated.

The converter calls :func:`checked_shape` for every node it emits (the one place), and
:func:`check_external_data` before it loads tensors stored beside the model file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa.fileio import format_size

from .. import ops
from .errors import ModelError
from .ir import Node
from .reference import output_shape

#: The largest tensor a model may have (a weight, an activation, a graph input), in bytes;
#: VGG-16's largest weight is 411 MB.
MAX_TENSOR_BYTES = 1 << 30

Shape = tuple[int, ...]

#: float32's largest finite value
_F32_MAX = float(np.finfo(np.float32).max)


def checked_shape(n: Node, in_shapes: Sequence[Shape | None],
                  params: Mapping[str, np.ndarray], source: str) -> Shape:
    """The shape of node ``n``'s output (as :func:`.reference.output_shape` gives it), after
    checking its inputs' sizes, its constants' values and its attributes, and then the size of
    the output itself."""
    for name, shape in zip(n.inputs, in_shapes):
        if shape is not None:
            _check_size(n, source, f"input {name!r}", shape, 4)
        # the constants of the ops whose constants are weights the int8 path scales (a
        # constant elsewhere, such as an attention mask of -inf, may be meant)
        if name in params and ops.has(n.op, "weights"):
            check_finite(params[name], f"{source}: node {n.name!r} ({n.op}): tensor {name!r}")
    desc = ops.get(n.op)
    rule = desc.check_attrs if desc is not None else None
    if rule is not None:
        problem = rule(n, [s for s in in_shapes if s is not None])
        if problem:
            raise ModelError(f"{source}: node {n.name!r} ({n.op}): {problem}")
    ahead = desc.predict_shape if desc is not None else None
    if ahead is not None and in_shapes and in_shapes[0] is not None:
        _check_size(n, source, "output", ahead(n, in_shapes[0]), 4)  # before computing it
    out = output_shape(n, list(in_shapes), params)
    if any(d < 1 for d in out):
        raise ModelError(f"{source}: node {n.name!r} ({n.op}): its output shape {list(out)} "
                         "is empty or negative")
    _check_size(n, source, "output", out, 4)
    return out


def check_finite(a: np.ndarray, what: str) -> None:
    """A ModelError naming ``what`` when the float array ``a`` holds NaN, infinity or a value
    beyond float32's finite range."""
    a = np.asarray(a)
    if a.dtype.kind != "f" or a.size == 0:
        return
    finite = np.isfinite(a)
    if not finite.all():
        bad = int(a.size - finite.sum())
        raise ModelError(f"{what} holds {bad} NaN or infinite value(s) of {a.size}; the int8 "
                         "path cannot represent them (fix or retrain the model)")
    peak = float(np.abs(a).max()) if a.dtype.itemsize > 4 else 0.0  # float32: finite is in range
    if peak > _F32_MAX:
        raise ModelError(f"{what} holds {peak:.3g}, beyond float32's finite range; the int8 "
                         "path cannot represent it")


def check_folded_size(op: str, name: str, values: Sequence[np.ndarray | None],
                      source: str) -> None:
    """Before a node of constant inputs is evaluated at import: the ops whose output size
    comes from an input's values (ConstantOfShape, Expand, Tile, Range) may make at most
    :data:`MAX_TENSOR_BYTES`."""
    try:
        size = _folded_size(op, values)
    except (ValueError, TypeError, IndexError, OverflowError):
        return  # not a size: the evaluation reports it
    if size is not None and size * 8 > MAX_TENSOR_BYTES:
        raise ModelError(f"{source}: node {name!r} ({op}) of constant inputs would make "
                         f"{size} values ({format_size(size * 8)} as int64), more than the "
                         f"{format_size(MAX_TENSOR_BYTES)} a tensor may have")


def _folded_size(op: str, v: Sequence[np.ndarray | None]) -> int | None:
    if op == "ConstantOfShape" and v and v[0] is not None:
        return math.prod(max(int(d), 0) for d in v[0].reshape(-1))
    if op == "Expand" and len(v) > 1 and v[0] is not None and v[1] is not None:
        dims = [int(d) for d in v[1].reshape(-1)]
        shape = list(v[0].shape)
        rank = max(len(dims), len(shape))
        dims, shape = [1] * (rank - len(dims)) + dims, [1] * (rank - len(shape)) + shape
        return math.prod(max(a, b) for a, b in zip(dims, shape))
    if op == "Tile" and len(v) > 1 and v[0] is not None and v[1] is not None:
        return v[0].size * math.prod(max(int(r), 0) for r in v[1].reshape(-1))
    if op == "Range" and len(v) > 2 and all(x is not None for x in v[:3]):
        start, limit, delta = (float(x.reshape(-1)[0]) for x in v[:3])
        return max(math.ceil((limit - start) / delta), 0) if delta else None
    return None


def check_external_data(tensors: Iterable[Any], base: Path, source: str) -> None:
    """Before loading the ONNX ``tensors`` stored beside the model file: each claims at most
    :data:`MAX_TENSOR_BYTES`, names a regular file inside ``base`` and fits in it."""
    # deferred: onnx is a heavy import, made only when a model is read
    from onnx import helper
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    root = base.resolve()
    for t in tensors:
        if not uses_external_data(t):
            continue
        dtype = helper.tensor_dtype_to_np_dtype(t.data_type) if t.data_type else None
        itemsize = np.dtype(dtype).itemsize if dtype is not None else 1
        claimed = math.prod(t.dims) * itemsize
        what = f"{source}: tensor {t.name!r}"
        if claimed > MAX_TENSOR_BYTES:
            raise ModelError(f"{what} claims {'x'.join(map(str, t.dims))} values "
                             f"({format_size(claimed)}), more than the "
                             f"{format_size(MAX_TENSOR_BYTES)} a tensor may have")
        info = ExternalDataInfo(t)
        path = (base / info.location).resolve()
        if not path.is_relative_to(root):
            raise ModelError(f"{what} is stored in {info.location}, outside the model's "
                             "directory")
        if not path.is_file():
            raise ModelError(f"{what} is stored in {info.location}, which is not a file "
                             "beside the model")
        end = (info.offset or 0) + (info.length if info.length else claimed)
        if path.stat().st_size < end:
            raise ModelError(f"{what} needs bytes up to {end} of {info.location}, which has "
                             f"{path.stat().st_size}")


def _check_size(n: Node, source: str, what: str, shape: Shape, itemsize: int) -> None:
    size = math.prod(shape) * itemsize
    if size > MAX_TENSOR_BYTES:
        raise ModelError(f"{source}: node {n.name!r} ({n.op}): its {what} "
                         f"{'x'.join(map(str, shape))} would take {format_size(size)}, more "
                         f"than the {format_size(MAX_TENSOR_BYTES)} a tensor may have")


def _window(n: Node, kernel: Sequence[int], dilations: Sequence[int],
            spatial: Sequence[int] | None) -> str | None:
    """The common checks of a 2-D window op: strides, dilations, pads and the window fits."""
    strides, pads = list(n.attrs["strides"]), list(n.attrs["pads"])
    if len(strides) != 2 or min(strides) < 1:
        return f"strides {strides} must be two integers of at least 1"
    if len(dilations) != 2 or min(dilations) < 1:
        return f"dilations {list(dilations)} must be two integers of at least 1"
    if len(pads) != 4 or min(pads) < 0:
        return f"pads {pads} must be four integers of at least 0"
    if len(kernel) != 2 or min(kernel) < 1:
        return f"kernel {list(kernel)} must be two sizes of at least 1"
    for k, (size, kk, d) in enumerate(zip(spatial or (), kernel, dilations)):
        span = (kk - 1) * d + 1
        if size + pads[k] + pads[k + 2] < span:
            return (f"its {kk}-wide window with dilation {d} spans {span}, more than the "
                    f"padded input's {size + pads[k] + pads[k + 2]}")
    return None


def _conv(n: Node, s: list[Shape]) -> str | None:
    if len(s) < 2 or len(s[0]) != 4 or len(s[1]) != 4:
        return f"needs a 4-D input and weight (shapes {[list(x) for x in s[:2]]})"
    (_, ci, *spatial), (co, wci, *kernel) = s[0], s[1]
    g = n.attrs.get("group", 1)
    if g < 1 or ci % g or co % g:
        return f"group={g} does not divide its {ci} input and {co} output channels"
    if wci * g != ci:
        return (f"its weight has {wci} input channels per group; with group={g} the input "
                f"needs {wci * g} channels, not {ci}")
    if len(s) > 2 and s[2] != (co,):
        return f"its bias has shape {list(s[2])}, not [{co}]"
    return _window(n, kernel, n.attrs["dilations"], spatial)


def _conv_t(n: Node, s: list[Shape]) -> str | None:
    if len(s) < 2 or len(s[0]) != 4 or len(s[1]) != 4:
        return f"needs a 4-D input and weight (shapes {[list(x) for x in s[:2]]})"
    (_, ci, *_spatial), (wci, _, *kernel) = s[0], s[1]
    g = n.attrs.get("group", 1)
    if g < 1 or ci % g:
        return f"group={g} does not divide its {ci} input channels"
    if wci != ci:
        return f"its weight has {wci} input channels, the input {ci}"
    strides, outpad = list(n.attrs["strides"]), list(n.attrs.get("output_padding", [0, 0]))
    if len(outpad) != 2 or min(outpad) < 0 or any(
            p >= max(st, d) for p, st, d in zip(outpad, strides, n.attrs["dilations"])):
        return f"output_padding {outpad} must be at least 0 and below the strides {strides}"
    return _window(n, kernel, n.attrs["dilations"], None)


def _pool(n: Node, s: list[Shape]) -> str | None:
    if len(s[0]) != 4:
        return f"needs a 4-D input (shape {list(s[0])})"
    kernel, pads = list(n.attrs["kernel_shape"]), list(n.attrs["pads"])
    problem = _window(n, kernel, [1, 1], s[0][2:])
    # the end pads may hold ceil mode's extra row: the begin pads are the model's own
    if problem is None and any(p >= k for p, k in zip(pads[:2], kernel)):
        return f"pads {pads} must be smaller than the kernel {kernel}"
    return problem


def _dense(n: Node, s: list[Shape]) -> str | None:
    if len(s) < 2 or len(s[1]) != 2 or not s[0] or s[0][-1] != s[1][1]:
        return (f"its weight {list(s[1]) if len(s) > 1 else []} does not take the input's "
                f"last dimension {s[0][-1] if s and s[0] else '?'}")
    return None


def _pad_ahead(n: Node, s: Shape) -> Shape:
    pads, rank = list(n.attrs["pads"]), len(s)
    if len(pads) != 2 * rank:
        return s
    return tuple(d + max(pads[k], 0) + max(pads[k + rank], 0) for k, d in enumerate(s))


def _resize_ahead(n: Node, s: Shape) -> Shape:
    if n.attrs.get("sizes"):
        return tuple(max(int(d), 0) for d in n.attrs["sizes"])
    scales = n.attrs.get("scales") or []
    if len(scales) != len(s):
        return s
    return tuple(int(d * max(float(f), 0.0)) if math.isfinite(f) else 0
                 for d, f in zip(s, scales))


# the output shape of ops whose kernel would be run (and allocate) to learn it, told ahead
ops.attach("Pad", predict_shape=_pad_ahead)
ops.attach("Resize", predict_shape=_resize_ahead)
ops.attach("Conv", check_attrs=_conv)
ops.attach("ConvTranspose", check_attrs=_conv_t)
ops.attach("MaxPool", check_attrs=_pool)
ops.attach("AveragePool", check_attrs=_pool)
ops.attach("Dense", check_attrs=_dense)
