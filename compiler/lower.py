"""Lowering a schedule to the loop IR: inlining, bounds inference, loop nests, tensorize.

Bounds inference follows TVM's: a stage attached with ``compute_at`` at loop L of a parent is
computed for exactly the region its consumers read while the loops inside L run over their
ranges; the loops outside L stay symbolic, so the region is (symbolic start, constant extent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import LoweringError, ScheduleError, TensorizeError
from .schedule import Schedule, Split, Stage
from .te.tensor import IterVar, Tensor, TensorIntrin
from .tir.expr import (
    Binary,
    BufferLoad,
    Cast,
    Const,
    Expr,
    Reduce,
    TensorRead,
    Var,
    all_of,
    binary,
    bound,
    const_value,
    simplify,
    structural_equal,
    substitute,
    transform,
    walk,
)
from .tir.stmt import (
    Allocate,
    Attr,
    Buffer,
    For,
    If,
    Nop,
    PrimFunc,
    Stmt,
    Store,
    seq,
)


@dataclass
class Region:
    """A block of a buffer handed to a tensor intrinsic's lowering rule."""

    buffer: Buffer
    indices: tuple[Expr, ...]

    @property
    def elem_offset(self) -> Expr:
        """Flat scalar offset of the block's first element."""
        return simplify(sum((i * s for i, s in zip(self.indices, self.buffer.strides())),
                            Const(0, "int32")))

    def tile_offset(self, tile_dims: int = 2) -> Expr:
        """Flat offset in tiles over the leading dimensions (the block is one tile)."""
        lead = self.indices[:-tile_dims]
        strides = self.buffer.elem_strides()
        return simplify(sum((i * s for i, s in zip(lead, strides)), Const(0, "int32")))


class _StageInfo:
    def __init__(self, st: Stage):
        self.st = st
        self.root_min: list[Expr] = []
        self.root_ext: list[int] = []
        self.ext: dict[IterVar, int] = {}
        self.value: dict[IterVar, Expr] = {}
        self.guards: list[Expr] = []
        self.buffer: Buffer | None = None
        self.chain: list[tuple[Stage, IterVar]] = []
        self.done = False


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main", *,
          init_in_first_iteration: bool = False) -> PrimFunc:
    """Lower a schedule to a :class:`PrimFunc` whose parameters are ``args``.

    A reduction's initialisation goes before its outermost reduction loop; with
    ``init_in_first_iteration`` it goes inside that loop, after the stages computed there,
    guarded by ``if k == 0`` (VTA: the next tile's loads then do not wait for the previous
    tile's stores).
    """
    return _Lowerer(sch, list(args), name, init_in_first_iteration).run()


