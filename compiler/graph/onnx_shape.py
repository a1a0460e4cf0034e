"""ONNX converters of the ops that move, select, reshape or cast values (registered with their
op: :func:`.onnx_converter.converts`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .onnx_converter import Attrs, Converter, Ins, converts, static_reshape


def _forward(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.extra_outputs_used(outs):
        raise c.fail("Dropout", name, "the mask output is not supported (inference only)")
    c.forward(ins[0], outs[0])


#: Cast targets on activations: floats stay float32 (a float Cast forwards its input); integer
#: and boolean ones are real casts (of masks and ids).
_CAST_TYPES = {"FLOAT": "float32", "DOUBLE": "float32", "FLOAT16": "float32", "INT64": "int64",
               "INT32": "int32", "INT8": "int8", "UINT8": "uint8", "BOOL": "bool"}


def _cast(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    # deferred: onnx is a heavy import, made only when a model is read
    import onnx

    to_name = onnx.TensorProto.DataType.Name(int(a.get("to", 0)))
    to = _CAST_TYPES.get(to_name)
    if to is None:
        raise c.fail("Cast", name, f"a cast of an activation to {to_name} is not supported "
                                   f"({', '.join(_CAST_TYPES)})")
    if to == c.dtype(ins[0]):
        c.forward(ins[0], outs[0])
    else:
        c.emit("Cast", name, ins[:1], outs[:1], to=to)


def _shape(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    shp = np.asarray(c.shape(ins[0]), np.int64)
    rank = len(shp)
    start = c.axis(int(a.get("start", 0)), rank)
    end = c.axis(int(a.get("end", rank)), rank)
    c.params[outs[0]] = shp[max(start, 0):max(end, 0)]


def _size(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    c.params[outs[0]] = np.asarray(math.prod(c.shape(ins[0])), np.int64)


def _flatten(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    rank = len(c.shape(ins[0]))
    axis = int(a.get("axis", 1))
    c.emit("Flatten", name, ins[:1], outs[:1], axis=axis + rank if axis < 0 else axis)


def _reshape(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.opset < 5:
        target = list(a["shape"])
    else:
        target = [int(v) for v in c.const("Reshape", name, ins[1], "the target shape")]
    xs = c.shape(ins[0])
    if not a.get("allowzero", 0):
        target = [xs[i] if v == 0 else v for i, v in enumerate(target)]
    if target.count(-1) > 1:
        raise c.fail("Reshape", name, f"target shape {target} has more than one -1")
    if -1 in target:
        known = math.prod(v for v in target if v != -1)
        target[target.index(-1)] = math.prod(xs) // known if known else 0
    if math.prod(target) != math.prod(xs):
        raise c.fail("Reshape", name, f"cannot reshape {list(xs)} to {target}")
    static_reshape(c, name, ins[0], outs[0], target)


def _axes_arg(c: Converter, op: str, name: str, ins: Ins, a: Attrs) -> list[int] | None:
    if "axes" in a:
        return [int(v) for v in a["axes"]]
    if len(ins) > 1 and ins[1]:
        return [int(v) for v in c.const(op, name, ins[1], "axes").reshape(-1)]
    return None


def _unsqueeze(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    xs = list(c.shape(ins[0]))
    axes = _axes_arg(c, "Unsqueeze", name, ins, a)
    if axes is None:
        raise c.fail("Unsqueeze", name, "axes are required")
    rank = len(xs) + len(axes)
    for ax in sorted(c.axis(v, rank) for v in axes):
        xs.insert(ax, 1)
    static_reshape(c, name, ins[0], outs[0], xs)


def _squeeze(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    xs = list(c.shape(ins[0]))
    axes = _axes_arg(c, "Squeeze", name, ins, a)
    drop = {c.axis(v, len(xs)) for v in axes} if axes is not None else \
        {k for k, d in enumerate(xs) if d == 1}
    static_reshape(c, name, ins[0], outs[0], [d for k, d in enumerate(xs) if k not in drop])


def _transpose(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    rank = len(c.shape(ins[0]))
    perm = [int(v) for v in a.get("perm", range(rank - 1, -1, -1))]
    c.emit("Transpose", name, ins[:1], outs[:1], perm=perm)


def _slice_attrs(shape: tuple[int, ...], starts: list[int], ends: list[int],
                 axes: list[int], steps: list[int]) -> dict[str, list[Any]]:
    """Canonical Slice attributes: non-negative axes, clamped bounds (an end of None runs to
    the start of the axis for a negative step)."""
    out: dict[str, list[Any]] = {"axes": [], "starts": [], "ends": [], "steps": []}
    for ax, b, e, st in zip(axes, starts, ends, steps):
        ax = ax + len(shape) if ax < 0 else ax
        b, e, st = slice(int(max(min(b, 2**62), -2**62)), int(max(min(e, 2**62), -2**62)),
                         int(st)).indices(shape[ax])
        out["axes"].append(ax)
        out["starts"].append(b)
        out["ends"].append(None if e < 0 else e)
        out["steps"].append(st)
    return out


def _slice(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    xs = c.shape(ins[0])
    if c.opset < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        def arg(k: int, what: str) -> list[int] | None:
            v = c.const("Slice", name, ins[k] if len(ins) > k else "", what)
            return None if v is None else [int(x) for x in v.reshape(-1)]
        starts, ends = arg(1, "starts"), arg(2, "ends")
        axes = arg(3, "axes") or list(range(len(starts)))
        steps = arg(4, "steps") or [1] * len(starts)
    if 0 in steps:
        raise c.fail("Slice", name, "a step of 0 is not valid")
    c.emit("Slice", name, ins[:1], outs[:1], **_slice_attrs(xs, starts, ends, axes, steps))


def _split(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """One Slice per output."""
    xs = c.shape(ins[0])
    axis = c.axis(int(a.get("axis", 0)), len(xs))
    n_out = len(outs)
    if "split" in a:
        sizes = [int(v) for v in a["split"]]
    elif len(ins) > 1 and ins[1]:
        sizes = [int(v) for v in c.const("Split", name, ins[1], "split").reshape(-1)]
    else:  # equal parts (opset 18: num_outputs; the last part may be smaller)
        part = -(-xs[axis] // n_out)
        sizes = [min(part, xs[axis] - k * part) for k in range(n_out)]
    if len(sizes) != n_out or sum(sizes) != xs[axis]:
        raise c.fail("Split", name, f"split sizes {sizes} do not cover axis {axis} "
                                    f"({xs[axis]}) in {n_out} outputs")
    begin = 0
    for k, (size, out) in enumerate(zip(sizes, outs)):
        if out:
            c.emit("Slice", f"{name}.{k}", ins[:1], [out],
                   **_slice_attrs(xs, [begin], [begin + size], [axis], [1]))
        begin += size


def _gather(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """Constant indices: ``Gather`` (a selection of the input's values); indices computed at
    run time (token ids into an embedding table): ``Take``, which checks their range."""
    xs = c.shape(ins[0])
    axis = c.axis(int(a.get("axis", 0)), len(xs))
    if ins[1] not in c.params:
        if c.dtype(ins[1]) not in ("int64", "int32"):
            raise c.fail("Gather", name, f"indices {ins[1]!r} are {c.dtype(ins[1])}, not "
                                         f"integers")
        c.emit("Take", name, ins[:2], outs[:1], axis=axis)
        return
    idx = c.const("Gather", name, ins[1], "the indices").astype(np.int64)
    idx = np.where(idx < 0, idx + xs[axis], idx)
    c.emit("Gather", name, ins[:1], outs[:1], axis=axis, indices=idx.tolist())


def _concat(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if "axis" not in a:
        raise c.fail("Concat", name, "the axis attribute is required")
    ins = [i for i in ins if i and math.prod(c.shape(i)) > 0]  # empty parts add nothing
    rank = len(c.shape(ins[0]))
    c.emit("Concat", name, ins, outs[:1], axis=c.axis(int(a["axis"]), rank))


def _expand(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    target = [int(v) for v in c.const("Expand", name, ins[1], "the shape")]
    shape = list(np.broadcast_shapes(c.shape(ins[0]), tuple(target)))
    if tuple(shape) == c.shape(ins[0]):
        c.forward(ins[0], outs[0])
    else:
        c.emit("Expand", name, ins[:1], outs[:1], shape=shape)


def _pad(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise c.fail("Pad", name, f"mode={mode} is not supported (constant, reflect, edge)")
    if c.opset < 11:
        pads, value = list(a["pads"]), float(a.get("value", 0.0))
    else:
        pads = [int(v) for v in c.const("Pad", name, ins[1], "pads")]
        v = c.const("Pad", name, ins[2] if len(ins) > 2 else "", "constant_value")
        value = 0.0 if v is None else float(np.asarray(v).reshape(-1)[0])
        if len(ins) > 3 and ins[3]:  # opset 18: pads for the listed axes only
            rank = len(c.shape(ins[0]))
            axes = [c.axis(int(v), rank) for v in c.const("Pad", name, ins[3], "axes")]
            full = [0] * (2 * rank)
            for k, ax in enumerate(axes):
                full[ax], full[ax + rank] = pads[k], pads[k + len(axes)]
            pads = full
    if min(pads) < 0:
        raise c.fail("Pad", name, "negative pads are not supported")
    c.emit("Pad", name, ins[:1], outs[:1], pads=pads, mode=mode, value=value)


_COORD_MODES = ("asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners",
                "tf_half_pixel_for_nearest")


def _resize(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise c.fail("Resize", name, f"mode={mode} is not supported (nearest, linear)")
    for key in ("antialias", "exclude_outside"):
        if a.get(key, 0):
            raise c.fail("Resize", name, f"{key}={a[key]} is not supported (only 0)")
    if "axes" in a or a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise c.fail("Resize", name, "axes / keep_aspect_ratio_policy are not supported")
    coord = a.get("coordinate_transformation_mode", "asymmetric" if c.opset < 11
                  else "half_pixel")
    allowed = _COORD_MODES if mode == "nearest" else _COORD_MODES[:4]
    if coord not in allowed:
        raise c.fail("Resize", name, f"coordinate_transformation_mode={coord} is not "
                                     f"supported with mode={mode} ({', '.join(allowed)})")
    nearest = a.get("nearest_mode", "floor" if c.opset < 11 else "round_prefer_floor")
    if c.opset < 11:
        scales_t, sizes_t = c.const("Resize", name, ins[1], "scales"), None
    else:
        scales_t = c.const("Resize", name, ins[2] if len(ins) > 2 else "", "scales")
        sizes_t = c.const("Resize", name, ins[3] if len(ins) > 3 else "", "sizes")
    scales = [float(v) for v in scales_t] if scales_t is not None and scales_t.size else None
    sizes = [int(v) for v in sizes_t] if sizes_t is not None and sizes_t.size else None
    if scales is None and sizes is None:
        raise c.fail("Resize", name, "neither scales nor sizes is given")
    c.emit("Resize", name, ins[:1], outs[:1], scales=scales, sizes=sizes, mode=mode,
           coordinate_transformation_mode=coord, nearest_mode=nearest)


def _upsample(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise c.fail("Upsample", name, f"mode={mode} is not supported (nearest, linear)")
    if "scales" in a:
        scales = [float(v) for v in a["scales"]]
    elif "height_scale" in a:
        scales = [1.0, 1.0, float(a["height_scale"]), float(a["width_scale"])]
    else:
        scales = [float(v) for v in c.const("Upsample", name, ins[1], "scales")]
    c.emit("Resize", name, ins[:1], outs[:1], scales=scales, sizes=None,
           mode="nearest" if mode == "nearest" else "linear",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor")


converts("Expand", _expand)


converts("Flatten", _flatten)


converts("Reshape", _reshape)


converts("Unsqueeze", _unsqueeze)


converts("Squeeze", _squeeze)


converts("Transpose", _transpose)


converts("Slice", _slice)


converts("Split", _split)


converts("Gather", _gather)


converts("Concat", _concat)


converts("Pad", _pad)


converts("Resize", _resize)


converts("Upsample", _upsample)


converts("Identity", _forward)


converts("Dropout", _forward)


converts("Cast", _cast)


converts("Shape", _shape)


converts("Size", _size)
