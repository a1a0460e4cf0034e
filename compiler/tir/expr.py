"""The expression language shared by tensor expressions (``te``) and the loop IR (``tir``).

Nodes are small immutable objects. Variables compare by identity; every other node is compared
structurally with :func:`structural_equal`. Integer index arithmetic is simplified through a
canonical affine form (:func:`linear`, :func:`simplify`), which is what bounds inference, DMA
injection and micro-op folding reason with.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import Any

from ..errors import LoweringError

INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
FLOAT_TYPES = ("float32", "float64")
#: dtypes whose constants hold a Python int (the integer types and bool)
_INTEGRAL = frozenset(INT_TYPES + ("bool",))
_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
         "uint32": 32, "float32": 32, "float64": 64, "bool": 1}


def is_int(dtype: str) -> bool:
    return dtype in INT_TYPES


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_TYPES


def bits(dtype: str) -> int:
    return _BITS[dtype]


def _promote(a: str, b: str) -> str:
    if a == b:
        return a
    if is_float(a) or is_float(b):
        return "float64" if "float64" in (a, b) else "float32"
    if a == "bool":
        return b
    if b == "bool":
        return a
    return a if bits(a) >= bits(b) else b


class Expr:
    """Base class; arithmetic operators build new nodes (TVM spelling)."""

    dtype: str = "int32"
    __slots__ = ()

    # arithmetic ---------------------------------------------------------------------
    def __add__(self, o: Any) -> Expr:
        return binary("add", self, o)

    def __radd__(self, o: Any) -> Expr:
        return binary("add", o, self)

    def __sub__(self, o: Any) -> Expr:
        return binary("sub", self, o)

    def __rsub__(self, o: Any) -> Expr:
        return binary("sub", o, self)

    def __mul__(self, o: Any) -> Expr:
        return binary("mul", self, o)

    def __rmul__(self, o: Any) -> Expr:
        return binary("mul", o, self)

    def __floordiv__(self, o: Any) -> Expr:
        return binary("floordiv", self, o)

    def __mod__(self, o: Any) -> Expr:
        return binary("floormod", self, o)

    def __truediv__(self, o: Any) -> Expr:
        return binary("div", self, o)

    def __rtruediv__(self, o: Any) -> Expr:
        return binary("div", o, self)

    def __neg__(self) -> Expr:
        return binary("sub", const(0, self.dtype), self)

    def __lshift__(self, o: Any) -> Expr:
        return binary("shl", self, o)

    def __rshift__(self, o: Any) -> Expr:
        return binary("shr", self, o)

    def __and__(self, o: Any) -> Expr:
        return binary("and", self, o)

    def __or__(self, o: Any) -> Expr:
        return binary("or", self, o)

    def __lt__(self, o: Any) -> Expr:
        return binary("lt", self, o)

    def __le__(self, o: Any) -> Expr:
        return binary("le", self, o)

    def __gt__(self, o: Any) -> Expr:
        return binary("lt", o, self)

    def __ge__(self, o: Any) -> Expr:
        return binary("le", o, self)

    def equal(self, o: Any) -> Expr:
        return binary("eq", self, o)

    def __bool__(self) -> bool:
        raise LoweringError(
            f"a tensor expression ({self}) has no truth value; use te.all/te.any or select")

    def astype(self, dtype: str) -> Expr:
        return cast(dtype, self)

    def __str__(self) -> str:
        return expr_str(self)

    __repr__ = __str__


class Var(Expr):
    """A variable (loop index, symbolic size). Identity is the variable."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: str = "int32"):
        self.name, self.dtype = name, dtype

    __hash__ = object.__hash__


class Const(Expr):
    __slots__ = ("value", "dtype")

    def __init__(self, value: int | float, dtype: str):
        self.value = int(value) if dtype in _INTEGRAL else float(value)
        self.dtype = dtype


