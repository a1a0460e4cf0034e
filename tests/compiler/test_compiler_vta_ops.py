"""VTA operators on the functional simulator: bit-exact against numpy, race-checked."""

from __future__ import annotations

import hypothesis
import numpy as np
import pytest
from vta.compiler import (
    DmaError,
    LoweringError,
    ScratchpadOverflowError,
    build,
    lower_vta,
    te,
    topi,
)
from vta.compiler.env import Env
from vta.isa import Config

from ..conftest import require_tool

pytestmark = pytest.mark.sim

RNG = np.random.default_rng(2024)


def _i8(shape):
    return RNG.integers(-128, 128, shape, dtype=np.int8)


@pytest.fixture(scope="module")
def small() -> Config:
    return Config.preset("small")


# ------------------------------------------------------------------ conv2d
@pytest.mark.parametrize("vt", [False, True])
def test_conv2d_virtual_threads_on_and_off(small, vt):
    ds, ks = (1, 2, 6, 6, small.batch, small.block_in), (4, 2, 3, 3, small.block_out,
                                                          small.block_in)
    d, k = _i8(ds), _i8(ks)
    knobs = topi.conv2d_knobs(ds, ks, (1, 1), (1, 1), small, virtual_threads=vt)
    if not vt:
        assert knobs["oc_nthread"] * knobs["h_nthread"] == 1
    knobs.update(tile_h=3, tile_w=6, tile_co=1, tile_ci=1, oc_nthread=2 if vt else 1,
                 h_nthread=1)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), shift=6, clip=(-128, 127), knobs=knobs,
                            config=small)
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(op(d, k), ref)
    np.testing.assert_array_equal(op.check_races(d, k), ref)
    ir = op.module.ir
    assert ("thread=(1,)" in ir) == vt


def test_reduction_init_inside_first_iteration_gives_the_same_result(small):
    ds, ks = (1, 2, 4, 4, small.batch, small.block_in), (2, 2, 3, 3, small.block_out,
                                                          small.block_in)
    d, k = _i8(ds), _i8(ks)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), shift=6, config=small, target=None)
    op.build("fsim", init_in_first_iteration=True)
    assert "if ic.outer == 0:" in op.module.ir
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(op.check_races(d, k), ref)


def test_conv2d_default_config_resnet_like_block(cfg):
    """A 3x3 stride-1 layer in the PYNQ configuration, with bias, relu and clip."""
    ds, ks = (1, 2, 8, 8, 1, 16), (2, 2, 3, 3, 16, 16)
    d, k = _i8(ds), _i8(ks)
    bias = topi.pack_bias(RNG.integers(-2000, 2000, 32).astype(np.int32), cfg)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), bias=True, shift=7, relu=True,
                            clip=(0, 127), config=cfg)
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"], bias=bias)
    np.testing.assert_array_equal(op.check_races(d, k, bias), ref)


def test_conv2d_stride2_and_1x1(small):
    for ks_hw, stride, pad in ((3, 2, 1), (1, 2, 0)):
        ds = (1, 2, 8, 8, small.batch, small.block_in)
        ks = (2, 2, ks_hw, ks_hw, small.block_out, small.block_in)
        d, k = _i8(ds), _i8(ks)
        op = topi.conv2d_packed(ds, ks, strides=(stride, stride), padding=(pad, pad),
                                shift=5, clip=(-128, 127), config=small)
        ref = topi.conv2d_reference(d, k, (stride, stride), (pad, pad), op.info["epilogue"])
        np.testing.assert_array_equal(op.check_races(d, k), ref)


