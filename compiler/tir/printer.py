"""A readable text form of expressions and loop IR (used by tests as golden output)."""

from __future__ import annotations

from contextvars import ContextVar

from .expr import (
    Binary,
    BufferLoad,
    Call,
    Cast,
    Const,
    Expr,
    Reduce,
    Select,
    TensorRead,
    Var,
)
from .stmt import (
    Allocate,
    Alu,
    Attr,
    Buffer,
    Dma,
    For,
    Gemm,
    If,
    Nop,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    UopKernel,
)

_INFIX = {"add": ("+", 4), "sub": ("-", 4), "mul": ("*", 5), "div": ("/", 5),
          "floordiv": ("//", 5), "floormod": ("%", 5), "shl": ("<<", 3), "shr": (">>", 3),
          "lt": ("<", 2), "le": ("<=", 2), "eq": ("==", 2), "ne": ("!=", 2),
          "and": ("and", 1), "or": ("or", 0)}


#: Display names of variables while printing a function (distinct variables that share a name
#: are shown as name, name_1, ...); a context variable, so printing is re-entrant.
_NAMES: ContextVar[dict[int, str] | None] = ContextVar("tir_printer_names", default=None)


def _var_name(v: Var) -> str:
    names = _NAMES.get()
    if names is not None and id(v) in names:
        return names[id(v)]
    return v.name


def _bind(v: Var) -> str:
    names = _NAMES.get()
    if names is None:
        return v.name
    if id(v) not in names:
        used = set(names.values())
        name, k = v.name, 0
        while name in used:
            k += 1
            name = f"{v.name}_{k}"
        names[id(v)] = name
    return names[id(v)]


def expr_str(e: Expr, prec: int = 0) -> str:
    if isinstance(e, Var):
        return _var_name(e)
    if isinstance(e, Const):
        if e.dtype in ("int32", "bool"):
            return str(e.value)
        return f"{e.dtype}({e.value})"
    if isinstance(e, Binary):
        if e.op == "add" and isinstance(e.b, Const) and e.b.value < 0 and e.b.dtype == "int32":
            s = f"{expr_str(e.a, 4)} - {-e.b.value}"
            return f"({s})" if prec > 4 else s
        if e.op in _INFIX:
            sym, p = _INFIX[e.op]
            s = f"{expr_str(e.a, p)} {sym} {expr_str(e.b, p + 1)}"
            return f"({s})" if p < prec else s
        return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(a.var.name for a in e.axes)
        return f"{e.combiner}({expr_str(e.source)}, axis=[{axes}])"
    return f"<{type(e).__name__}>"


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


__all__ = ["expr_str", "stmt_str", "func_str", "stmt_lines"]
