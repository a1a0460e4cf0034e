"""Layout packing: NCHW <-> NCHW{b}n{c}c with channel (and batch) padding to the GEMM block.

A packed activation has shape ``(N/b, C/c, H, W, b, c)`` (TVM's ``NCHW1n16c`` for the default
config); a packed OIHW weight ``(O/bo, I/bi, KH, KW, bo, bi)``. Padding entries are zero, which
is exact for int8 data with a zero point of 0.
"""

from __future__ import annotations

import numpy as np


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pad_to(n: int, block: int) -> int:
    return ceil_div(n, block) * block


def pack_activation(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """(N, C, H, W) -> (N/b, C/c, H, W, b, c), zero-padding N and C."""
    n, c, h, w = x.shape
    np_, cp = pad_to(n, batch), pad_to(c, block)
    if (np_, cp) != (n, c):
        x = np.pad(x, ((0, np_ - n), (0, cp - c), (0, 0), (0, 0)))
    return np.ascontiguousarray(
        x.reshape(np_ // batch, batch, cp // block, block, h, w).transpose(0, 2, 4, 5, 1, 3))


def unpack_activation(p: np.ndarray, n: int, c: int) -> np.ndarray:
    """(N/b, C/c, H, W, b, c) -> (N, C, H, W), dropping the padding."""
    nb, cb, h, w, b, blk = p.shape
    x = p.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * blk, h, w)
    return np.ascontiguousarray(x[:n, :c])


def pack_weight(w: np.ndarray, block_out: int, block_in: int) -> np.ndarray:
    """(O, I, KH, KW) -> (O/bo, I/bi, KH, KW, bo, bi), zero-padding O and I."""
    o, i, kh, kw = w.shape
    op, ip = pad_to(o, block_out), pad_to(i, block_in)
    if (op, ip) != (o, i):
        w = np.pad(w, ((0, op - o), (0, ip - i), (0, 0), (0, 0)))
    return np.ascontiguousarray(
        w.reshape(op // block_out, block_out, ip // block_in, block_in, kh, kw)
        .transpose(0, 2, 4, 5, 1, 3))


def unpack_weight(p: np.ndarray, o: int, i: int) -> np.ndarray:
    ob, ib, kh, kw, bo, bi = p.shape
    w = p.transpose(0, 4, 1, 5, 2, 3).reshape(ob * bo, ib * bi, kh, kw)
    return np.ascontiguousarray(w[:o, :i])


def packed_shape(shape: tuple[int, ...], batch: int, block: int) -> tuple[int, ...]:
    """Packed shape of an NCHW (or NC, treated as NC11) activation."""
    if len(shape) == 2:
        shape = (*shape, 1, 1)
    n, c, h, w = shape
    return (ceil_div(n, batch), ceil_div(c, block), h, w, batch, block)


def packed_nbytes(shape: tuple[int, ...], batch: int, block: int, elem_bits: int = 8) -> int:
    return int(np.prod(packed_shape(shape, batch, block))) * elem_bits // 8
