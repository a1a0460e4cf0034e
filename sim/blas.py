"""The kit's one OpenBLAS thread limiter (OpenBLAS, as bundled with numpy).

fsim's matrix products are one per GEMM instruction and mostly small (a tile of a few hundred rows
and columns). Multi-threaded OpenBLAS gains nothing on those and, on a busy machine, loses a lot:
its threads spin waiting for each other (a 2M-MAC product was measured at 20-40 ms instead of
0.2 ms on a loaded 2-core machine). :func:`blas_threads` sets the thread count for the duration of
a ``with`` block and restores it afterwards; :func:`limit_blas_threads` sets it for the rest of the
process (the graph executor's many small products, ``vta compile``/``vta run``). When no OpenBLAS
is found (another BLAS, another OS) both do nothing. (``OPENBLAS_NUM_THREADS`` only works before
numpy is imported, hence OpenBLAS's own setter through ctypes.)
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

_NAMES = [(f"{p}set_num_threads{s}", f"{p}get_num_threads{s}")
          for p in ("scipy_openblas_", "openblas_") for s in ("64_", "")]


def _loaded_openblas() -> list[tuple[Any, Any]]:
    """(set_num_threads, get_num_threads) of every OpenBLAS loaded in this process."""
    import numpy as np

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
