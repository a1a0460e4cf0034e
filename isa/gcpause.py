"""``paused_gc()``: no cyclic garbage collection while a burst of short-lived objects is made.

Building and timing one candidate program (lowering, code generation in record mode, the
performance model) makes hundreds of thousands of small container objects (IR nodes, commands,
instructions) that live just long enough to be promoted to the oldest generation, so
CPython's automatic collector keeps running full collections, each traversing every object of
the process (the model's graph, the compiler's caches): in a default-knob search that cost
more than the work itself. The objects are freed by reference counting when the burst ends;
any cyclic garbage waits for the next automatic collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Disable automatic garbage collection inside the block (re-enabled after it only if it
    was enabled before: nested and concurrent uses leave it as they found it)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


__all__ = ["paused_gc"]
