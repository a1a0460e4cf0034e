"""VTA passes: hand-checked IR after the pipeline, token placement, micro-op folding."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler import Env, build, lower_vta, te
from vta.compiler.passes.sync import COMPUTE, LOAD, STORE, Command, insert_sync
from vta.compiler.tir import UopKernel, walk
from vta.isa import Config

pytestmark = pytest.mark.unit


def _tutorial_gemm(env: Env, n: int = 4):
    """TVM's first VTA tutorial (matrix multiply), ported by changing the imports."""
    A = te.placeholder((1, n, env.BATCH, env.BLOCK_IN), name="A", dtype=env.inp_dtype)
    B = te.placeholder((4, n, env.BLOCK_OUT, env.BLOCK_IN), name="B", dtype=env.wgt_dtype)
    A_buf = te.compute(A.shape, lambda *i: A(*i), "A_buf")
    B_buf = te.compute(B.shape, lambda *i: B(*i), "B_buf")
    ko = te.reduce_axis((0, n), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    C_buf = te.compute(
        (1, 4, env.BATCH, env.BLOCK_OUT),
        lambda bo, co, bi, ci: te.sum(A_buf[bo, ko, bi, ki].astype(env.acc_dtype)
                                      * B_buf[co, ko, ci, ki].astype(env.acc_dtype),
                                      axis=[ko, ki]), name="C_buf")
    C = te.compute(C_buf.shape, lambda *i: C_buf(*i).astype(env.inp_dtype), name="C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)
    s[B_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    s[C_buf].reorder(ko, *s[C_buf].op.axis, ki)
    s[A_buf].compute_at(s[C_buf], ko)
    s[B_buf].compute_at(s[C_buf], ko)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    s[C_buf].tensorize(s[C_buf].op.axis[2], env.gemm)
    return s, [A, B, C]


def test_tutorial_gemm_ir_golden(cfg):
    """Hand-checked: A tile (0, ko) is element ko; B rows co*4+ko are 4 rows at stride 4."""
    s, args = _tutorial_gemm(Env(cfg))
    assert str(lower_vta(s, args, cfg, "gemm")) == (
        "def gemm(A: int8[1, 4, 1, 16], B: int8[4, 4, 16, 16], C: int8[1, 4, 1, 16]):\n"
        "  alloc C_buf: int32[1, 4, 1, 16] in local.acc_buffer @0\n"
        "  vta.uop_kernel [co < 4: dst*1 src*0 wgt*0]:\n"
        "    vta.gemm_reset C_buf[co]\n"
        "  for ko in range(4):\n"
        "    alloc A_buf: int8[1, 1, 1, 16] in local.inp_buffer @0\n"
        "    alloc B_buf: int8[4, 1, 16, 16] in local.wgt_buffer @0\n"
        "    vta.load A_buf[0] <- A[ko] (1x1, stride 1)\n"
        "    vta.load B_buf[0] <- B[ko] (4x1, stride 4)\n"
        "    vta.uop_kernel [co < 4: dst*1 src*0 wgt*1]:\n"
        "      vta.gemm C_buf[co] += A_buf[0] x B_buf[co]\n"
        "  vta.store C[0] <- C_buf[0] (1x4, stride 4)\n")


@pytest.mark.sim
def test_tutorial_gemm_runs_bit_exact(cfg):
    s, args = _tutorial_gemm(Env(cfg))
    f = build(s, args, "fsim", cfg)
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (1, 4, 1, 16), dtype=np.int8)
    b = rng.integers(-128, 128, (4, 4, 16, 16), dtype=np.int8)
    c = np.zeros((1, 4, 1, 16), np.int8)
    f(a, b, c)
    ref = np.einsum("bkij,ckoj->bcio", a.astype(np.int32), b.astype(np.int32)).astype(np.int8)
    np.testing.assert_array_equal(c, ref)
    np.testing.assert_array_equal(f.check_races(a, b, c)[0], ref)


def test_padding_becomes_dma_pads():
    cfg = Config.preset("small")
    env = Env(cfg)
    from vta.compiler.topi import nn

    A = te.placeholder((1, 1, 4, 4, env.BATCH, env.BLOCK_OUT), "int32", "A")
    P = nn.pad(A, (0, 0, 1, 2, 0, 0), name="P")
    C = te.compute(P.shape, lambda *i: P(*i).astype("int8"), "C")
    s = te.create_schedule(C.op)
    s[P].set_scope(env.acc_scope)
    s[P].pragma(s[P].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    text = str(lower_vta(s, [A, C], cfg, "pad"))
    # rows 0..5 and columns 0..7 of the padded block; data rows 1..4, columns 2..5
    assert "vta.load P[0] <- A[-6] (6x8, stride 4, pad_y=(0 in [1, 5)), pad_x=(0 in [2, 6)))" \
        in text
    f = build(s, [A, C], "fsim", cfg)
    a = np.random.default_rng(3).integers(-100, 100, A.shape).astype(np.int32)
    c = np.zeros(C.shape, np.int8)
    f(a, c)
    ref = np.pad(a, ((0, 0), (0, 0), (1, 1), (2, 2), (0, 0), (0, 0))).astype(np.int8)
    np.testing.assert_array_equal(c, ref)


def test_fold_uop_loops_folds_two_outer_loops():
    cfg = Config.preset("small")
    s, args = _tutorial_gemm(Env(cfg), n=2)
    func = lower_vta(s, args, cfg)
    kernels = [n for n in walk(func.body) if isinstance(n, UopKernel)]
    assert len(kernels) == 2  # reset and update
    assert all(len(k.loops) == 1 and k.loops[0].extent == 4 for k in kernels)


def test_fold_uop_loops_drops_nested_unit_loops():
    from vta.compiler.passes.vta import FoldUopLoops
    from vta.compiler.tir.expr import Var
    from vta.compiler.tir.stmt import ACC_SCOPE, INP_SCOPE, WGT_SCOPE, Buffer, For, Gemm

    acc, inp = Buffer("acc", (16, 1, 16), "int32", ACC_SCOPE), Buffer("inp", (16, 1, 16), "int8",
                                                                       INP_SCOPE)
    wgt = Buffer("wgt", (16, 16, 16), "int8", WGT_SCOPE)
    a, b, c = Var("a"), Var("b"), Var("c")
    leaf = Gemm(False, acc, a * 8 + b * 2 + c + 1, inp, b + c * 3, wgt, a * 5 + c + 2)
    kern = FoldUopLoops().kernel(For(a, 1, For(b, 4, For(c, 1, leaf))), alu=False)
    # the unit loops a and c are gone (their variables are 0), b is folded (the leaf keeps
    # it: code generation evaluates the leaf with folded variables at 0)
    assert [(lp.var, lp.extent, lp.dst_factor, lp.src_factor, lp.wgt_factor)
            for lp in kern.loops] == [(b, 4, 2, 1, 0)]
    assert isinstance(kern.body, Gemm)
    assert [str(x) for x in (kern.body.dst_index, kern.body.src_index, kern.body.wgt_index)] \
        == ["b * 2 + 1", "b", "2"]


def _cmds(spec):
    return [Command(m, t, None, f"{m}{t}") for m, t in spec]


def test_sync_per_thread_tokens_when_threads_match():
    cmds = insert_sync(_cmds([(LOAD, 0), (LOAD, 1), (COMPUTE, 0), (COMPUTE, 1),
                              (LOAD, 0), (LOAD, 1), (COMPUTE, 0), (COMPUTE, 1), (STORE, 0),
                              (STORE, 1)]))
    pushes = [(c.what, p) for c in cmds for p in c.pushes]
    pops = [(c.what, p) for c in cmds for p in c.pops]
    # every thread's loads hand over to its own compute, and back (WAR) for the next loads
    assert pushes == [("load0", COMPUTE), ("load1", COMPUTE), ("compute0", LOAD),
                      ("compute1", LOAD), ("load0", COMPUTE), ("load1", COMPUTE),
                      ("compute0", STORE), ("compute1", STORE)]
    assert pops == [("compute0", LOAD), ("compute1", LOAD), ("load0", COMPUTE),
                    ("load1", COMPUTE), ("compute0", LOAD), ("compute1", LOAD),
                    ("store0", COMPUTE), ("store1", COMPUTE)]


def test_sync_single_token_without_threads():
    cmds = insert_sync(_cmds([(LOAD, None), (LOAD, None), (COMPUTE, None), (STORE, None),
                              (COMPUTE, None), (STORE, None)]))
    pairs = [(k, c.what, sorted(c.pops), sorted(c.pushes)) for k, c in enumerate(cmds)]
    assert pairs == [
        (0, "loadNone", [], []),
        (1, "loadNone", [], [COMPUTE]),
        (2, "computeNone", [LOAD], [STORE]),
        (3, "storeNone", [COMPUTE], [COMPUTE]),   # store -> next compute (WAR)
        (4, "computeNone", [STORE], [STORE]),
        (5, "storeNone", [COMPUTE], []),
    ]


@pytest.mark.sim
def test_cache_read_into_vta_scopes_and_trace_replay(cfg):
    """cache_read into the input/weight buffers instead of explicit copy stages; the recorded
    trace replays on a fresh graph with a different reduction split."""
    env = Env(Config.preset("small"))
    small = env.cfg

    def graph():
        A = te.placeholder((2, 4, env.BATCH, env.BLOCK_IN), env.inp_dtype, "A")
        B = te.placeholder((2, 4, env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, "B")
        ko = te.reduce_axis((0, 4), "ko")
        ki = te.reduce_axis((0, env.BLOCK_IN), "ki")
        C_buf = te.compute((2, 2, env.BATCH, env.BLOCK_OUT), lambda bo, co, bi, ci: te.sum(
            A[bo, ko, bi, ki].astype("int32") * B[co, ko, ci, ki].astype("int32"),
            axis=[ko, ki]), name="C_buf")
        C = te.compute(C_buf.shape, lambda *i: C_buf(*i).astype("int8"), name="C")
        return A, B, C_buf, C, ko

    A, B, C_buf, C, ko = graph()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, env.inp_scope, [C_buf])
    BB = s.cache_read(B, env.wgt_scope, [C_buf])
    s[C_buf].set_scope(env.acc_scope)
    ko_o, ko_i = s[C_buf].split(ko, factor=2)
    bo, co, bi, ci = s[C_buf].op.axis
    s[C_buf].reorder(ko_o, bo, co, ko_i, bi, ci, s[C_buf].op.reduce_axis[1])
    for t in (AA, BB):
        s[t].compute_at(s[C_buf], ko_o)
        s[t].pragma(s[t].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    s[C_buf].tensorize(bi, env.gemm)
    rng = np.random.default_rng(9)
    a = rng.integers(-128, 128, A.shape, dtype=np.int8)
    b = rng.integers(-128, 128, B.shape, dtype=np.int8)
    ref = np.einsum("mkbi,nkoi->mnbo", a.astype(np.int32), b.astype(np.int32)).astype(np.int8)
    def check(sch, args):
        f = build(sch, args, "fsim", small)
        c = np.zeros(ref.shape, np.int8)
        f(a, b, c)
        np.testing.assert_array_equal(c, ref)
        np.testing.assert_array_equal(f.check_races(a, b, c)[0], ref)
        return str(f.func)

    assert "for ko.outer in range(2)" in check(s, [A, B, C])
    # replay the trace on a fresh graph with the reduction split by 4 (a single step)
    from vta.compiler import replay

    A2, B2, _, C2, _ = graph()
    idx = next(k for k, e in enumerate(s.trace) if e["prim"] == "split")
    s2 = replay(s.trace, [C2.op], overrides={idx: {"factor": 4}})
    assert "for ko.outer in range(1)" in check(s2, [A2, B2, C2])


@pytest.mark.sim
def test_dump_commands_shows_per_thread_tokens():
    from vta.compiler import topi

    small = Config.preset("small")
    args = (np.zeros((2, 3, 1, 4), np.int8), np.zeros((4, 3, 4, 4), np.int8))
    op = topi.dense_packed((2, 3, 1, 4), (4, 3, 4, 4), config=small, target=None,
                           knobs={"tile_b": 2, "tile_ci": 3, "tile_co": 2, "oc_nthread": 2})
    # the reset before the reduction: the loads wait for it (compute -> load, per thread)
    op.build("fsim", init_in_first_iteration=False)
    op(*args)
    text = op.module.dump_commands()
    assert "load data_buf.t1 t1 pop<-compute" in text
    assert "compute gemm x2 t0 pop<-load push->store" in text
    # the default: the reset sits in the first reduction step, after the loads, and does not
    # wait for them (it reads nothing they write); the GEMM does
    op.build("fsim")
    op(*args)
    lines = [ln.split(None, 1)[1] for ln in op.module.dump_commands().splitlines()]
    assert lines[:4] == ["load    load data_buf.t0 t0",
                         "load    load weight_buf.t0 t0 push->compute",
                         "load    load data_buf.t1 t1",
                         "load    load weight_buf.t1 t1 push->compute"]
    assert lines[4:8] == ["compute gemm x1 t0", "compute gemm x2 t0 pop<-load push->store",
                          "compute gemm x1 t1", "compute gemm x2 t1 pop<-load push->store"]


def test_fold_uop_loops_coalesces_an_alu_nest_over_a_contiguous_block():
    """An ALU nest whose loops walk a contiguous block (outer coefficient = inner extent x
    inner coefficient) becomes one loop and one micro-op; a nest whose src breaks that keeps
    both loops."""
    from vta.compiler.passes.vta import FoldUopLoops
    from vta.compiler.tir.expr import Var
    from vta.compiler.tir.stmt import ACC_SCOPE, Alu, Buffer, For

    acc = Buffer("acc", (64, 1, 16), "int32", ACC_SCOPE)
    h, w = Var("h"), Var("w")
    shift = Alu("shr", acc, h * 8 + w + 3, imm=2)
    kern = FoldUopLoops().kernel(For(h, 4, For(w, 8, shift)), alu=True)
    # one loop over w (h is 0 in the leaf; codegen evaluates it with w at 0 too)
    assert [(lp.var, lp.extent, lp.dst_factor) for lp in kern.loops] == [(w, 32, 1)]
    assert isinstance(kern.body, Alu) and str(kern.body.dst_index) == "w + 3"
    bias = Alu("add", acc, h * 8 + w + 3, acc, h + 40)  # src per row: h and w stay apart
    kern = FoldUopLoops().kernel(For(h, 4, For(w, 8, bias)), alu=True)
    assert [(lp.extent, lp.dst_factor, lp.src_factor) for lp in kern.loops] == \
        [(4, 8, 1), (8, 1, 0)]
