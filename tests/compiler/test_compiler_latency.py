"""Latency hiding in the VTA command stream: per-thread grouping of module runs, deferred
load->compute pops, the reduction reset inside the first step, micro-kernel preloading."""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler import topi
from vta.compiler.passes.sync import (
    COMPUTE,
    LOAD,
    STORE,
    Command,
    conflict,
    group_threads,
    insert_sync,
)
from vta.isa import Config, Opcode
from vta.isa.insn import decode_program

from ..conftest import require_tool

RNG = np.random.default_rng(11)


def _c(module, thread, what, sram=None, writes=()):
    return Command(module, thread, None, what, sram=sram, dram_writes=writes)


def _inp(t):  # thread t's input buffer / accumulator buffer
    return ("inp", 100 * t, 100 * t + 50)


def _acc(t):
    return ("acc", 100 * t, 100 * t + 50)


# ------------------------------------------------------------------ unit: the sync pass
@pytest.mark.unit
def test_group_threads_makes_each_threads_run_contiguous():
    """The lockstep interleave G0 G1 A0 A1 becomes G0 A0 G1 A1: thread 0's epilogue (and so
    its store) no longer waits for thread 1's last GEMM."""
    cmds = [_c(LOAD, (0,), "L0", (_inp(0),)), _c(LOAD, (1,), "L1", (_inp(1),)),
            _c(COMPUTE, (0,), "G0", (_inp(0), _acc(0))),
            _c(COMPUTE, (1,), "G1", (_inp(1), _acc(1))),
            _c(COMPUTE, (0,), "A0", (_acc(0),)), _c(COMPUTE, (1,), "A1", (_acc(1),)),
            _c(STORE, (0,), "S0", (_acc(0),), (("out", 0, 10),)),
            _c(STORE, (1,), "S1", (_acc(1),), (("out", 10, 20),))]
    out = insert_sync(group_threads(cmds))
    assert [c.what for c in out] == ["L0", "L1", "G0", "A0", "G1", "A1", "S0", "S1"]
    # tokens stay per thread: S0 waits for A0 only, G1 for L1 only
    by = {c.what: c for c in out}
    assert by["A0"].pushes == [STORE] and by["S0"].pops == [COMPUTE]
    assert by["G1"].pops == [LOAD] and by["L1"].pushes == [COMPUTE]


def _grouped_by_pairs(run):
    """The grouping rule checked pair by pair: every thread contiguous (threads in order of
    first appearance) unless that moves a command past an earlier one it conflicts with."""
    if len(run) < 3 or any(c.thread is None for c in run):
        return run
    order = {}
    for c in run:
        order.setdefault(c.thread, len(order))
    new = sorted(run, key=lambda c: order[c.thread])
    for x, a in enumerate(run):
        for b in run[x + 1:]:
            if order[a.thread] > order[b.thread] and conflict(a, b):
                return run
    return new


@pytest.mark.unit
def test_group_threads_equals_the_pairwise_rule_on_random_runs():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        run = []
        for k in range(n):
            t = int(rng.integers(0, 3))
            lo = int(rng.integers(0, 6)) * 10
            sram = None if rng.random() < 0.05 else (("acc", lo, lo + 10),)
            writes = ((1, lo, lo + 5),) if rng.random() < 0.3 else ()
            run.append(_c(COMPUTE, (t,), f"c{k}", sram, writes))
        assert [c.what for c in group_threads(run)] == \
            [c.what for c in _grouped_by_pairs(run)]