class Binary(Expr):
    """``op`` is one of add sub mul div floordiv floormod min max shl shr and or lt le eq ne."""

    __slots__ = ("op", "a", "b", "dtype")
    COMPARE = ("lt", "le", "eq", "ne")

    def __init__(self, op: str, a: Expr, b: Expr, dtype: str):
        self.op = op
        self.a = a
        self.b = b
        self.dtype = dtype


class Cast(Expr):
    __slots__ = ("dtype", "value")

    def __init__(self, dtype: str, value: Expr):
        self.dtype, self.value = dtype, value


class Select(Expr):
    __slots__ = ("cond", "t", "f", "dtype")

    def __init__(self, cond: Expr, t: Expr, f: Expr):
        self.cond, self.t, self.f = cond, t, f
        self.dtype = t.dtype


class Call(Expr):
    """A pure math call: exp, sqrt, log, tanh, sigmoid, abs."""

    __slots__ = ("name", "args", "dtype")

    def __init__(self, name: str, args: Sequence[Expr], dtype: str):
        self.name, self.args, self.dtype = name, tuple(args), dtype


class TensorRead(Expr):
    """A read of a tensor element in a tensor expression (TVM's ProducerLoad)."""

    __slots__ = ("tensor", "indices", "dtype")

    def __init__(self, tensor: Any, indices: Sequence[Expr]):
        self.tensor, self.indices, self.dtype = tensor, tuple(indices), tensor.dtype


class BufferLoad(Expr):
    """A read of a buffer element in the loop IR."""

    __slots__ = ("buffer", "indices", "dtype")

    def __init__(self, buffer: Any, indices: Sequence[Expr]):
        self.buffer, self.indices, self.dtype = buffer, tuple(indices), buffer.dtype


class Reduce(Expr):
    """A commutative reduction (``sum``, ``max``, ``min``) of ``source`` over ``axes``."""

    __slots__ = ("combiner", "source", "axes", "where", "dtype")

    def __init__(self, combiner: str, source: Expr, axes: Sequence[Any], where: Expr | None):
        self.combiner, self.source, self.axes, self.where = combiner, source, tuple(axes), where
        self.dtype = source.dtype

    def identity(self) -> Expr:
        if self.combiner == "sum":
            return const(0, self.dtype)
        if is_float(self.dtype):
            v = -math.inf if self.combiner == "max" else math.inf
        else:
            lo, hi = int_range(self.dtype)
            v = lo if self.combiner == "max" else hi
        return const(v, self.dtype)


#: isinstance tuples of hot traversals (a ``A | B`` union is built anew at every call)
_INDEXED = (TensorRead, BufferLoad)
#: integer nodes :func:`simplify` leaves as they are
_OPAQUE = (TensorRead, BufferLoad, Reduce, Select, Call)


def int_range(dtype: str) -> tuple[int, int]:
    b = bits(dtype)
    if dtype.startswith("uint"):
        return 0, (1 << b) - 1
    return -(1 << (b - 1)), (1 << (b - 1)) - 1


# ------------------------------------------------------------------------ constructors
def const(value: int | float, dtype: str | None = None) -> Const:
    if dtype is None:
        dtype = "float32" if isinstance(value, float) else "int32"
    return Const(value, dtype)


def as_expr(x: Any, like: str | None = None) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(getattr(x, "var", None), Var):  # an IterVar
        return x.var
    if isinstance(x, bool):
        return Const(int(x), "bool")
    if isinstance(x, int) or hasattr(x, "__index__"):
        if like is not None and (is_int(like) or is_float(like)):
            return Const(int(x), like)
        return Const(int(x), "int32")
    if isinstance(x, float):
        return Const(x, like if like is not None and is_float(like) else "float32")
    if hasattr(x, "op") and hasattr(x, "shape"):  # a 0-d tensor used as a value
        return x()
    raise LoweringError(f"cannot use {x!r} ({type(x).__name__}) in a tensor expression")


