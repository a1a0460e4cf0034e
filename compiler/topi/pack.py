"""Packing between plain layouts and VTA's blocked layouts (host-side numpy).

Channels that are not a multiple of the block are zero-padded up to it (and cut off again by
the unpack functions), so any channel count runs on VTA.
"""

from __future__ import annotations

import numpy as np
from vta.isa import Config


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def pack_nchw(x: np.ndarray, cfg: Config) -> np.ndarray:
    """(N, C, H, W) -> (N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN), zero-padding N and C."""
    n, c, h, w = x.shape
    b, bi = cfg.batch, cfg.block_in
    npad, cpad = _ceil(n, b) * b, _ceil(c, bi) * bi
    xp = np.zeros((npad, cpad, h, w), x.dtype)
    xp[:n, :c] = x
    return np.ascontiguousarray(
        xp.reshape(npad // b, b, cpad // bi, bi, h, w).transpose(0, 2, 4, 5, 1, 3))


def unpack_nchw(x: np.ndarray, n: int, c: int) -> np.ndarray:
    """(N/B, C/BO, H, W, B, BO) -> (N, C, H, W), dropping channel/batch padding."""
    nb, cb, h, w, b, bo = x.shape
    return np.ascontiguousarray(
        x.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * bo, h, w)[:n, :c])


def pack_oihw(k: np.ndarray, cfg: Config) -> np.ndarray:
    """(O, I, KH, KW) -> (O/BLOCK_OUT, I/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN), zero-padded."""
    o, i, kh, kw = k.shape
    bo, bi = cfg.block_out, cfg.block_in
    op_, ip = _ceil(o, bo) * bo, _ceil(i, bi) * bi
    kp = np.zeros((op_, ip, kh, kw), k.dtype)
    kp[:o, :i] = k
    return np.ascontiguousarray(
        kp.reshape(op_ // bo, bo, ip // bi, bi, kh, kw).transpose(0, 2, 4, 5, 1, 3))


def pack_bias(b: np.ndarray, cfg: Config) -> np.ndarray:
    """(O,) int32 -> (1, O/BLOCK_OUT, 1, 1, BATCH, BLOCK_OUT) (replicated over the batch)."""
    bo = cfg.block_out
    op_ = _ceil(b.shape[0], bo) * bo
    bp = np.zeros(op_, np.int32)
    bp[:b.shape[0]] = b
    t = bp.reshape(op_ // bo, bo)
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
    cp = _ceil(c, blk) * blk
    out = np.zeros((cp // blk, 1, kh, kw, blk, blk), k.dtype)
    for ch in range(c):
        out[ch // blk, 0, :, :, ch % blk, ch % blk] = k[ch, 0]
    return out


def pack_matrix(x: np.ndarray, rows_block: int, cols_block: int) -> np.ndarray:
    """(R, C) -> (R/rb, C/cb, rb, cb), zero-padded (dense data and weights)."""
    r, c = x.shape
    rp, cp = _ceil(r, rows_block) * rows_block, _ceil(c, cols_block) * cols_block
    xp = np.zeros((rp, cp), x.dtype)
    xp[:r, :c] = x
    return np.ascontiguousarray(
        xp.reshape(rp // rows_block, rows_block, cp // cols_block, cols_block)
        .transpose(0, 2, 1, 3))


def unpack_matrix(x: np.ndarray, r: int, c: int) -> np.ndarray:
    a, b, rb, cb = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(a * rb, b * cb)[:r, :c])


__all__ = ["pack_nchw", "unpack_nchw", "pack_oihw", "pack_bias", "depthwise_to_group_kernel",
           "pack_matrix", "unpack_matrix"]
