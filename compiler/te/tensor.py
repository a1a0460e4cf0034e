"""Tensor expressions: placeholders, computes, reductions and tensor intrinsics (TVM spelling)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from types import FunctionType
from typing import Any

from ..errors import LoweringError, ScheduleError
from ..tir.expr import (
    Call,
    Expr,
    Reduce,
    TensorRead,
    Var,
    all_of,
    as_expr,
    binary,
    cast,
    children,
    const,
    select,
)


class IterVar:
    """An iteration axis: a variable over [lo, lo + extent), kind data/reduce/thread."""

    def __init__(self, lo: int, extent: int, name: str, kind: str = "data",
                 thread_tag: str = ""):
        self.var = Var(name)
        self.lo, self.extent, self.kind, self.thread_tag = int(lo), int(extent), kind, thread_tag

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def dom(self) -> tuple[int, int]:
        return (self.lo, self.extent)

    # an IterVar can be used directly in expressions, as in TVM
    def _e(self) -> Expr:
        return self.var

    def __add__(self, o: Any) -> Expr:
        return self.var + o

    def __radd__(self, o: Any) -> Expr:
        return o + self.var

    def __sub__(self, o: Any) -> Expr:
        return self.var - o

    def __rsub__(self, o: Any) -> Expr:
        return o - self.var

    def __mul__(self, o: Any) -> Expr:
        return self.var * o

    def __rmul__(self, o: Any) -> Expr:
        return o * self.var

    def __floordiv__(self, o: Any) -> Expr:
        return self.var // o

    def __mod__(self, o: Any) -> Expr:
        return self.var % o

    def __repr__(self) -> str:
        return f"IterVar({self.name}, {self.lo}..{self.lo + self.extent}, {self.kind})"


class Operation:
    name: str

    def output(self, i: int = 0) -> Tensor:
        if i != 0:
            raise LoweringError(f"{self.name} has a single output")
        return self._out  # type: ignore[attr-defined]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[int, ...], dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype
        self._out = Tensor(self, shape, dtype, name)


class ComputeOp(Operation):
    def __init__(self, name: str, axis: list[IterVar], body: Expr, tag: str = "",
                 attrs: dict | None = None):
        self.name, self.axis, self.body, self.tag = name, axis, body, tag
        self.attrs = dict(attrs or {})
        self.reduce_axis: list[IterVar] = list(body.axes) if isinstance(body, Reduce) else []
        self.dtype = body.dtype
        shape = tuple(iv.extent for iv in axis)
        self._out = Tensor(self, shape, body.dtype, name)

    @property
    def input_tensors(self) -> list[Tensor]:
        seen: dict[int, Tensor] = {}
        _reads(self.body, seen)
        return list(seen.values())


def _reads(e: Expr, seen: dict[int, Tensor]) -> None:
    """The tensors ``e`` reads, into ``seen`` by id (a module-level recursion: a recursive
    closure is a reference cycle, garbage for the cyclic collector)."""
    if isinstance(e, TensorRead):
        seen.setdefault(id(e.tensor), e.tensor)
    for c in children(e):
        _reads(c, seen)


class Tensor:
    """The output of an operation; call or index it to read an element."""

    def __init__(self, op: Operation, shape: tuple[int, ...], dtype: str, name: str):
        self.op, self.shape, self.dtype, self.name = op, tuple(int(d) for d in shape), dtype, name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __call__(self, *indices: Any) -> Expr:
        if len(indices) == 1 and isinstance(indices[0], tuple | list):
            indices = tuple(indices[0])
        if len(indices) != self.ndim:
            raise LoweringError(f"{self.name} has {self.ndim} dimensions, indexed with "
                                f"{len(indices)}")
        return TensorRead(self, [i.var if isinstance(i, IterVar) else as_expr(i)
                                 for i in indices])

    def __getitem__(self, indices: Any) -> Expr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self(*indices)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


# --------------------------------------------------------------------------- builders
def placeholder(shape: Sequence[int] | int, dtype: str = "float32", name: str = "placeholder"
                ) -> Tensor:
    """An input tensor."""
    if isinstance(shape, int):
        shape = (shape,)
    return PlaceholderOp(name, tuple(int(d) for d in shape), dtype).output(0)


def compute(shape: Sequence[int] | int, fcompute: Callable[..., Any], name: str = "compute",
            tag: str = "", attrs: dict | None = None) -> Tensor:
    """A tensor whose element at each index is ``fcompute(*index)``."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(d) for d in shape)
    arg_names, varargs = _arguments(fcompute)
    if varargs:
        names = [f"i{k}" for k in range(len(shape))]
    else:
        if len(arg_names) != len(shape):
            raise LoweringError(f"compute {name}: fcompute takes {len(arg_names)} arguments "
                                f"for a {len(shape)}-d shape")
        names = list(arg_names)
    axis = [IterVar(0, d, n) for d, n in zip(shape, names)]
    body = fcompute(*[iv.var for iv in axis])
    body = as_expr(body)
    if isinstance(body, Reduce):
        for iv in body.axes:
            if iv.kind != "reduce":
                raise LoweringError(f"compute {name}: {iv.name} is not a reduce_axis")
    return ComputeOp(name, axis, body, tag, attrs).output(0)