def binary(op: str, a: Any, b: Any) -> Expr:
    if not isinstance(a, Expr):
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    elif not isinstance(b, Expr):
        b = as_expr(b, a.dtype)
    if op in _BOOL_OPS:
        dtype = "bool"
    elif op == "shl" or op == "shr":
        dtype = a.dtype
    else:
        dtype = a.dtype if a.dtype == b.dtype else _promote(a.dtype, b.dtype)
    # constant folding
    if isinstance(a, Const) and isinstance(b, Const):
        v = _fold(op, a.value, b.value)
        if v is not None:
            return Const(v, dtype)
    return Binary(op, a, b, dtype)


_BOOL_OPS = frozenset(Binary.COMPARE + ("and", "or"))

#: constant folding of each operator (None: not folded)
_FOLD: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "floordiv": lambda x, y: x // y if y else None,
    "floormod": lambda x, y: x % y if y else None,
    "div": lambda x, y: (x / y if isinstance(x, float) or isinstance(y, float) else
                         (int(x / y) if y else None)),
    "min": lambda x, y: min(x, y), "max": lambda x, y: max(x, y),
    "shl": lambda x, y: x << y if isinstance(x, int) and y >= 0 else None,
    "shr": lambda x, y: x >> y if isinstance(x, int) and y >= 0 else None,
    "and": lambda x, y: int(bool(x) and bool(y)), "or": lambda x, y: int(bool(x) or bool(y)),
    "lt": lambda x, y: int(x < y), "le": lambda x, y: int(x <= y),
    "eq": lambda x, y: int(x == y), "ne": lambda x, y: int(x != y),
}


def _fold(op: str, x: Any, y: Any) -> Any:
    fn = _FOLD.get(op)
    if fn is None:
        return None
    try:
        return fn(x, y)
    except OverflowError:
        return None


def cast(dtype: str, value: Any) -> Expr:
    value = as_expr(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, Const):
        return Const(value.value, dtype)
    return Cast(dtype, value)


def select(cond: Any, t: Any, f: Any) -> Expr:
    if isinstance(t, Expr):
        f = as_expr(f, t.dtype)
    else:
        f = as_expr(f)
        t = as_expr(t, f.dtype)
    if t.dtype != f.dtype:
        dt = _promote(t.dtype, f.dtype)
        t, f = cast(dt, t), cast(dt, f)
    return Select(as_expr(cond), t, f)


def emax(a: Any, b: Any) -> Expr:
    return binary("max", a, b)


def emin(a: Any, b: Any) -> Expr:
    return binary("min", a, b)


def all_of(*conds: Any) -> Expr:
    out: Expr = Const(1, "bool")
    for c in conds:
        out = c if isinstance(out, Const) and out.value else binary("and", out, c)
    return out


# ------------------------------------------------------------------------ traversal
def children(e: Expr) -> tuple[Expr, ...]:
    t = type(e)  # the exact type: no node class has subclasses
    if t is Binary:
        return (e.a, e.b)
    if t is Var or t is Const:
        return ()
    if t is Cast:
        return (e.value,)
    if t is Select:
        return (e.cond, e.t, e.f)
    if t is Call:
        return e.args
    if t is TensorRead or t is BufferLoad:
        return e.indices
    if t is Reduce:
        return (e.source,) + ((e.where,) if e.where is not None else ())
    return ()


