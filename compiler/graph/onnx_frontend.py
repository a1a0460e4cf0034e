"""ONNX -> graph IR. Every operator is converted to canonical attributes; anything else is an
:class:`UnsupportedOpError` naming the op type, the node and what is supported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ModelError, UnsupportedOpError
from .ir import Graph, Node, TensorInfo

SUPPORTED_OPS = (
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Mul", "Relu", "Clip", "Tanh", "Sigmoid",
    "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape",
    "Concat", "Softmax", "Pad", "Resize", "Upsample", "Identity", "Dropout", "Constant",
)

#: Attributes each op accepts (others are rejected by name).
_ATTRS: dict[str, set[str]] = {
    "Conv": {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
    "ConvTranspose": {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides",
                      "output_padding"},
    "Gemm": {"alpha", "beta", "transA", "transB", "broadcast"},
    "MatMul": set(), "Add": {"broadcast", "axis"}, "Mul": {"broadcast", "axis"},
    "Relu": set(), "Clip": {"min", "max"}, "Tanh": set(), "Sigmoid": set(),
    "BatchNormalization": {"epsilon", "momentum", "spatial", "training_mode", "is_test"},
    "MaxPool": {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides",
                "storage_order"},
    "AveragePool": {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads",
                    "strides", "dilations"},
    "GlobalAveragePool": set(), "Flatten": {"axis"}, "Reshape": {"allowzero", "shape"},
    "Concat": {"axis"}, "Softmax": {"axis"}, "Pad": {"mode", "pads", "value"},
    "Resize": {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
               "exclude_outside", "extrapolation_value", "antialias", "axes",
               "keep_aspect_ratio_policy"},
    "Upsample": {"mode", "scales", "height_scale", "width_scale"},
    "Identity": set(), "Dropout": {"ratio", "seed", "is_test"}, "Constant": {"value"},
}


def load_onnx(path: str | Path) -> Graph:
    """Read an ONNX file into a :class:`Graph` (a one-line ModelError on any problem)."""
    import onnx

    p = Path(path)
    if not p.exists():
        raise ModelError(f"model file {p} does not exist")
    if p.is_dir():
        raise ModelError(f"model file {p} is a directory (vta run accepts a compiled module "
                         f"directory; vta compile needs an .onnx file)")
    try:
        model = onnx.load(str(p))
    except Exception as e:  # noqa: BLE001 - protobuf raises several unrelated types
        raise ModelError(f"{p} is not a valid ONNX file ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else 'cannot parse'})") from None
    return from_onnx(model, source=str(p))


def from_onnx(model: Any, *, source: str = "model") -> Graph:
    """Convert an ``onnx.ModelProto`` (checked first) into a :class:`Graph`."""
    import onnx
    from onnx import numpy_helper

    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{source} contains no graph (is it an ONNX model file?)")
    try:
        onnx.checker.check_model(model)
    except Exception as e:  # noqa: BLE001 - ValidationError and friends
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"{source} is not a valid ONNX model: {first}") from None
    opset = 1
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = imp.version
    g = model.graph
    params: dict[str, np.ndarray] = {}
    for init in g.initializer:
        params[init.name] = _to_array(numpy_helper, init, source)
    inputs: dict[str, TensorInfo] = {}
    for vi in g.input:
        if vi.name in params:
            continue
        inputs[vi.name] = _tensor_info(vi, source)
    if not inputs:
        raise ModelError(f"{source} has no (non-constant) graph input")
    conv = _Converter(params, opset, source)
    for k, onode in enumerate(g.node):
        conv.convert(onode, k)
    graph = Graph(conv.nodes, inputs, [o.name for o in g.output], params,
                  name=g.name or Path(source).stem)
    graph.verify()
    return graph.remove_unused()


def _to_array(numpy_helper: Any, t: Any, source: str) -> np.ndarray:
    try:
        a = numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{source}: tensor {t.name!r} cannot be read ({e})") from None
    if a.dtype == np.float64 or a.dtype == np.float16:
        a = a.astype(np.float32)
    return a


def _tensor_info(vi: Any, source: str) -> TensorInfo:
    import onnx

    tt = vi.type.tensor_type
    if tt.elem_type != onnx.TensorProto.FLOAT:
        name = onnx.TensorProto.DataType.Name(tt.elem_type) if tt.elem_type else "unknown"
        raise UnsupportedOpError(f"{source}: input {vi.name!r} has element type {name}; only "
                                 f"FLOAT (float32) inputs are supported")
    if not tt.HasField("shape"):
        raise ModelError(f"{source}: input {vi.name!r} has no shape; give the model a static "
                         f"input shape")
    dims = []
    for k, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(d.dim_value)
        elif k == 0:
            dims.append(1)  # a symbolic batch dimension: compile for batch 1
        else:
            raise ModelError(f"{source}: input {vi.name!r} dimension {k} is symbolic "
                             f"({d.dim_param or '?'}); export the model with a static shape")
    return TensorInfo(tuple(dims), "float32")


class _Converter:
    def __init__(self, params: dict[str, np.ndarray], opset: int, source: str):
        self.params, self.opset, self.source = params, opset, source
        self.nodes: list[Node] = []
        self.names: set[str] = set()

    # ------------------------------------------------------------------ helpers
    def fail(self, op: str, name: str, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.source}: node {name!r} ({op}): {what}")

    def const(self, op: str, name: str, tensor: str, what: str) -> np.ndarray | None:
        if not tensor:
            return None
        if tensor not in self.params:
            raise self.fail(op, name, f"{what} (input {tensor!r}) must be a constant "
                                      f"(an initializer or Constant node)")
        return self.params[tensor]

    def convert(self, onode: Any, k: int) -> None:
        from onnx import helper

        op = onode.op_type
        name = onode.name or f"{op}_{k}"
        while name in self.names:
            name = f"{name}_{k}"
        self.names.add(name)
        if onode.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(
                f"{self.source}: node {name!r} is {onode.domain}::{op}; only the default ONNX "
                f"domain is supported (ops: {', '.join(SUPPORTED_OPS)})")
        if op not in _CONVERTERS:
            raise UnsupportedOpError(
                f"{self.source}: node {name!r} has unsupported op type {op}; supported: "
                f"{', '.join(SUPPORTED_OPS)}")
        attrs = {a.name: helper.get_attribute_value(a) for a in onode.attribute}
        for key in attrs:
            if key not in _ATTRS[op]:
                raise self.fail(op, name, f"attribute {key!r} is not supported (supported: "
                                          f"{', '.join(sorted(_ATTRS[op])) or 'none'})")
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        ins, outs = list(onode.input), list(onode.output)
        _CONVERTERS[op](self, name, ins, outs, attrs)

    def emit(self, op: str, name: str, ins: list[str], outs: list[str], **attrs: Any) -> None:
        self.nodes.append(Node(op, name, ins, outs, attrs))

    def spatial(self, op: str, name: str, attrs: dict[str, Any], kernel: list[int]
                ) -> tuple[list[int], list[int], list[int]]:
        if len(kernel) != 2:
            raise self.fail(op, name, f"only 2-D operators are supported (kernel {kernel})")
        auto = attrs.get("auto_pad", "NOTSET")
        if auto not in ("NOTSET", "VALID"):
            raise self.fail(op, name, f"auto_pad={auto} is not supported (supported: NOTSET "
                                      f"with explicit pads, VALID)")
        strides = list(attrs.get("strides", [1, 1]))
        dil = list(attrs.get("dilations", [1, 1]))
        p = list(attrs.get("pads", [0, 0, 0, 0])) if auto == "NOTSET" else [0, 0, 0, 0]
        # ONNX pads are [x1_begin, x2_begin, x1_end, x2_end] == [top, left, bottom, right]
        return strides, [int(v) for v in p], dil


def _conv(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    w = c.const("Conv", name, ins[1], "the weight")
    if w.ndim != 4:
        raise c.fail("Conv", name, f"only 2-D convolution is supported (weight rank {w.ndim})")
    kernel = list(a.get("kernel_shape", w.shape[2:]))
    strides, pads, dil = c.spatial("Conv", name, a, kernel)
    c.emit("Conv", name, [i for i in ins if i], outs[:1], strides=strides, pads=pads,
           dilations=dil, group=int(a.get("group", 1)))


def _conv_t(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    w = c.const("ConvTranspose", name, ins[1], "the weight")
    if w.ndim != 4:
        raise c.fail("ConvTranspose", name, "only 2-D transposed convolution is supported")
    kernel = list(a.get("kernel_shape", w.shape[2:]))
    strides, pads, dil = c.spatial("ConvTranspose", name, a, kernel)
    c.emit("ConvTranspose", name, [i for i in ins if i], outs[:1], strides=strides, pads=pads,
           dilations=dil, group=int(a.get("group", 1)),
           output_padding=list(a.get("output_padding", [0, 0])))


def _gemm(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
    b = c.params.get(ins[1])
    bias = c.params.get(ins[2]) if len(ins) > 2 and ins[2] else None
    has_c = len(ins) > 2 and bool(ins[2])
    if not ta and b is not None and b.ndim == 2 and (not has_c or bias is not None):
        w = (b if tb else b.T) * alpha
        wname = f"{name}.weight"
        c.params[wname] = np.ascontiguousarray(w.astype(np.float32))
        dins = [ins[0], wname]
        if bias is not None:
            n_out = w.shape[0]
            bb = np.broadcast_to(bias.astype(np.float32) * beta, (1, n_out)).reshape(n_out)
            c.params[f"{name}.bias"] = np.ascontiguousarray(bb)
            dins.append(f"{name}.bias")
        c.emit("Dense", name, dins, outs[:1])
        return
    c.emit("Gemm", name, [i for i in ins if i], outs[:1], alpha=alpha, beta=beta,
           transA=ta, transB=tb)


def _matmul(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    b = c.params.get(ins[1])
    if b is not None and b.ndim == 2:
        wname = f"{name}.weight"
        c.params[wname] = np.ascontiguousarray(b.T.astype(np.float32))
        c.emit("Dense", name, [ins[0], wname], outs[:1])
    else:
        c.emit("MatMul", name, ins, outs[:1])


def _binary(op: str) -> Callable[..., None]:
    def conv(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
        if "axis" in a:
            raise c.fail(op, name, "legacy broadcast with 'axis' is not supported; re-export "
                                   "with opset >= 7")
        c.emit(op, name, ins, outs[:1])
    return conv


def _simple(op: str) -> Callable[..., None]:
    def conv(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
        c.emit(op, name, ins[:1], outs[:1])
    return conv


def _clip(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    if c.opset < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo_t = c.const("Clip", name, ins[1] if len(ins) > 1 else "", "min")
        hi_t = c.const("Clip", name, ins[2] if len(ins) > 2 else "", "max")
        lo = None if lo_t is None else float(lo_t)
        hi = None if hi_t is None else float(hi_t)
    c.emit("Clip", name, ins[:1], outs[:1], min=lo, max=hi)


def _bn(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    if a.get("training_mode", 0):
        raise c.fail("BatchNormalization", name, "training_mode=1 is not supported "
                                                 "(export the model in eval mode)")
    if a.get("spatial", 1) != 1:
        raise c.fail("BatchNormalization", name, "spatial=0 is not supported")
    if len([o for o in outs if o]) > 1:
        raise c.fail("BatchNormalization", name, "only the first output (inference) is "
                                                 "supported")
    for k, what in zip(range(1, 5), ("scale", "bias", "mean", "var")):
        c.const("BatchNormalization", name, ins[k], what)
    c.emit("BatchNormalization", name, ins[:5], outs[:1], epsilon=float(a.get("epsilon", 1e-5)))


def _pool(op: str) -> Callable[..., None]:
    def conv(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
        if "kernel_shape" not in a:
            raise c.fail(op, name, "kernel_shape is required")
        kernel = list(a["kernel_shape"])
        strides, pads, dil = c.spatial(op, name, a, kernel)
        if dil != [1, 1]:
            raise c.fail(op, name, f"dilations={dil} are not supported (only 1)")
        if a.get("ceil_mode", 0):
            raise c.fail(op, name, "ceil_mode=1 is not supported (only 0, floor)")
        if a.get("storage_order", 0):
            raise c.fail(op, name, "storage_order=1 is not supported")
        if len([o for o in outs if o]) > 1:
            raise c.fail(op, name, "the Indices output is not supported")
        extra = {}
        if op == "AveragePool":
            extra["count_include_pad"] = bool(a.get("count_include_pad", 0))
        c.emit(op, name, ins[:1], outs[:1], kernel_shape=kernel, strides=strides, pads=pads,
               **extra)
    return conv


def _flatten(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    c.emit("Flatten", name, ins[:1], outs[:1], axis=int(a.get("axis", 1)))


def _reshape(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    if c.opset < 5:
        shape = list(a["shape"])
    else:
        shape = [int(v) for v in c.const("Reshape", name, ins[1], "the target shape")]
    c.emit("Reshape", name, ins[:1], outs[:1], shape=shape, allowzero=int(a.get("allowzero", 0)))


def _concat(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    if "axis" not in a:
        raise c.fail("Concat", name, "the axis attribute is required")
    c.emit("Concat", name, ins, outs[:1], axis=int(a["axis"]))


def _softmax(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    legacy = c.opset < 13
    c.emit("Softmax", name, ins[:1], outs[:1], axis=int(a.get("axis", 1 if legacy else -1)),
           legacy=legacy)


def _pad(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise c.fail("Pad", name, f"mode={mode} is not supported (constant, reflect, edge)")
    if c.opset < 11:
        pads, value = list(a["pads"]), float(a.get("value", 0.0))
    else:
        pads = [int(v) for v in c.const("Pad", name, ins[1], "pads")]
        v = c.const("Pad", name, ins[2] if len(ins) > 2 else "", "constant_value")
        value = 0.0 if v is None else float(np.asarray(v).reshape(-1)[0])
        if len(ins) > 3 and ins[3]:
            raise c.fail("Pad", name, "the axes input is not supported (give pads for every "
                                      "axis)")
    if min(pads) < 0:
        raise c.fail("Pad", name, "negative pads are not supported")
    c.emit("Pad", name, ins[:1], outs[:1], pads=pads, mode=mode, value=value)


def _resize(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]) -> None:
    mode = a.get("mode", "nearest")
    if mode != "nearest":
        raise c.fail("Resize", name, f"mode={mode} is not supported (only nearest)")
    for key in ("antialias", "exclude_outside"):
        if a.get(key, 0):
            raise c.fail("Resize", name, f"{key}={a[key]} is not supported (only 0)")
    if "axes" in a or a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise c.fail("Resize", name, "axes / keep_aspect_ratio_policy are not supported")
    coord = a.get("coordinate_transformation_mode", "asymmetric" if c.opset < 11
                  else "half_pixel")
    allowed = ("asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners",
               "tf_half_pixel_for_nearest")
    if coord not in allowed:
        raise c.fail("Resize", name, f"coordinate_transformation_mode={coord} is not "
                                     f"supported ({', '.join(allowed)})")
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
    c.emit("Resize", name, ins[:1], outs[:1], scales=scales, sizes=sizes,
           coordinate_transformation_mode=coord, nearest_mode=nearest)


def _upsample(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]
              ) -> None:
    if a.get("mode", "nearest") != "nearest":
        raise c.fail("Upsample", name, f"mode={a['mode']} is not supported (only nearest)")
    if "scales" in a:
        scales = [float(v) for v in a["scales"]]
    elif "height_scale" in a:
        scales = [1.0, 1.0, float(a["height_scale"]), float(a["width_scale"])]
    else:
        scales = [float(v) for v in c.const("Upsample", name, ins[1], "scales")]
    c.emit("Resize", name, ins[:1], outs[:1], scales=scales, sizes=None,
           coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def _dropout(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]
             ) -> None:
    if len([o for o in outs if o]) > 1:
        raise c.fail("Dropout", name, "the mask output is not supported (inference only)")
    c.emit("Identity", name, ins[:1], outs[:1])


def _constant(c: _Converter, name: str, ins: list[str], outs: list[str], a: dict[str, Any]
              ) -> None:
    from onnx import numpy_helper

    if "value" not in a:
        raise c.fail("Constant", name, "only the 'value' attribute is supported")
    c.params[outs[0]] = _to_array(numpy_helper, a["value"], c.source)


_CONVERTERS: dict[str, Callable[..., None]] = {
    "Conv": _conv, "ConvTranspose": _conv_t, "Gemm": _gemm, "MatMul": _matmul,
    "Add": _binary("Add"), "Mul": _binary("Mul"), "Relu": _simple("Relu"), "Clip": _clip,
    "Tanh": _simple("Tanh"), "Sigmoid": _simple("Sigmoid"), "BatchNormalization": _bn,
    "MaxPool": _pool("MaxPool"), "AveragePool": _pool("AveragePool"),
    "GlobalAveragePool": _simple("GlobalAveragePool"), "Flatten": _flatten,
    "Reshape": _reshape, "Concat": _concat, "Softmax": _softmax, "Pad": _pad,
    "Resize": _resize, "Upsample": _upsample, "Identity": _simple("Identity"),
    "Dropout": _dropout, "Constant": _constant,
}
