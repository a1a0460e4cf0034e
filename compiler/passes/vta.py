"""VTA passes after DMA/ALU injection: micro-op folding, virtual threads, scratchpad allocation.

* :class:`FoldUopLoops` turns each maximal loop nest of GEMM/ALU micro-ops (one instruction
  signature) into a :class:`UopKernel`, folding its two outermost loops into the instruction's
  ``iter_out``/``iter_in`` and factors (TVM's ``FoldUopLoop``).
* :class:`InjectVirtualThreads` expands ``cthread`` loops: every statement below is duplicated per
  thread with its own copy of every buffer allocated there, and the copies are interleaved at the
  innermost level (load t0, load t1, compute t0, compute t1, ...), so one thread's loads overlap
  another thread's compute once dependency tokens are placed per thread (``passes.sync``).
* :class:`AllocateScratchpad` assigns on-chip base entries (nested scopes reuse space) and
  raises :class:`ScratchpadOverflowError` naming the buffer, needed and available entries.
* :class:`CheckVtaLowered` rejects any plain loop left writing an on-chip buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.isa import Config

from ..errors import LoweringError, ScratchpadOverflowError
from ..tir.expr import BufferLoad, Const, Var, free_vars, linear, simplify_ranges
from ..tir.expr import walk as ewalk
from ..tir.stmt import (
    ACC_SCOPE,
    INP_SCOPE,
    MICRO_OPS,
    VTA_SCOPES,
    WGT_SCOPE,
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
    UopLoop,
    map_exprs,
    rebuild,
    seq,
    stmt_children,
    stmt_substitute,
    walk,
    with_fields,
)
from .base import Pass, replace_buffers
from .dma import tile_shape

#: isinstance tuples of hot traversals (an ``A | B`` union is built at every call)
_COMPUTE = (UopKernel, *MICRO_OPS)
_THREADED = (Dma, UopKernel)


def _signature(leaf: Stmt) -> tuple:
    if isinstance(leaf, Gemm):
        return ("gemm", leaf.reset)
    assert isinstance(leaf, Alu)
    return ("alu", leaf.op, leaf.use_imm, leaf.imm)


def _pure(s: Stmt) -> bool:
    """Only serial loops, sequences and micro-ops."""
    if isinstance(s, MICRO_OPS):
        return True
    if isinstance(s, For):
        return s.kind in ("serial", "unroll") and _pure(s.body)
    if isinstance(s, Seq):
        return all(_pure(c) for c in s.stmts)
    return False


@dataclass(frozen=True)
class FoldUopLoops(Pass):
    """Micro-kernel extraction and loop folding (at most ``max_loops`` folded loops)."""

    max_loops: int = 2
    name = "fold-uop-loops"

    def apply(self, func: PrimFunc) -> PrimFunc:
        return PrimFunc(func.name, func.params, rebuild(func.body, self._visit), func.attrs)

    def _visit(self, s: Stmt) -> Stmt | None:
        if not _pure(s):
            return None
        sigs = {_signature(n) for n in walk(s) if isinstance(n, MICRO_OPS)}
        if len(sigs) == 1:
            return self.kernel(s, alu=next(iter(sigs))[0] == "alu")
        if isinstance(s, Seq):
            return seq(rebuild(c, self._visit) for c in s.stmts)
        if isinstance(s, For):
            return For(s.var, s.extent, rebuild(s.body, self._visit), s.kind)
        return None

    def kernel(self, s: Stmt, *, alu: bool) -> UopKernel:
        """The kernel of ``s``, a nest of micro-ops of one signature (``alu``: ALU ones)."""
        s = _range_simplify(_drop_unit_loops(s), {})
        if alu:
            s = _coalesce(s)
        loops: list[UopLoop] = []
        while isinstance(s, For) and len(loops) < self.max_loops:
            lp = self._fold(s)
            if lp is None:
                break
            loops.append(lp)
            s = s.body
        return UopKernel(tuple(loops), s)

    @staticmethod
    def _fold(s: For) -> UopLoop | None:
        v = s.var
        factors: list[int | None] = [None, None, None]
        for leaf in walk(s.body):
            if not isinstance(leaf, MICRO_OPS):
                continue
            idxs = (leaf.dst_index, leaf.src_index, getattr(leaf, "wgt_index", None))
            for k, e in enumerate(idxs):
                if e is None:
                    continue
                lin = linear(e)
                for key, atom in lin.atoms.items():
                    if key in lin.terms and not isinstance(atom, Var) and v in free_vars(atom):
                        return None
                c = lin.coef(v)
                if factors[k] is None:
                    factors[k] = c
                elif factors[k] != c:
                    return None
        f = [x or 0 for x in factors]
        return UopLoop(v, s.extent, f[0], f[1], f[2])


def _coalesce(s: Stmt) -> Stmt:
    """Merge each loop with the loop directly inside it when every micro-op index walks the
    two as one (the outer variable's coefficient is the inner loop's extent times the inner
    one's): the pair becomes one loop over both extents' product. An ALU nest over a
    contiguous block then folds into one micro-op and two loops, which the compute module runs
    fused with the immediate ALU instructions that follow (``vta.hw.compute``)."""
    if not isinstance(s, For):
        return s
    inner = _coalesce(s.body)
    if isinstance(inner, For) and _walks_as_one(s.var, inner):
        body = stmt_substitute(inner.body, {s.var: Const(0, "int32")})
        return For(inner.var, s.extent * inner.extent, body, inner.kind)
    return For(s.var, s.extent, inner, s.kind)


def _walks_as_one(outer: Var, inner: For) -> bool:
    """Whether every micro-op index below ``inner`` is affine in ``outer`` and ``inner.var``
    with ``coef(outer) == inner.extent * coef(inner.var)``."""
    for leaf in walk(inner.body):
        if not isinstance(leaf, MICRO_OPS):
            continue
        idxs = [leaf.dst_index, getattr(leaf, "wgt_index", None)]
        if not (isinstance(leaf, Alu) and leaf.use_imm):
            idxs.append(leaf.src_index)
        for e in idxs:
            if e is None:
                continue
            lin = linear(e)
            for key, atom in lin.atoms.items():
                if key in lin.terms and not isinstance(atom, Var) and \
                        (outer in free_vars(atom) or inner.var in free_vars(atom)):
                    return False
            if lin.coef(outer) != inner.extent * lin.coef(inner.var):
                return False
    return True


def _range_simplify(s: Stmt, ranges: dict[Var, tuple[int, int]]) -> Stmt:
    """Use the kernel's loop ranges to turn block-local floordiv/floormod indices affine."""
    if isinstance(s, For):
        inner = {**ranges, s.var: (0, s.extent - 1)}
        return For(s.var, s.extent, _range_simplify(s.body, inner), s.kind)
    if isinstance(s, Seq):
        return seq(_range_simplify(c, ranges) for c in s.stmts)
    if isinstance(s, MICRO_OPS) and ranges:
        return map_exprs(s, lambda e: simplify_ranges(e, ranges))
    return s


def _drop_unit_loops(s: Stmt) -> Stmt:
    """Remove loops of extent 1 (their variable is 0) so they do not take a folding slot.

    Below an outermost unit loop, the unit loops nested in it go first, then one substitution
    sets all their variables to 0 (not one substitution of the whole body per loop)."""
    def fn(n: Stmt) -> Stmt | None:
        if isinstance(n, For) and n.extent == 1:
            zero = {n.var: Const(0, "int32")}
            return stmt_substitute(rebuild(n.body, _DropUnitLoops(zero)), zero)
        return None

    return rebuild(s, fn)


class _DropUnitLoops:
    """A :func:`rebuild` callback dropping unit loops and collecting their variables in
    ``zero`` (a callable object, not a recursive closure: that would be a reference cycle,
    garbage for the cyclic collector)."""

    def __init__(self, zero: dict[Var, Const]) -> None:
        self.zero = zero

    def __call__(self, n: Stmt) -> Stmt | None:
        if isinstance(n, For) and n.extent == 1:
            self.zero[n.var] = Const(0, "int32")
            return rebuild(n.body, self)
        return None


@dataclass(frozen=True)
class InjectVirtualThreads(Pass):
    """Expand ``cthread`` loops into interleaved per-thread statements with private buffers."""

    name = "inject-virtual-threads"

    def apply(self, func: PrimFunc) -> PrimFunc:
        return PrimFunc(func.name, func.params, self._expand_all(func.body), func.attrs)

    def _expand_all(self, s: Stmt) -> Stmt:
        def fn(n: Stmt) -> Stmt | None:
            if isinstance(n, For) and n.kind == "vthread":
                body = self._expand_all(n.body)  # inner virtual threads first
                return self._inject(body, n.var, n.extent, {})
            return None

        return rebuild(s, fn)

    def _inject(self, s: Stmt, v: Var, n: int, bufs: dict[Buffer, list[Buffer]]) -> Stmt:
        if _module(s) is not None:
            return self._copies([s], v, n, bufs)
        if isinstance(s, For):
            return For(s.var, s.extent, self._inject(s.body, v, n, bufs), s.kind)
        if isinstance(s, Seq):
            # consecutive statements of one module are copied as a block per thread, so each
            # thread's loads (or computes, or stores) are contiguous in the stream
            out: list[Stmt] = []
            run: list[Stmt] = []
            for c in s.stmts:
                m = _module(c)
                if run and (m is None or m != _module(run[0])):
                    out.append(self._copies(run, v, n, bufs))
                    run = []
                if m is None:
                    out.append(self._inject(c, v, n, bufs))
                else:
                    run.append(c)
            if run:
                out.append(self._copies(run, v, n, bufs))
            return seq(out)
        if isinstance(s, Attr):
            return Attr(s.key, s.value, self._inject(s.body, v, n, bufs))
        if isinstance(s, Allocate):
            b = s.buffer
            copies = [Buffer(f"{b.name}.t{t}", b.shape, b.dtype, b.scope) for t in range(n)]
            inner = self._inject(s.body, v, n, {**bufs, b: copies})
            for c in reversed(copies):
                inner = Allocate(c, inner)
            return inner
        return self._copies([s], v, n, bufs)

    @staticmethod
    def _copies(stmts: list[Stmt], v: Var, n: int, bufs: dict[Buffer, list[Buffer]]) -> Stmt:
        out = []
        for t in range(n):
            mapping = {b: cs[t] for b, cs in bufs.items()}
            for s in stmts:
                leaf = replace_buffers(stmt_substitute(s, {v: Const(t, "int32")}), mapping)
                out.append(_tag(leaf, t))
        return seq(out)


def _module(s: Stmt) -> str | None:
    """The one VTA module every coprocessor statement in ``s`` runs on, else None."""
    mods = set()
    for n in walk(s):
        if isinstance(n, Allocate) or (isinstance(n, For) and n.kind == "vthread"):
            return None
        if isinstance(n, Dma):
            mods.add("compute" if n.direction == "load" and n.sram.scope == ACC_SCOPE
                     else ("load" if n.direction == "load" else "store"))
        elif isinstance(n, _COMPUTE):
            mods.add("compute")
        elif isinstance(n, Store):
            return None
    return mods.pop() if len(mods) == 1 else None


def _tag(s: Stmt, t: int) -> Stmt:
    def fn(n: Stmt) -> Stmt | None:
        if isinstance(n, _THREADED):
            old = n.thread
            tag = (t,) if old is None else (t,) + (old if isinstance(old, tuple) else (old,))
            return with_fields(n, thread=tag)
        return None

    return rebuild(s, fn)


@dataclass(frozen=True)
class AllocateScratchpad(Pass):
    """Assign base entries to on-chip buffers; overflow is an error naming the buffer."""

    cfg: Config
    name = "allocate-scratchpad"

    def apply(self, func: PrimFunc) -> PrimFunc:
        depth = {INP_SCOPE: self.cfg.inp_depth, WGT_SCOPE: self.cfg.wgt_depth,
                 ACC_SCOPE: self.cfg.acc_depth}
        top = {k: 0 for k in depth}
        peak = dict(top)
        self._visit(func.body, depth, top, peak)
        attrs = dict(func.attrs)
        attrs["scratchpad_peak"] = peak
        return PrimFunc(func.name, func.params, func.body, attrs)

    def _visit(self, s: Stmt, depth: dict[str, int], top: dict[str, int],
               peak: dict[str, int]) -> None:
        """Allocate the on-chip buffers of ``s`` from ``top`` (a method, not a recursive
        closure: that would be a reference cycle, garbage for the cyclic collector)."""
        if isinstance(s, Allocate) and s.buffer.scope in VTA_SCOPES:
            b = s.buffer
            if tuple(b.shape[-2:]) != tile_shape(self.cfg, b.scope):
                raise LoweringError(
                    f"buffer {b.name} in {b.scope} has shape {b.shape}; its last two "
                    f"dimensions must be the {tile_shape(self.cfg, b.scope)} tile")
            need = b.n_elems
            b.base = top[b.scope]
            top[b.scope] += need
            if top[b.scope] > depth[b.scope]:
                raise ScratchpadOverflowError(
                    f"buffer {b.name} needs {need} entries of {b.scope} at entry {b.base} "
                    f"({top[b.scope]} in use) but the {b.scope} buffer has "
                    f"{depth[b.scope]} entries; use smaller tiles")
            peak[b.scope] = max(peak[b.scope], top[b.scope])
            self._visit(s.body, depth, top, peak)
            top[b.scope] -= need
            return
        if isinstance(s, Allocate) and s.buffer.scope not in ("global", "local"):
            raise LoweringError(f"buffer {s.buffer.name} has unknown scope {s.buffer.scope}")

        for c in stmt_children(s):
            self._visit(c, depth, top, peak)


@dataclass(frozen=True)
class CheckVtaLowered(Pass):
    """Every on-chip buffer must be written by DMA, GEMM or ALU, never by a plain loop."""

    name = "check-vta-lowered"

    def apply(self, func: PrimFunc) -> PrimFunc:
        for s in walk(func.body):
            if isinstance(s, Store):
                if s.buffer.scope in VTA_SCOPES:
                    raise LoweringError(
                        f"{s.buffer.name} ({s.buffer.scope}) is written by a plain loop; "
                        "tensorize it with env.gemm, or add pragma 'alu' / 'dma_copy'")
                raise LoweringError(
                    f"{s.buffer.name} is computed by a plain loop, which VTA cannot run; add "
                    "pragma 'dma_copy' to the store stage or build it for target='cpu'")
            if isinstance(s, If) and any(isinstance(n, BufferLoad) for n in ewalk(s.cond)):
                raise LoweringError(f"the condition {s.cond} reads memory; VTA host code "
                                    "can only branch on loop variables")
            if isinstance(s, For) and s.kind == "vthread":
                raise LoweringError("a virtual-thread loop was left unexpanded")
        return func


__all__ = ["FoldUopLoops", "InjectVirtualThreads", "AllocateScratchpad", "CheckVtaLowered"]
