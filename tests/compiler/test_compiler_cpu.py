"""CPU (LLVM) code generation and operators against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from vta.compiler import build, te
from vta.compiler.topi import cpu

pytestmark = pytest.mark.unit
RNG = np.random.default_rng(7)


def test_llvm_ir_is_vectorised_and_correct():
    n = 1000
    A = te.placeholder((n,), "float32", "A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = build(s, [A, B], "cpu")
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    assert "x float>" in f.optimized_ir  # a vector type: the loop was vectorised


def test_integer_ops_shifts_select_floordiv():
    A = te.placeholder((64,), "int32", "A")
    B = te.compute((64,), lambda i: te.if_then_else(
        A[i] > 0, (A[i] >> 2) + (i // 8) - (i % 3), A[i] << 1), name="B")
    s = te.create_schedule(B.op)
    f = build(s, [A, B], "cpu")
    a = RNG.integers(-1000, 1000, 64).astype(np.int32)
    b = np.zeros_like(a)
    f(a, b)
    i = np.arange(64)
    np.testing.assert_array_equal(b, np.where(a > 0, (a >> 2) + i // 8 - i % 3, a << 1))


def _conv_ref(x, w, stride, pad, groups=1):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh = w.shape[2]
    win = sliding_window_view(xp, (kh, kh), axis=(2, 3))[:, :, ::stride, ::stride]
    cig, opg = x.shape[1] // groups, w.shape[0] // groups
    outs = [np.einsum("nchwyx,ocyx->nohw", win[:, g * cig:(g + 1) * cig],
                      w[g * opg:(g + 1) * opg]) for g in range(groups)]
    return np.concatenate(outs, axis=1)


@pytest.mark.parametrize("stride,pad,groups", [(1, 1, 1), (2, 1, 1), (1, 0, 4)])
def test_conv2d(stride, pad, groups):
    x = RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = RNG.standard_normal((8, 8 // groups, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    op = cpu.conv2d(x.shape, w.shape, (stride, stride), (pad, pad), bias=True, relu=True,
                    groups=groups)
    ref = np.maximum(_conv_ref(x, w, stride, pad, groups) + b[None, :, None, None], 0)
    np.testing.assert_allclose(op(x, w, b), ref, rtol=1e-4, atol=1e-4)


def test_pooling():
    x = RNG.standard_normal((1, 3, 9, 9)).astype(np.float32)
    mp = cpu.max_pool2d(x.shape, (3, 3), (2, 2), (1, 1))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ref = sliding_window_view(xp, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-2, -1))
    np.testing.assert_array_equal(mp(x), ref)
    ap = cpu.avg_pool2d(x.shape, (3, 3), (3, 3))
    np.testing.assert_allclose(ap(x), x.reshape(1, 3, 3, 3, 3, 3).mean(axis=(3, 5)),
                               rtol=1e-5, atol=1e-6)
    gp = cpu.global_avg_pool2d(x.shape)
    np.testing.assert_allclose(gp(x), x.mean(axis=(2, 3), keepdims=True), rtol=1e-5,
                               atol=1e-6)


def test_dense_softmax_add_relu():
    x = RNG.standard_normal((3, 40)).astype(np.float32)
    w = RNG.standard_normal((10, 40)).astype(np.float32)
    b = RNG.standard_normal(10).astype(np.float32)
    y = cpu.dense(3, 40, 10, bias=True)(x, w, b)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-4, atol=1e-4)
    sm = cpu.softmax((3, 10))(y)
    e = np.exp(y - y.max(1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(cpu.add((3, 10))(y, y), y + y)
    np.testing.assert_array_equal(cpu.relu((3, 10))(y), np.maximum(y, 0))


def test_fast_exp_accuracy_and_vectorisation():
    A = te.placeholder((4001,), "float32", "A")
    B = te.compute(A.shape, lambda i: cpu.fast_exp(A[i]), name="B")
    f = build(te.create_schedule(B.op), [A, B], "cpu")
    a = np.linspace(-80, 80, 4001).astype(np.float32)
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_allclose(b, np.exp(a.astype(np.float64)), rtol=2e-6)
    assert "x float>" in f.optimized_ir


def test_user_declared_intrinsic_tensorize_on_cpu():
    """A user intrinsic (4x4 matrix-vector product) declared as a compute plus a lowering rule
    that returns (body, reset, update) loop IR; tensorize checks and replaces the inner loops."""
    from vta.compiler.tir import For, Seq, Store
    from vta.compiler.tir.expr import BufferLoad, Const, Var

    a = te.placeholder((4,), "float32", "a")
    b = te.placeholder((4, 4), "float32", "b")
    k = te.reduce_axis((0, 4), "k")
    c = te.compute((4,), lambda j: te.sum(a[k] * b[j, k], axis=[k]), name="c")

    def rule(ins, outs):
        ra, rb = ins
        rc = outs[0]
        jj, kk = Var("jj"), Var("kk")

        def at(region, *offs):
            idx = list(region.indices)
            for n, off in enumerate(offs):
                idx[len(idx) - len(offs) + n] = idx[len(idx) - len(offs) + n] + off
            return tuple(idx)

        cur = BufferLoad(rc.buffer, at(rc, jj))
        prod = BufferLoad(ra.buffer, at(ra, kk)) * BufferLoad(rb.buffer, at(rb, jj, kk))
        update = For(jj, 4, For(kk, 4, Store(rc.buffer, at(rc, jj), cur + prod)))
        reset = For(jj, 4, Store(rc.buffer, at(rc, jj), Const(0.0, "float32")))
        return Seq((reset, update)), reset, update

    gemv4 = te.decl_tensor_intrin(c.op, rule, name="test.gemv4")

    A = te.placeholder((3, 2, 4), "float32", "A")          # (i, ko, ki)
    B = te.placeholder((2, 2, 4, 4), "float32", "B")       # (jo, ko, ji, ki)
    ko = te.reduce_axis((0, 2), "ko")
    ki = te.reduce_axis((0, 4), "ki")
    C = te.compute((3, 2, 4), lambda i, jo, ji: te.sum(A[i, ko, ki] * B[jo, ko, ji, ki],
                                                        axis=[ko, ki]), name="C")
    s = te.create_schedule(C.op)
    i, jo, ji = s[C].op.axis
    s[C].reorder(i, jo, ko, ji, ki)
    s[C].tensorize(ji, gemv4)
    f = build(s, [A, B, C], "cpu")
    assert "jj" in str(f.func) and "ki" not in str(f.func)  # the rule's loops replaced ki
    x = RNG.standard_normal(A.shape).astype(np.float32)
    w = RNG.standard_normal(B.shape).astype(np.float32)
    out = np.zeros(C.shape, np.float32)
    f(x, w, out)
    np.testing.assert_allclose(out, np.einsum("iok,jopk->ijp", x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride,bias,relu,shape", [
    (1, False, False, (1, 16, 8, 8, 24)), (2, True, True, (1, 12, 9, 9, 10)),
    (2, False, True, (2, 8, 14, 14, 16)), (1, True, False, (1, 5, 7, 7, 3))])
def test_conv2d_1x1_as_register_blocked_matrix_product(stride, bias, relu, shape):
    n, c, h, w, o = shape
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    k = RNG.standard_normal((o, c, 1, 1)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    op = cpu.conv2d(x.shape, k.shape, (stride, stride), (0, 0), bias=bias, relu=relu)
    ref = _conv_ref(x, k, stride, 0, 1)
    if bias:
        ref = ref + b[None, :, None, None]
    if relu:
        ref = np.maximum(ref, 0)
    got = op(x, k, *([b] if bias else []))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert "x float>" in op.module.optimized_ir


def test_call_path_checks_natively_and_converts_what_it_must():
    from vta.compiler import CodegenError

    op = cpu.add((3, 10))
    x = RNG.standard_normal((3, 10)).astype(np.float32)
    y = RNG.standard_normal((3, 10)).astype(np.float32)
    np.testing.assert_array_equal(op(x, y), x + y)
    out = np.empty((3, 10), np.float32)
    assert op(x, y, out=out) is out
    np.testing.assert_array_equal(out, x + y)
    # converted on the Python path: another dtype, a strided view, a flat same-size array,
    # an ndarray subclass
    x64, big = x.astype(np.float64), np.repeat(y, 2, axis=1)
    np.testing.assert_array_equal(op(x64, big[:, ::2]), x + y)
    np.testing.assert_array_equal(op(x.reshape(-1), y), x + y)

    class Sub(np.ndarray):
        pass

    np.testing.assert_array_equal(op(x.view(Sub), y), x + y)
    with pytest.raises(CodegenError, match="input 1 has shape"):
        op(x, y[:2])
    with pytest.raises(CodegenError, match="writable C-contiguous float32"):
        op(x, y, out=np.empty((3, 10), np.float64))
    ro = np.empty((3, 10), np.float32)
    ro.flags.writeable = False
    with pytest.raises(CodegenError, match="writable"):
        op(x, y, out=ro)
    # the module itself takes exactly its parameters' shapes
    m = op.module
    m(x.reshape(-1), y.reshape(-1), out.reshape(-1))
    with pytest.raises(CodegenError, match="argument a: expected a C-contiguous float32"):
        m(x, y.reshape(-1), out.reshape(-1))
    with pytest.raises(CodegenError, match="expected a writable C-contiguous"):
        m(x.reshape(-1), y.reshape(-1), ro.reshape(-1))
    with pytest.raises(CodegenError, match="takes 3 arrays"):
        m(x.reshape(-1))
    assert op.module.call_flat(x, y, out) and not op.module.call_flat(x64, y, out)


def test_nontemporal_stores_keep_the_loop_vectorised():
    n = 1000
    A = te.placeholder((n,), "float32", "A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].op.axis[0])
    f = build(s, [A, B], "cpu", nontemporal_stores=True)
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float32(3))
    assert "x float>" in f.optimized_ir and "!nontemporal" in f.optimized_ir


def test_conv2d_gemm_rows_and_flat_pixel_blocks():
    """KxK convs with enough reduction go through the im2col-block matrix product: output rows
    that divide into 16-pixel blocks (conv1-like, stride 2) and flattened pixels (4x4)."""
    for xs, ws, s, p in [((1, 3, 37, 37), (16, 3, 7, 7), 2, 3), ((1, 20, 7, 7), (24, 20, 4, 4),
                                                                 1, 0)]:
        x = RNG.standard_normal(xs).astype(np.float32)
        w = RNG.standard_normal(ws).astype(np.float32)
        b = RNG.standard_normal(ws[0]).astype(np.float32)
        op = cpu.conv2d(xs, ws, (s, s), (p, p), bias=True, relu=True)
        assert "im2col" in str(op.sch.stages)
        ref = np.maximum(_conv_ref(x, w, s, p) + b[None, :, None, None], 0)
        np.testing.assert_allclose(op(x, w, b), ref, rtol=1e-4, atol=1e-4)


def test_int8_kernels_exact_against_the_int8_reference():
    """quantize/dequantize, qadd, int8 max and global average pooling and the int8
    conv with the VTA epilogue give the int8 reference's bits (vta.compiler.graph.quantize),
    with power-of-two scales and with calibrated scales (fixed-point multipliers)."""
    from vta.compiler.graph.ir import Node
    from vta.compiler.ops import kernel_for
    from vta.compiler.ops import kernels as ops
    from vta.compiler.ops.int8 import dequantize_array, quantize_array

    x = (RNG.standard_normal((1, 8, 9, 9)) * 4).astype(np.float32)
    for scale in (2.0 ** -4, 3.0, 0.0123456789, 0.3):
        # halfway cases (ties to even: x / scale is exactly k + 1/2 for scale 1/16 and 3),
        # saturation both ways, and a value just below a half
        x.ravel()[:10] = np.array([0.5, 1.5, -0.5, -2.5, 2.5, 1000 / scale, -1000 / scale,
                                   0.49999997, 7.5, -126.5]) * scale
        q = cpu.quantize(x.shape, scale)(x)
        np.testing.assert_array_equal(q, quantize_array(x, scale), err_msg=str(scale))
        np.testing.assert_array_equal(cpu.dequantize(q.shape, scale)(q),
                                      dequantize_array(q, scale), err_msg=str(scale))
    a = RNG.integers(-128, 128, (1, 8, 9, 9)).astype(np.int8)
    b = RNG.integers(-128, 128, (1, 8, 9, 9)).astype(np.int8)
    for ma, mb, k, lo, hi in [(1, 2, 1, -128, 127), (4, 1, 3, 0, 127), (1, 1, 0, -128, 127),
                              (21845, 13107, 15, -128, 127), (32767, 9, 15, 0, 127),
                              (3, 5, 0, -128, 127), (1 << 24, 3 << 23, 30, -128, 127)]:
        n = Node("QAdd", "a", ["a", "b"], ["c"],
                 {"mul_a": ma, "mul_b": mb, "shift": k, "lo": lo, "hi": hi})
        np.testing.assert_array_equal(cpu.qadd(a.shape, ma, mb, k, lo, hi)(a, b),
                                      kernel_for("QAdd")(n, [a, b])[0], err_msg=str((ma, k)))
    for m, k in [(1, 0), (4, 0), (1, 3), (21845, 15), (32767, 30), (19, 4)]:
        n = Node("QGlobalAveragePool", "p", ["a"], ["c"], {"mul": m, "shift": k})
        np.testing.assert_array_equal(cpu.qglobal_avg_pool2d(a.shape, m, k)(a),
                                      kernel_for("QGlobalAveragePool")(n, [a])[0],
                                      err_msg=str((m, k)))
    np.testing.assert_array_equal(cpu.max_pool2d(a.shape, (3, 3), (2, 2), (1, 1), "int8")(a),
                                  ops.max_pool(a, [3, 3], [2, 2], [1, 1, 1, 1]))
    bias = RNG.integers(-3000, 3000, 8).astype(np.int32)
    per_ch = [3, 4, 5, -1, 0, 2, 6, 7]
    muls = [1500, 1023, 2047, 7, 1, 1800, 999, 1234]
    for shift, lo, hi, grp, mul, shift2 in [
            (5, 0, 127, 8, 1, 0), (per_ch, -128, 127, 8, 1, 0), (7, -128, 127, 1, 1, 0),
            (-2, -128, 127, 2, 1, 0), (4, -128, 127, 1, 1234, 15), (per_ch, 0, 127, 2, muls, 15),
            (2, -128, 127, 8, muls, 11), (0, -128, 127, 1, 3, 0),
            (-3, -128, 127, 1, 30000, 15)]:  # the last wraps in int32, as VTA does
        w = RNG.integers(-128, 128, (8, 8 // grp, 3, 3)).astype(np.int8)
        n = Node("QConv", "c", ["x", "w", "b"], ["y"],
                 {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": grp,
                  "shift": shift, "lo": lo, "hi": hi, "mul": mul, "shift2": shift2})
        op = cpu.conv2d(a.shape, w.shape, (1, 1), (1, 1), dtype="int8", bias=True, groups=grp,
                        requant=(shift, lo, hi, mul, shift2))
        extra = [np.array(v, np.int32) for v in (shift, mul) if isinstance(v, list)]
        np.testing.assert_array_equal(op(a, w, bias, *extra),
                                      kernel_for("QConv")(n, [a, w, bias])[0],
                                      err_msg=str((shift, mul, shift2)))


def test_tanh_within_1e6_of_numpy():
    x = np.concatenate([np.linspace(-20, 20, 100001), [0, 1e-30, -1e-7, np.inf, -np.inf]])
    x = x.astype(np.float32)
    assert float(np.abs(cpu.tanh(x.shape)(x) - np.tanh(x)).max()) <= 1e-6
