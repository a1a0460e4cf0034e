"""Statements of the loop IR, including the VTA coprocessor statements the passes produce.

Every node is an immutable dataclass compared by identity. A lowered program is a
:class:`PrimFunc`: parameters (global buffers) and a body. VTA nodes (:class:`Dma`, :class:`Gemm`,
:class:`Alu`, :class:`UopKernel`) index on-chip buffers in *elements* (one element is a
BATCH x BLOCK tile, the unit the hardware moves and computes on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from math import prod

from .expr import (
    _NAMES,
    BufferLoad,
    Expr,
    Var,
    _bind,
    expr_str,
    is_int,
    simplify,
    substitute,
)
from .expr import walk as ewalk

#: On-chip buffer scopes (TVM's env.inp_scope, env.wgt_scope, env.acc_scope).
INP_SCOPE = "local.inp_buffer"
WGT_SCOPE = "local.wgt_buffer"
ACC_SCOPE = "local.acc_buffer"
VTA_SCOPES = (INP_SCOPE, WGT_SCOPE, ACC_SCOPE)


@dataclass(eq=False)
class Buffer:
    """A named n-d array in a memory scope ("global" is DRAM / host memory)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"
    #: Base entry in its on-chip buffer, set by scratchpad allocation.
    base: int | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def elem_shape(self) -> tuple[int, ...]:
        """The tile the hardware moves as one element (the last two dimensions)."""
        return self.shape[-2:]

    @property
    def n_elems(self) -> int:
        """Number of tiles (on-chip entries) of a VTA-layout buffer."""
        return prod(self.shape[:-2])

    def strides(self) -> tuple[int, ...]:
        out, acc = [], 1
        for d in reversed(self.shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    def elem_strides(self) -> tuple[int, ...]:
        """Strides of the leading dimensions counted in tiles."""
        out, acc = [], 1
        for d in reversed(self.shape[:-2]):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    def __repr__(self) -> str:
        return f"Buffer({self.name})"


class Stmt:
    """Base class of statements."""


@dataclass(frozen=True, eq=False)
class For(Stmt):
    var: Var
    extent: int
    body: Stmt
    #: serial, vthread, unroll, vectorize, parallel
    kind: str = "serial"


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False)
class Attr(Stmt):
    """A scoped annotation, e.g. ``pragma_dma_copy`` or ``pragma_alu``."""

    key: str
    value: object
    body: Stmt


@dataclass(frozen=True, eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Stmt | None = None


@dataclass(frozen=True, eq=False)
class Nop(Stmt):
    pass


# -------------------------------------------------------------------- VTA statements
@dataclass(frozen=True)
class PadSpec:
    """Zero padding along one DMA axis: element ``start + i`` is valid iff lo <= it < hi."""

    start: Expr
    lo: int
    hi: int


@dataclass(frozen=True, eq=False)
class Dma(Stmt):
    """A 2D strided copy between DRAM and an on-chip buffer (one LOAD or STORE).

    ``dram_index`` is the DRAM element offset of row 0, column 0 (padding included: it may
    point outside the tensor, the pads are computed when the instruction is issued).
    """

    direction: str  # "load" | "store"
    sram: Buffer
    sram_index: Expr
    dram: Buffer
    dram_index: Expr
    y_size: int
    x_size: int
    x_stride: int
    pad_y: PadSpec | None = None
    pad_x: PadSpec | None = None
    thread: int | None = None


@dataclass(frozen=True, eq=False)
class Gemm(Stmt):
    """One GEMM micro-op: acc[dst] (+)= inp[src] x wgt[wgt]^T (indices in elements)."""

    reset: bool
    dst: Buffer
    dst_index: Expr
    src: Buffer | None = None
    src_index: Expr | None = None
    wgt: Buffer | None = None
    wgt_index: Expr | None = None


@dataclass(frozen=True, eq=False)
class Alu(Stmt):
    """One ALU micro-op: acc[dst] = op(acc[dst], imm or acc[src])."""

    op: str  # min max add shr mul
    dst: Buffer
    dst_index: Expr
    src: Buffer | None = None
    src_index: Expr | None = None
    imm: int | None = None

    @property
    def use_imm(self) -> bool:
        return self.imm is not None


@dataclass(frozen=True)
class UopLoop:
    """A loop folded into a GEMM/ALU instruction: index += var * factor for each operand."""

    var: Var
    extent: int
    dst_factor: int
    src_factor: int
    wgt_factor: int


@dataclass(frozen=True, eq=False)
class UopKernel(Stmt):
    """One GEMM or ALU instruction: up to two folded loops around a micro-op list.

    ``body`` holds the remaining (unrolled) loops and the micro-ops as Gemm/Alu leaves whose
    indices are evaluated with the folded variables at zero.
    """

    loops: tuple[UopLoop, ...]
    body: Stmt
    thread: int | None = None

    @property
    def leaves(self) -> list[Stmt]:
        return [s for s in walk(self.body) if isinstance(s, MICRO_OPS)]


@dataclass(eq=False)
class PrimFunc:
    name: str
    params: list[Buffer]
    body: Stmt
    attrs: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return func_str(self)


# --------------------------------------------------------------------------- helpers
def seq(stmts: Iterable[Stmt]) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        elif not isinstance(s, Nop):
            flat.append(s)
    if not flat:
        return Nop()
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


#: statements with one ``body`` (isinstance tuples: a ``A | B`` union is built at every call)
_BODY = (For, Allocate, Attr)
_BODY_OR_KERNEL = (For, Allocate, Attr, UopKernel)
_WITH_EXPRS = (Store, Dma, Gemm, Alu)
#: the micro-op statements (an isinstance tuple)
MICRO_OPS = (Gemm, Alu)


def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    if isinstance(s, _BODY):
        return (s.body,)
    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, If):
        return (s.then,) + ((s.else_,) if s.else_ is not None else ())
    if isinstance(s, UopKernel):
        return (s.body,)
    return ()


