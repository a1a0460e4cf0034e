"""QDQ: ONNX's QuantizeLinear / DequantizeLinear pairs, imported as ``FakeQuant`` nodes that fix a
tensor's scale (registered with their op: :func:`.onnx_converter.converts`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .onnx_converter import Converter, converts


def qparams(c: Converter, op: str, name: str, ins: list[str], a: dict[str, Any], k: int = 1
             ) -> tuple[np.ndarray, np.ndarray]:
    """Scale and zero point (default 0 of uint8) of a (De)QuantizeLinear: its inputs ``k``,
    ``k + 1`` (a QOperator op has several pairs)."""
    if int(a.get("block_size", 0)):
        raise c.fail(op, name, "blocked quantization (block_size) is not supported")
    scale = c.const(op, name, ins[k], "the scale").astype(np.float64)
    zp = c.const(op, name, ins[k + 1], "the zero point") if len(ins) > k + 1 and ins[k + 1] \
        else None
    if zp is None:
        zp = np.zeros(scale.shape, np.uint8)
    if zp.dtype not in (np.int8, np.uint8):
        raise c.fail(op, name, f"zero point of type {zp.dtype} is not supported (int8, uint8)")
    return scale, zp


def _quantize_linear(c: Converter, name: str, ins: list[str], outs: list[str],
                     a: dict[str, Any]) -> None:
    qparams(c, "QuantizeLinear", name, ins, a)
    c.quantized[outs[0]] = (ins[0], {"ins": ins, "attrs": a, "name": name})


def _dequantize_linear(c: Converter, name: str, ins: list[str], outs: list[str],
                       a: dict[str, Any]) -> None:
    """A QuantizeLinear + DequantizeLinear pair on an activation becomes one FakeQuant node (its
    scale, zero point and integer range are what the quantizer uses for that tensor). On
    constants (int8 weights, int32 biases) both fold at import like any constant node."""
    op = "DequantizeLinear"
    scale, zp = qparams(c, op, name, ins, a)
    if ins[0] in c.qvalues:  # a QOperator op's integer output: its float values
        c.forward(c.qvalues[ins[0]], outs[0])
        return
    if ins[0] not in c.quantized:
        raise c.fail(op, name, f"input {ins[0]!r} is neither a constant nor a "
                               f"QuantizeLinear output")
    src, q = c.quantized.pop(ins[0])
    qs, qz = qparams(c, "QuantizeLinear", q["name"], q["ins"], q["attrs"])
    if not (np.array_equal(qs, scale) and np.array_equal(qz, zp)):
        raise c.fail(op, name, "its scale or zero point differs from its QuantizeLinear's")
    fake_quant(c, op, name, src, outs[0], scale, zp)


def fake_quant(c: Converter, op: str, name: str, x: str, out: str, scale: np.ndarray,
                zp: np.ndarray) -> None:
    """``out`` = ``x`` quantized at (``scale``, ``zp``) and dequantized: one ``FakeQuant``
    node (per tensor; on the 4-D view inside a 1-D network)."""
    if scale.size != 1 or zp.size != 1:
        raise c.fail(op, name, "per-axis quantization of an activation is not supported")
    info = np.iinfo(zp.dtype)
    c.emit_viewed("FakeQuant", name, [x], out, scale=float(scale.reshape(-1)[0]),
                  zero_point=int(zp.reshape(-1)[0]), qmin=int(info.min), qmax=int(info.max))


converts("QuantizeLinear", _quantize_linear)


converts("DequantizeLinear", _dequantize_linear)
