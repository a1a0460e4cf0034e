"""The built-in ops: one :func:`~.registry.register` call per op of the graph IR (float and
int8) and per ONNX op the frontend imports under its own name. Imported by
:mod:`vta.compiler.ops`; the ONNX converters and quantizer rules are attached by
:mod:`vta.compiler.graph` (see :func:`~.registry.attach`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import float_kernels as fk
from . import int8_kernels as ik
from . import kernels as ops
from .macs import conv_macs, dense_macs, matmul_macs
from .registry import INJECTIVE, OUT_FUSABLE, REDUCTION, Op, register


def _broadcast(n: Any, s: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*s))


def _same(n: Any, s: list[tuple[int, ...]]) -> tuple[int, ...]:
    return s[0]


def _global(n: Any, s: list[tuple[int, ...]]) -> tuple[int, ...]:
    return (*s[0][:2], 1, 1)


def _ew(name: str, kernel: Any, *, unary: bool = True, **facts: Any) -> None:
    """An element-wise op: broadcast shape, injective."""
    register(Op(name, float_kernel=kernel, shape=_broadcast, elementwise=True, unary=unary,
                pattern=INJECTIVE, **facts))


def _bool(name: str, kernel: Any) -> None:
    """A comparison or logic op: bool output of the broadcast shape, on the CPU."""
    register(Op(name, float_kernel=kernel, shape=_broadcast, boolean=True,
                integer_inputs=name not in ("IsNaN", "IsInf")))


_CONV_ATTRS = frozenset({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})

# ------------------------------------------------------------- matrix products
register(Op("Conv", float_kernel=fk.conv_kernel, shape=fk.conv_shape, pattern=OUT_FUSABLE,
            macs=conv_macs, onnx_attrs=_CONV_ATTRS, named_by_weight=True, weights=True,
            vta_layer=True, fuses_activation=True))
register(Op("ConvTranspose", float_kernel=fk.conv_transpose_kernel, shape=fk.conv_t_shape,
            pattern=OUT_FUSABLE, onnx_attrs=_CONV_ATTRS | {"output_padding"},
            named_by_weight=True, weights=True, vta_layer=True, fuses_activation=True))
register(Op("Dense", float_kernel=fk.dense_kernel, shape=lambda n, s: (*s[0][:-1], s[1][0]),
            pattern=OUT_FUSABLE, macs=dense_macs, weights=True, vta_layer=True,
            fuses_activation=True))
register(Op("Gemm", float_kernel=fk.gemm_kernel, shape=fk.gemm_shape, pattern=OUT_FUSABLE,
            macs=matmul_macs, onnx_attrs=frozenset({"alpha", "beta", "transA", "transB",
                                                    "broadcast"}), named_by_weight=True,
            weights=True))
register(Op("MatMul", float_kernel=lambda n, a: [np.matmul(a[0], a[1]).astype(np.float32)],
            shape=fk.matmul_shape, pattern=OUT_FUSABLE, macs=matmul_macs, named_by_weight=True,
            weights=True, activation_product=True))

# ------------------------------------------------------------------ element-wise
_ew("Add", lambda n, a: [fk.activation(n, (a[0] + a[1]).astype(np.float32))], unary=False,
    view=True, fuses_activation=True)
_ew("Sub", lambda n, a: [(a[0] - a[1]).astype(np.float32)], unary=False, view=True)
_ew("Mul", lambda n, a: [(a[0] * a[1]).astype(np.float32)], unary=False, view=True)
_ew("Div", lambda n, a: [(a[0] / a[1]).astype(np.float32)], unary=False, view=True)
_ew("Pow", lambda n, a: [np.power(a[0], a[1]).astype(np.float32)], unary=False)
_ew("Max", lambda n, a: [np.maximum(a[0], a[1]).astype(np.float32)], unary=False)
_ew("Min", lambda n, a: [np.minimum(a[0], a[1]).astype(np.float32)], unary=False)
_ew("PRelu", lambda n, a: [np.where(a[0] >= 0, a[0], a[0] * a[1]).astype(np.float32)],
    unary=False)
_ew("Relu", lambda n, a: [np.maximum(a[0], 0)], view=True)
_ew("Clip", fk.clip_kernel, view=True)
_ew("Tanh", lambda n, a: [np.tanh(a[0])], view=True, order_keeping=True)
_ew("Sigmoid", fk.f32(fk.sigmoid), view=True, order_keeping=True)
_ew("Erf", fk.f32(ops.erf), view=True)
_ew("Sqrt", fk.f32(np.sqrt), view=True)
_ew("Exp", fk.f32(np.exp), view=True)
_ew("Neg", fk.f32(np.negative), view=True)
_ew("Abs", fk.f32(np.abs), view=True)
_ew("Reciprocal", fk.f32(np.reciprocal), view=True)
_ew("Softplus", fk.f32(lambda x: np.logaddexp(0, x)), view=True)
_ew("Mish", fk.f32(lambda x: x * np.tanh(np.logaddexp(0, x))), view=True)
_ew("Elu", lambda n, a: [np.where(a[0] > 0, a[0], n.attrs["alpha"] * np.expm1(a[0]))
                         .astype(np.float32)], view=True)
_ew("HardSigmoid", lambda n, a: [fk.hardsigmoid(n, a[0]).astype(np.float32)], view=True)
_ew("HardSwish", fk.f32(lambda x: x * np.clip(x / 6 + 0.5, 0, 1)), view=True)
_ew("Silu", fk.f32(lambda x: x * fk.sigmoid(x)))
_ew("Gelu", lambda n, a: [ops.gelu(a[0], n.attrs.get("approximate", "none"))], view=True)
_ew("LeakyRelu", lambda n, a: [np.where(a[0] >= 0, a[0], a[0] * np.float32(n.attrs["alpha"]))
                               .astype(np.float32)], view=True)
_ew("Identity", lambda n, a: [a[0]], moves=True, selecting=True, index_moving=True,
    int8_passthrough=True, integer_inputs=True)

# -------------------------------------------------------- normalisations, softmax
register(Op("BatchNormalization", float_kernel=fk.bn_kernel, shape=_same, pattern=INJECTIVE,
            view=True, weights=True,
            onnx_attrs=frozenset({"epsilon", "momentum", "spatial", "training_mode",
                                  "is_test"})))
register(Op("LayerNormalization", shape=_same, weights=True, float_kernel=lambda n, a: [
    ops.layer_norm(a[0], a[1], a[2] if len(a) > 2 else None, n.attrs["axes"], n.attrs["epsilon"])]))
register(Op("Softmax", shape=_same, order_keeping=True, float_kernel=lambda n, a: [
    ops.softmax(a[0], n.attrs["axis"], n.attrs["legacy"])]))
register(Op("LogSoftmax", shape=_same, order_keeping=True, float_kernel=lambda n, a: [
    np.log(ops.softmax(a[0].astype(np.float64), n.attrs["axis"], n.attrs["legacy"]))
    .astype(np.float32)]))

# ------------------------------------------------------------------ pooling, reductions
register(Op("MaxPool", shape=fk.pool_shape, pattern=OUT_FUSABLE, selecting=True,
            float_kernel=lambda n, a: [ops.max_pool(a[0], n.attrs["kernel_shape"],
                                                    n.attrs["strides"], n.attrs["pads"])],
            onnx_attrs=frozenset({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                                  "strides", "storage_order"})))
register(Op("AveragePool", shape=fk.pool_shape, pattern=OUT_FUSABLE,
            float_kernel=lambda n, a: [ops.avg_pool(a[0], n.attrs["kernel_shape"],
                                                    n.attrs["strides"], n.attrs["pads"],
                                                    n.attrs["count_include_pad"],
                                                    n.attrs.get("ceil_extra"))],
            onnx_attrs=frozenset({"auto_pad", "ceil_mode", "count_include_pad",
                                  "kernel_shape", "pads", "strides", "dilations"})))
register(Op("GlobalAveragePool", shape=_global, pattern=REDUCTION, view=True,
            float_kernel=lambda n, a: [a[0].mean(axis=(2, 3), keepdims=True,
                                                 dtype=np.float32)]))
register(Op("GlobalMaxPool", shape=_global, pattern=REDUCTION, view=True, selecting=True,
            int8_passthrough=True,
            float_kernel=lambda n, a: [a[0].max(axis=(2, 3), keepdims=True)]))
register(Op("ReduceMean", shape=fk.reduce_shape, pattern=REDUCTION,
            float_kernel=lambda n, a: [a[0].mean(axis=tuple(n.attrs["axes"]),
                                                 keepdims=n.attrs["keepdims"],
                                                 dtype=np.float32)]))
register(Op("ReduceMax", shape=fk.reduce_shape, pattern=REDUCTION,
            float_kernel=lambda n, a: [a[0].max(axis=tuple(n.attrs["axes"]),
                                                keepdims=n.attrs["keepdims"])]))

# ------------------------------------------------------------------ moving values
_MOVER = dict(pattern=INJECTIVE, moves=True, selecting=True, index_moving=True,
              int8_passthrough=True, integer_inputs=True)
register(Op("Flatten", float_kernel=fk.flatten_kernel, **_MOVER))
register(Op("Reshape", float_kernel=fk.reshape_kernel, **_MOVER))
register(Op("Transpose", float_kernel=lambda n, a: [np.ascontiguousarray(
    a[0].transpose(n.attrs["perm"]))], **_MOVER))
register(Op("Slice", float_kernel=fk.slice_kernel, pattern=INJECTIVE, selecting=True,
            index_moving=True, int8_passthrough=True, integer_inputs=True))
register(Op("Gather", pattern=INJECTIVE, selecting=True, index_moving=True,
            int8_passthrough=True, integer_inputs=True,
            float_kernel=lambda n, a: [np.take(a[0], np.asarray(n.attrs["indices"], np.int64),
                                               axis=n.attrs["axis"])]))
register(Op("Concat", float_kernel=lambda n, a: [np.concatenate(a, axis=n.attrs["axis"])],
            pattern=INJECTIVE, moves=True, index_moving=True, integer_inputs=True))
register(Op("Expand", shape=lambda n, s: tuple(n.attrs["shape"]), pattern=INJECTIVE,
            index_moving=True, integer_inputs=True,
            float_kernel=lambda n, a: [np.ascontiguousarray(np.broadcast_to(
                a[0], n.attrs["shape"]))]))
register(Op("Pad", float_kernel=fk.pad_kernel, pattern=INJECTIVE, int8_passthrough=True,
            onnx_attrs=frozenset({"mode", "pads", "value"})))
register(Op("Resize", float_kernel=fk.resize_kernel, pattern=INJECTIVE, int8_passthrough=True,
            onnx_attrs=frozenset({"mode", "coordinate_transformation_mode", "nearest_mode",
                                  "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                                  "antialias", "axes", "keep_aspect_ratio_policy"})))
register(Op("Take", float_kernel=fk.take_kernel, shape=lambda n, s: (
    *s[0][:n.attrs["axis"]], *s[1], *s[0][n.attrs["axis"] + 1:])))
register(Op("Cast", float_kernel=lambda n, a: [np.asarray(a[0]).astype(n.attrs["to"])],
            shape=_same, index_moving=True, integer_inputs=True))
register(Op("Where", float_kernel=fk.where_kernel, shape=_broadcast, integer_inputs=True))

# ------------------------------------------------------------------ comparisons, logic
for _name, _fn in (("Equal", np.equal), ("Less", np.less), ("Greater", np.greater),
                   ("LessOrEqual", np.less_equal), ("GreaterOrEqual", np.greater_equal),
                   ("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)):
    _bool(_name, fk.boolean(_fn))
_bool("Not", lambda n, a: [np.logical_not(a[0])])
_bool("IsNaN", lambda n, a: [np.isnan(a[0])])
_bool("IsInf", lambda n, a: [(np.isposinf(a[0]) & bool(n.attrs["detect_positive"]))
                             | (np.isneginf(a[0]) & bool(n.attrs["detect_negative"]))])

# ------------------------------------------------------------------ quantization
register(Op("FakeQuant", float_kernel=fk.fake_quant_kernel))
register(Op("Quantize", int_kernel=ik.quantize, pattern=INJECTIVE, conversion=True))
register(Op("Dequantize", int_kernel=ik.dequantize, pattern=INJECTIVE, conversion=True))
register(Op("QConv", int_kernel=ik.qconv, gemm=True, clipped=True, macs=conv_macs))
register(Op("QDense", int_kernel=ik.qdense, gemm=True, clipped=True, macs=dense_macs))
register(Op("QMatMul", int_kernel=ik.qmatmul, gemm=True, clipped=True, macs=matmul_macs))
register(Op("QAdd", int_kernel=ik.qadd, alu_kind="add", clipped=True))
register(Op("QClip", int_kernel=ik.qclip, alu_kind="clip", clipped=True))
register(Op("QLeakyRelu", int_kernel=ik.qleaky, alu_kind="leaky_relu"))
register(Op("QHardSigmoid", int_kernel=ik.qhardsigmoid, alu_kind="hard_sigmoid"))
register(Op("QHardSwish", int_kernel=ik.qhardswish, alu_kind="hard_swish"))
register(Op("QLut", int_kernel=ik.qlut))
register(Op("QSoftmax", int_kernel=ik.qsoftmax))
register(Op("QLayerNorm", int_kernel=ik.qlayernorm))
register(Op("QAveragePool", int_kernel=ik.qavg))
register(Op("QGlobalAveragePool", int_kernel=ik.qavg))
register(Op("QMaxPool", int_kernel=ik.qmaxpool, selecting=True))
register(Op("QConcat", int_kernel=ik.qconcat))
register(Op("QPad", int_kernel=ik.qpad))
register(Op("QFakeQuant", int_kernel=ik.qfakequant, clipped=True))

# ---------------------------------------------- ONNX ops imported under other names
register(Op("Squeeze", moves=True, selecting=True, integer_inputs=True))
register(Op("Unsqueeze", moves=True, selecting=True, integer_inputs=True))
register(Op("Split", selecting=True, integer_inputs=True))
register(Op("Dropout", integer_inputs=True))
register(Op("Shape", integer_inputs=True, reads_integers=True))
register(Op("Size", integer_inputs=True, reads_integers=True))
register(Op("Attention", integer_inputs=True))
register(Op("Upsample", onnx_attrs=frozenset({"mode", "scales", "height_scale",
                                              "width_scale"})))
register(Op("QuantizeLinear", onnx_attrs=frozenset({"axis", "saturate", "block_size",
                                                    "output_dtype", "precision"})))
register(Op("DequantizeLinear", onnx_attrs=frozenset({"axis", "block_size", "output_dtype"}),
            reads_integers=True))
for _name in ("QLinearConv", "QLinearMatMul"):
    register(Op(_name, reads_integers=True))
for _name in ("QGemm", "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool",
              "QLinearAveragePool", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat"):
    register(Op(_name, domain="com.microsoft", reads_integers=True))
for _name in ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Bernoulli"):
    register(Op(_name, never_fold=True))
