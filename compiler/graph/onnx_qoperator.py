"""onnxruntime's QOperator format, as ``quantize_static(..., quant_format=QuantFormat.QOperator)``
writes it: integer activations between ``QLinearConv``, ``QLinearMatMul`` and the
``com.microsoft`` ops ``QGemm``, ``QLinearAdd``, ``QLinearMul``, ``QLinearGlobalAveragePool``,
``QLinearAveragePool``, ``QLinearConcat``, ``QLinearSigmoid`` and ``QLinearLeakyRelu``.

They are imported in the QDQ form the rest of the compiler takes (a pre-quantized QDQ model,
see :mod:`.onnx_frontend`): every integer activation stands for a float tensor of its
dequantized values (``Converter.qvalues``), and each op becomes its float op on those values
followed by a ``FakeQuant`` of its output's scale and zero point; integer weights and biases
become the float constants they stand for. A ``QuantizeLinear`` of a float tensor is a
``FakeQuant`` where an op reads it, a ``DequantizeLinear`` forwards the float values, and the
standard ops that only move or select values (max pooling, shape ops, Slice, Gather, Concat,
nearest Resize: :func:`moves_values`) run on the float values as they are.

The quantizer then gives every tensor its scale from the model (as for QDQ), so the int8 graph
VTA runs rounds where onnxruntime rounds; it is not bit-exact with onnxruntime's integer
kernels (their requantization rounds once, from the int32 accumulator).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from .onnx_qdq import fake_quant, qparams
from .onnx_qdq_values import dequantize_values


def dq_input(c: Any, op: str, name: str, q: str, scale: np.ndarray | None = None,
             zp: np.ndarray | None = None) -> str:
    """The float tensor the integer activation ``q`` stands for: a QOperator op's output, or a
    ``QuantizeLinear`` of a float tensor (a ``FakeQuant`` of it, made once)."""
    if q in c.qvalues:
        return c.qvalues[q]
    if q in c.params:  # a constant integer operand (an Add's other input)
        values = dequantize_values(c.params[q], scale, zp)
        c.params[f"{q}.dq"] = values
        return f"{q}.dq"
    if q not in c.quantized:
        raise c.fail(op, name, f"input {q!r} is neither a QuantizeLinear output nor a "
                               f"quantized op's output")
    src, ql = c.quantized[q]
    qs, qz = qparams(c, "QuantizeLinear", ql["name"], ql["ins"], ql["attrs"])
    fake_quant(c, "QuantizeLinear", f"{ql['name']}.fq", src, f"{q}.dq", qs, qz)
    c.qvalues[q] = f"{q}.dq"
    return f"{q}.dq"


def _requantized(c: Any, op: str, name: str, ins: list[str], outs: list[str], k: int,
                 build: Callable[[str], None]) -> None:
    """``build(out)`` emits the float op into ``out``; its output is then quantized at the
    (scale, zero point) of inputs ``k``, ``k + 1`` and stands for ``outs[0]``."""
    scale, zp = qparams(c, op, name, ins, {}, k)
    build(f"{outs[0]}.f")
    fake_quant(c, op, f"{name}.requant", f"{outs[0]}.f", f"{outs[0]}.dq", scale, zp)
    c.qvalues[outs[0]] = f"{outs[0]}.dq"


def _weight(c: Any, op: str, name: str, ins: list[str], k: int, axis: int = 0) -> str:
    """The float constant of the integer weight at input ``k`` with its (scale, zero point)
    at ``k + 1``, ``k + 2`` (per channel along ``axis``)."""
    w = c.const(op, name, ins[k], "the weight")
    scale, zp = qparams(c, op, name, ins, {}, k + 1)
    c.params[f"{name}.weight"] = dequantize_values(w, scale, zp, axis)
    return f"{name}.weight"


def _bias(c: Any, op: str, name: str, b: str, scale: np.ndarray) -> str:
    """The float constant of an int32 bias at ``scale`` (input scale x weight scale)."""
    q = c.const(op, name, b, "the bias")
    c.params[f"{name}.bias"] = (q.astype(np.float64) * scale.reshape(-1)).astype(np.float32)
    return f"{name}.bias"


def _qlinear_conv(c: Any, name: str, ins: list[str], outs: list[str], a: dict) -> None:
    op = "QLinearConv"
    x = dq_input(c, op, name, ins[0])
    w = _weight(c, op, name, ins, 3)
    xs, _ = qparams(c, op, name, ins, {}, 1)
    ws, _ = qparams(c, op, name, ins, {}, 4)
    conv_ins = [x, w] + ([_bias(c, op, name, ins[8], xs * ws)] if len(ins) > 8 and ins[8]
                         else [])
    _requantized(c, op, name, ins, outs, 6,
                 lambda out: ops.get("Conv").onnx(c, name, conv_ins, [out], a))


def _qlinear_matmul(c: Any, name: str, ins: list[str], outs: list[str], a: dict) -> None:
    op = "QLinearMatMul"
    x = dq_input(c, op, name, ins[0])
    w = _weight(c, op, name, ins, 3, axis=1)
    _requantized(c, op, name, ins, outs, 6,
                 lambda out: ops.get("MatMul").onnx(c, name, [x, w], [out], a))


def _qgemm(c: Any, name: str, ins: list[str], outs: list[str], a: dict) -> None:
    """com.microsoft QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C (int32), y_scale, y_zp; a
    float output without y_scale."""
    op = "QGemm"
    x = dq_input(c, op, name, ins[0])
    w = _weight(c, op, name, ins, 3, axis=0 if a.get("transB", 0) else 1)
    xs, _ = qparams(c, op, name, ins, {}, 1)
    ws, _ = qparams(c, op, name, ins, {}, 4)
    attrs = {k: a[k] for k in ("alpha", "transA", "transB") if k in a}
    gemm_ins = [x, w] + ([_bias(c, op, name, ins[6], xs * ws)] if len(ins) > 6 and ins[6]
                         else [])
    if len(ins) > 7 and ins[7]:
        _requantized(c, op, name, ins, outs, 7,
                     lambda out: ops.get("Gemm").onnx(c, name, gemm_ins, [out], attrs))
    else:
        ops.get("Gemm").onnx(c, name, gemm_ins, outs[:1], attrs)


def _qlinear_binary(float_op: str) -> Callable[..., None]:
    """com.microsoft QLinearAdd / QLinearMul: A, A_scale, A_zp, B, B_scale, B_zp, C_scale,
    C_zp."""
    def conv(c: Any, name: str, ins: list[str], outs: list[str], a: dict) -> None:
        op = f"QLinear{float_op}"
        xa = dq_input(c, op, name, ins[0], *qparams(c, op, name, ins, {}, 1))
        xb = dq_input(c, op, name, ins[3], *qparams(c, op, name, ins, {}, 4))
        _requantized(c, op, name, ins, outs, 6,
                     lambda out: c.emit_viewed(float_op, name, [xa, xb], out))
    return conv


def _qlinear_unary(float_op: str, *, attrs: tuple[str, ...] = ()) -> Callable[..., None]:
    """com.microsoft QLinear ops of one input: X, X_scale, X_zp, Y_scale, Y_zp."""
    def conv(c: Any, name: str, ins: list[str], outs: list[str], a: dict) -> None:
        op = f"QLinear{float_op}"
        if a.get("channels_last", 0):
            raise c.fail(op, name, "channels_last=1 is not supported")
        x = dq_input(c, op, name, ins[0])
        kept = {k: v for k, v in a.items() if k in attrs}
        _requantized(c, op, name, ins, outs, 3,
                     lambda out: c.call(ops.get(float_op).onnx, float_op, name, [x], [out],
                                        kept))
    return conv


def _qlinear_concat(c: Any, name: str, ins: list[str], outs: list[str], a: dict) -> None:
    """com.microsoft QLinearConcat: Y_scale, Y_zp, then (X, X_scale, X_zp) per input."""
    op = "QLinearConcat"
    xs = [dq_input(c, op, name, ins[k]) for k in range(2, len(ins), 3)]
    fe_attrs = {"axis": a["axis"]}
    _requantized(c, op, name, ins, outs, 0,
                 lambda out: ops.get("Concat").onnx(c, name, xs, [out], fe_attrs))


ops.attach("QLinearConv", onnx=_qlinear_conv)
ops.attach("QLinearMatMul", onnx=_qlinear_matmul)
ops.attach("QGemm", onnx=_qgemm)
ops.attach("QLinearAdd", onnx=_qlinear_binary("Add"))
ops.attach("QLinearMul", onnx=_qlinear_binary("Mul"))
ops.attach("QLinearGlobalAveragePool", onnx=_qlinear_unary("GlobalAveragePool"))
ops.attach("QLinearAveragePool", onnx=_qlinear_unary(
    "AveragePool", attrs=("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads",
                          "strides")))
ops.attach("QLinearSigmoid", onnx=_qlinear_unary("Sigmoid"))
ops.attach("QLinearLeakyRelu", onnx=_qlinear_unary("LeakyRelu", attrs=("alpha",)))
ops.attach("QLinearConcat", onnx=_qlinear_concat)