def transform(e: Expr, f: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild ``e`` bottom-up; ``f`` returns a replacement node or None to keep it."""
    r = f(e)
    if r is not None:
        return r
    t = type(e)  # the exact type: no node class has subclasses
    if t is Binary:
        a, b = transform(e.a, f), transform(e.b, f)
        return e if a is e.a and b is e.b else binary(e.op, a, b)
    if t is Var or t is Const:
        return e
    if t is Cast:
        v = transform(e.value, f)
        return e if v is e.value else cast(e.dtype, v)
    if t is Select:
        return Select(transform(e.cond, f), transform(e.t, f), transform(e.f, f))
    if t is Call:
        return Call(e.name, [transform(a, f) for a in e.args], e.dtype)
    if t is TensorRead:
        return TensorRead(e.tensor, [transform(i, f) for i in e.indices])
    if t is BufferLoad:
        return BufferLoad(e.buffer, [transform(i, f) for i in e.indices])
    if t is Reduce:
        return Reduce(e.combiner, transform(e.source, f), e.axes,
                      None if e.where is None else transform(e.where, f))
    return e


def substitute(e: Expr, mapping: dict[Var, Any]) -> Expr:
    """``e`` with the variables in ``mapping`` replaced (what :func:`transform` with a
    variable lookup builds, without a callback per node: lowering substitutes a lot)."""
    if not mapping:
        return e
    return _subst(e, mapping)


def _subst(e: Expr, mapping: dict[Var, Any]) -> Expr:
    t = type(e)
    if t is Var:
        r = mapping.get(e, e)
        return e if r is e else as_expr(r)
    if t is Const:
        return e
    if t is Binary:
        a, b = _subst(e.a, mapping), _subst(e.b, mapping)
        return e if a is e.a and b is e.b else binary(e.op, a, b)
    if t is BufferLoad:
        return BufferLoad(e.buffer, [_subst(i, mapping) for i in e.indices])
    if t is TensorRead:
        return TensorRead(e.tensor, [_subst(i, mapping) for i in e.indices])
    if t is Cast:
        v = _subst(e.value, mapping)
        return e if v is e.value else cast(e.dtype, v)
    return transform(e, lambda n: as_expr(mapping[n]) if isinstance(n, Var) and n in mapping
                     else None)


def walk(e: Expr) -> Iterable[Expr]:
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(children(n))


def free_vars(e: Expr) -> set[Var]:
    return {n for n in walk(e) if isinstance(n, Var)}


def structural_key(e: Expr) -> tuple:
    """A hashable key equal for structurally equal expressions (variables by identity)."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Const):
        return ("const", e.value, e.dtype)
    if isinstance(e, Binary):
        return ("bin", e.op, e.dtype, structural_key(e.a), structural_key(e.b))
    if isinstance(e, Cast):
        return ("cast", e.dtype, structural_key(e.value))
    if isinstance(e, Select):
        return ("sel",) + tuple(structural_key(c) for c in children(e))
    if isinstance(e, Call):
        return ("call", e.name) + tuple(structural_key(c) for c in e.args)
    if isinstance(e, TensorRead):
        return ("read", id(e.tensor)) + tuple(structural_key(c) for c in e.indices)
    if isinstance(e, BufferLoad):
        return ("load", id(e.buffer)) + tuple(structural_key(c) for c in e.indices)
    if isinstance(e, Reduce):
        return ("reduce", e.combiner, tuple(id(a) for a in e.axes), structural_key(e.source))
    raise TypeError(type(e))


def structural_equal(a: Expr, b: Expr) -> bool:
    return structural_key(a) == structural_key(b)


# ------------------------------------------------------------------ affine canonical form
class Lin:
    """An integer affine form: sum(coef * atom) + const; atoms are variables or opaque nodes."""

    __slots__ = ("terms", "const", "atoms")

    def __init__(self, terms: dict[tuple, int] | None = None, const_: int = 0,
                 atoms: dict[tuple, Expr] | None = None):
        self.terms = {k: v for k, v in terms.items() if v} if terms else {}
        self.const = const_
        self.atoms = atoms or {}

    @staticmethod
    def _of(terms: dict[tuple, int], const_: int, atoms: dict[tuple, Expr]) -> Lin:
        """A form from ``terms`` that hold no zero coefficient (the dicts are shared, never
        changed in place)."""
        lin = Lin.__new__(Lin)
        lin.terms, lin.const, lin.atoms = terms, const_, atoms
        return lin

    @staticmethod
    def atom(e: Expr) -> Lin:
        k = structural_key(e)
        return Lin._of({k: 1}, 0, {k: e})

    def __add__(self, o: Lin) -> Lin:
        return self._plus(o, 1)

    def __sub__(self, o: Lin) -> Lin:
        """``self + o.scale(-1)`` without building the negated form."""
        return self._plus(o, -1)

    def _plus(self, o: Lin, sign: int) -> Lin:
        """``self + sign * o`` (``sign`` is 1 or -1)."""
        const = self.const + sign * o.const
        if not o.terms:
            return Lin._of(self.terms, const, self.atoms)
        if not self.terms:
            terms = o.terms if sign == 1 else {k: -v for k, v in o.terms.items()}
            return Lin._of(terms, const, o.atoms)
        t = dict(self.terms)
        for k, v in o.terms.items():
            n = t.get(k, 0) + sign * v
            if n:
                t[k] = n
            else:
                del t[k]
        return Lin._of(t, const, {**self.atoms, **o.atoms})

    def scale(self, c: int) -> Lin:
        if not c:
            return Lin._of({}, 0, self.atoms)
        return Lin._of({k: v * c for k, v in self.terms.items()}, self.const * c, self.atoms)

    def is_const(self) -> bool:
        return not self.terms

    def coef(self, v: Var) -> int:
        return self.terms.get(("var", id(v)), 0)

    def without(self, vs: Iterable[Var]) -> Lin:
        drop = {("var", id(v)) for v in vs}
        return Lin({k: c for k, c in self.terms.items() if k not in drop}, self.const,
                   self.atoms)

    def to_expr(self, dtype: str = "int32") -> Expr:
        out: Expr | None = None
        items = self.terms.items()
        if len(items) > 1:  # (the order key prints opaque atoms)
            items = sorted(items, key=lambda kv: _atom_order(self.atoms[kv[0]]))
        for k, c in items:
            a = self.atoms[k]
            term = a if c == 1 else Binary("mul", a, Const(c, dtype), dtype)
            out = term if out is None else Binary("add", out, term, dtype)
        if out is None:
            return Const(self.const, dtype)
        if self.const:
            out = Binary("add", out, Const(self.const, dtype), dtype)
        return out


_lin = Lin._of


def _atom_order(e: Expr) -> tuple:
    return (0, e.name) if isinstance(e, Var) else (1, str(e))


def linear(e: Expr) -> Lin:
    """The affine form of an integer expression (non-affine parts become atoms)."""
    # dispatch on the exact type (no subclasses of these nodes): the hottest function of a
    # knob search
    t = type(e)
    if t is Const:
        return _lin({}, int(e.value), {})
    if t is Var:
        k = ("var", id(e))  # structural_key of a variable
        return _lin({k: 1}, 0, {k: e})
    if t is Cast and is_int(e.dtype) and is_int(e.value.dtype) and \
            bits(e.dtype) >= bits(e.value.dtype):
        return linear(e.value)
    if t is Binary:
        op = e.op
        if type(e.b) is Const and (op == "add" or op == "sub" or op == "mul"):
            # the usual constant right operand, without a form of its own (the same results
            # as the general cases below)
            la, c = linear(e.a), int(e.b.value)
            if op == "add":
                return _lin(la.terms, la.const + c, la.atoms)
            if op == "sub":
                return _lin(la.terms, la.const - c, la.atoms)
            return la.scale(c) if la.terms else _lin({}, c * la.const, {})
        if op == "add":
            return linear(e.a)._plus(linear(e.b), 1)
        if op == "sub":
            return linear(e.a)._plus(linear(e.b), -1)
        if op == "mul":
            la, lb = linear(e.a), linear(e.b)
            if not la.terms:
                return lb.scale(la.const)
            if not lb.terms:
                return la.scale(lb.const)
        elif op == "floordiv" or op == "floormod":
            la, lb = linear(e.a), linear(e.b)
            if not lb.terms and lb.const > 0:
                c = lb.const
                if not la.terms:
                    return Lin({}, la.const // c if op == "floordiv" else la.const % c)
                div = Lin({k: v // c for k, v in la.terms.items() if v % c == 0}, 0, la.atoms)
                rest = Lin({k: v for k, v in la.terms.items() if v % c}, la.const, la.atoms)
                if e.op == "floordiv":
                    if rest.is_const():
                        return div + Lin({}, rest.const // c)
                    return div + Lin.atom(Binary("floordiv", rest.to_expr(), Const(c, "int32"),
                                                 "int32"))
                if rest.is_const():
                    return Lin({}, rest.const % c)
                return Lin.atom(Binary("floormod", rest.to_expr(), Const(c, "int32"), "int32"))
    return Lin.atom(e)


def simplify(e: Expr) -> Expr:
    """Canonicalise integer index arithmetic (affine parts folded, constants combined)."""
    t = type(e)
    if t is Var or t is Const:  # its own canonical form (an int constant's value is an int)
        return e
    if is_int(e.dtype) and not isinstance(e, _OPAQUE):
        if isinstance(e, Binary) and e.op not in ("add", "sub", "mul", "floordiv", "floormod"):
            return binary(e.op, simplify(e.a), simplify(e.b))
        if isinstance(e, Cast):
            return cast(e.dtype, simplify(e.value))
        lin = linear(e)
        return lin.to_expr(e.dtype)
    return e


def const_value(e: Expr) -> int | None:
    """The value of an integer expression that simplifies to a constant, else None."""
    if not is_int(e.dtype):
        return None
    lin = linear(e)
    if lin.is_const():  # then simplify(e) is that constant: no need to build it
        return lin.const
    lin = linear(simplify(e))  # (min/max of operands that simplify to constants)
    return lin.const if lin.is_const() else None


# ------------------------------------------------------------------------ bounds
def bound(e: Expr, ranges: dict[Var, tuple[int, int]]) -> tuple[Expr, Expr]:
    """Symbolic (min, max) of ``e`` when each variable in ``ranges`` spans [lo, hi].

    Other variables stay symbolic. Exact for affine expressions; floordiv by a positive
    constant is handled by monotonicity; other nodes fall back to interval evaluation.
    """
    lin = linear(e)
    lo = Lin({}, 0, {})
    hi = Lin({}, 0, {})
    lo_c = hi_c = lin.const  # the constant parts, summed apart from the forms
    ranged_keys = {("var", id(v)): r for v, r in ranges.items()}
    ranged = set(ranges)
    for k, c in lin.terms.items():
        atom = lin.atoms[k]
        if k in ranged_keys:
            a, b = ranged_keys[k]
            lo_c += c * (a if c > 0 else b)
            hi_c += c * (b if c > 0 else a)
        elif type(atom) is not Var and free_vars(atom) & ranged:  # (a variable here is unranged)
            amin, amax = _bound_atom(atom, ranges)
            if c > 0:
                lo, hi = lo + linear(amin).scale(c), hi + linear(amax).scale(c)
            else:
                lo, hi = lo + linear(amax).scale(c), hi + linear(amin).scale(c)
        else:
            t = Lin({k: c}, 0, {k: atom})
            lo, hi = lo + t, hi + t
    return _lin(lo.terms, lo.const + lo_c, lo.atoms).to_expr(), \
        _lin(hi.terms, hi.const + hi_c, hi.atoms).to_expr()


def _bound_atom(e: Expr, ranges: dict[Var, tuple[int, int]]) -> tuple[Expr, Expr]:
    if isinstance(e, Binary) and e.op == "floordiv" and isinstance(e.b, Const) and e.b.value > 0:
        lo, hi = bound(e.a, ranges)
        return simplify(binary("floordiv", lo, e.b)), simplify(binary("floordiv", hi, e.b))
    if isinstance(e, Binary) and e.op == "floormod" and isinstance(e.b, Const) and e.b.value > 0:
        lo, hi = bound(e.a, ranges)
        span = const_value(binary("sub", hi, lo))
        if span is not None and span < e.b.value:
            lo_m = simplify(binary("floormod", lo, e.b))
            if isinstance(lo_m, Const) and lo_m.value + span < e.b.value:
                return lo_m, Const(lo_m.value + span, "int32")
        return Const(0, "int32"), Const(e.b.value - 1, "int32")
    if isinstance(e, Binary) and e.op in ("min", "max"):
        alo, ahi = bound(e.a, ranges)
        blo, bhi = bound(e.b, ranges)
        return simplify(binary(e.op, alo, blo)), simplify(binary(e.op, ahi, bhi))
    raise LoweringError(f"cannot bound the index expression {e} (not affine in the loops)")


_DIVMOD = ("floordiv", "floormod")


def simplify_ranges(e: Expr, ranges: dict[Var, tuple[int, int]]) -> Expr:
    """Simplify ``floordiv``/``floormod`` atoms whose numerator stays inside one block when the
    variables in ``ranges`` span their [lo, hi] (e.g. ``(o * 4 + i) // 4`` -> ``o`` for
    ``i`` in [0, 3])."""
    if not any(type(n) is Binary and n.op in _DIVMOD for n in walk(e)):
        return e  # (only floordiv/floormod nodes of ``e`` make the atoms this rewrites)
    lin = linear(simplify(e))
    out = Lin({}, lin.const, {})
    changed = False
    for k, c in lin.terms.items():
        atom = lin.atoms[k]
        rep = None
        if isinstance(atom, Binary) and atom.op in ("floordiv", "floormod") and \
                isinstance(atom.b, Const) and atom.b.value > 0 and free_vars(atom.a) <= set(ranges):
            lo, hi = bound(atom.a, ranges)
            if isinstance(lo, Const) and isinstance(hi, Const):
                d = atom.b.value
                if lo.value // d == hi.value // d:
                    q = lo.value // d
                    rep = linear(Const(q, "int32")) if atom.op == "floordiv" else \
                        linear(atom.a) + Lin({}, -q * d)
        if rep is None:
            out = out + Lin({k: c}, 0, {k: atom})
        else:
            out = out + rep.scale(c)
            changed = True
    return out.to_expr(e.dtype) if changed else e


# ------------------------------------------------------------------------ evaluation
_PY_BIN = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})",
           "floordiv": "({a} // {b})", "floormod": "({a} % {b})", "min": "min({a}, {b})",
           "max": "max({a}, {b})", "shl": "({a} << {b})", "shr": "({a} >> {b})",
           "and": "({a} and {b})", "or": "({a} or {b})", "lt": "({a} < {b})",
           "le": "({a} <= {b})", "eq": "({a} == {b})", "ne": "({a} != {b})",
           "div": "int({a} / {b})"}


def py_source(e: Expr, names: dict[int, str],
              unbound: Callable[[Var], str] | None = None,
              const: Callable[[Const], str] | None = None) -> str:
    """Python source of an integer expression; ``names`` maps ``id(var)`` to a Python name,
    ``unbound`` (if given) names a variable that is not in ``names`` (else it is an error),
    ``const`` (if given) the Python source of a constant (else its ``repr``).
    (A module-level recursion, not a recursive closure: a closure that calls itself is a
    reference cycle, garbage the cyclic collector must find; see vta.isa.gcpause.)"""
    t = type(e)
    if t is Binary:
        return _PY_BIN[e.op].format(a=py_source(e.a, names, unbound, const),
                                    b=py_source(e.b, names, unbound, const))
    if t is Var:
        name = names.get(id(e))
        if name is not None:
            return name
        if unbound is None:
            raise LoweringError(f"variable {e.name} is not bound here")
        return unbound(e)
    if t is Const:
        return repr(e.value) if const is None else const(e)
    if t is Cast:
        return py_source(e.value, names, unbound, const)
    if t is Select:
        return (f"({py_source(e.t, names, unbound, const)} if "
                f"{py_source(e.cond, names, unbound, const)} "
                f"else {py_source(e.f, names, unbound, const)})")
    raise LoweringError(f"cannot evaluate {e} on the host")


_counter = itertools.count()


def fresh_name(base: str) -> str:
    return f"{base}{next(_counter)}"


# ------------------------------------------------------------------ text form
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
