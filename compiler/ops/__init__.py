"""The op registry (:mod:`.registry`) with the built-in ops (:mod:`.table`), their float and
int8 kernels, and the int8 arithmetic they share. Below both :mod:`vta.compiler.topi` and
:mod:`vta.compiler.graph`: every list of ops in the compiler derives from it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import table as _table  # noqa: F401 - declares the built-in ops
from .registry import (
    INJECTIVE,
    OPAQUE,
    OUT_FUSABLE,
    REDUCTION,
    Call,
    Kernel,
    Op,
    all_ops,
    alu_kind,
    attach,
    get,
    has,
    names,
    op_for_alu_kind,
    register,
    unregister,
)


def kernel_for(op: str) -> Kernel:
    """The kernel a node of ``op`` runs: its int8 kernel, else its float one."""
    o = get(op)
    k = o and (o.int_kernel or o.float_kernel)
    if k is None:
        raise KeyError(op)
    return k


def has_kernel(op: str) -> bool:
    """Whether a node of ``op`` has a kernel to run (int8 or float)."""
    o = get(op)
    return o is not None and (o.int_kernel or o.float_kernel) is not None


def node_macs(n: Any, shapes: Mapping[str, tuple[int, ...]], params: Mapping[str, Any]) -> int:
    """Multiply-accumulates of node ``n`` (its op's ``macs`` rule; 0 for other ops)."""
    o = get(n.op)
    return o.macs(n, shapes, params) if o is not None and o.macs is not None else 0


__all__ = ["INJECTIVE", "OPAQUE", "OUT_FUSABLE", "REDUCTION", "Call", "Kernel", "Op",
           "all_ops", "alu_kind", "attach", "get", "has", "has_kernel", "kernel_for", "names",
           "node_macs", "op_for_alu_kind", "register", "unregister"]