def walk(s: Stmt) -> Iterable[Stmt]:
    stack = [s]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(stmt_children(n)))


def rebuild(s: Stmt, f: Callable[[Stmt], Stmt | None]) -> Stmt:
    """Rebuild top-down: ``f`` returns a replacement (not revisited) or None to recurse."""
    r = f(s)
    if r is not None:
        return r
    if isinstance(s, _BODY_OR_KERNEL):
        b = rebuild(s.body, f)
        return s if b is s.body else with_fields(s, body=b)
    if isinstance(s, Seq):
        return seq(rebuild(c, f) for c in s.stmts)
    if isinstance(s, If):
        return If(s.cond, rebuild(s.then, f),
                  None if s.else_ is None else rebuild(s.else_, f))
    return s


def with_fields(s: object, **changes: object) -> object:
    """``dataclasses.replace(s, **changes)`` without its per-call field introspection (the
    frozen dataclasses of this module have no ``__post_init__``; rebuilding a program replaces
    many fields)."""
    n = object.__new__(type(s))
    d = n.__dict__
    d.update(s.__dict__)
    d.update(changes)
    return n


def map_exprs(s: Stmt, f: Callable[[Expr], Expr]) -> Stmt:
    """Apply ``f`` to every expression directly held by ``s`` (not its children)."""
    if isinstance(s, Store):
        return Store(s.buffer, tuple(f(i) for i in s.indices), f(s.value))
    if isinstance(s, If):
        return If(f(s.cond), s.then, s.else_)
    if isinstance(s, Dma):
        return with_fields(
            s, sram_index=f(s.sram_index), dram_index=f(s.dram_index),
            pad_y=None if s.pad_y is None else with_fields(s.pad_y, start=f(s.pad_y.start)),
            pad_x=None if s.pad_x is None else with_fields(s.pad_x, start=f(s.pad_x.start)))
    if isinstance(s, Gemm):
        return with_fields(s, dst_index=f(s.dst_index),
                           src_index=None if s.src_index is None else f(s.src_index),
                           wgt_index=None if s.wgt_index is None else f(s.wgt_index))
    if isinstance(s, Alu):
        return with_fields(s, dst_index=f(s.dst_index),
                           src_index=None if s.src_index is None else f(s.src_index))
    return s


def stmt_substitute(s: Stmt, mapping: dict) -> Stmt:
    """Substitute variables in every expression of a statement tree."""
    def sub(e):
        r = substitute(e, mapping)
        return simplify(r) if is_int(r.dtype) else r

    def fn(n: Stmt) -> Stmt | None:
        if isinstance(n, _WITH_EXPRS):
            return map_exprs(n, sub)
        if isinstance(n, If):
            return If(substitute(n.cond, mapping), stmt_substitute(n.then, mapping),
                      None if n.else_ is None else stmt_substitute(n.else_, mapping))
        return None

    return rebuild(s, fn)


def buffers_used(s: Stmt) -> set[Buffer]:
    out: set[Buffer] = set()
    for n in walk(s):
        if isinstance(n, Store):
            out.add(n.buffer)
            for e in (*n.indices, n.value):
                out |= {x.buffer for x in ewalk(e) if isinstance(x, BufferLoad)}
        elif isinstance(n, Dma):
            out |= {n.sram, n.dram}
        elif isinstance(n, Gemm):
            out |= {b for b in (n.dst, n.src, n.wgt) if b is not None}
        elif isinstance(n, Alu):
            out |= {b for b in (n.dst, n.src) if b is not None}
    return out


