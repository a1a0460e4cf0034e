"""Passes are named IR -> IR functions: frozen dataclasses whose fields are their options."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import ClassVar

from ..tir.expr import BufferLoad, Expr, transform
from ..tir.stmt import (
    MICRO_OPS,
    Allocate,
    Buffer,
    Dma,
    PrimFunc,
    Stmt,
    Store,
    map_exprs,
    rebuild,
    with_fields,
)
from ..tir.verify import verify


@dataclass(frozen=True)
class Pass:
    """Base class: subclasses set ``name`` and implement :meth:`apply`."""

    name: ClassVar[str] = "pass"

    def apply(self, func: PrimFunc) -> PrimFunc:
        raise NotImplementedError

    def __call__(self, func: PrimFunc) -> PrimFunc:
        return self.apply(func)

    def __str__(self) -> str:
        opts = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"{self.name}{{{opts}}}" if opts else self.name


@dataclass(frozen=True)
class Pipeline:
    """Run passes in order; with ``verify_each`` the verifier runs after every pass."""

    passes: tuple[Pass, ...]
    verify_each: bool = True
    #: Optional callback(pass_name, func) for dumping IR between passes.
    dump: Callable[[str, PrimFunc], None] | None = None

    def __call__(self, func: PrimFunc) -> PrimFunc:
        if self.verify_each:
            verify(func)
        for p in self.passes:
            func = p(func)
            if self.verify_each:
                verify(func)
            if self.dump is not None:
                self.dump(p.name, func)
        return func

    def __str__(self) -> str:
        return " -> ".join(str(p) for p in self.passes)


def replace_buffers(s: Stmt, mapping: dict[Buffer, Buffer], drop_alloc: bool = False) -> Stmt:
    """Substitute buffers everywhere (stores, loads, VTA nodes, allocations)."""
    if not mapping:
        return s

    def expr(e: Expr) -> Expr:
        return _replace_loads(e, mapping)

    def fn(n: Stmt) -> Stmt | None:
        if isinstance(n, Allocate) and n.buffer in mapping:
            body = replace_buffers(n.body, mapping, drop_alloc)
            return body if drop_alloc else Allocate(mapping[n.buffer], body)
        if isinstance(n, Store):
            n2 = map_exprs(n, expr)
            return Store(mapping.get(n2.buffer, n2.buffer), n2.indices, n2.value)
        if isinstance(n, Dma):
            return with_fields(map_exprs(n, expr), sram=mapping.get(n.sram, n.sram),
                               dram=mapping.get(n.dram, n.dram))
        if isinstance(n, MICRO_OPS):
            kw = {k: mapping.get(getattr(n, k), getattr(n, k))
                  for k in ("dst", "src", "wgt") if hasattr(n, k) and getattr(n, k) is not None}
            return with_fields(n, **kw)
        return None

    return rebuild(s, fn)


def _replace_loads(e: Expr, mapping: dict[Buffer, Buffer]) -> Expr:
    """``e`` with its loads of the buffers in ``mapping`` reading their replacements (no
    recursive closure: that would be a reference cycle, garbage for the cyclic collector)."""
    return transform(e, lambda n: BufferLoad(mapping[n.buffer],
                                             [_replace_loads(i, mapping) for i in n.indices])
                     if isinstance(n, BufferLoad) and n.buffer in mapping else None)


def run_passes(func: PrimFunc, passes: Sequence[Pass], verify_each: bool = True) -> PrimFunc:
    return Pipeline(tuple(passes), verify_each)(func)


__all__ = ["Pass", "Pipeline", "replace_buffers", "run_passes"]
