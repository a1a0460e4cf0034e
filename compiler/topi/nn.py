"""Generic tensor-expression building blocks shared by the VTA and CPU operators."""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..te.tensor import Tensor


def pad(data: Tensor, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        pad_value: int | float = 0, name: str = "pad") -> Tensor:
    """Zero-pad (or ``pad_value``-pad) every dimension (TVM's topi.nn.pad)."""
    pad_after = list(pad_before) if pad_after is None else list(pad_after)
    if len(pad_before) != data.ndim or len(pad_after) != data.ndim:
        raise ValueError(f"pad: {data.ndim} dimensions, {len(pad_before)} pads")
    out_shape = tuple(d + b + a for d, b, a in zip(data.shape, pad_before, pad_after))

    def f(*i):
        conds = []
        idx = []
        for k, (x, b, a) in enumerate(zip(i, pad_before, pad_after)):
            if b or a:
                conds += [x >= b, x < data.shape[k] + b]
                idx.append(x - b)
            else:
                idx.append(x)
        if not conds:
            return data(*idx)
        return te.if_then_else(te.all(*conds), data(*idx), te.const(pad_value, data.dtype))

    return te.compute(out_shape, f, name=name)


__all__ = ["pad"]