#: (parameter names, whether one is ``*args``) of plain functions by their code object: what
#: inspect.signature says of them depends only on it (a knob search builds its operator's
#: computes, the same lambdas, for every candidate); cleared at _MAX_ARGUMENTS entries.
_ARGUMENTS: dict[Any, tuple[tuple[str, ...], bool]] = {}
_MAX_ARGUMENTS = 4096


def _arguments(fcompute: Callable[..., Any]) -> tuple[tuple[str, ...], bool]:
    """The parameter names of ``fcompute`` and whether one of them is ``*args``."""
    plain = type(fcompute) is FunctionType and not fcompute.__dict__  # no __wrapped__ etc.
    if plain:
        hit = _ARGUMENTS.get(fcompute.__code__)
        if hit is not None:
            return hit
    params = list(inspect.signature(fcompute).parameters.values())
    out = (tuple(p.name for p in params),
           any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params))
    if plain:
        if len(_ARGUMENTS) >= _MAX_ARGUMENTS:
            _ARGUMENTS.clear()
        _ARGUMENTS[fcompute.__code__] = out
    return out


def reduce_axis(dom: Sequence[int] | range, name: str = "rv") -> IterVar:
    if isinstance(dom, range):
        lo, hi = dom.start, dom.stop
    else:
        lo, hi = dom
    return IterVar(lo, int(hi) - int(lo), name, "reduce")


def thread_axis(tag: str = "cthread", name: str | None = None) -> IterVar:
    """A thread axis to bind to; VTA uses ``"cthread"`` (virtual threads)."""
    if tag not in ("cthread", "vthread"):
        raise ScheduleError(f"thread axis {tag!r} is not supported; use 'cthread' (virtual "
                            "threads)")
    return IterVar(0, 0, name or tag, "thread", tag)


def _reducer(combiner: str) -> Callable[..., Expr]:
    def reduce(expr: Any, axis: Any = None, where: Any = None, *rest: Any) -> Expr:
        if axis is None or isinstance(axis, IterVar) or (
                isinstance(axis, list | tuple) and axis and isinstance(axis[0], IterVar)):
            axes = [axis] if isinstance(axis, IterVar) else list(axis or [])
            if not axes:
                raise LoweringError(f"te.{combiner} needs axis=[reduce axes]")
            return Reduce(combiner, as_expr(expr), axes,
                          None if where is None else as_expr(where))
        if combiner == "sum":
            return binary("add", expr, axis)
        out = binary(combiner, expr, axis)
        for r in ([where] if where is not None else []) + list(rest):
            out = binary(combiner, out, r)
        return out

    reduce.__name__ = combiner
    reduce.__doc__ = (f"``{combiner}(expr, axis=[...])`` reduces; ``{combiner}(a, b)`` is "
                      "element-wise.")
    return reduce


sum = _reducer("sum")  # noqa: A001 - TVM spelling
max = _reducer("max")  # noqa: A001
min = _reducer("min")  # noqa: A001


def clip(x: Any, lo: Any, hi: Any) -> Expr:
    """max(min(x, hi), lo)."""
    x = as_expr(x)
    return binary("max", binary("min", x, as_expr(hi, x.dtype)), as_expr(lo, x.dtype))


def if_then_else(cond: Any, t: Any, f: Any) -> Expr:
    return select(cond, t, f)


def exp(x: Expr) -> Expr:
    return Call("exp", [x], x.dtype)


def sqrt(x: Expr) -> Expr:
    return Call("sqrt", [x], x.dtype)


def all(*conds: Any) -> Expr:  # noqa: A001
    return all_of(*conds)


def var(name: str = "v", dtype: str = "int32") -> Var:
    return Var(name, dtype)


# --------------------------------------------------------------------------- intrinsics
class TensorIntrin:
    """A hardware intrinsic: a compute definition plus its lowering rule.

    ``lower(ins, outs)`` receives one :class:`~vta.compiler.tir.lower.Region` per input and
    output (the buffer and the element offset of the tensorized block) and returns either one
    statement or a triple ``(body, reset, update)``.
    """

    def __init__(self, name: str, op: ComputeOp, lower: Callable[..., Any],
                 inputs: list[Tensor]):
        self.name, self.op, self.lower, self.inputs = name, op, lower, inputs

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name})"


_INTRINSICS: dict[str, TensorIntrin] = {}


def decl_tensor_intrin(op: Operation, fintrin: Callable[..., Any], name: str | None = None,
                       binds: dict | None = None) -> TensorIntrin:
    """Declare an intrinsic from the compute ``op`` and its lowering rule ``fintrin``."""
    if not isinstance(op, ComputeOp):
        raise ScheduleError("decl_tensor_intrin needs a compute operation (C.op)")
    intrin = TensorIntrin(name or op.name, op, fintrin, op.input_tensors)
    _INTRINSICS[intrin.name] = intrin
    return intrin


def get_intrin(name: str) -> TensorIntrin:
    if name not in _INTRINSICS:
        raise ScheduleError(f"unknown tensor intrinsic {name!r}; declare it with "
                            "decl_tensor_intrin")
    return _INTRINSICS[name]


__all__ = [
    "IterVar", "Operation", "PlaceholderOp", "ComputeOp", "Tensor", "placeholder", "compute",
    "reduce_axis", "thread_axis", "sum", "max", "min", "clip", "if_then_else", "exp", "sqrt",
    "all", "var", "TensorIntrin", "decl_tensor_intrin", "get_intrin", "cast", "const",
]
