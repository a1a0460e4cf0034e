"""Packing between plain layouts and VTA's blocked layouts (host-side numpy).

A packed activation has shape ``(N/b, C/c, H, W, b, c)`` (TVM's ``NCHW1n16c`` for the default
config); a packed OIHW weight ``(O/bo, I/bi, KH, KW, bo, bi)``. Channels (and the batch) that are
not a multiple of the block are zero-padded up to it (and cut off again by the unpack
functions), so any channel count runs on VTA; zero padding is exact for int8 data with a zero
point of 0. The ``*_nchw``/``*_oihw`` forms take the blocks from a :class:`~vta.isa.Config`.
"""

from __future__ import annotations

import numpy as np
from vta.isa import Config


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pad_to(n: int, block: int) -> int:
    """``n`` rounded up to a multiple of ``block``."""
    return ceil_div(n, block) * block


def _pad_leading(x: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """``x`` zero-padded at the end of its leading axes up to ``sizes``."""
    if x.shape[:len(sizes)] == sizes:
        return x
    return np.pad(x, [(0, s - n) for s, n in zip(sizes, x.shape)]
                  + [(0, 0)] * (x.ndim - len(sizes)))


def _block4(x: np.ndarray, b0: int, b1: int) -> np.ndarray:
    """(A, B, H, W) -> (A/b0, B/b1, H, W, b0, b1), zero-padding A and B."""
    a, b, h, w = x.shape
    ap, bp = pad_to(a, b0), pad_to(b, b1)
    x = _pad_leading(x, (ap, bp))
    return np.ascontiguousarray(
        x.reshape(ap // b0, b0, bp // b1, b1, h, w).transpose(0, 2, 4, 5, 1, 3))


def _unblock4(p: np.ndarray, a: int, b: int) -> np.ndarray:
    """(A/b0, B/b1, H, W, b0, b1) -> (A, B, H, W), dropping the padding."""
    ab, bb, h, w, b0, b1 = p.shape
    x = p.transpose(0, 4, 1, 5, 2, 3).reshape(ab * b0, bb * b1, h, w)
    return np.ascontiguousarray(x[:a, :b])


def pack_activation(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """(N, C, H, W) -> (N/b, C/c, H, W, b, c), zero-padding N and C."""
    return _block4(x, batch, block)


def unpack_activation(p: np.ndarray, n: int, c: int) -> np.ndarray:
    """(N/b, C/c, H, W, b, c) -> (N, C, H, W), dropping the padding."""
    return _unblock4(p, n, c)


def pack_weight(w: np.ndarray, block_out: int, block_in: int) -> np.ndarray:
    """(O, I, KH, KW) -> (O/bo, I/bi, KH, KW, bo, bi), zero-padding O and I."""
    return _block4(w, block_out, block_in)


def unpack_weight(p: np.ndarray, o: int, i: int) -> np.ndarray:
    """(O/bo, I/bi, KH, KW, bo, bi) -> (O, I, KH, KW), dropping the padding."""
    return _unblock4(p, o, i)


def pack_nchw(x: np.ndarray, cfg: Config) -> np.ndarray:
    """(N, C, H, W) -> (N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN), zero-padding N and C."""
    return pack_activation(x, cfg.batch, cfg.block_in)


def unpack_nchw(x: np.ndarray, n: int, c: int) -> np.ndarray:
    """(N/B, C/BO, H, W, B, BO) -> (N, C, H, W), dropping channel/batch padding."""
    return unpack_activation(x, n, c)


def pack_oihw(k: np.ndarray, cfg: Config) -> np.ndarray:
    """(O, I, KH, KW) -> (O/BLOCK_OUT, I/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN), zero-padded."""
    return pack_weight(k, cfg.block_out, cfg.block_in)


def packed_shape(shape: tuple[int, ...], batch: int, block: int) -> tuple[int, ...]:
    """Packed shape of an NCHW (or NC, treated as NC11) activation."""
    if len(shape) == 2:
        shape = (*shape, 1, 1)
    n, c, h, w = shape
    return (ceil_div(n, batch), ceil_div(c, block), h, w, batch, block)


def packed_nbytes(shape: tuple[int, ...], batch: int, block: int, elem_bits: int = 8) -> int:
    """Bytes of a packed activation of ``shape`` with ``elem_bits``-bit elements."""
    return int(np.prod(packed_shape(shape, batch, block))) * elem_bits // 8


def pack_bias(b: np.ndarray, cfg: Config) -> np.ndarray:
    """(O,) int32 -> (1, O/BLOCK_OUT, 1, 1, BATCH, BLOCK_OUT) (replicated over the batch)."""
    bo = cfg.block_out
    op_ = pad_to(b.shape[0], bo)
    t = _pad_leading(b.astype(np.int32, copy=False), (op_,)).reshape(op_ // bo, bo)
    return np.ascontiguousarray(
        np.broadcast_to(t[None, :, None, None, None, :],
                        (1, op_ // bo, 1, 1, cfg.batch, bo)))


def depthwise_to_group_kernel(k: np.ndarray, cfg: Config) -> np.ndarray:
    """Depthwise (C, 1, KH, KW) -> group-conv packed (C/BLOCK, 1, KH, KW, BLOCK, BLOCK) with
    block-diagonal tiles (groups = C/BLOCK)."""
    c, one, kh, kw = k.shape
    if one != 1:
        raise ValueError(f"depthwise kernel must be (C, 1, KH, KW), got {k.shape}")
    blk = cfg.block_out
    out = np.zeros((ceil_div(c, blk), 1, kh, kw, blk, blk), k.dtype)
    for ch in range(c):
        out[ch // blk, 0, :, :, ch % blk, ch % blk] = k[ch, 0]
    return out


def pack_matrix(x: np.ndarray, rows_block: int, cols_block: int) -> np.ndarray:
    """(R, C) -> (R/rb, C/cb, rb, cb), zero-padded (dense data and weights)."""
    r, c = x.shape
    rp, cp = pad_to(r, rows_block), pad_to(c, cols_block)
    xp = _pad_leading(x, (rp, cp))
    return np.ascontiguousarray(
        xp.reshape(rp // rows_block, rows_block, cp // cols_block, cols_block)
        .transpose(0, 2, 1, 3))


def unpack_matrix(x: np.ndarray, r: int, c: int) -> np.ndarray:
    """(R/rb, C/cb, rb, cb) -> (R, C), dropping the padding."""
    a, b, rb, cb = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(a * rb, b * cb)[:r, :c])


__all__ = ["ceil_div", "pad_to", "pack_activation", "unpack_activation", "pack_weight",
           "unpack_weight", "pack_nchw", "unpack_nchw", "pack_oihw", "packed_shape",
           "packed_nbytes", "pack_bias", "depthwise_to_group_kernel", "pack_matrix",
           "unpack_matrix"]