class _Lowerer:
    def __init__(self, sch: Schedule, args: list[Tensor], name: str, init_inside: bool = False):
        self.sch, self.args, self.name = sch, args, name
        self.init_inside = init_inside
        self.info: dict[Stage, _StageInfo] = {}
        self.in_progress: set[Stage] = set()
        # memos, filled after inlining (the stage bodies no longer change)
        self._readers: dict[int, list[Stage]] | None = None
        self._root_index: dict[Stage, dict[Var, Expr]] = {}

    # ---------------------------------------------------------------- inlining
    def inline_all(self) -> None:
        inlined = {st.op.output(0): st for st in self.sch.stages if st.attach == "inline"}
        if not inlined:
            return

        def expand(e: Expr) -> Expr:
            def f(n: Expr) -> Expr | None:
                if isinstance(n, TensorRead) and n.tensor in inlined:
                    st = inlined[n.tensor]
                    idx = [expand(i) for i in n.indices]
                    return expand(substitute(st.body, {iv.var: i for iv, i in
                                                       zip(st.axis, idx)}))
                if isinstance(n, Reduce):
                    return Reduce(n.combiner, expand(n.source), n.axes, n.where)
                return None

            return transform(e, f)

        for st in self.sch.stages:
            if st.body is not None and st.attach != "inline":
                st.body = expand(st.body)

    # ---------------------------------------------------------------- stages
    def live_stages(self) -> list[Stage]:
        return [st for st in self.sch.stages if not st.is_placeholder and st.attach != "inline"]

    def consumers(self, st: Stage) -> list[Stage]:
        """The live stages that read ``st``'s output, in stage order."""
        if self._readers is None:
            self._readers = {}
            for c in self.live_stages():
                for tid in {id(n.tensor) for n in walk(c.body) if isinstance(n, TensorRead)}:
                    self._readers.setdefault(tid, []).append(c)
        return list(self._readers.get(id(st.op.output(0)), ()))

    def get(self, st: Stage) -> _StageInfo:
        if st in self.info and self.info[st].done:
            return self.info[st]
        if st in self.in_progress:
            raise LoweringError(f"stage {st.name}: cyclic compute_at attachment")
        self.in_progress.add(st)
        inf = _StageInfo(st)
        self.info[st] = inf
        roots = st.axis + st.reduce_axis
        if st.attach == "at":
            par = self.get(st.attach_stage)
            if (st.attach_stage, st.attach_ivar) not in par.chain:
                raise LoweringError(f"stage {st.name}: attach loop {st.attach_ivar.name} is "
                                    f"not a loop of {st.attach_stage.name}")
            k = par.chain.index((st.attach_stage, st.attach_ivar))
            prefix = par.chain[:k + 1]
            mins, exts = self.infer_region(st, prefix)
            inf.root_min = mins + [Const(iv.lo, "int32") for iv in st.reduce_axis]
            inf.root_ext = exts + [iv.extent for iv in st.reduce_axis]
        else:
            prefix = []
            inf.root_min = [Const(iv.lo, "int32") for iv in roots]
            inf.root_ext = [iv.extent for iv in roots]
        # leaf extents and root values
        ext = {iv: e for iv, e in zip(roots, inf.root_ext)}
        for r in st.relations:
            if isinstance(r, Split):
                ext[r.inner] = min(r.factor, ext[r.parent])
                ext[r.outer] = -(-ext[r.parent] // ext[r.inner])
            else:
                ext[r.fused] = ext[r.outer] * ext[r.inner]
        inf.ext = ext
        value: dict[IterVar, Expr] = {iv: iv.var for iv in st.leaf_iter_vars}
        for r in reversed(st.relations):
            if isinstance(r, Split):
                value[r.parent] = simplify(value[r.outer] * ext[r.inner] + value[r.inner])
                if ext[r.parent] % ext[r.inner]:
                    inf.guards.append(binary("lt", value[r.parent], ext[r.parent]))
            else:
                value[r.outer] = simplify(value[r.fused] // ext[r.inner])
                value[r.inner] = simplify(value[r.fused] % ext[r.inner])
        inf.value = value
        inf.chain = prefix + [(st, iv) for iv in st.leaf_iter_vars]
        inf.done = True
        self.in_progress.discard(st)
        return inf

    def root_index(self, st: Stage) -> dict[Var, Expr]:
        """Root variables of ``st`` -> absolute index expressions in loop variables."""
        sub = self._root_index.get(st)
        if sub is None:
            inf = self.get(st)
            roots = st.axis + st.reduce_axis
            sub = {iv.var: simplify(m + inf.value[iv]) for iv, m in zip(roots, inf.root_min)}
            self._root_index[st] = sub
        return dict(sub)

    def infer_region(self, st: Stage, prefix: list[tuple[Stage, IterVar]]
                     ) -> tuple[list[Expr], list[int]]:
        t = st.op.output(0)
        lows: list[list[Expr]] = [[] for _ in t.shape]
        highs: list[list[Expr]] = [[] for _ in t.shape]
        cons = self.consumers(st)
        if not cons:
            raise LoweringError(f"stage {st.name} is attached with compute_at but nothing "
                                "reads it")
        for c in cons:
            cinf = self.get(c)
            if cinf.chain[:len(prefix)] != prefix:
                where = f"{prefix[-1][0].name}.{prefix[-1][1].name}"
                raise LoweringError(f"stage {st.name} is computed at {where} but read by "
                                    f"{c.name} outside that loop; attach {c.name} inside it "
                                    "or compute_root the producer")
            ranges = {}
            for s2, iv in cinf.chain[len(prefix):]:
                e = self.get(s2).ext[iv]
                ranges[iv.var] = (0, e - 1)
            sub = self.root_index(c)
            for n in walk(c.body):
                if isinstance(n, TensorRead) and n.tensor is t:
                    for d, idx in enumerate(n.indices):
                        lo, hi = bound(substitute(idx, sub), ranges)
                        lows[d].append(lo)
                        highs[d].append(hi)
        mins, exts = [], []
        for d in range(len(t.shape)):
            lo = _pick(lows[d], min, st.name, d)
            hi = _pick(highs[d], max, st.name, d)
            e = const_value(binary("sub", hi, lo))
            if e is None:
                raise LoweringError(
                    f"stage {st.name}: the extent of dimension {d} read by its consumers "
                    f"({hi} - {lo} + 1) is not a constant; change the compute_at point")
            mins.append(simplify(lo))
            exts.append(e + 1)
        return mins, exts

    # ---------------------------------------------------------------- buffers
    def make_buffers(self) -> None:
        for st in self.live_stages():
            inf = self.get(st)
            t = st.op.output(0)
            if st.attach == "at":
                shape = tuple(inf.root_ext[:len(st.axis)])
            else:
                shape = t.shape
            inf.buffer = Buffer(t.name, shape, t.dtype, st.scope)
        self.arg_buffers: dict[int, Buffer] = {}
        for a in self.args:
            st = self.sch[a]
            if st.is_placeholder:
                self.arg_buffers[id(a)] = Buffer(a.name, a.shape, a.dtype)
            else:
                if st.attach != "root":
                    raise LoweringError(f"argument {a.name} must be computed at the root")
                if st.scope != "global":
                    raise LoweringError(f"argument {a.name} is in scope {st.scope}; outputs "
                                        "live in global memory")
                self.arg_buffers[id(a)] = self.info[st].buffer

    def buffer_of(self, t: Tensor) -> tuple[Buffer, list[Expr]]:
        st = self.sch[t]
        if st.is_placeholder:
            if id(t) not in self.arg_buffers:
                raise LoweringError(f"input {t.name} is read but not in the argument list")
            return self.arg_buffers[id(t)], [Const(0, "int32")] * t.ndim
        if st.attach == "inline":
            raise LoweringError(f"{t.name} was inlined")
        inf = self.get(st)
        mins = inf.root_min[:len(st.axis)] if st.attach == "at" else \
            [Const(0, "int32")] * t.ndim
        return inf.buffer, mins

    def to_loads(self, e: Expr) -> Expr:
        def f(n: Expr) -> Expr | None:
            if isinstance(n, TensorRead):
                buf, mins = self.buffer_of(n.tensor)
                idx = [simplify(self.to_loads(i) - m) for i, m in zip(n.indices, mins)]
                return BufferLoad(buf, idx)
            return None

        return transform(e, f)

    # ---------------------------------------------------------------- nests
    def attached(self, st: Stage, iv: IterVar) -> list[Stage]:
        return [s for s in self.live_stages()
                if s.attach == "at" and s.attach_stage is st and s.attach_ivar is iv]

    def stage_stmt(self, st: Stage) -> Stmt:
        inf = self.get(st)
        leaves = st.leaf_iter_vars
        sub = self.root_index(st)
        out_idx = [simplify(inf.value[iv]) if st.attach == "at" else sub[iv.var]
                   for iv in st.axis]
        buf = inf.buffer
        body = substitute(st.body, sub)
        q = next((k for k, iv in enumerate(leaves) if iv in st.tensorize_at), None)
        is_reduce = isinstance(body, Reduce)
        p = next((k for k, iv in enumerate(leaves) if iv.kind == "reduce"), None)

        guard = all_of(*[substitute(g, {}) for g in inf.guards]) if inf.guards else None

        def guarded(s: Stmt) -> Stmt:
            return s if guard is None else If(guard, s)

        # innermost statements
        intrin_parts = None
        if q is not None:
            intrin_parts = self.tensorize(st, q, sub, out_idx)
        if is_reduce:
            src = self.to_loads(body.source)
            cur = BufferLoad(buf, out_idx)
            comb = {"sum": "add", "max": "max", "min": "min"}[body.combiner]
            update: Stmt = guarded(Store(buf, tuple(out_idx), binary(comb, cur, src)))
            init: Stmt = guarded(Store(buf, tuple(out_idx), body.identity()))
            if body.where is not None:
                update = If(self.to_loads(body.where), update)
        else:
            update = guarded(Store(buf, tuple(out_idx), self.to_loads(body)))
            init = Nop()
        if intrin_parts is not None:
            full, reset, upd = intrin_parts
            if p is None or p >= q:  # the whole reduction is inside the intrinsic
                update, init, p = full, Nop(), None
            else:
                update, init = upd, reset
        stop = q if q is not None else len(leaves)

        if is_reduce and p is not None and p < stop:
            spatial_after = {iv for iv in leaves[p + 1:stop] if iv.kind != "reduce"}
            init_nest = self.loops_only(st, leaves[p + 1:stop], spatial_after, init)
            if self.init_inside:
                first = binary("eq", leaves[p].var, 0)
                body_p = seq([If(first, init_nest), self.nest_range(st, p + 1, stop, update)])
                loop_p = self.loop(st, leaves[p], self.wrap_attached(st, leaves[p], body_p))
                return self.nest_range(st, 0, p, loop_p)
            main_inner = self.nest_range(st, p, stop, update)
            head = seq([init_nest, main_inner])
            return self.nest_range(st, 0, p, head)
        return self.nest_range(st, 0, stop, update)

    def nest_range(self, st: Stage, a: int, b: int, inner: Stmt) -> Stmt:
        for iv in reversed(st.leaf_iter_vars[a:b]):
            inner = self.loop(st, iv, self.wrap_attached(st, iv, inner))
        return inner

    def loops_only(self, st: Stage, ivs: list[IterVar], keep: set, inner: Stmt) -> Stmt:
        for iv in reversed(ivs):
            if iv in keep:
                inner = self.loop(st, iv, inner, pragmas=False)
        return inner

    def loop(self, st: Stage, iv: IterVar, body: Stmt, pragmas: bool = True) -> Stmt:
        ext = self.get(st).ext[iv]
        kind = "serial"
        if iv in st.bindings:
            kind = "vthread"
        elif iv in st.annotations:
            kind = st.annotations[iv]
        s: Stmt = For(iv.var, ext, body, kind)
        if pragmas:
            for key in reversed(st.pragmas.get(iv, [])):
                s = Attr(f"pragma_{key}", st.name, s)
        return s

    def wrap_attached(self, st: Stage, iv: IterVar, body: Stmt) -> Stmt:
        att = self.attached(st, iv)
        if not att:
            return body
        stmts = [self.stage_stmt(a) for a in att]
        out = seq(stmts + [body])
        for a in reversed(att):
            out = Allocate(self.get(a).buffer, out)
        return out

    # ---------------------------------------------------------------- tensorize
    def tensorize(self, st: Stage, q: int, sub: dict[Var, Expr], out_idx: list[Expr]
                  ) -> tuple[Stmt, Stmt, Stmt]:
        iv_at = st.leaf_iter_vars[q]
        intrin: TensorIntrin = st.tensorize_at[iv_at]
        inner = st.leaf_iter_vars[q:]
        inf = self.get(st)
        roots = st.axis + st.reduce_axis
        where = f"tensorize {st.name} at {iv_at.name} with {intrin.name}"
        for iv in inner:
            if iv not in roots:
                raise TensorizeError(f"{where}: loop {iv.name} is split or fused; tensorize "
                                     "needs whole axes inside the tensorize point")
        sp = [iv for iv in inner if iv.kind != "reduce"]
        rd = [iv for iv in inner if iv.kind == "reduce"]
        iop = intrin.op
        if len(sp) != len(iop.axis) or len(rd) != len(iop.reduce_axis):
            raise TensorizeError(
                f"{where}: the intrinsic has {len(iop.axis)} spatial and "
                f"{len(iop.reduce_axis)} reduction axes, the loops inside the tensorize point "
                f"are {', '.join(iv.name for iv in inner)}")
        vmap: dict[Var, Var] = {}
        for mine, theirs in zip(sp + rd, list(iop.axis) + list(iop.reduce_axis)):
            e = inf.ext[mine]
            if e != theirs.extent:
                raise TensorizeError(f"{where}: loop {mine.name} has extent {e}, the "
                                     f"intrinsic's {theirs.name} has {theirs.extent}")
            vmap[theirs.var] = mine.var
        if [iv for iv in st.axis if iv in sp] != sp[-len(sp):] or \
                st.axis[-len(sp):] != sp:
            raise TensorizeError(f"{where}: the tensorized spatial loops must be the last "
                                 f"{len(sp)} axes of {st.name} in order")
        # structural match of the computations
        ibody = substitute(iop.body, vmap)
        binding: dict[int, Any] = {}
        reads: list[TensorRead] = []
        if not _match(st.body, ibody, binding, reads, {iv.var for iv in inner}):
            raise TensorizeError(f"{where}: the computation {st.body} does not match the "
                                 f"intrinsic's {iop.body}")
        # regions
        zero = {iv.var: Const(0, "int32") for iv in inner}
        ins = []
        for ph in intrin.inputs:
            rd_ = next((r for r in reads if binding.get(id(r.tensor)) is ph), None)
            if rd_ is None:
                raise TensorizeError(f"{where}: input {ph.name} of the intrinsic is not read")
            buf, mins = self.buffer_of(rd_.tensor)
            idx = [simplify(substitute(substitute(i, sub), zero) - m)
                   for i, m in zip(rd_.indices, mins)]
            ins.append(Region(buf, tuple(idx)))
        out = Region(inf.buffer, tuple(simplify(substitute(i, zero)) for i in out_idx))
        res = intrin.lower(ins, [out])
        if isinstance(res, Stmt):
            return res, res, res
        if not (isinstance(res, tuple | list) and len(res) == 3):
            raise TensorizeError(f"{intrin.name}: the lowering rule must return a statement "
                                 "or (body, reset, update)")
        return tuple(r if r is not None else Nop() for r in res)  # type: ignore[return-value]

    # ---------------------------------------------------------------- driver
    def run(self) -> PrimFunc:
        self.inline_all()
        for st in self.live_stages():
            if st.attach == "at" and st.attach_stage.attach == "inline":
                raise ScheduleError(f"{st.name} is attached to the inlined stage "
                                    f"{st.attach_stage.name}")
            self.get(st)
        self.make_buffers()
        params = []
        for a in self.args:
            params.append(self.arg_buffers[id(a)])
        roots = [st for st in self.live_stages() if st.attach == "root"]
        body = seq([self.stage_stmt(st) for st in roots])
        arg_ids = {id(b) for b in params}
        for st in reversed(roots):
            b = self.get(st).buffer
            if id(b) not in arg_ids:
                body = Allocate(b, body)
        for st in self.live_stages():
            if st.attach == "root" and st.op.output(0) not in self.args and \
                    st.op in [o for o in self.sch.outputs]:
                raise LoweringError(f"output {st.name} is not in the argument list")
        return PrimFunc(self.name, params, body)


def _pick(cands: list[Expr], fn: Any, name: str, d: int) -> Expr:
    best = cands[0]
    for c in cands[1:]:
        diff = const_value(binary("sub", c, best))
        if diff is None:
            raise LoweringError(f"stage {name}: consumers read dimension {d} at offsets that "
                                f"differ by a non-constant ({c} vs {best})")
        if (fn is min and diff < 0) or (fn is max and diff > 0):
            best = c
    return best


def _match(se: Expr, ie: Expr, binding: dict[int, Any], reads: list[TensorRead],
           inner: set[Var]) -> bool:
    """Structural match of a stage body against an intrinsic body (tensors bound by position)."""
    if isinstance(se, TensorRead) and isinstance(ie, TensorRead):
        if se.tensor.dtype != ie.tensor.dtype:
            return False
        prev = binding.get(id(se.tensor))
        if prev is None:
            if ie.tensor in binding.values():
                return False
            binding[id(se.tensor)] = ie.tensor
        elif prev is not ie.tensor:
            return False
        k = len(ie.indices)
        lead, tail = se.indices[:-k], se.indices[-k:]
        if any(v in inner for i in lead for v in _vars(i)):
            return False
        if not all(structural_equal(simplify(a), simplify(b)) for a, b in zip(tail, ie.indices)):
            return False
        reads.append(se)
        return True
    if type(se) is not type(ie) or se.dtype != ie.dtype:
        return False
    if isinstance(se, Reduce):
        return se.combiner == ie.combiner and len(se.axes) >= len(ie.axes) and \
            _match(se.source, ie.source, binding, reads, inner)
    if isinstance(se, Binary):
        return se.op == ie.op and _match(se.a, ie.a, binding, reads, inner) and \
            _match(se.b, ie.b, binding, reads, inner)
    if isinstance(se, Cast):
        return _match(se.value, ie.value, binding, reads, inner)
    if isinstance(se, Const):
        return se.value == ie.value
    if isinstance(se, Var):
        return se is ie
    return structural_equal(se, ie)


def _vars(e: Expr) -> set[Var]:
    return {n for n in walk(e) if isinstance(n, Var)}


def flat_index(buf: Buffer, idx: Sequence[Expr]) -> Expr:
    return simplify(sum((i * s for i, s in zip(idx, buf.strides())), Const(0, "int32")))


__all__ = ["lower", "Region", "flat_index"]
