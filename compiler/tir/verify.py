"""The loop-IR verifier: run between passes (tests do) to catch malformed IR early."""

from __future__ import annotations

from ..errors import VerifyError
from .expr import BufferLoad, Expr, Reduce, TensorRead, Var, free_vars
from .expr import walk as ewalk
from .stmt import (
    Allocate,
    Alu,
    Attr,
    Buffer,
    Dma,
    For,
    Gemm,
    If,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    UopKernel,
)


def verify(func: PrimFunc) -> PrimFunc:
    """Check scoping of variables and buffers, index arity and sizes; raise VerifyError."""
    _Verifier(func).run()
    return func


class _Verifier:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.vars: list[Var] = []
        self.bufs: set[Buffer] = set(func.params)

    def run(self) -> None:
        names = [b.name for b in self.func.params]
        if len(set(names)) != len(names):
            raise VerifyError(f"{self.func.name}: duplicate parameter names {names}")
        self.stmt(self.func.body)

    def fail(self, msg: str) -> None:
        raise VerifyError(f"{self.func.name}: {msg}")

    def expr(self, e: Expr | None, where: str) -> None:
        if e is None:
            return
        for n in ewalk(e):
            if isinstance(n, TensorRead | Reduce):
                self.fail(f"{where}: tensor-expression node {n} left in the loop IR")
            if isinstance(n, BufferLoad):
                self.buffer(n.buffer, where)
                if len(n.indices) != n.buffer.ndim:
                    self.fail(f"{where}: {n.buffer.name} has {n.buffer.ndim} dimensions, "
                              f"read with {len(n.indices)} indices")
        scope = set(self.vars)
        for v in free_vars(e):
            if v not in scope:
                self.fail(f"{where}: variable {v.name} is used outside its loop")

    def buffer(self, b: Buffer | None, where: str) -> None:
        if b is not None and b not in self.bufs:
            self.fail(f"{where}: buffer {b.name} is not allocated or a parameter")

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, For):
            if s.extent <= 0:
                self.fail(f"loop {s.var.name} has extent {s.extent}")
            if s.var in self.vars:
                self.fail(f"loop variable {s.var.name} is bound twice")
            self.vars.append(s.var)
            self.stmt(s.body)
            self.vars.pop()
        elif isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, Allocate):
            if any(d <= 0 for d in s.buffer.shape):
                self.fail(f"buffer {s.buffer.name} has shape {s.buffer.shape}")
            self.bufs.add(s.buffer)
            self.stmt(s.body)
            self.bufs.discard(s.buffer)
        elif isinstance(s, Attr):
            self.stmt(s.body)
        elif isinstance(s, If):
            self.expr(s.cond, "if")
            self.stmt(s.then)
            if s.else_ is not None:
                self.stmt(s.else_)
        elif isinstance(s, Store):
            where = f"store to {s.buffer.name}"
            self.buffer(s.buffer, where)
            if len(s.indices) != s.buffer.ndim:
                self.fail(f"{where}: {s.buffer.ndim} dimensions, {len(s.indices)} indices")
            for i in s.indices:
                self.expr(i, where)
            self.expr(s.value, where)
        elif isinstance(s, Dma):
            where = f"vta.{s.direction} {s.sram.name}"
            self.buffer(s.sram, where)
            self.buffer(s.dram, where)
            self.expr(s.sram_index, where)
            self.expr(s.dram_index, where)
            if s.y_size < 1 or s.x_size < 1:
                self.fail(f"{where}: empty copy {s.y_size}x{s.x_size}")
        elif isinstance(s, Gemm):
            where = f"vta.gemm {s.dst.name}"
            for b, i in ((s.dst, s.dst_index), (s.src, s.src_index), (s.wgt, s.wgt_index)):
                self.buffer(b, where)
                self.expr(i, where)
        elif isinstance(s, Alu):
            where = f"vta.alu {s.dst.name}"
            for b, i in ((s.dst, s.dst_index), (s.src, s.src_index)):
                self.buffer(b, where)
                self.expr(i, where)
            if s.imm is None and s.src is None:
                self.fail(f"{where}: neither an immediate nor a source")
        elif isinstance(s, UopKernel):
            if len(s.loops) > 2:
                self.fail(f"micro-kernel with {len(s.loops)} folded loops (at most 2)")
            self.vars.extend(lp.var for lp in s.loops)
            self.stmt(s.body)
            del self.vars[len(self.vars) - len(s.loops):]


__all__ = ["verify"]
