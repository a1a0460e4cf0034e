"""Vectorised numpy kernels shared by the float reference and the int8 reference.

Convolution is im2col + one matrix multiply per group (float32 BLAS for floats, in NCHW, and
Winograd F(4x4, 3x3) or F(2x2, 3x3) for large 3x3 stride-1 ones; for int8, the exact integer
product of :func:`vta.sim.blas.exact_matmul`: :func:`int8_matmul`); depthwise convolution
(float64 for integers: exact) is a sum of shifted, scaled copies. Attributes are the canonical
ones produced by the ONNX frontend (``pads`` is ``[top, left, bottom, right]``).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided
from vta.sim.blas import exact_matmul


def conv_out_size(size: int, k: int, stride: int, pad0: int, pad1: int, dil: int) -> int:
    return (size + pad0 + pad1 - dil * (k - 1) - 1) // stride + 1


def pad_nchw(x: np.ndarray, pads: list[int], value: float | int = 0) -> np.ndarray:
    """Pad H and W by ``[top, left, bottom, right]`` (negative values crop)."""
    t, left, b, r = pads
    if min(pads) < 0:
        h, w = x.shape[2], x.shape[3]
        x = x[:, :, max(0, -t):h - max(0, -b), max(0, -left):w - max(0, -r)]
        t, left, b, r = max(t, 0), max(left, 0), max(b, 0), max(r, 0)
    if t == left == b == r == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (t, b), (left, r)), constant_values=value)


def windows(x: np.ndarray, kh: int, kw: int, strides: list[int],
            dil: list[int] = (1, 1)) -> np.ndarray:
    """A strided view (N, C, OH, OW, KH, KW) of the (already padded) input."""
    n, c, h, w = x.shape
    sh, sw = strides
    dh, dw = dil
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    s = x.strides
    return as_strided(x, (n, c, oh, ow, kh, kw),
                      (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw), writeable=False)


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, *, strides: list[int],
           pads: list[int], dilations: list[int], group: int,
           acc_dtype: Any = np.float32, input_strides: list[int] | None = None) -> np.ndarray:
    """NCHW x OIHW convolution. Integer (int8) inputs are accumulated exactly (result int64).
    ``input_strides``: ``s - 1`` zeros between the input's pixels first (a transposed conv's
    equivalent convolution), then ``pads`` (negative: crop)."""
    if input_strides is not None and list(input_strides) != [1, 1]:
        x, pads = dilate_pad(x, input_strides, pads), [0, 0, 0, 0]
    integer = np.issubdtype(x.dtype, np.integer)
    if integer and (x.dtype != np.int8 or w.dtype != np.int8):  # int8_matmul's exactness
        raise TypeError(f"an integer convolution takes int8 data and weights, not {x.dtype} "
                        f"and {w.dtype}")
    work = np.float64 if integer else acc_dtype
    o, cg, kh, kw = w.shape
    depthwise = cg == 1 and group == x.shape[1] and group > 1
    if not integer and not depthwise:
        return _conv2d_float(x.astype(work, copy=False), w.astype(work, copy=False), b,
                             strides, pads, dilations, group).astype(np.float32, copy=False)
    # integers stay int8 up to the matrix products (int8_matmul), or the depthwise sums
    # (float64 weights)
    xp = np.ascontiguousarray(pad_nchw(x, pads) if integer else
                              pad_nchw(x, pads).astype(work, copy=False))
    n, c = xp.shape[:2]
    win = windows(xp, kh, kw, strides, dilations)  # N, C, OH, OW, KH, KW
    oh, ow = win.shape[2], win.shape[3]
    wf = w.astype(work, copy=False)
    if depthwise:
        # depthwise (channel multiplier m = o // c): sum of shifted, scaled copies
        m = o // c
        out = np.zeros((n, o, oh, ow), dtype=work)
        xr = np.repeat(win, m, axis=1) if m > 1 else win
        for i in range(kh):
            for j in range(kw):
                out += xr[:, :, :, :, i, j] * wf[:, 0, i, j][None, :, None, None]
        if b is not None:
            out += b.astype(work, copy=False)[None, :, None, None]
    else:  # int8: channels-last im2col, each window row copies contiguous runs of C values
        og = o // group
        xh = np.ascontiguousarray(xp.transpose(0, 2, 3, 1))  # N, H, W, C
        st = xh.strides
        sh, sw = strides
        dh, dw = dilations
        cols6 = as_strided(xh, (n, oh, ow, kh, kw, c),
                           (st[0], st[1] * sh, st[2] * sw, st[1] * dh, st[2] * dw, st[3]),
                           writeable=False)
        out = None if group == 1 else np.empty((n, oh, ow, o), np.int64)
        for g in range(group):
            cols = cols6[..., g * cg:(g + 1) * cg].reshape(n * oh * ow, kh * kw * cg)
            wg = w[g * og:(g + 1) * og].transpose(0, 2, 3, 1).reshape(og, kh * kw * cg)
            prod = int8_matmul(cols, wg)
            if out is None:  # one group: the product is the output
                out = prod.reshape(n, oh, ow, o)
            else:
                out[..., g * og:(g + 1) * og] = prod.reshape(n, oh, ow, og)
        out = out.transpose(0, 3, 1, 2)
    # one copy into a fresh NCHW array (integers: rounded in place first)
    res = np.empty((n, o, oh, ow), np.int64 if integer else np.float32)
    if out.dtype.kind == "f" and integer:  # the depthwise sums
        np.rint(out, out=out)
    np.copyto(res, out, casting="unsafe")
    if integer and out.dtype.kind != "f" and b is not None:  # the integer products: in int64
        res += np.asarray(b).astype(np.int64)[None, :, None, None]
    return res


#: Winograd F(m x m, 3x3) for a 3x3 stride-1 convolution with at least this many m x m output
#: tiles per image; the larger tile first (F(4x4, 3x3): 2.25 multiplications per output
#: against F(2x2, 3x3)'s 4 and a direct sum's 9, with cheaper transforms per output). Below it
#: the 36 or 16 products are too narrow for BLAS and im2col is as fast (measured on ResNet-18's
#: stages: 28x28 outputs and up take F(4x4), 14x14 F(2x2), 7x7 im2col).
_WINOGRAD_MIN_TILES = 49
_WINOGRAD_TILES = (4, 2)


def _conv2d_float(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides: list[int],
                  pads: list[int], dilations: list[int], group: int) -> np.ndarray:
    """A float convolution computed in NCHW: 3x3 stride-1 convolutions of enough tiles by
    Winograd (:func:`_winograd_3x3`); the others as one product of the weights with the
    input's im2col columns per image and group (the product's rows are the output channels,
    so it is NCHW as it comes)."""
    o, cg, kh, kw = w.shape
    n = x.shape[0]
    sh, sw = strides
    if ((kh, kw, sh, sw) == (3, 3, 1, 1) and list(dilations) == [1, 1] and group == 1
            and min(pads) >= 0):
        oh, ow = x.shape[2] + pads[0] + pads[2] - 2, x.shape[3] + pads[1] + pads[3] - 2
        for m in _WINOGRAD_TILES:
            if -(-oh // m) * -(-ow // m) >= _WINOGRAD_MIN_TILES:
                return _winograd_3x3(x, w, b, pads, m)
    xp = pad_nchw(x, pads)
    win = windows(xp, kh, kw, strides, dilations)  # N, C, OH, OW, KH, KW
    oh, ow = win.shape[2], win.shape[3]
    og = o // group
    out = np.empty((n, o, oh * ow), x.dtype)
    for i in range(n):
        for g in range(group):
            if (kh, kw, sh, sw) == (1, 1, 1, 1):  # the input is its own im2col
                cols = xp[i, g * cg:(g + 1) * cg].reshape(cg, oh * ow)
            else:  # (C, KH, KW, OH, OW): rows of OW contiguous values
                cols = win[i, g * cg:(g + 1) * cg].transpose(0, 3, 4, 1, 2).reshape(
                    cg * kh * kw, oh * ow)
            np.matmul(w[g * og:(g + 1) * og].reshape(og, cg * kh * kw), cols,
                      out=out[i, g * og:(g + 1) * og])
    if b is not None:
        out += b.astype(x.dtype, copy=False)[None, :, None]
    return out.reshape(n, o, oh, ow)


def _winograd_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """F(m x m, 3x3)'s transforms as Kronecker products (Lavin & Gray 2016, points 0, +-1
    (m = 2) and 0, +-1, +-2, infinity (m = 4)): B^T x B of an (m + 2)^2 tile, G g G^T of a
    3x3 kernel and A^T y A of the product tile, each as one matrix on flattened tiles."""
    if m == 2:
        bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
        g = [[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]
        at = [[1, 1, 1, 0], [0, 1, -1, -1]]
    else:
        bt = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
              [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
        g = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
             [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
        at = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
    return tuple(np.kron(np.array(t, np.float64), np.array(t, np.float64)) for t in (bt, g, at))


_WINOGRAD = {m: _winograd_matrices(m) for m in _WINOGRAD_TILES}

#: The transformed weights of the last convolutions (G g G^T costs as much as the products on
#: 14x14 outputs): key (id of the weights, m) -> (a copy of the weights, their transform). An
#: entry is used only while the weights still equal its copy, so that weights changed in place
#: or a new array at a reused address are transformed again.
_WINOGRAD_WEIGHTS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
_WINOGRAD_WEIGHTS_MAX = 64
_WINOGRAD_LOCK = threading.Lock()


def _winograd_weights(w: np.ndarray, m: int) -> np.ndarray:
    """G g G^T of every (output, input) kernel pair: ((m + 2)^2, O, C)."""
    key = (id(w), m)
    hit = _WINOGRAD_WEIGHTS.get(key)
    if hit is not None and hit[0].shape == w.shape and hit[0].dtype == w.dtype and \
            np.array_equal(hit[0], w):
        return hit[1]
    o, c = w.shape[:2]
    kg = _WINOGRAD[m][1].astype(w.dtype)
    u = (kg @ w.reshape(o * c, 9).T).reshape((m + 2) ** 2, o, c)
    with _WINOGRAD_LOCK:  # (a caller may run convolutions in several threads)
        if len(_WINOGRAD_WEIGHTS) >= _WINOGRAD_WEIGHTS_MAX:
            _WINOGRAD_WEIGHTS.pop(next(iter(_WINOGRAD_WEIGHTS)))
        _WINOGRAD_WEIGHTS[key] = (w.copy(), u)
    return u


def _winograd_3x3(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, pads: list[int],
                  m: int) -> np.ndarray:
    """A 3x3 stride-1 convolution by Winograd F(m x m, 3x3) (Lavin & Gray 2016): per
    (m + 2)^2 input tile d (stride m) and channel pair, the m x m output tile
    A^T [(G g G^T) * (B^T d B)] A. Each transform is one matrix product on the flattened tiles
    of all channels, the elementwise products summed over channels are (m + 2)^2 matrix
    products. In float32 the result is within about 1e-6 (m = 2) and 1e-5 (m = 4) of the
    largest output."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    a = m + 2
    kb, _, ka = (k.astype(x.dtype) for k in _WINOGRAD[m])
    t, left, bot, r = pads
    oh, ow = h + t + bot - 2, wd + left + r - 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((n, c, m * th + 2, m * tw + 2), x.dtype)
    xp[:, :, t:t + h, left:left + wd] = x
    s = xp.strides
    tiles = as_strided(xp, (a, a, c, n, th, tw), (s[2], s[3], s[1], s[0], m * s[2], m * s[3]),
                       writeable=False)  # element (i, j) of every tile: A, A, C, N, TH, TW
    v = (kb @ np.ascontiguousarray(tiles).reshape(a * a, -1)).reshape(a * a, c, n * th * tw)
    prod = np.matmul(_winograd_weights(w, m), v).reshape(a * a, -1)
    y = (ka @ prod).reshape(m, m, o, n, th, tw)
    out = np.empty((n, o, th, m, tw, m), x.dtype)
    out.transpose(3, 5, 1, 0, 2, 4)[...] = y
    out = out.reshape(n, o, m * th, m * tw)
    if (m * th, m * tw) != (oh, ow):
        out = np.ascontiguousarray(out[:, :, :oh, :ow])
    if b is not None:
        out += b.astype(x.dtype, copy=False)[None, :, None, None]
    return out