@pytest.mark.unit
def test_group_threads_keeps_the_order_of_conflicting_or_unknown_commands():
    shared = ("acc", 0, 8)
    clash = [_c(COMPUTE, (0,), "G0", (shared,)), _c(COMPUTE, (1,), "G1", (("acc", 50, 60),)),
             _c(COMPUTE, (0,), "A0", (("acc", 55, 56),))]  # A0 touches G1's entries
    assert [c.what for c in group_threads(clash)] == ["G0", "G1", "A0"]
    unknown = [_c(COMPUTE, (0,), "G0"), _c(COMPUTE, (1,), "G1"), _c(COMPUTE, (0,), "A0")]
    assert [c.what for c in group_threads(unknown)] == ["G0", "G1", "A0"]
    # two stores to overlapping DRAM are never swapped; disjoint ones are
    stores = [_c(STORE, (0,), "S0", (_acc(0),), (("out", 0, 10),)),
              _c(STORE, (1,), "S1", (_acc(1),), (("out", 10, 20),)),
              _c(STORE, (0,), "S0b", (_acc(0),), (("out", 15, 30),))]
    assert [c.what for c in group_threads(stores)] == ["S0", "S1", "S0b"]
    assert conflict(stores[1], stores[2]) and not conflict(stores[0], stores[1])
    stores[2].dram_writes = (("out", 20, 30),)
    assert [c.what for c in group_threads(stores)] == ["S0", "S0b", "S1"]


@pytest.mark.unit
def test_load_pop_goes_on_the_first_command_that_reads_the_loads():
    """A GEMM reset touches only the accumulator: it runs while the input loads are in
    flight; the GEMM that reads them waits."""
    cmds = insert_sync([_c(LOAD, None, "L", (_inp(0),)),
                        _c(COMPUTE, None, "R", (_acc(0),)),
                        _c(COMPUTE, None, "G", (_inp(0), _acc(0)))])
    assert [c.pops for c in cmds] == [[], [], [LOAD]]
    assert cmds[0].pushes == [COMPUTE]


@pytest.mark.unit
def test_deferred_pops_keep_the_push_order_of_the_threads():
    """Thread 0's reader comes after thread 1's: deferring would swap the two pops of one
    token queue, so both stay on each thread's first command."""
    cmds = insert_sync([_c(LOAD, (0,), "L0", (_inp(0),)), _c(LOAD, (1,), "L1", (_inp(1),)),
                        _c(COMPUTE, (0,), "R0", (_acc(0),)),
                        _c(COMPUTE, (1,), "G1", (_inp(1), _acc(1))),
                        _c(COMPUTE, (0,), "G0", (_inp(0), _acc(0)))])
    pops = {c.what: c.pops for c in cmds}
    assert pops["R0"] == [LOAD] and pops["G1"] == [LOAD] and pops["G0"] == []


@pytest.mark.unit
def test_threads_sharing_a_buffer_get_one_token_for_the_run():
    """Per-thread tokens assume private buffers; a consumer of thread 1 reading what thread
    0 loaded makes the pair coarse (one push after the last load, one pop before the run)."""
    cmds = insert_sync([_c(LOAD, (0,), "L0", (_inp(0),)), _c(LOAD, (1,), "L1", (_inp(1),)),
                        _c(COMPUTE, (0,), "G0", (_inp(0),)),
                        _c(COMPUTE, (1,), "G1", (_inp(0), _inp(1)))])
    assert [(c.what, c.pushes, c.pops) for c in cmds] == [
        ("L0", [], []), ("L1", [COMPUTE], []), ("G0", [], [LOAD]), ("G1", [], [])]


# ------------------------------------------------------------------ the generated streams
def _i8(shape):
    return RNG.integers(-128, 128, shape, dtype=np.int8)


@pytest.mark.sim
@pytest.mark.parametrize("threads", [(2, 1), (1, 2)])
def test_conv2d_stream_groups_threads_and_resets_in_the_first_step(threads):
    small = Config.preset("small")
    ds, ks = (1, 2, 6, 6, small.batch, small.block_in), (4, 2, 3, 3, small.block_out,
                                                          small.block_in)
    d, k = _i8(ds), _i8(ks)
    knobs = dict(tile_b=1, tile_h=3 // threads[1] or 1, tile_w=6, tile_ci=1, tile_co=1,
                 oc_nthread=threads[0], h_nthread=threads[1])
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), shift=5, clip=(-127, 127), knobs=knobs,
                            config=small)
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(op(d, k), ref)
    np.testing.assert_array_equal(op.check_races(d, k), ref)
    assert "if ic.outer == 0:" in op.module.ir  # the default for conv2d
    cmds = op.module.last_commands
    # in every run of compute commands, each thread's commands are contiguous
    runs, cur = [], []
    for c in cmds:
        if c.module == COMPUTE:
            cur.append(c.thread)
        elif cur:
            runs.append(cur)
            cur = []
    runs.append(cur)
    for run in runs:
        starts = [t for i, t in enumerate(run) if i == 0 or run[i - 1] != t]
        assert len(starts) == len(set(starts)), run
    # a thread's epilogue follows its own last GEMM of the tile (not the other thread's)
    seq = [(c.what.split()[0], c.thread) for c in cmds if c.module == COMPUTE]
    for i, (what, t) in enumerate(seq[1:], 1):
        if what == "alu" and seq[i - 1][0] == "gemm":
            assert seq[i - 1][1] == t


