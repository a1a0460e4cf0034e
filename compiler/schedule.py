"""Schedules: how a tensor-expression graph is turned into loops (TVM's te.Schedule).

Every primitive is recorded in :attr:`Schedule.trace` by stage and axis *names*, so a trace can be
replayed on a freshly declared compute graph with some values changed (:func:`replay`): that is
how the tuner applies knob settings.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ScheduleError
from .te.tensor import (
    ComputeOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Tensor,
    TensorIntrin,
    compute,
    get_intrin,
    thread_axis,
)
from .tir.expr import Expr, Reduce, TensorRead, substitute, transform, walk
from .tir.stmt import VTA_SCOPES


@dataclass
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int


@dataclass
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


class Stage:
    """The schedule of one operation: its loop structure, attachment, scope and annotations."""

    def __init__(self, sch: Schedule, op: Operation):
        self.sch, self.op, self.name = sch, op, op.name
        self.is_placeholder = isinstance(op, PlaceholderOp)
        if isinstance(op, ComputeOp):
            self.body: Expr = op.body
            self.axis = list(op.axis)
            self.reduce_axis = list(op.reduce_axis)
        else:
            self.body, self.axis, self.reduce_axis = None, [], []  # type: ignore[assignment]
        self.leaf_iter_vars: list[IterVar] = self.axis + self.reduce_axis
        self.relations: list[Split | Fuse] = []
        self.attach: str = "root"  # root | inline | at
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.pragmas: dict[IterVar, list[str]] = {}
        self.tensorize_at: dict[IterVar, TensorIntrin] = {}
        self.bindings: dict[IterVar, IterVar] = {}
        self.annotations: dict[IterVar, str] = {}

    # ------------------------------------------------------------------ helpers
    @property
    def all_iter_vars(self) -> list[IterVar]:
        out = list(self.axis + self.reduce_axis)
        for r in self.relations:
            out += [r.outer, r.inner] if isinstance(r, Split) else [r.fused]
        return out

    def _iv(self, iv: Any, what: str) -> IterVar:
        if isinstance(iv, str):
            for cand in self.all_iter_vars:
                if cand.name == iv:
                    iv = cand
                    break
        if not isinstance(iv, IterVar) or iv not in self.leaf_iter_vars:
            name = iv.name if isinstance(iv, IterVar) else iv
            leaves = ", ".join(v.name for v in self.leaf_iter_vars)
            raise ScheduleError(f"{what}: {name} is not a current loop of stage {self.name} "
                                f"(its loops are {leaves})")
        return iv

    def _record(self, prim: str, **args: Any) -> None:
        self.sch.trace.append({"prim": prim, "stage": self.name, **args})

    def _fresh(self, name: str, kind: str) -> IterVar:
        return IterVar(0, 0, name, kind)

    # ------------------------------------------------------------------ primitives
    def split(self, parent: IterVar | str, factor: int | None = None,
              nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """Split a loop into (outer, inner) with ``factor`` inner iterations (or ``nparts``)."""
        parent = self._iv(parent, "split")
        ext = self.sch._extent(self, parent)
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split {parent.name}: give exactly one of factor and nparts")
        if factor is None:
            nparts = int(nparts)  # type: ignore[arg-type]
            if nparts < 1:
                raise ScheduleError(f"split {parent.name}: nparts={nparts} must be >= 1")
            factor = -(-ext // nparts)
        factor = int(factor)
        if factor < 1:
            raise ScheduleError(f"split {parent.name}: factor={factor} must be >= 1")
        outer = self._fresh(f"{parent.name}.outer", parent.kind)
        inner = self._fresh(f"{parent.name}.inner", parent.kind)
        self.relations.append(Split(parent, outer, inner, factor))
        k = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[k:k + 1] = [outer, inner]
        self._record("split", axis=parent.name, factor=factor)
        return outer, inner

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: int, y_factor: int
             ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        xo, xi = self.split(x_parent, x_factor)
        yo, yi = self.split(y_parent, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *order: IterVar) -> None:
        """Put the given loops in this order (the others keep their positions)."""
        if len(order) == 1 and isinstance(order[0], list | tuple):
            order = tuple(order[0])
        ivs = [self._iv(iv, "reorder") for iv in order]
        if len(set(ivs)) != len(ivs):
            raise ScheduleError(f"reorder on stage {self.name}: an axis appears twice")
        pos = sorted(self.leaf_iter_vars.index(iv) for iv in ivs)
        for p, iv in zip(pos, ivs):
            self.leaf_iter_vars[p] = iv
        self._record("reorder", axes=[iv.name for iv in ivs])

    def fuse(self, *ivs: IterVar) -> IterVar:
        """Fuse adjacent loops (outer first) into one."""
        if len(ivs) == 1 and isinstance(ivs[0], list | tuple):
            ivs = tuple(ivs[0])
        ivs = tuple(self._iv(iv, "fuse") for iv in ivs)
        if len(ivs) < 2:
            return ivs[0]
        pos = [self.leaf_iter_vars.index(iv) for iv in ivs]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ScheduleError(f"fuse on stage {self.name}: "
                                f"{', '.join(iv.name for iv in ivs)} are not adjacent loops")
        names = [iv.name for iv in ivs]
        cur = ivs[0]
        for nxt in ivs[1:]:
            kind = "reduce" if "reduce" in (cur.kind, nxt.kind) else "data"
            fused = self._fresh(f"{cur.name}.{nxt.name}.fused", kind)
            self.relations.append(Fuse(cur, nxt, fused))
            k = self.leaf_iter_vars.index(cur)
            self.leaf_iter_vars[k:k + 2] = [fused]
            cur = fused
        self._record("fuse", axes=names)
        return cur

    def compute_at(self, parent: Stage, ivar: IterVar) -> None:
        """Compute this stage inside loop ``ivar`` of ``parent`` (bounds are inferred)."""
        parent = self.sch[parent] if not isinstance(parent, Stage) else parent
        ivar = parent._iv(ivar, f"compute_at of {self.name}")
        if parent is self:
            raise ScheduleError(f"compute_at: stage {self.name} cannot be attached to itself")
        self.attach, self.attach_stage, self.attach_ivar = "at", parent, ivar
        self._record("compute_at", parent=parent.name, axis=ivar.name)

    def compute_inline(self) -> None:
        if self.is_placeholder:
            raise ScheduleError(f"compute_inline: {self.name} is an input")
        if self.reduce_axis:
            raise ScheduleError(f"compute_inline: {self.name} is a reduction")
        self.attach = "inline"
        self._record("compute_inline")

    def compute_root(self) -> None:
        self.attach, self.attach_stage, self.attach_ivar = "root", None, None
        self._record("compute_root")

    def set_scope(self, scope: str) -> None:
        if scope not in VTA_SCOPES + ("global", "local"):
            raise ScheduleError(f"set_scope {self.name}: unknown scope {scope!r}; use one of "
                                f"{', '.join(VTA_SCOPES)}, global, local")
        self.scope = scope
        self._record("set_scope", scope=scope)

    def pragma(self, ivar: IterVar, key: str) -> None:
        """Annotate a loop: ``dma_copy`` (VTA LOAD/STORE) or ``alu`` (VTA ALU)."""
        ivar = self._iv(ivar, f"pragma {key}")
        self.pragmas.setdefault(ivar, []).append(key)
        self._record("pragma", axis=ivar.name, key=key)

    def tensorize(self, ivar: IterVar, intrin: TensorIntrin) -> None:
        """Replace the loops from ``ivar`` inward by a declared tensor intrinsic."""
        ivar = self._iv(ivar, "tensorize")
        self.tensorize_at[ivar] = intrin
        self._record("tensorize", axis=ivar.name, intrin=intrin.name)

    def bind(self, ivar: IterVar, thread: IterVar) -> None:
        """Bind a loop to a thread axis; ``cthread`` makes virtual threads."""
        ivar = self._iv(ivar, "bind")
        if thread.kind != "thread":
            raise ScheduleError(f"bind {ivar.name}: {thread.name} is not a thread_axis")
        self.bindings[ivar] = thread
        self._record("bind", axis=ivar.name, thread=thread.thread_tag)

    def unroll(self, ivar: IterVar) -> None:
        self.annotations[self._iv(ivar, "unroll")] = "unroll"
        self._record("unroll", axis=ivar.name)

    def vectorize(self, ivar: IterVar) -> None:
        self.annotations[self._iv(ivar, "vectorize")] = "vectorize"
        self._record("vectorize", axis=ivar.name)

    def parallel(self, ivar: IterVar) -> None:
        self.annotations[self._iv(ivar, "parallel")] = "parallel"
        self._record("parallel", axis=ivar.name)

    def __repr__(self) -> str:
        return f"Stage({self.name}, {[iv.name for iv in self.leaf_iter_vars]})"


class Schedule:
    """Stages of every operation reachable from the outputs, in topological order."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self._by_op: dict[int, Stage] = {}
        self.trace: list[dict[str, Any]] = []
        seen: set[int] = set()

        def visit(op: Operation) -> None:
            if id(op) in seen:
                return
            seen.add(id(op))
            for t in op.input_tensors:
                visit(t.op)
            st = Stage(self, op)
            self.stages.append(st)
            self._by_op[id(op)] = st

        for op in self.outputs:
            visit(op)

    def __getitem__(self, x: Tensor | Operation | Stage) -> Stage:
        if isinstance(x, Stage):
            return x
        op = x.op if isinstance(x, Tensor) else x
        if id(op) not in self._by_op:
            raise ScheduleError(f"{getattr(op, 'name', x)} is not part of this schedule")
        return self._by_op[id(op)]

    def stage(self, name: str) -> Stage:
        for st in self.stages:
            if st.name == name:
                return st
        raise ScheduleError(f"no stage named {name!r}; stages: "
                            f"{', '.join(s.name for s in self.stages)}")

    def _extent(self, st: Stage, iv: IterVar) -> int:
        """Extent of a loop from the declared domains (attached stages are re-inferred)."""
        ext = {v: v.extent for v in st.axis + st.reduce_axis}
        for r in st.relations:
            if isinstance(r, Split):
                ext[r.inner] = r.factor
                ext[r.outer] = -(-ext[r.parent] // r.factor)
            else:
                ext[r.fused] = ext[r.outer] * ext[r.inner]
        return ext[iv]

    def readers(self, t: Tensor) -> list[Stage]:
        out = []
        for st in self.stages:
            if st.body is not None and any(
                    isinstance(n, TensorRead) and n.tensor is t for n in _walk(st.body)):
                out.append(st)
        return out

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Any]) -> Tensor:
        """A copy of ``tensor`` in ``scope`` read by ``readers`` instead of the original."""
        rd = [self[r] for r in readers]
        name = f"{tensor.name}.{scope}"
        cache = compute(tensor.shape, lambda *i: tensor(*i), name=name)
        st = Stage(self, cache.op)
        st.scope = scope
        for r in rd:
            r.body = _replace_reads(r.body, tensor, cache)
        pos = max(self.stages.index(self[tensor]), 0) + 1
        self.stages.insert(pos, st)
        self._by_op[id(cache.op)] = st
        self.trace.append({"prim": "cache_read", "stage": tensor.name, "scope": scope,
                           "readers": [r.name for r in rd]})
        return cache

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a ``scope`` buffer first; the original becomes a copy."""
        orig = self[tensor]
        if orig.relations:
            raise ScheduleError(f"cache_write {tensor.name}: call it before splitting the stage")
        body = orig.body
        axis_vars = [iv.var for iv in orig.axis]

        def f(*i: Any) -> Expr:
            return substitute(body, dict(zip(axis_vars, i)))

        cache = compute(tensor.shape, f, name=f"{tensor.name}.{scope}")
        st = Stage(self, cache.op)
        st.scope = scope
        orig.body = cache(*axis_vars)
        orig.reduce_axis = []
        orig.leaf_iter_vars = list(orig.axis)
        self.stages.insert(self.stages.index(orig), st)
        self._by_op[id(cache.op)] = st
        self.trace.append({"prim": "cache_write", "stage": tensor.name, "scope": scope})
        return cache

    def __repr__(self) -> str:
        return f"Schedule({[s.name for s in self.stages]})"


def _walk(e: Expr):
    return walk(e)


def _replace_reads(body: Expr, old: Tensor, new: Tensor) -> Expr:
    def f(n: Expr) -> Expr | None:
        if isinstance(n, TensorRead) and n.tensor is old:
            return TensorRead(new, [_replace_reads(i, old, new) for i in n.indices])
        if isinstance(n, Reduce):
            return Reduce(n.combiner, _replace_reads(n.source, old, new), n.axes, n.where)
        return None

    return transform(body, f)


def create_schedule(ops: Operation | Sequence[Operation]) -> Schedule:
    """A default schedule (every stage at the root, in its declared loop order)."""
    if isinstance(ops, Operation):
        ops = [ops]
    return Schedule([o.op if isinstance(o, Tensor) else o for o in ops])


# ------------------------------------------------------------------------ trace replay
def replay(trace: Sequence[dict[str, Any]], outputs: Sequence[Any],
           overrides: dict[int, dict[str, Any]] | None = None) -> Schedule:
    """Apply a recorded trace to a fresh schedule of ``outputs``.

    ``overrides`` maps a trace index to changed arguments (e.g. ``{3: {"factor": 8}}``).
    """
    s = create_schedule(outputs)
    overrides = overrides or {}
    for n, entry in enumerate(trace):
        e = {**entry, **overrides.get(n, {})}
        prim = e["prim"]
        try:
            if prim == "cache_read":
                st = s.stage(e["stage"])
                s.cache_read(st.op.output(0), e["scope"], [s.stage(r) for r in e["readers"]])
                continue
            if prim == "cache_write":
                s.cache_write(s.stage(e["stage"]).op.output(0), e["scope"])
                continue
            st = s.stage(e["stage"])
            if prim == "split":
                st.split(e["axis"], factor=e["factor"])
            elif prim == "reorder":
                st.reorder(*[st._iv(a, "reorder") for a in e["axes"]])
            elif prim == "fuse":
                st.fuse(*[st._iv(a, "fuse") for a in e["axes"]])
            elif prim == "compute_at":
                par = s.stage(e["parent"])
                st.compute_at(par, par._iv(e["axis"], "compute_at"))
            elif prim == "compute_inline":
                st.compute_inline()
            elif prim == "compute_root":
                st.compute_root()
            elif prim == "set_scope":
                st.set_scope(e["scope"])
            elif prim == "pragma":
                st.pragma(e["axis"], e["key"])
            elif prim == "tensorize":
                st.tensorize(e["axis"], get_intrin(e["intrin"]))
            elif prim == "bind":
                st.bind(e["axis"], thread_axis(e["thread"]))
            elif prim in ("unroll", "vectorize", "parallel"):
                getattr(st, prim)(e["axis"])
            else:
                raise ScheduleError(f"unknown primitive {prim!r}")
        except ScheduleError as err:
            raise ScheduleError(f"trace entry {n} ({prim}): {err}") from None
    return s


def trace_json(s: Schedule) -> str:
    return json.dumps(s.trace, indent=1)


__all__ = ["Stage", "Schedule", "Split", "Fuse", "create_schedule", "replay", "trace_json"]