def test_conv2d_channels_not_multiple_of_block_are_padded(small):
    """6 input and 5 output channels with BLOCK=4: the packers zero-pad to 8."""
    x = RNG.integers(-128, 128, (1, 6, 5, 5), dtype=np.int8)
    w = RNG.integers(-128, 128, (5, 6, 3, 3), dtype=np.int8)
    xp, wp = topi.pack_nchw(x, small), topi.pack_oihw(w, small)
    op = topi.conv2d_packed(xp.shape, wp.shape, padding=(1, 1), shift=6, clip=(-128, 127),
                            config=small)
    out = topi.unpack_nchw(op(xp, wp), 1, 5)
    # plain NCHW reference, independent of the packed one
    xpad = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((1, 5, 5, 5), np.int64)
    for dy in range(3):
        for dx in range(3):
            acc += np.einsum("nchw,oc->nohw", xpad[:, :, dy:dy + 5, dx:dx + 5], w[:, :, dy, dx])
    ref = np.clip(acc.astype(np.int32) >> 6, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(out, ref)


def test_depthwise_as_group_conv(small):
    c = 8
    x = _i8((1, c // small.block_in, 6, 6, small.batch, small.block_in))
    kd = RNG.integers(-128, 128, (c, 1, 3, 3), dtype=np.int8)
    kg = topi.depthwise_to_group_kernel(kd, small)
    op = topi.group_conv2d_packed(x.shape, kg.shape, groups=c // small.block_out,
                                  padding=(1, 1), shift=3, clip=(-128, 127), config=small)
    # depthwise reference on the unpacked tensors
    xu = topi.unpack_nchw(x, 1, c).astype(np.int64)
    xpad = np.pad(xu, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((1, c, 6, 6), np.int64)
    for dy in range(3):
        for dx in range(3):
            acc += xpad[:, :, dy:dy + 6, dx:dx + 6] * kd[None, :, 0, dy, dx, None, None]
    ref = np.clip(acc.astype(np.int32) >> 3, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(topi.unpack_nchw(op.check_races(x, kg), 1, c), ref)


def test_group_conv2d_two_tiles_per_group(small):
    """2 groups of 2 input and 2 output tiles: the group's input tiles follow its outputs."""
    x = _i8((1, 4, 5, 5, small.batch, small.block_in))
    k = _i8((4, 2, 3, 3, small.block_out, small.block_in))
    op = topi.group_conv2d_packed(x.shape, k.shape, 2, padding=(1, 1), shift=6,
                                  clip=(-128, 127), config=small)
    # reference: two independent dense convolutions, concatenated
    halves = [topi.conv2d_acc_reference(x[:, 2 * g:2 * g + 2], k[2 * g:2 * g + 2], (1, 1),
                                        (1, 1)) for g in range(2)]
    ref = op.info["epilogue"].reference(np.concatenate(halves, axis=1), None)
    np.testing.assert_array_equal(op.check_races(x, k), ref)


@pytest.mark.parametrize("ksize,stride,pad,outpad", [(4, 2, 1, 0), (3, 2, 1, 1), (4, 2, 2, 0),
                                                     (4, 1, 0, 0), (3, 3, 1, 2)])
def test_conv2d_transpose_one_program_no_stride_zeros(small, ksize, stride, pad, outpad):
    """One VTA program: every output phase interleaved in place, bit-exact with the scatter
    reference; the GEMM multiplies no zero of the stride dilation when the stride divides the
    kernel and the phases' input offsets are affine (stride 2, or a padding the stride
    divides): then every phase has kernel/stride taps a dimension."""
    b, bi = small.batch, small.block_in
    x = _i8((1, 2, 4, 4, b, bi))
    k = _i8((2, 1, ksize, ksize, bi, small.block_out))
    bias = RNG.integers(-500, 500, (1, 1, 1, 1, 1, 1, b, small.block_out), dtype=np.int32)
    op = topi.conv2d_transpose_packed(x.shape, k.shape, strides=(stride, stride),
                                      padding=(pad, pad), output_padding=(outpad, outpad),
                                      shift=5, clip=(-128, 127), bias=True, config=small)
    ref = topi.conv2d_transpose_reference(x, k, (stride, stride), (pad, pad),
                                          op.info["epilogue"], (outpad, outpad), bias)
    assert ref.shape[2] == 3 * stride + ksize - 2 * pad + outpad
    out = op.check_races(x, topi.packed_phase_kernel(k, *op.info["phases"]), bias)
    np.testing.assert_array_equal(out, ref)
    for ph in op.info["phases"]:
        assert ph.real_taps() == ksize  # each kernel row in exactly one phase
        if ksize % stride == 0 and (stride == 2 or pad % stride == 0):
            assert ph.taps * stride == ksize
        else:  # shorter phases padded with zero taps
            assert ksize < ph.taps * stride < ksize + 2 * stride


@pytest.mark.parametrize("knobs", [
    {"tile_h": 1, "tile_w": 1, "tile_ci": 1, "tile_co": 1, "h_nthread": 2, "oc_nthread": 1},
    {"tile_h": 2, "tile_w": 1, "tile_ci": 2, "tile_co": 1, "h_nthread": 1, "oc_nthread": 2},
    {"tile_h": 1, "tile_w": 2, "tile_ci": 1, "tile_co": 2, "h_nthread": 2, "oc_nthread": 1}])
def test_conv2d_transpose_knobs(small, knobs):
    """Tiles smaller than the output (partial rows: one STORE a phase row block) and virtual
    threads over rows or output channels: still the reference's bits, race-free."""
    b, bi, bo = small.batch, small.block_in, small.block_out
    x = _i8((1, 2, 4, 4, b, bi))
    k = _i8((2, 2, 4, 4, bi, bo))
    op = topi.conv2d_transpose_packed(x.shape, k.shape, strides=(2, 2), padding=(1, 1),
                                      shift=6, clip=(-128, 127), knobs=dict(knobs, tile_b=1),
                                      config=small)
    ref = topi.conv2d_transpose_reference(x, k, (2, 2), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(
        op.check_races(x, topi.packed_phase_kernel(k, *op.info["phases"])), ref)


# ------------------------------------------------------------------ dense / element-wise
def test_dense(small):
    d = _i8((2, 3, small.batch, small.block_in))
    w = _i8((4, 3, small.block_out, small.block_in))
    op = topi.dense_packed(d.shape, w.shape, shift=4, relu=True, config=small)
    ref = topi.dense_reference(d, w, op.info["epilogue"])
    np.testing.assert_array_equal(op.check_races(d, w), ref)


def test_dense_with_bias(small):
    d = _i8((2, 3, small.batch, small.block_in))
    w = _i8((4, 3, small.block_out, small.block_in))
    b = topi.pack_bias(RNG.integers(-3000, 3000, 16).astype(np.int32), small)
    b = b.reshape(1, 4, small.batch, small.block_out)
    op = topi.dense_packed(d.shape, w.shape, bias=True, shift=5, clip=(-128, 127),
                           config=small)
    ref = topi.dense_reference(d, w, op.info["epilogue"], bias=b)
    np.testing.assert_array_equal(op.check_races(d, w, b), ref)


@pytest.mark.parametrize("shift, mul, shift2", [(8, 3000, 12), (8, 30000, 15), (2, 20000, 20)])
def test_dense_fixed_point_requantization(small, shift, mul, shift2):
    """The epilogue's MUL and rounding shift equal the graph's requantize (shift2 20: the
    rounding term is beyond the 16-bit immediate, so the shift runs in two SHRs)."""
    from vta.compiler.ops.int8 import requantize

    d = _i8((4, 3, small.batch, small.block_in))
    w = _i8((8, 3, small.block_out, small.block_in))
    b = RNG.integers(-3000, 3000, (1, 8, small.batch, small.block_out)).astype(np.int32)
    op = topi.dense_packed(d.shape, w.shape, bias=True, shift=shift, mul=mul, shift2=shift2,
                           clip=(-128, 127), config=small)
    acc = np.einsum("nkbi,mkoi->nmbo", d.astype(np.int64), w.astype(np.int64)) + b
    ref = requantize(acc, shift, -128, 127, mul, shift2)
    got = op.check_races(d, w, b)
    np.testing.assert_array_equal(got, ref)
    assert len(np.unique(got)) > 40  # the data spans the output range, not just its clips


def _alu_trace(k: int, add: int) -> list[tuple[str, int]]:
    """The ALU operations (op, immediate) of ``rshift`` on a tracer."""
    from vta.compiler.topi.alu import rshift

    class Tracer:
        def __init__(self, ops):
            self.ops = ops

        def __add__(self, c):
            return Tracer(self.ops + [("add", c)])

        def __rshift__(self, c):
            return Tracer(self.ops + [("shr", c)])

    return rshift(Tracer([]), k, add).ops


@pytest.mark.parametrize("k", range(32))
def test_rounding_shift_immediates_fit_and_round_exactly(k):
    from vta.compiler.topi.alu import rshift

    v = np.concatenate([RNG.integers(-(1 << 30), 1 << 30, 2000), np.arange(-70000, 70000)])
    for add in (0, 5, -7, 32000, -32768, 32767):
        ops = _alu_trace(k, add)
        assert all(-(1 << 15) <= c < (1 << 15) for _, c in ops), ops
        assert len(ops) <= (2 if -(1 << 15) <= add + (1 << k >> 1) < (1 << 15) else 4)
        exact = (v + add + (1 << k >> 1)) >> k  # int64: floor((v + add + 2**(k-1)) / 2**k)
        np.testing.assert_array_equal(rshift(v, k, add), exact, err_msg=f"k={k} add={add}")


@pytest.mark.parametrize("name", ["add", "min", "max", "relu", "clip", "shr", "shl",
                                  "add_imm", "mul_imm"])
def test_elementwise_alu(small, name):
    shape = (2, 3, small.batch, small.block_out)
    a = RNG.integers(-3000, 3000, shape).astype(np.int32)
    b = RNG.integers(-3000, 3000, shape).astype(np.int32)
    op = topi.elementwise_packed(name, shape, imm=3, lo=-100, hi=90, config=small)
    ins = [a, b] if name in ("add", "min", "max") else [a]
    ref = {"add": a + b, "min": np.minimum(a, b), "max": np.maximum(a, b),
           "relu": np.maximum(a, 0), "clip": np.clip(a, -100, 90), "shr": a >> 3,
           "shl": a << 3, "add_imm": a + 3, "mul_imm": a * 3}[name].astype(np.int8)
    np.testing.assert_array_equal(op.check_races(*ins), ref)


# ------------------------------------------------------------------ errors
def _copy_graph(env, n):
    A = te.placeholder((n, 1, env.BATCH, env.BLOCK_OUT), "int32", "A")
    A_buf = te.compute(A.shape, lambda *i: A(*i), "A_buf")
    C = te.compute(A.shape, lambda *i: A_buf(*i).astype("int8"), "C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.acc_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    return s, [A, C]


def test_scratchpad_overflow_names_buffer_and_sizes(small):
    env = Env(small)
    s, args = _copy_graph(env, small.acc_depth + 1)
    with pytest.raises(ScratchpadOverflowError,
                       match=rf"A_buf needs {small.acc_depth + 1} entries .*has "
                             rf"{small.acc_depth} entries"):
        lower_vta(s, args, small)


def test_dma_error_names_the_loop(small):
    env = Env(small)
    A = te.placeholder((4, 4, env.BATCH, env.BLOCK_OUT), "int32", "A")
    # a non-affine read (i * j) % 4 cannot be a strided DMA
    A_buf = te.compute(A.shape, lambda i, j, b, c: A[(i * j) % 4, j, b, c], "A_buf")
    C = te.compute(A.shape, lambda *i: A_buf(*i).astype("int8"), "C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.acc_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    with pytest.raises(DmaError, match="stage A_buf: loop [ij] indexes A non-linearly"):
        lower_vta(s, [A, C], small)


def test_plain_loop_on_accumulator_is_rejected(small):
    env = Env(small)
    A = te.placeholder((2, 1, env.BATCH, env.BLOCK_OUT), "int32", "A")
    A_buf = te.compute(A.shape, lambda *i: A(*i), "A_buf")
    B = te.compute(A.shape, lambda *i: A_buf(*i) + 1, "B")
    C = te.compute(A.shape, lambda *i: B(*i).astype("int8"), "C")
    s = te.create_schedule(C.op)
    for t in (A_buf, B):
        s[t].set_scope(env.acc_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)  # B has no pragma alu
    with pytest.raises(LoweringError, match="B .local.acc_buffer. is written by a plain loop"):
        lower_vta(s, [A, C], small)


def test_build_rejects_wrong_argument_shapes(small):
    env = Env(small)
    s, args = _copy_graph(env, 2)
    f = build(s, args, "fsim", small)
    from vta.compiler import CodegenError

    with pytest.raises(CodegenError, match="argument A: expected int32"):
        f(np.zeros((3, 1, 1, 4), np.int32), np.zeros((2, 1, 1, 4), np.int8))


# ------------------------------------------------------------------ tsim
@pytest.mark.tsim
def test_conv2d_on_tsim_small_shapes(small):
    """The same compiled operator on the Verilator RTL gives the numpy result."""
    require_tool("verilator")
    ds, ks = (1, 2, 4, 4, small.batch, small.block_in), (2, 2, 3, 3, small.block_out,
                                                          small.block_in)
    d, k = _i8(ds), _i8(ks)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), shift=6, clip=(-128, 127), config=small,
                            target="tsim")
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(op(d, k), ref)
    assert op.module.last_stats.cycles > 0


@pytest.mark.slow
def test_resnet18_c9_full_size_race_free(cfg):
    """ResNet-18 layer C9 (14x14, 256 -> 256, 3x3) with the default knobs (virtual threads)."""
    ds, ks = (1, 16, 14, 14, 1, 16), (16, 16, 3, 3, 16, 16)
    d, k = _i8(ds), _i8(ks)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), shift=8, clip=(-127, 127), config=cfg)
    assert op.knobs["oc_nthread"] * op.knobs["h_nthread"] == 2
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(op.check_races(d, k), ref)


def test_four_virtual_threads_oc_and_rows(small):
    """oc_nthread=2 and h_nthread=2 nest two cthread axes: four interleaved threads."""
    ds, ks = (1, 2, 8, 8, small.batch, small.block_in), (4, 2, 3, 3, small.block_out,
                                                          small.block_in)
    d, k = _i8(ds), _i8(ks)
    knobs = dict(tile_b=1, tile_h=2, tile_w=8, tile_ci=1, tile_co=1, oc_nthread=2,
                 h_nthread=2)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), shift=6, clip=(-128, 127), knobs=knobs,
                            config=small)
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(op.check_races(d, k), ref)
    for tag in ("(0, 0)", "(0, 1)", "(1, 0)", "(1, 1)"):
        assert f"thread={tag}" in op.module.ir


def test_micro_kernel_larger_than_uop_buffer_is_a_clear_error(small):
    from vta.compiler import CodegenError

    ds, ks = (1, 2, 1, 32, small.batch, small.block_in), (2, 2, 3, 3, small.block_out,
                                                           small.block_in)
    # co and ic fold into the GEMM loops; 3x3 taps x 32 columns = 288 micro-ops > 256
    knobs = dict(tile_b=1, tile_h=1, tile_w=32, tile_ci=2, tile_co=2, oc_nthread=1,
                 h_nthread=1)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), knobs=knobs, config=small)
    with pytest.raises(CodegenError, match="288 micro-ops but the micro-op buffer has 256"):
        op(_i8(ds), _i8(ks))


