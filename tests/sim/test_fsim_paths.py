"""fsim's vectorised paths against simple sequential loops: the GEMM fast path (one matrix product
for a dense block product) against the general path, and the ALU rounds against one micro-op at
a time, on index patterns built to hit every case (duplicates, read-after-write chains)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from vta.isa import AluInsn, AluOp, Config, FinishInsn, GemmInsn, Uop, encode_uop
from vta.sim.fsim import FunctionalSim

from ..conftest import unavailable


def _sim(cfg: Config, rng: np.random.Generator, **opts) -> FunctionalSim:
    sim = FunctionalSim(cfg, **opts)
    sim.inp[...] = rng.integers(-128, 128, sim.inp.shape)
    sim.wgt[...] = rng.integers(-128, 128, sim.wgt.shape)
    sim.acc[...] = rng.integers(-(1 << 31), 1 << 31, sim.acc.shape)
    return sim


def _put_uops(sims: list[FunctionalSim], uops: list[Uop], at: int) -> None:
    for sim in sims:
        for k, u in enumerate(uops):
            sim.uop[at + k] = encode_uop(u, sim.cfg)


def _random_dense_gemm(cfg: Config, rng: np.random.Generator) -> tuple[GemmInsn, list[Uop]]:
    """A GEMM whose micro-ops form a dense block product with random roles and layouts."""
    mu, nu, ku = (int(rng.integers(1, 4)) for _ in range(3))
    axes = []
    for _ in range(2):
        role = rng.choice(["m", "n", "k", "1"])
        count = 1 if role == "1" else int(rng.integers(2, 4))
        f = [int(rng.integers(1, 5)) for _ in range(3)]  # dst, src, wgt factor
        if role == "m":
            f[2] = 0
        elif role == "n":
            f[1] = 0
        elif role == "k":
            f[0] = 0
        if rng.random() < 0.2:  # a factor that is zero although it could vary
            f[int(rng.integers(0, 3))] = 0
        axes.append((count, f))
    depth = {"dst": cfg.acc_depth, "src": cfg.inp_depth, "wgt": cfg.wgt_depth}
    span = [sum((c - 1) * f[j] for c, f in axes) for j in range(3)]
    room = [depth[n] - span[j] - 1 for j, n in enumerate(("dst", "src", "wgt"))]
    # distinct base indices (in a random order) keep the product structure recognisable
    du = rng.permutation(min(room[0], 40))[:mu * nu].reshape(mu, nu)
    if rng.random() < 0.2:
        du[0, 0] = du[-1, -1]  # two (m, n) pairs accumulate into one entry: general path
    su = rng.permutation(min(room[1], 40))[:mu * ku].reshape(mu, ku)
    wu = rng.permutation(min(room[2], 40))[:nu * ku].reshape(nu, ku)
    uops = [Uop(int(du[m, n]), int(su[m, k]), int(wu[n, k]))
            for m in range(mu) for n in range(nu) for k in range(ku)]
    rng.shuffle(uops)
    (c0, f0), (c1, f1) = axes
    insn = GemmInsn(uop_bgn=5, uop_end=5 + len(uops), iter_out=c0, iter_in=c1,
                    dst_factor_out=f0[0], src_factor_out=f0[1], wgt_factor_out=f0[2],
                    dst_factor_in=f1[0], src_factor_in=f1[1], wgt_factor_in=f1[2])
    return insn, uops


@pytest.mark.sim
@pytest.mark.parametrize("preset", ["default", "small"])
def test_fsim_gemm_fast_path_equals_general_path(preset: str) -> None:
    cfg = Config.preset(preset)
    rng = np.random.default_rng(7)
    fast_hits = 0
    for trial in range(60):
        insn, uops = _random_dense_gemm(cfg, rng)
        seed = int(rng.integers(1 << 30))
        fast = _sim(cfg, np.random.default_rng(seed))
        general = _sim(cfg, np.random.default_rng(seed), gemm_path="general")
        _put_uops([fast, general], uops, insn.uop_bgn)
        dram = np.zeros(16, np.uint8)
        for sim in (fast, general):
            sim.run([insn, FinishInsn()], dram)
        fast_hits += fast.fast_gemms
        assert general.fast_gemms == 0
        assert np.array_equal(fast.acc, general.acc), f"trial {trial}: {insn} {uops}"
    assert fast_hits >= 30, f"the fast path was taken only {fast_hits} times of 60"


@pytest.mark.sim
def test_fsim_gemm_general_path_equals_per_uop_loop(small_cfg: Config) -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        uops = [Uop(int(rng.integers(0, 8)), int(rng.integers(0, 8)), int(rng.integers(0, 8)))
                for _ in range(int(rng.integers(1, 5)))]
        insn = GemmInsn(uop_bgn=0, uop_end=len(uops), iter_out=int(rng.integers(1, 4)),
                        iter_in=int(rng.integers(1, 4)),
                        **{f"{n}_factor_{w}": int(rng.integers(0, 3))
                           for n in ("dst", "src", "wgt") for w in ("out", "in")})
        sim = _sim(small_cfg, np.random.default_rng(1))
        want = _gemm_by_loop(sim, insn, uops)
        _put_uops([sim], uops, 0)
        sim.run([insn, FinishInsn()], np.zeros(4, np.uint8))
        assert np.array_equal(sim.acc, want)


def _gemm_by_loop(sim: FunctionalSim, insn: GemmInsn, uops: list[Uop]) -> np.ndarray:
    """The accumulators after ``insn``, one micro-op at a time (the definition), wrapped."""
    want = sim.acc.astype(np.int64)
    for o in range(insn.iter_out):
        for i in range(insn.iter_in):
            for u in uops:
                d = u.dst_idx + o * insn.dst_factor_out + i * insn.dst_factor_in
                s = u.src_idx + o * insn.src_factor_out + i * insn.src_factor_in
                w = u.wgt_idx + o * insn.wgt_factor_out + i * insn.wgt_factor_in
                want[d] += sim.inp[s].astype(np.int64) @ sim.wgt[w].astype(np.int64).T
    return ((want + (1 << 31)) % (1 << 32)) - (1 << 31)


@pytest.mark.sim
@pytest.mark.parametrize("stride", [1, 2])
def test_fsim_conv_gemm_takes_the_fast_path(stride: int) -> None:
    """A convolution's GEMM as the compiler emits it (micro-ops over output columns x 3x3 taps x
    input channel blocks, iter_out over output channel blocks, iter_in over output rows; an
    input entry read at several taps), its micro-ops also shuffled: one matrix product, the
    same accumulators as the per-micro-op loop, at stride 1 and 2."""
    cfg = Config()
    rng = np.random.default_rng(stride)
    width, rows, oc_blocks, ic_blocks = 6, 3, 2, 2
    in_width = (width - 1) * stride + 3
    in_rows = (rows - 1) * stride + 3
    uops = [Uop(x, c * in_rows * in_width + dy * in_width + x * stride + dx,
                c * 9 + dy * 3 + dx)
            for c in range(ic_blocks) for dy in range(3) for dx in range(3)
            for x in range(width)]
    for shuffle in (False, True):
        if shuffle:
            rng.shuffle(uops)
        insn = GemmInsn(uop_bgn=0, uop_end=len(uops), iter_out=oc_blocks, iter_in=rows,
                        dst_factor_out=rows * width, dst_factor_in=width,
                        src_factor_out=0, src_factor_in=stride * in_width,
                        wgt_factor_out=9 * ic_blocks, wgt_factor_in=0)
        sim = _sim(cfg, np.random.default_rng(11))
        want = _gemm_by_loop(sim, insn, uops)
        _put_uops([sim], uops, 0)
        sim.run([insn, FinishInsn()], np.zeros(4, np.uint8))
        assert sim.fast_gemms == 1
        assert np.array_equal(sim.acc, want)


def _alu_by_loop(acc: np.ndarray, insn: AluInsn, uops: list[Uop], width: int = 32
                 ) -> np.ndarray:
    """One micro-op at a time, in order (the definition), on ``width``-bit accumulators."""
    acc = acc.astype(np.int64)
    for o in range(insn.iter_out):
        for i in range(insn.iter_in):
            for u in uops:
                d = u.dst_idx + o * insn.dst_factor_out + i * insn.dst_factor_in
                s = u.src_idx + o * insn.src_factor_out + i * insn.src_factor_in
                a = acc[d].copy()
                b = np.full_like(a, insn.imm) if insn.use_imm else acc[s].copy()
                if insn.alu_opcode == AluOp.MIN:
                    r = np.minimum(a, b)
                elif insn.alu_opcode == AluOp.MAX:
                    r = np.maximum(a, b)
                elif insn.alu_opcode == AluOp.ADD:
                    r = a + b
                elif insn.alu_opcode == AluOp.MUL:
                    r = np.array([int(x) * int(y) for x, y in zip(a.ravel(), b.ravel())],
                                 dtype=object).reshape(a.shape)
                else:
                    r = np.array([int(x) >> int(y) if y >= 0 else int(x) << min(-int(y), 40)
                                  for x, y in zip(a.ravel(), b.ravel())],
                                 dtype=object).reshape(a.shape)
                half = 1 << (width - 1)
                acc[d] = np.array([((int(v) + half) % (2 * half)) - half
                                   for v in np.ravel(r)]).reshape(a.shape)
    return acc


@pytest.mark.sim
@pytest.mark.parametrize("acc_width", [32, 16])
@pytest.mark.parametrize("pattern", ["distinct", "chain", "reduce", "self", "overlap", "random"])
def test_fsim_alu_rounds_equal_sequential_loop(small_cfg: Config, pattern: str,
                                               acc_width: int) -> None:
    """Every ALU operation, with an immediate or an accumulator operand, on 32- and 16-bit
    accumulators, against one micro-op at a time."""
    if acc_width == 16:
        small_cfg = replace(small_cfg, LOG_ACC_WIDTH=4)
    rng = np.random.default_rng(len(pattern) * 101 + ord(pattern[0]))
    for trial in range(25):
        op = AluOp(int(rng.integers(0, 5)))
        use_imm = int(rng.random() < 0.3)
        imm = int(rng.integers(-40, 40)) if op == AluOp.SHR else int(rng.integers(-300, 300))
        loops = dict(iter_out=int(rng.integers(1, 4)), iter_in=int(rng.integers(1, 4)))
        if pattern == "distinct":  # dst all different, src elsewhere
            uops = [Uop(k, 60 + k, 0) for k in range(3)]
            f = dict(dst_factor_out=9, dst_factor_in=3, src_factor_out=9, src_factor_in=3)
        elif pattern == "chain":  # each micro-op reads what the previous one wrote
            uops = [Uop(k + 1, k, 0) for k in range(4)]
            f = dict(dst_factor_out=20, dst_factor_in=5, src_factor_out=20, src_factor_in=5)
        elif pattern == "reduce":  # many sources into one destination
            uops = [Uop(0, 40 + k, 0) for k in range(3)]
            f = dict(dst_factor_out=1, dst_factor_in=0, src_factor_out=3, src_factor_in=9)
        elif pattern == "overlap":  # runs of entries; each reads the next, written later
            uops = [Uop(k, k + 1, 0) for k in range(3)]
            f = dict(dst_factor_out=9, dst_factor_in=3, src_factor_out=9, src_factor_in=3)
        elif pattern == "self":  # acc[d] = op(acc[d], acc[d]), with repeats
            uops = [Uop(2, 2, 0), Uop(5, 5, 0), Uop(2, 2, 0)]
            f = dict(dst_factor_out=1, dst_factor_in=0, src_factor_out=1, src_factor_in=0)
        else:
            uops = [Uop(int(rng.integers(0, 12)), int(rng.integers(0, 12)), 0)
                    for _ in range(int(rng.integers(1, 5)))]
            f = {k: int(rng.integers(0, 3)) for k in ("dst_factor_out", "dst_factor_in",
                                                       "src_factor_out", "src_factor_in")}
        insn = AluInsn(uop_bgn=0, uop_end=len(uops), alu_opcode=op, use_imm=use_imm, imm=imm,
                       **loops, **f)
        sim = _sim(small_cfg, np.random.default_rng(trial))
        if op == AluOp.SHR and not use_imm:  # keep some shift amounts small
            sim.acc[::2] = rng.integers(-40, 40, sim.acc[::2].shape)
        want = _alu_by_loop(sim.acc, insn, uops, acc_width)
        _put_uops([sim], uops, 0)
        sim.run([insn, FinishInsn()], np.zeros(4, np.uint8))
        assert np.array_equal(sim.acc, want), f"{pattern} trial {trial}: {insn}"


@pytest.mark.sim
def test_fsim_alu_semantics_by_hand(small_cfg: Config) -> None:
    """Hand-computed values: wrap-around, shifts both ways and beyond the width, negative imm."""
    cases = [  # (op, a, b, expected)
        (AluOp.ADD, 2**31 - 1, 1, -2**31),
        (AluOp.MUL, 65536, 65536, 0),
        (AluOp.MUL, -3, 7, -21),
        (AluOp.SHR, -9, 1, -5),
        (AluOp.SHR, -9, 40, -1),
        (AluOp.SHR, 9, 40, 0),
        (AluOp.SHR, 3, -2, 12),
        (AluOp.SHR, 1, -31, -2**31),
        (AluOp.SHR, 1, -32, 0),
        (AluOp.MIN, -5, -7, -7),
        (AluOp.MAX, -5, -7, -5),
    ]
    # reset_reg applies to GEMM only: an ALU instruction with reset_reg=1 performs its operation
    # (TVM's sim_driver.cc and HLS core)
    for op, a, b, expected in cases:
        for use_imm, reset in ((0, 0), (1, 0), (0, 1), (1, 1)):
            if use_imm and not -2**15 <= b < 2**15:
                continue
            sim = FunctionalSim(small_cfg)
            sim.acc[0] = a
            sim.acc[1] = b
            sim.uop[0] = encode_uop(Uop(0, 1, 0), small_cfg)
            insn = AluInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1, alu_opcode=op,
                           use_imm=use_imm, imm=b if use_imm else 0, reset_reg=reset)
            sim.run([insn, FinishInsn()], np.zeros(4, np.uint8))
            assert (sim.acc[0] == expected).all(), (op.name, a, b, use_imm, reset,
                                                    sim.acc[0, 0, 0])


@pytest.mark.unit
def test_blas_thread_limits_set_and_restore() -> None:
    """blas_threads (a block) sets and restores the count; limit_blas_threads sets it."""
    from vta.sim.blas import _openblas, blas_threads, limit_blas_threads

    funcs = _openblas()
    if funcs is None:
        unavailable("numpy does not use OpenBLAS here (blas_threads is then a no-op)")
    setter, getter = funcs
    before = getter()
    with blas_threads(1):
        assert getter() == 1
    assert getter() == before
    try:
        assert limit_blas_threads(1) is True
        assert getter() == 1
    finally:
        setter(before)
