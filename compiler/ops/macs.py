"""Multiply-accumulate counts of the ops that do matrix products (the registry's ``macs``
rules; :func:`vta.compiler.ops.node_macs` applies them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

Node = Any  # a node of the graph IR


def matmul_macs(n: Node, shapes: Mapping[str, tuple[int, ...]],
                params: Mapping[str, np.ndarray]) -> int:
    """A matrix product of two activations (``MatMul``, ``Gemm``: Q·Kᵀ and softmax·V of
    attention, on the CPU for now)."""
    a = shapes[n.inputs[0]]
    k = a[0] if n.op == "Gemm" and n.attrs.get("transA") else a[-1]
    return int(np.prod(shapes[n.outputs[0]])) * int(k)


def conv_macs(n: Node, shapes: Mapping[str, tuple[int, ...]],
              params: Mapping[str, np.ndarray]) -> int:
    """A (float or int8) convolution; of a transposed one, only the taps that meet an input
    pixel (not an inserted zero)."""
    w = params[n.inputs[1]].shape
    st = n.attrs.get("input_strides", [1, 1])
    if list(st) == [1, 1]:
        return int(np.prod(shapes[n.outputs[0]])) * int(np.prod(w[1:]))
    x, out, pads = shapes[n.inputs[0]], shapes[n.outputs[0]], n.attrs["pads"]
    taps = 1
    for d in range(2):
        z = np.arange(out[2 + d])[:, None] + np.arange(w[2 + d])[None, :] - pads[d]
        taps *= int(((z >= 0) & (z % st[d] == 0) & (z // st[d] < x[2 + d])).sum())
    return out[0] * out[1] * int(w[1]) * taps


def dense_macs(n: Node, shapes: Mapping[str, tuple[int, ...]],
               params: Mapping[str, np.ndarray]) -> int:
    w = params[n.inputs[1]].shape
    return int(np.prod(shapes[n.outputs[0]])) * int(w[1])