def int8_matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w.T`` of int8 matrices, exact (:func:`vta.sim.blas.exact_matmul`: float32 BLAS over
    slices of 1024 columns); int32, or int64 from a reduction of 131072 columns on."""
    return exact_matmul(x, w)


def dilate_pad(x: np.ndarray, strides: list[int], pads: list[int]) -> np.ndarray:
    """Insert ``stride - 1`` zeros between pixels, then pad/crop by ``[t, l, b, r]``."""
    sh, sw = strides
    n, c, h, w = x.shape
    if (sh, sw) != (1, 1):
        z = np.zeros((n, c, (h - 1) * sh + 1, (w - 1) * sw + 1), dtype=x.dtype)
        z[:, :, ::sh, ::sw] = x
        x = z
    return pad_nchw(x, pads)


def conv_transpose_as_conv(w: np.ndarray, *, group: int, kernel: tuple[int, int],
                           strides: list[int], pads: list[int], dilations: list[int],
                           output_padding: list[int]) -> tuple[np.ndarray, list[int]]:
    """The equivalent convolution: (flipped, transposed weights, dilate_pad pads)."""
    cin, og, kh, kw = w.shape
    cg = cin // group
    wc = w.reshape(group, cg, og, kh, kw).transpose(0, 2, 1, 3, 4)[:, :, :, ::-1, ::-1]
    wc = np.ascontiguousarray(wc.reshape(group * og, cg, kh, kw))
    dh, dw = dilations
    t, left, b, r = pads
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    new_pads = [eh - t, ew - left, eh - b + output_padding[0], ew - r + output_padding[1]]
    return wc, new_pads


def conv_transpose2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, *, strides: list[int],
                     pads: list[int], dilations: list[int], group: int,
                     output_padding: list[int]) -> np.ndarray:
    wc, cpads = conv_transpose_as_conv(w, group=group, kernel=w.shape[2:], strides=strides,
                                       pads=pads, dilations=dilations,
                                       output_padding=output_padding)
    return conv2d(x, wc, b, strides=[1, 1], pads=cpads, dilations=dilations, group=group,
                  input_strides=strides)


def max_pool(x: np.ndarray, kernel: list[int], strides: list[int], pads: list[int]) -> np.ndarray:
    """Separable: the maximum over the kernel's rows (whole input rows at a time), then over
    its columns (kh + kw - 2 passes instead of kh * kw - 1)."""
    lo = np.iinfo(x.dtype).min if np.issubdtype(x.dtype, np.integer) else -np.inf
    xp = pad_nchw(x, pads, lo)
    (kh, kw), (sh, sw) = kernel, strides
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    rows = np.array(xp[:, :, 0:(oh - 1) * sh + 1:sh])
    for i in range(1, kh):
        np.maximum(rows, xp[:, :, i:i + (oh - 1) * sh + 1:sh], out=rows)
    out = np.array(rows[..., 0:(ow - 1) * sw + 1:sw])
    for j in range(1, kw):
        np.maximum(out, rows[..., j:j + (ow - 1) * sw + 1:sw], out=out)
    return out


def ceil_mode_extra(size: int, k: int, stride: int, pad0: int, pad1: int) -> int:
    """Padding to add at the end of an axis so that the floor output size equals ONNX's (and
    PyTorch's) ``ceil_mode=1`` size, whose last window must start inside the input or the
    leading padding."""
    out = -(-(size + pad0 + pad1 - k) // stride) + 1
    if (out - 1) * stride >= size + pad0:
        out -= 1
    return max(0, (out - 1) * stride + k - (size + pad0 + pad1))


def pool_sum_count(x: np.ndarray, kernel: list[int], strides: list[int], pads: list[int],
                   count_include_pad: bool, ceil_extra: list[int] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Window sums (exact for integers) and the divisor per output position. ``pads`` include
    the ceil-mode extension ``ceil_extra`` ([bottom, right]), which is never counted; the
    other pads are counted when ``count_include_pad``."""
    work = np.int64 if np.issubdtype(x.dtype, np.integer) else np.float32
    xp = pad_nchw(x.astype(work, copy=False), pads)
    win = windows(xp, kernel[0], kernel[1], strides)
    s = np.zeros(win.shape[:4], dtype=work)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            s += win[..., i, j]
    eb, er = ceil_extra or (0, 0)
    if count_include_pad and not (eb or er):
        cnt = np.full(s.shape[2:], kernel[0] * kernel[1], dtype=np.int64)
    else:
        t, left, b, r = pads
        counted = [t, left, b - eb, r - er] if count_include_pad else [0, 0, 0, 0]
        ones = pad_nchw(np.ones((1, 1) + x.shape[2:], dtype=np.int64), counted, 1)
        ones = pad_nchw(ones, [p - c for p, c in zip(pads, counted)])
        cnt = windows(ones, kernel[0], kernel[1], strides).sum(axis=(4, 5))[0, 0]
    return s, cnt