# ------------------------------------------------------------------ random tilings
@hypothesis.settings(max_examples=10, deadline=None, derandomize=True)
@hypothesis.given(data=hypothesis.strategies.data())
def test_random_conv2d_tilings_are_exact_and_race_free(data):
    """Random layer shapes, tilings, virtual threads and epilogues (BATCH=2 configuration)."""
    st = hypothesis.strategies
    cfg = Config.preset("small").replace(LOG_BATCH=1)
    n, ci, co = data.draw(st.sampled_from([1, 2])), data.draw(st.integers(1, 3)), \
        data.draw(st.sampled_from([1, 2, 4]))
    h, w = data.draw(st.integers(3, 7)), data.draw(st.integers(3, 7))
    k, s = data.draw(st.sampled_from([1, 3])), data.draw(st.sampled_from([1, 2]))
    p = data.draw(st.sampled_from([0, 1])) if k == 3 else 0
    ds = (n, ci, h, w, cfg.batch, cfg.block_in)
    ks = (co, ci, k, k, cfg.block_out, cfg.block_in)
    space = topi.conv2d_knob_space(ds, ks, (s, s), (p, p))
    knobs = {name: data.draw(st.sampled_from(space[name]))
             for name in ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co")}
    knobs["oc_nthread"] = 2 if (co // knobs["tile_co"]) % 2 == 0 and data.draw(st.booleans()) \
        else 1
    knobs["h_nthread"] = 1
    hypothesis.assume(topi.conv2d_fits(knobs, ks, (s, s), cfg))
    epi = dict(shift=data.draw(st.sampled_from([0, 4, 7])), relu=data.draw(st.booleans()),
               clip=data.draw(st.sampled_from([None, (-100, 100)])))
    rng = np.random.default_rng(0)
    d = rng.integers(-128, 128, ds, dtype=np.int8)
    kk = rng.integers(-128, 128, ks, dtype=np.int8)
    op = topi.conv2d_packed(ds, ks, strides=(s, s), padding=(p, p), knobs=knobs, config=cfg,
                            **epi)
    ref = topi.conv2d_reference(d, kk, (s, s), (p, p), op.info["epilogue"])
    np.testing.assert_array_equal(op.check_races(d, kk), ref)
