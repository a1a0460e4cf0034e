"""The values of quantized tensors: what a DequantizeLinear of constants computes (folded at
import) and what a QDQ pair's integers stand for."""

from __future__ import annotations

from typing import Any

import numpy as np


def dequantize(onode: Any, vals: list[np.ndarray | None]) -> np.ndarray:
    """DequantizeLinear of constants (int8 weights, int32 biases)."""
    # deferred: onnx is a heavy import, made only when a model is read
    from onnx import helper

    axis = next((helper.get_attribute_value(a) for a in onode.attribute if a.name == "axis"), 1)
    return dequantize_values(vals[0], vals[1], vals[2] if len(vals) > 2 else None, axis)


def dequantize_values(q: np.ndarray, scale: Any, zp: Any = None, axis: int = 1) -> np.ndarray:
    """``(q - zero) * scale`` as float32, per tensor or per channel along ``axis``."""
    scale = np.asarray(scale, np.float64)
    zp = np.asarray(zp, np.float64) if zp is not None else 0.0
    shape = [1] * q.ndim
    if scale.ndim == 1 and scale.size > 1 and q.ndim:
        shape[axis % q.ndim] = -1
    return ((q.astype(np.float64) - np.reshape(zp, shape if np.ndim(zp) else ()))
            * scale.reshape(shape if scale.ndim else ())).astype(np.float32)