def avg_pool(x: np.ndarray, kernel: list[int], strides: list[int], pads: list[int],
             count_include_pad: bool, ceil_extra: list[int] | None = None) -> np.ndarray:
    s, cnt = pool_sum_count(x, kernel, strides, pads, count_include_pad, ceil_extra)
    return (s / cnt.astype(np.float32)).astype(np.float32)


def source_coords(in_size: int, out_size: int, scale: float, coord_mode: str) -> np.ndarray:
    """ONNX Resize's coordinate transformation: the input coordinate of every output position
    along one axis."""
    xo = np.arange(out_size, dtype=np.float64)
    if coord_mode == "asymmetric":
        return xo / scale
    if coord_mode == "half_pixel":
        return (xo + 0.5) / scale - 0.5
    if coord_mode == "pytorch_half_pixel":
        return (xo + 0.5) / scale - 0.5 if out_size > 1 else np.zeros_like(xo)
    if coord_mode == "align_corners":
        return xo * (in_size - 1) / (out_size - 1) if out_size > 1 else np.zeros_like(xo)
    if coord_mode == "tf_half_pixel_for_nearest":
        return (xo + 0.5) / scale
    raise ValueError(coord_mode)  # pragma: no cover - the frontend rejects other modes


def nearest_indices(in_size: int, out_size: int, scale: float, coord_mode: str,
                    nearest_mode: str) -> np.ndarray:
    """ONNX Resize (mode=nearest) source index of every output position along one axis."""
    xi = source_coords(in_size, out_size, scale, coord_mode)
    if nearest_mode == "round_prefer_floor":
        idx = np.where(xi - np.floor(xi) == 0.5, np.floor(xi), np.round(xi))
    elif nearest_mode == "round_prefer_ceil":
        idx = np.floor(xi + 0.5)
    elif nearest_mode == "floor":
        idx = np.floor(xi)
    else:
        idx = np.ceil(xi)
    return np.clip(idx, 0, in_size - 1).astype(np.int64)


