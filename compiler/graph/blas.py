"""Limit OpenBLAS to one thread in this process.

The graph kernels multiply many small matrices; two BLAS threads per process on a shared
two-core machine spend most of their time spinning (measured: 3-10x slower under load), and
one thread is as fast when the machine is idle. ``OPENBLAS_NUM_THREADS`` only works before numpy
is imported, so this calls OpenBLAS's own setter through ctypes.
"""

from __future__ import annotations

import ctypes

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")


def limit_blas_threads(n: int = 1) -> bool:
    """Set the thread count of every loaded OpenBLAS; False when none was found."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return False
    done = False
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for fn in _SETTERS:
            if hasattr(lib, fn):
                getattr(lib, fn)(n)
                done = True
                break
    return done
