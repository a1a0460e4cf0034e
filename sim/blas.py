"""The kit's BLAS helpers: the one OpenBLAS thread limiter and the one exact integer matmul.

Threads (OpenBLAS, as bundled with numpy). fsim's matrix products are one per GEMM instruction and
mostly small (a tile of a few hundred rows and columns). Multi-threaded OpenBLAS gains nothing on
those and, on a busy machine, loses a lot: its threads spin waiting for each other (a 2M-MAC
product was measured at 20-40 ms instead of 0.2 ms on a loaded 2-core machine).
:func:`blas_threads` sets the thread count for the duration of a ``with`` block and restores it
afterwards; :func:`limit_blas_threads` sets it for the rest of the process (the graph executor's
many small products, ``vta compile``/``vta run``). When no OpenBLAS is found (another BLAS,
another OS) both do nothing. (``OPENBLAS_NUM_THREADS`` only works before numpy is imported, hence
OpenBLAS's own setter through ctypes.)

Exact integer products. numpy's integer matmul does not use BLAS (it is tens of times slower than
float BLAS); a float matmul is exact as long as every partial sum stays within the float's
mantissa (2^24 in float32, 2^53 in float64). :func:`exact_matmul` computes ``a @ b.T`` of integer
matrices on float BLAS under that rule; fsim's GEMMs and the compiler's int8 reference of
conv/dense both use it.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from typing import Any

import numpy as np

_NAMES = [(f"{p}set_num_threads{s}", f"{p}get_num_threads{s}")
          for p in ("scipy_openblas_", "openblas_") for s in ("64_", "")]


def _loaded_openblas() -> list[tuple[Any, Any]]:
    """(set_num_threads, get_num_threads) of every OpenBLAS loaded in this process."""
    np.ones((2, 2)) @ np.ones((2, 2))  # make sure numpy's BLAS library is loaded
    if not sys.platform.startswith("linux"):
        return []
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f
                            if "openblas" in line.lower() and ".so" in line})
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _NAMES:
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                found.append((setter, getter))
                break
    return found


@cache
def _openblas() -> tuple[Any, Any] | None:
    """(set_num_threads, get_num_threads) of the OpenBLAS numpy uses, or None."""
    found = _loaded_openblas()
    return found[0] if found else None


def limit_blas_threads(n: int = 1) -> bool:
    """Set the thread count of every loaded OpenBLAS for the rest of the process; False when
    none was found."""
    found = _loaded_openblas()
    for setter, _ in found:
        setter(n)
    return bool(found)


@contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` BLAS threads (``None``: leave the setting alone)."""
    funcs = _openblas() if n is not None else None
    if funcs is None:
        yield
        return
    setter, getter = funcs
    before = getter()
    if before == n:
        yield
        return
    setter(n)
    try:
        yield
    finally:
        setter(before)


#: Integers a float holds exactly: every partial sum of a product must stay within this bound.
_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53
#: The narrowest reduction slice worth computing in float32 rather than the whole product in
#: float64 (float32 BLAS is about twice as fast; each slice adds one pass over the result, which
#: 64-column slices already repay: 256x256x2048 int8 took 2.6 ms in 64-column float32 slices,
#: 2.2 ms in 1024-column ones, 4.6 ms as one float64 product). int8 x int8 gives 1024-column
#: slices; int16 x int8 only 4 (float64 then).
_MIN_F32_COLS = 64
#: A product with fewer rows than this in ``a`` (a dense layer, a small feature map) is bound by
#: reading ``b``: when a float slice of ``b`` would be more than twice _CAST_BLOCK elements, it
#: casts ``b`` a block of at most _CAST_BLOCK (2 MB of float32, a core's L2 cache on the 2-core
#: EPYC it was measured on) at a time, which stays in cache (int8, 1x2048x4096: 1.1 ms instead of
#: 1.8 in 1024-column slices of all 2048 rows; 1x4096x4096: 3.5 ms instead of 8.2;
#: 16x4096x4096: 9.5 ms instead of 14.6). Below twice the block (1x1000x4096) and with 64 rows
#: or more the blocks gain nothing and cost a few percent.
_FEW_ROWS = 64
_CAST_BLOCK = 1 << 19


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b.T`` of int8 or int16 matrices ``a`` (M, K) and ``b`` (N, K), exact, on float
    BLAS: float32 when every partial sum is within 2^24, summed over slices of the reduction
    (K) that each stay within it when the whole does not; float64 when within 2^53; int64
    (numpy's integer matmul, no BLAS) beyond. The bound is K times the largest product of the
    two dtypes' ranges (int8 x int8: 2^14, so 1024 columns per float32 slice). Slices are cast
    one at a time (a VGG dense layer's 4096x25088 weights are never a 400 MB float32 array), and
    in row blocks when ``a`` has few rows. Returns int32 when every possible result fits (the
    bound is below 2^31), else int64.
    """
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise ValueError(f"exact_matmul: a is {a.shape}, b is {b.shape}; they need the same "
                         f"number of columns")
    work, step, out_dtype = _plan(a.dtype, b.dtype, k)
    if work is None:
        return a.astype(np.int64) @ b.astype(np.int64).T
    few = m < _FEW_ROWS and n * step > 2 * _CAST_BLOCK
    rows = max(1, _CAST_BLOCK // step if few else n)
    if step == k and n <= rows:  # one product (fsim's GEMMs, most convolutions)
        return (a.astype(work) @ b.astype(work).T).astype(out_dtype)
    out = np.zeros((m, n), out_dtype)
    for k0 in range(0, k, step):
        ak = a[:, k0:k0 + step].astype(work)
        for j0 in range(0, n, rows):
            bk = b[j0:j0 + rows, k0:k0 + step].astype(work)
            out[:, j0:j0 + rows] += (ak @ bk.T).astype(out_dtype)
    return out


@lru_cache(maxsize=1024)
def _plan(da: np.dtype, db: np.dtype, k: int) -> tuple[Any, int, Any]:
    """(float type or None for int64, reduction columns per product, result type) of a product
    of int8/int16 matrices over ``k`` columns (cached: fsim calls this once per GEMM)."""
    for d in (da, db):
        if d.kind != "i" or d.itemsize > 2:  # int64 sums of wider products could overflow
            raise TypeError(f"exact_matmul takes int8 or int16 matrices, not {d}")
    big = 1 << (da.itemsize * 8 - 1 + db.itemsize * 8 - 1)  # int8 x int8: (-128) * (-128)
    bound = k * big
    out_dtype = np.int32 if bound < 1 << 31 else np.int64
    if bound <= _F32_EXACT or _F32_EXACT // big >= _MIN_F32_COLS:
        return np.float32, min(k, _F32_EXACT // big), out_dtype
    if bound <= _F64_EXACT:
        return np.float64, k, out_dtype
    return None, k, out_dtype
