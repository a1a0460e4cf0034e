"""Host (CPU) kernels through the operator compiler's LLVM backend (vta.compiler.topi.cpu).

Float layers the operator compiler has a kernel for (conv2d with symmetric padding and an
optional Relu, max pooling, global average pooling, dense, softmax over the last axis) can run
as LLVM-compiled code instead of numpy; the module stores their LLVM IR (``host/*.ll``).
LLVM's float reassociation differs from numpy's summation order in the last bits, so the numpy
kernels stay the default (they are the bit-exact reference the int8 path is checked against).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .ir import Node


def host_kernel(n: Node, shapes: Mapping[str, tuple[int, ...]],
                params: Mapping[str, np.ndarray]) -> Any | None:
    """A built ``CpuOp`` computing node ``n`` from its inputs, or None when there is none."""
    try:
        from vta.compiler.topi import cpu
    except ImportError:  # pragma: no cover - the operator compiler ships with the kit
        return None
    a = n.attrs
    xs = shapes.get(n.inputs[0]) if n.inputs else None
    if xs is None:
        return None
    if n.op == "Conv":
        t, left, b, r = a["pads"]
        act = a.get("activation")
        relu = act == "relu"
        if (t, left) != (b, r) or a["dilations"] != [1, 1] or (act and not relu):
            return None
        w = params[n.inputs[1]]
        return cpu.conv2d(xs, w.shape, tuple(a["strides"]), (t, left), bias=len(n.inputs) > 2,
                          relu=relu, groups=a["group"])
    if n.op == "MaxPool":
        t, left, b, r = a["pads"]
        if (t, left) != (b, r):
            return None
        return cpu.max_pool2d(xs, a["kernel_shape"], a["strides"], (t, left))
    if n.op == "GlobalAveragePool" and len(xs) == 4:
        return cpu.global_avg_pool2d(xs)
    if n.op == "Dense" and len(xs) == 2 and not n.attrs.get("activation"):
        w = params[n.inputs[1]]
        return cpu.dense(xs[0], w.shape[1], w.shape[0], bias=len(n.inputs) > 2)
    if n.op == "Softmax" and not a.get("legacy") and a["axis"] in (-1, len(xs) - 1):
        return cpu.softmax(xs)
    return None


def run_host(op: Any, n: Node, inputs: list[np.ndarray]) -> np.ndarray:
    if n.op == "GlobalAveragePool":
        x = inputs[0]
        return op(x.reshape(x.shape[0], x.shape[1], -1)).reshape(x.shape[0], x.shape[1], 1, 1)
    return op(*inputs)
