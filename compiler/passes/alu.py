"""ALU injection: ``pragma alu`` element-wise loops on the accumulator -> VTA ALU micro-ops.

A stage ``D[i] = f(S[i])`` where ``f`` is a chain of add/sub/min/max/shifts/multiply by
immediates or by another accumulator buffer (a right shift by a buffer: per-lane amounts)
becomes one in-place ALU loop nest per operation on
``S``'s storage; ``D`` is then an alias of ``S`` (TVM's in-place storage rewrite).
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.isa import Config

from ..errors import AluError
from ..tir.expr import (
    Binary,
    BufferLoad,
    Cast,
    Const,
    Expr,
    Var,
    is_int,
    simplify,
    structural_equal,
)
from ..tir.stmt import (
    ACC_SCOPE,
    Alu,
    Attr,
    Buffer,
    For,
    PrimFunc,
    Stmt,
    Store,
    rebuild,
    seq,
)
from .base import Pass, replace_buffers
from .dma import tile_shape

_IMM_BITS = 16


@dataclass(frozen=True)
class InjectAlu(Pass):
    """Replace every ``pragma_alu`` loop nest by in-place :class:`Alu` micro-op loops."""

    cfg: Config
    name = "inject-alu"

    def apply(self, func: PrimFunc) -> PrimFunc:
        aliases: dict[Buffer, Buffer] = {}

        def fn(s: Stmt) -> Stmt | None:
            if isinstance(s, Attr) and s.key == "pragma_alu":
                return self.lower_alu(s.body, str(s.value), aliases)
            return None

        body = rebuild(func.body, fn)
        # resolve alias chains (D -> S -> T)
        for k in list(aliases):
            v = aliases[k]
            while v in aliases:
                v = aliases[v]
            aliases[k] = v
        body = replace_buffers(body, aliases, drop_alloc=True)
        return PrimFunc(func.name, func.params, body, dict(func.attrs))

    def lower_alu(self, s: Stmt, stage: str, aliases: dict[Buffer, Buffer]) -> Stmt:
        loops: list[tuple[Var, int]] = []
        while isinstance(s, For):
            loops.append((s.var, s.extent))
            s = s.body
        names = f"stage {stage}"
        if not isinstance(s, Store):
            raise AluError(f"{names}: an alu loop nest must end in one element-wise statement "
                           f"(found {type(s).__name__}; splits must divide the shape)")
        dst = s.buffer
        tile = tile_shape(self.cfg, ACC_SCOPE)
        if dst.scope != ACC_SCOPE or tuple(dst.shape[-2:]) != tile:
            raise AluError(f"{names}: ALU work must write an accumulator buffer with "
                           f"{tile} tiles ({dst.name} is {dst.scope}, shape {dst.shape})")
        if len(loops) < 2 or [v for v, _ in loops[-2:]] != [
                i for i in s.indices[-2:] if isinstance(i, Var)] or \
                tuple(e for _, e in loops[-2:]) != tile:
            raise AluError(f"{names}: the two innermost loops must walk whole {tile} tiles")
        base, ops = _chain(s.value, names)
        if base.buffer.scope != ACC_SCOPE:
            raise AluError(f"{names}: operand {base.buffer.name} is not in the accumulator")
        if not all(structural_equal(simplify(a), simplify(b))
                   for a, b in zip(base.indices, s.indices)):
            raise AluError(f"{names}: {dst.name}{list(s.indices)} and its operand "
                           f"{base.buffer.name}{list(base.indices)} must be the same element")
        if base.buffer is not dst:
            if base.buffer.shape != dst.shape:
                raise AluError(f"{names}: {dst.name} {dst.shape} and {base.buffer.name} "
                               f"{base.buffer.shape} differ; ALU works in place")
            aliases[dst] = base.buffer
        target = base.buffer
        dst_idx = _tile_index(target, s.indices)
        outer = loops[:-2]
        nests = []
        for op, operand in ops:
            if isinstance(operand, int):
                leaf: Stmt = Alu(op, target, dst_idx, imm=operand)
            else:
                if operand.buffer.scope != ACC_SCOPE:
                    raise AluError(f"{names}: operand {operand.buffer.name} is in "
                                   f"{operand.buffer.scope}; load it into the accumulator")
                if not all(structural_equal(simplify(a), simplify(b)) for a, b in
                           zip(operand.indices[-2:], s.indices[-2:])):
                    raise AluError(f"{names}: operand {operand.buffer.name} must be read "
                                   "tile-aligned (same position inside each tile)")
                leaf = Alu(op, target, dst_idx, operand.buffer,
                           _tile_index(operand.buffer, operand.indices))
            for v, e in reversed(outer):
                leaf = For(v, e, leaf)
            nests.append(leaf)
        return seq(nests)


def _tile_index(b: Buffer, idx: tuple[Expr, ...]) -> Expr:
    out: Expr = Const(0, "int32")
    for i, st in zip(idx[:-2], b.elem_strides()):
        out = out + i * st
    return simplify(out)


def _strip(e: Expr) -> Expr:
    while isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        e = e.value
    return e


def _imm(e: Expr, names: str) -> int | None:
    e = _strip(e)
    if isinstance(e, Const):
        v = int(e.value)
        lo, hi = -(1 << (_IMM_BITS - 1)), (1 << (_IMM_BITS - 1)) - 1
        if not lo <= v <= hi:
            raise AluError(f"{names}: immediate {v} does not fit the ALU's 16-bit field")
        return v
    return None


def _chain(e: Expr, names: str) -> tuple[BufferLoad, list[tuple[str, int | BufferLoad]]]:
    """Decompose ``e`` into a base load and a list of (op, immediate or load) applied in order."""
    e = _strip(e)
    if isinstance(e, BufferLoad):
        return e, []
    if isinstance(e, Binary) and e.op in ("add", "sub", "min", "max", "shr", "shl", "mul"):
        a, b = _strip(e.a), _strip(e.b)
        commut = e.op in ("add", "min", "max", "mul")
        # the chain continues in the operand holding the base element
        for first, other in ((a, b), (b, a)) if commut else ((a, b),):
            if isinstance(other, Const) or isinstance(other, BufferLoad) and (
                    isinstance(first, (Binary, BufferLoad))):
                imm = _imm(other, names)
                if imm is None and not isinstance(other, BufferLoad):
                    continue
                base, ops = _chain(first, names)
                op = e.op
                if op == "sub":
                    if imm is None:
                        raise AluError(f"{names}: subtracting a buffer is not an ALU operation")
                    op, imm = "add", -imm
                if op == "shl":
                    if imm is None:
                        raise AluError(f"{names}: a left shift needs an immediate amount "
                                       "(shift right by a negated buffer instead)")
                    op, imm = "shr", -imm
                return base, ops + [(op, imm if imm is not None else other)]
    raise AluError(f"{names}: {e} is not an ALU operation (add, sub/min/max/shift/mul by an "
                   "immediate, add/min/max of two accumulator buffers)")


__all__ = ["InjectAlu"]