@pytest.mark.sim
def test_micro_kernels_are_loaded_before_the_first_dependency_wait():
    small = Config.preset("small")
    ds, ks = (1, 2, 6, 6, small.batch, small.block_in), (4, 2, 3, 3, small.block_out,
                                                          small.block_in)
    d, k = _i8(ds), _i8(ks)
    op = topi.conv2d_packed(ds, ks, padding=(1, 1), shift=5, clip=(-127, 127), config=small)
    rec, _, _ = op.module.record(d, k, np.zeros(op.out_shape, np.int8))
    insns = decode_program(rec.program, small)
    uop_loads = [i for i, x in enumerate(insns)  # x_size 0: a no-op that moves tokens
                 if x.opcode == Opcode.LOAD and x.memory_type == 0 and x.x_size]
    first_wait = next(i for i, x in enumerate(insns) if x.pop_prev_dep or x.pop_next_dep)
    assert uop_loads and max(uop_loads) < first_wait
    # each kernel once: the later GEMM/ALU instructions hit the micro-op cache
    assert len(uop_loads) == len({(x.sram_base, x.x_size) for x in
                                  (insns[i] for i in uop_loads)})
    ref = topi.conv2d_reference(d, k, (1, 1), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(op.check_races(d, k), ref)


@pytest.mark.sim
def test_dense_with_threads_is_exact_and_race_free():
    small = Config.preset("small")
    ds, ws = (2, 3, small.batch, small.block_in), (4, 3, small.block_out, small.block_in)
    d, w = _i8(ds), _i8(ws)
    op = topi.dense_packed(ds, ws, shift=4, clip=(-127, 127), config=small,
                           knobs=dict(tile_b=1, tile_co=1, tile_ci=1, oc_nthread=2))
    ref = topi.dense_reference(d, w, op.info["epilogue"])
    np.testing.assert_array_equal(op.check_races(d, w), ref)
    np.testing.assert_array_equal(op(d, w), ref)


@pytest.mark.tsim
@pytest.mark.slow
def test_resnet18_c4_on_tsim_reaches_the_latency_hiding_goal():
    """ResNet-18 C4 (56x56, 64 -> 128, 3x3 stride 2) with the default knobs and virtual threads
    on the Verilator RTL: the numpy result, and >= 87% of the GEMM peak (88.3% measured; the
    ISA ceiling with the reset and three epilogue passes is 90%; 84.7% before the stream was
    grouped per thread)."""
    from vta import runtime as rt

    require_tool("verilator")
    cfg = Config()
    ds, ks = (1, 4, 56, 56, 1, 16), (8, 4, 3, 3, 16, 16)
    d, k = _i8(ds), _i8(ks)
    op = topi.conv2d_packed(ds, ks, strides=(2, 2), padding=(1, 1), shift=8,
                            clip=(-127, 127), config=cfg, target=None)
    assert op.knobs["oc_nthread"] * op.knobs["h_nthread"] == 2
    op.build("tsim", device=rt.open("tsim", cfg, arena_size=8 << 20))
    out = np.zeros(op.out_shape, np.int8)
    stats = op.module(d, k, out)
    ref = topi.conv2d_reference(d, k, (2, 2), (1, 1), op.info["epilogue"])
    np.testing.assert_array_equal(out, ref)
    ideal = 28 * 28 * 128 * 64 * 9 / cfg.macs_per_cycle
    assert ideal / stats.cycles >= 0.87, stats.cycles