def resize_nearest(x: np.ndarray, sizes: list[int], scales: list[float], coord_mode: str,
                   nearest_mode: str) -> np.ndarray:
    for axis, (n_out, sc) in enumerate(zip(sizes, scales)):
        if n_out == x.shape[axis] and sc == 1.0:
            continue
        idx = nearest_indices(x.shape[axis], n_out, sc, coord_mode, nearest_mode)
        x = np.take(x, idx, axis=axis)
    return x


def resize_linear(x: np.ndarray, sizes: list[int], scales: list[float], coord_mode: str
                  ) -> np.ndarray:
    """ONNX Resize mode=linear (bilinear on images): separable, one axis at a time, source
    coordinates clamped to the input (as onnxruntime and PyTorch do)."""
    dtype = x.dtype
    y = x.astype(np.float64)
    for axis, (n_out, sc) in enumerate(zip(sizes, scales)):
        n_in = y.shape[axis]
        if n_out == n_in and sc == 1.0:
            continue
        xi = np.clip(source_coords(n_in, n_out, sc, coord_mode), 0, n_in - 1)
        i0 = np.floor(xi).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        shape = [1] * y.ndim
        shape[axis] = n_out
        frac = (xi - i0).reshape(shape)
        y = np.take(y, i0, axis=axis) * (1 - frac) + np.take(y, i1, axis=axis) * frac
    if np.issubdtype(dtype, np.integer):  # int8 in, int8 out (same scale): round to nearest
        y = np.rint(y)
    return y.astype(dtype)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7, below float32's
    resolution of values near 1); numpy has none."""
    a = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
            + 0.254829592) * t
    return (np.sign(x) * (1.0 - poly * np.exp(-a * a))).astype(x.dtype)


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1 + erf(x64 / math.sqrt(2)))
    return y.astype(x.dtype)


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, axes: list[int],
               eps: float) -> np.ndarray:
    """Normalise over ``axes``, then scale and shift (``scale`` and ``bias`` broadcast)."""
    axes = tuple(axes)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps) * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype)


def softmax(x: np.ndarray, axis: int, legacy: bool) -> np.ndarray:
    """Softmax along ``axis``; a row that is ``-inf`` everywhere (attention masked entirely) is
    0, as in PyTorch's ``scaled_dot_product_attention`` and ONNX's ``Attention`` op (onnxruntime's
    ``Softmax`` gives NaN there)."""
    if legacy:  # opset < 13: coerce to 2D at axis
        shape = x.shape
        x2 = x.reshape(math.prod(shape[:axis]), -1)
        return softmax(x2, 1, False).reshape(shape)
    m = x.max(axis=axis, keepdims=True)
    masked = np.isneginf(m)
    if masked.any():
        m = np.where(masked, 0, m)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    if masked.any():
        s = np.where(s == 0, 1, s)
    return (e / s).astype(x.dtype)


def conv_macs(x_shape: tuple[int, ...], w_shape: tuple[int, ...],
              out_shape: tuple[int, ...]) -> int:
    n, o, oh, ow = out_shape
    return n * o * oh * ow * int(np.prod(w_shape[1:]))