# ------------------------------------------------------------------ text form
def _buf(b: Buffer) -> str:
    shape = ", ".join(str(d) for d in b.shape)
    return f"{b.dtype}[{shape}]"


def _ref(b: Buffer, idx: Expr | None) -> str:
    return f"{b.name}[{expr_str(idx) if idx is not None else '?'}]"


def stmt_lines(s: Stmt, indent: int = 0) -> list[str]:
    pad = "  " * indent
    if isinstance(s, Seq):
        return [line for c in s.stmts for line in stmt_lines(c, indent)]
    if isinstance(s, Nop):
        return [pad + "pass"]
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else f" ({s.kind})"
        return [f"{pad}for {_bind(s.var)} in range({s.extent}){kind}:"] + \
            stmt_lines(s.body, indent + 1)
    if isinstance(s, Allocate):
        b = s.buffer
        at = f" @{b.base}" if b.base is not None else ""
        return [f"{pad}alloc {b.name}: {_buf(b)} in {b.scope}{at}"] + stmt_lines(s.body, indent)
    if isinstance(s, Attr):
        return [f"{pad}# {s.key}" + (f" = {s.value}" if s.value is not None else "")] + \
            stmt_lines(s.body, indent)
    if isinstance(s, Store):
        idx = ", ".join(expr_str(i) for i in s.indices)
        return [f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}"]
    if isinstance(s, If):
        out = [f"{pad}if {expr_str(s.cond)}:"] + stmt_lines(s.then, indent + 1)
        if s.else_ is not None:
            out += [f"{pad}else:"] + stmt_lines(s.else_, indent + 1)
        return out
    if isinstance(s, Dma):
        pads = ""
        for axis, p in (("y", s.pad_y), ("x", s.pad_x)):
            if p is not None:
                pads += f", pad_{axis}=({expr_str(p.start)} in [{p.lo}, {p.hi}))"
        th = f", thread={s.thread}" if s.thread is not None else ""
        if s.direction == "load":
            src, dst = _ref(s.dram, s.dram_index), _ref(s.sram, s.sram_index)
        else:
            src, dst = _ref(s.sram, s.sram_index), _ref(s.dram, s.dram_index)
        return [f"{pad}vta.{s.direction} {dst} <- {src} ({s.y_size}x{s.x_size}, "
                f"stride {s.x_stride}{pads}{th})"]
    if isinstance(s, Gemm):
        if s.reset:
            return [f"{pad}vta.gemm_reset {_ref(s.dst, s.dst_index)}"]
        return [f"{pad}vta.gemm {_ref(s.dst, s.dst_index)} += {_ref(s.src, s.src_index)} x "
                f"{_ref(s.wgt, s.wgt_index)}"]
    if isinstance(s, Alu):
        rhs = str(s.imm) if s.use_imm else _ref(s.src, s.src_index)
        return [f"{pad}vta.alu_{s.op} {_ref(s.dst, s.dst_index)}, {rhs}"]
    if isinstance(s, UopKernel):
        loops = "; ".join(f"{_bind(lp.var)} < {lp.extent}: dst*{lp.dst_factor} "
                          f"src*{lp.src_factor} wgt*{lp.wgt_factor}" for lp in s.loops)
        th = f" thread={s.thread}" if s.thread is not None else ""
        return [f"{pad}vta.uop_kernel [{loops}]{th}:"] + stmt_lines(s.body, indent + 1)
    return [f"{pad}<{type(s).__name__}>"]


def stmt_str(s: Stmt) -> str:
    return "\n".join(stmt_lines(s)) + "\n"


def func_str(f: PrimFunc) -> str:
    params = ", ".join(f"{b.name}: {_buf(b)}" for b in f.params)
    token = _NAMES.set({})
    try:
        body = "\n".join(stmt_lines(f.body, 1))
    finally:
        _NAMES.reset(token)
    return f"def {f.name}({params}):\n" + body + "\n"


__all__ = [
    "INP_SCOPE", "WGT_SCOPE", "ACC_SCOPE", "VTA_SCOPES", "Buffer", "Stmt", "For", "Seq", "Store",
    "Allocate", "Attr", "If", "Nop", "PadSpec", "Dma", "Gemm", "Alu", "UopLoop", "UopKernel",
    "PrimFunc", "MICRO_OPS", "seq", "stmt_children", "walk", "rebuild", "with_fields",
    "map_exprs", "stmt_substitute", "buffers_used", "stmt_lines", "stmt_str", "func_str",
]
