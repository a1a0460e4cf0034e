"""ONNX converters of the element-wise ops, comparisons and logic (registered with their op:
:func:`.onnx_converter.converts`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .onnx_converter import Attrs, Converter, Ins, converts


def _binary(op: str) -> Callable[..., None]:
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        if "axis" in a or a.get("broadcast"):
            raise c.fail(op, name, "legacy broadcast with 'axis' is not supported; re-export "
                                   "with opset >= 7")
        c.emit(op, name, ins[:2], outs[:1])
    return conv


def _simple(op: str, **defaults: Any) -> Callable[..., None]:
    """A one-input op; ``defaults`` are its attributes with their ONNX default values."""
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        for key in a:
            if key not in defaults:
                raise c.fail(op, name, f"attribute {key!r} is not supported")
        attrs = {k: type(v)(a.get(k, v)) for k, v in defaults.items()}
        c.emit(op, name, ins[:1], outs[:1], **attrs)
    return conv


def _clip(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.opset < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo_t = c.const("Clip", name, ins[1] if len(ins) > 1 else "", "min")
        hi_t = c.const("Clip", name, ins[2] if len(ins) > 2 else "", "max")
        lo = None if lo_t is None else float(lo_t.reshape(-1)[0])
        hi = None if hi_t is None else float(hi_t.reshape(-1)[0])
    c.emit("Clip", name, ins[:1], outs[:1], min=lo, max=hi)


def _boolean(op: str) -> Callable[..., None]:
    """Comparisons and logic (attention masks): a boolean tensor."""
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        c.emit(op, name, [i for i in ins if i], outs[:1])
    return conv


def _where(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.dtype(ins[0]) != "bool":
        raise c.fail("Where", name, f"condition {ins[0]!r} is {c.dtype(ins[0])}, not bool")
    c.emit("Where", name, ins[:3], outs[:1])


def _minmax(op: str) -> Callable[..., None]:
    def conv(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        ins = [i for i in ins if i]
        if len(ins) == 1:
            c.forward(ins[0], outs[0])
            return
        acc = ins[0]
        for k, other in enumerate(ins[1:]):  # variadic: a chain of binary ops
            last = k == len(ins) - 2
            out = outs[0] if last else f"{name}.{k}"
            c.emit(op, name if last else f"{name}.{k}", [acc, other], [out])
            acc = out
    return conv


def _prelu(c: Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    c.const("PRelu", name, ins[1], "the slope")
    c.emit("PRelu", name, ins[:2], outs[:1])


converts("Add", _binary("Add"))


converts("Sub", _binary("Sub"))


converts("Mul", _binary("Mul"))


converts("Div", _binary("Div"))


converts("Pow", _binary("Pow"))


converts("Relu", _simple("Relu"))


converts("Tanh", _simple("Tanh"))


converts("Sigmoid", _simple("Sigmoid"))


converts("Erf", _simple("Erf"))


converts("Sqrt", _simple("Sqrt"))


converts("Exp", _simple("Exp"))


converts("Neg", _simple("Neg"))


converts("Abs", _simple("Abs"))


converts("Reciprocal", _simple("Reciprocal"))


converts("HardSwish", _simple("HardSwish"))


converts("Softplus", _simple("Softplus"))


converts("Mish", _simple("Mish"))


converts("Elu", _simple("Elu", alpha=1.0))


converts("Max", _minmax("Max"))


converts("Min", _minmax("Min"))


converts("HardSigmoid", _simple("HardSigmoid", alpha=0.2, beta=0.5))


converts("LeakyRelu", _simple("LeakyRelu", alpha=0.01))


converts("Gelu", _simple("Gelu", approximate="none"))


converts("PRelu", _prelu)


converts("Clip", _clip)


converts("Where", _where)


converts("IsInf", _simple("IsInf", detect_negative=1, detect_positive=1))


converts("Not", _boolean("Not"))


converts("IsNaN", _boolean("IsNaN"))


converts("Equal", _boolean("Equal"))


converts("Less", _boolean("Less"))


converts("Greater", _boolean("Greater"))


converts("LessOrEqual", _boolean("LessOrEqual"))


converts("GreaterOrEqual", _boolean("GreaterOrEqual"))


converts("And", _boolean("And"))


converts("Or", _boolean("Or"))


converts("Xor", _boolean("Xor"))
