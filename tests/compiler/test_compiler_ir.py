"""Tensor expressions, schedules, lowering, printer golden tests, verifier, trace replay."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler import (
    ScheduleError,
    TensorizeError,
    VerifyError,
    build,
    create_schedule,
    lower,
    replay,
    te,
)
from vta.compiler.tir import Buffer, For, PrimFunc, Store, verify
from vta.compiler.tir.expr import (
    BufferLoad,
    Var,
    bound,
    cast,
    const,
    const_value,
    emin,
    linear,
    simplify,
    structural_key,
    substitute,
    transform,
)

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------ expressions
def test_linear_form_and_simplify():
    i, j = Var("i"), Var("j")
    e = (i * 4 + j) * 2 - i * 8 + 3
    lin = linear(e)
    assert lin.coef(i) == 0 and lin.coef(j) == 2 and lin.const == 3
    assert str(simplify(e)) == "j * 2 + 3"
    # floordiv of a multiple folds exactly
    assert str(simplify((i * 16 + 5) // 16)) == "i"
    assert str(simplify((i * 16 + j) % 16)) == "j % 16"


def test_bound_symbolic_outer_ranged_inner():
    o, k = Var("o"), Var("k")
    lo, hi = bound(o * 4 + k * 2 + 1, {k: (0, 3)})
    assert str(lo) == "o * 4 + 1"
    assert str(hi) == "o * 4 + 7"
    assert const_value(hi - lo) == 6


def test_const_value_exact_and_after_simplify():
    i = Var("i")
    assert const_value((i * 4 + 3) - i * 4) == 3
    # min of two operands that each simplify to a constant: the constant only shows after
    # simplifying the operands (the affine form alone sees an opaque min)
    assert const_value(emin(i - i + 3, i * 2 - i - i + 5)) == 3
    assert const_value(i * 2 - i) is None
    assert const_value(emin(i, 4)) is None


def test_affine_difference_matches_sum_of_negation():
    i, j = Var("i"), Var("j")
    a, b = linear(i * 3 + j // 4 + 7), linear(i * 3 - j * 2 + 1)
    d, ref = a - b, a + b.scale(-1)
    assert (d.terms, d.const) == (ref.terms, ref.const)
    assert d.coef(i) == 0 and d.coef(j) == 2 and d.const == 6
    # evaluated at points against Python arithmetic
    e = simplify((i * 3 + j // 4 + 7) - (i * 3 - j * 2 + 1))
    for iv, jv in ((0, 0), (5, 9), (-3, 13)):
        got = const_value(substitute(e, {i: iv, j: jv}))
        assert got == (iv * 3 + jv // 4 + 7) - (iv * 3 - jv * 2 + 1)


def test_substitute_matches_a_rebuild_by_transform():
    i, j, k = Var("i"), Var("j"), Var("k")
    buf = Buffer("b", (4, 4), "int32")
    e = BufferLoad(buf, [i * 2 + j, k]) + cast("int64", emin(i, j * 3)) * 2 - k // 4
    mapping = {i: const(3), j: k + 1}

    def by_transform(n):
        return transform(n, lambda x: mapping[x] if isinstance(x, Var) and x in mapping
                         else None)

    assert structural_key(substitute(e, mapping)) == structural_key(by_transform(e))
    assert substitute(i * 2 + k, {j: 1}).a.a is i  # untouched subtrees are kept
    # evaluated against Python arithmetic
    f = substitute(substitute(i * 2 + j * 5 - k // 4, {i: 3, j: k + 1}), {k: 9})
    assert const_value(f) == 3 * 2 + (9 + 1) * 5 - 9 // 4


def test_reducer_elementwise_and_reduction_forms():
    a = te.placeholder((4,), "int32", "a")
    k = te.reduce_axis((0, 4), "k")
    assert str(te.max(a[0], 3)) == "max(a[0], 3)"
    assert str(te.sum(a[k], axis=[k])) == "sum(a[k], axis=[k])"
    assert str(te.clip(a[1], -2, 5)) == "max(min(a[1], 5), -2)"


# ------------------------------------------------------------------ printer goldens
# Each expected text was checked by hand against the schedule that produces it.
def test_printer_split_golden():
    A = te.placeholder((4, 8), "float32", "A")
    B = te.compute((4, 8), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    _, j = s[B].op.axis
    s[B].split(j, factor=4)
    assert str(lower(s, [A, B], "scale")) == (
        "def scale(A: float32[4, 8], B: float32[4, 8]):\n"
        "  for i in range(4):\n"
        "    for j.outer in range(2):\n"
        "      for j.inner in range(4):\n"
        "        B[i, j.inner + j.outer * 4] = A[i, j.inner + j.outer * 4] * float32(2.0)"
        " + float32(1.0)\n")


def test_printer_reduction_golden():
    A = te.placeholder((4, 8), "float32", "A")
    k = te.reduce_axis((0, 8), "k")
    C = te.compute((4,), lambda i: te.sum(A[i, k], axis=[k]), name="C")
    s = te.create_schedule(C.op)
    assert str(lower(s, [A, C], "rowsum")) == (
        "def rowsum(A: float32[4, 8], C: float32[4]):\n"
        "  for i in range(4):\n"
        "    C[i] = float32(0.0)\n"
        "    for k in range(8):\n"
        "      C[i] = C[i] + A[i, k]\n")


def test_compute_at_bounds_golden():
    """D is needed for a 5-wide window per outer iteration of E (3 outputs + offset 2)."""
    A = te.placeholder((4, 8), "float32", "A")
    D = te.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="D")
    E = te.compute((4, 6), lambda i, j: D[i, j] + D[i, j + 2], name="E")
    s = te.create_schedule(E.op)
    _, j = s[E].op.axis
    jo, _ = s[E].split(j, factor=3)
    s[D].compute_at(s[E], jo)
    assert str(lower(s, [A, E], "window")) == (
        "def window(A: float32[4, 8], E: float32[4, 6]):\n"
        "  for i in range(4):\n"
        "    for j.outer in range(2):\n"
        "      alloc D: float32[1, 5] in global\n"
        "      for i_1 in range(1):\n"
        "        for j in range(5):\n"
        "          D[i_1, j] = A[i + i_1, j + j.outer * 3] + float32(1.0)\n"
        "      for j.inner in range(3):\n"
        "        E[i, j.inner + j.outer * 3] = D[0, j.inner] + D[0, j.inner + 2]\n")


# ------------------------------------------------------------------ schedules
def test_schedule_errors_name_the_axis():
    A = te.placeholder((8,), "float32", "A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="not a current loop of stage C"):
        s[C].split(s[B].op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="factor=0"):
        s[C].split(s[C].op.axis[0], factor=0)
    i = s[C].op.axis[0]
    s[C].split(i, factor=2)
    with pytest.raises(ScheduleError, match="not a current loop"):
        s[C].split(i, factor=2)  # already split


def test_fuse_tile_reorder_inline_cpu_results():
    A = te.placeholder((6, 10), "float32", "A")
    B = te.compute((6, 10), lambda i, j: A[i, j] * 3.0, name="B")
    C = te.compute((6, 10), lambda i, j: B[i, j] + A[i, j], name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    i, j = s[C].op.axis
    xo, yo, xi, yi = s[C].tile(i, j, 2, 5)
    s[C].fuse(xo, yo)
    f = build(s, [A, C], "cpu")
    a = np.arange(60, dtype=np.float32).reshape(6, 10)
    c = np.zeros_like(a)
    f(a, c)
    np.testing.assert_array_equal(c, a * 3 + a)
    assert "B[" not in str(f.func)  # inlined


def test_cache_read_and_cache_write_cpu():
    A = te.placeholder((8, 8), "float32", "A")
    k = te.reduce_axis((0, 8), "k")
    C = te.compute((8,), lambda i: te.sum(A[i, k] * A[i, k], axis=[k]), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    CC = s.cache_write(C, "local")
    s[AA].compute_at(s[CC], s[CC].op.axis[0])
    s[CC].compute_at(s[C], s[C].op.axis[0])
    f = build(s, [A, C], "cpu")
    a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    c = np.zeros(8, np.float32)
    f(a, c)
    np.testing.assert_allclose(c, (a * a).sum(1), rtol=1e-5)


def test_trace_replay_with_override_changes_the_split():
    def graph():
        A = te.placeholder((16,), "float32", "A")
        B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
        return A, B

    A, B = graph()
    s = te.create_schedule(B.op)
    s[B].split(s[B].op.axis[0], factor=4)
    assert s.trace == [{"prim": "split", "stage": "B", "axis": "i", "factor": 4}]
    A2, B2 = graph()
    s2 = replay(s.trace, [B2.op], overrides={0: {"factor": 8}})
    text = str(lower(s2, [A2, B2], "f"))
    assert "for i.inner in range(8)" in text and "for i.outer in range(2)" in text


def test_verifier_rejects_out_of_scope_variable():
    v = Var("v")
    buf = Buffer("X", (4,), "int32")
    bad = PrimFunc("bad", [buf], Store(buf, (v,), v))
    with pytest.raises(VerifyError, match="variable v is used outside its loop"):
        verify(bad)
    good = PrimFunc("good", [buf], For(v, 4, Store(buf, (v,), v)))
    assert verify(good) is good


def test_tensorize_rejects_a_different_computation(cfg):
    from vta.compiler import Env

    env = Env(cfg)
    A = te.placeholder((1, 1, env.BATCH, env.BLOCK_IN), env.inp_dtype, "A")
    B = te.placeholder((1, 1, env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, "B")
    ki = te.reduce_axis((0, env.BLOCK_IN), "ki")
    # max instead of sum: not the GEMM
    C = te.compute((1, 1, env.BATCH, env.BLOCK_OUT), lambda b, o, bi, ci: te.max(
        A[b, 0, bi, ki].astype("int32") * B[o, 0, ci, ki].astype("int32"), axis=[ki]),
        name="C")
    s = create_schedule(C.op)
    s[C].tensorize(s[C].op.axis[2], env.gemm)
    with pytest.raises(TensorizeError, match="does not match"):
        lower(s, [A, B, C])
